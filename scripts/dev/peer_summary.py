#!/usr/bin/env python3
"""The table of scripts/dev/peer-llamacpp.sh: llama-bench's JSON and `zipmoe generate`'s stderr in OUT,
as a Markdown table on stdout and OUT/peer.json (dev tool)."""
import argparse
import json
import os
import re


def llama(path):
    rows = json.load(open(path))
    tg = next(r for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0)
    pp = next(r for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0)
    return {"tpot_ms": 1e3 / tg["avg_ts"], "tg_tokens_per_s": tg["avg_ts"], "pp_tokens_per_s": pp["avg_ts"],
            "pp_tokens": pp["n_prompt"], "tg_tokens": tg["n_gen"], "build": tg.get("build_commit"), "threads": tg.get("n_threads")}


def timing(path):
    text = open(path).read()
    m = re.search(r"\[(\d+) prompt tokens, (\d+) reused, (\d+) prefilled; (\d+) generated; time to first token ([\d.]+) ms"
                  r"(?:; time per output token ([\d.]+) ms)?", text)  # one token generated: no TPOT
    if not m:
        raise SystemExit(f"{path}: no timing line (did generate fail?)")
    return int(m.group(3)), float(m.group(5)), float(m.group(6)) if m.group(6) else None


def zipmoe(path):  # OUT/zipmoe-LABEL.log: its .tg.log (TPOT) and .pp.log (the prompt's rate)
    base = path[:-4]
    _, _, tpot = timing(base + ".tg.log")
    prefilled, ttft, _ = timing(base + ".pp.log")
    rss = base + ".maxrss"
    return {"tpot_ms": tpot, "ttft_ms": ttft, "prompt_tokens": prefilled, "pp_tokens_per_s": 1e3 * prefilled / ttft,
            "max_rss_mib": int(open(rss).read().split()[-1]) / 1024 if os.path.exists(rss) else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shares", required=True)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--version")
    ap.add_argument("--gguf")
    ap.add_argument("--store")
    a = ap.parse_args()
    rows = [("resident", "resident", "resident")] + [(f"{s} %", f"held-{s}", f"probe-{s}") for s in a.shares.split()]
    result = {"llama_cpp_python_version": a.version, "gguf": a.gguf, "store": a.store, "threads": a.threads, "rows": []}
    print("| available memory | llama.cpp TPOT | ZipMoE TPOT | ÷ llama.cpp | llama.cpp prompt tok/s | ZipMoE prompt tok/s | × llama.cpp | ZipMoE max RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for label, held, probe in rows:
        try:
            l = llama(os.path.join(a.out, f"llama-{held}.json"))
            z = zipmoe(os.path.join(a.out, f"zipmoe-{held}.log"))
        except (OSError, StopIteration, SystemExit) as e:
            print(f"| {label} | (missing: {e}) |")
            continue
        rss = z["max_rss_mib"] if held == "resident" else zipmoe(os.path.join(a.out, f"zipmoe-{probe}.log"))["max_rss_mib"]
        where = "all" if held == "resident" else f"ZipMoE's RSS at {label} ({rss:.0f} MiB)"
        print(f"| {where} | {l['tpot_ms']:.1f} ms | {z['tpot_ms']:.1f} ms | {z['tpot_ms'] / l['tpot_ms']:.2f} | "
              f"{l['pp_tokens_per_s']:.1f} | {z['pp_tokens_per_s']:.1f} | {z['pp_tokens_per_s'] / l['pp_tokens_per_s']:.1f} | "
              f"{z['max_rss_mib']:.0f} MiB |")
        result["rows"].append({"budget": label, "llama_cpp": l, "zipmoe": z, "available_held_to_mib": None if held == "resident" else rss})
    json.dump(result, open(os.path.join(a.out, "peer.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
