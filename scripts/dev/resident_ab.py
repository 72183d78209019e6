#!/usr/bin/env python3
"""Resident time per output token of two builds of `zipmoe`, alternating, as JSON.

usage: resident_ab.py OUT.json MODEL LABEL=BINARY LABEL=BINARY [--runs N] [--tokens LIST] [--prompt TEXT]

Runs `BINARY generate MODEL --raw --temperature 0 --max-tokens T --prompt TEXT` for every T in
--tokens (default 24,200), N times (default 3) per build, the builds alternating so that the
machine's drift falls on both; parses each run's stats line (prompt tokens, TTFT, TPOT, weight bytes
a token reads) and writes every run with its command, plus the median TPOT of each build and length.
The read bandwidth the floor needs is not measured here: take it from `zipmoe bench kernels` in the
same sitting. Standard library only."""
import json
import re
import statistics
import subprocess
import sys
import time

STATS = re.compile(r"\[(\d+) prompt tokens.*time to first token ([0-9.]+) ms; time per output token ([0-9.]+) ms"
                   r".*weights read per token ([0-9.]+) MB")


def main(argv):
    args, opts = [], {"--runs": "3", "--tokens": "24,200",
                      "--prompt": "The quick brown fox jumps over the lazy dog and keeps on running"}
    i = 0
    while i < len(argv):
        if argv[i] in opts:
            if i + 1 >= len(argv):
                raise SystemExit(f"{argv[i]} needs a value")
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 4 or any("=" not in a for a in args[2:]):
        raise SystemExit(__doc__)
    out, model = args[0], args[1]
    builds = [tuple(a.split("=", 1)) for a in args[2:]]
    runs = []
    for tokens in [int(t) for t in opts["--tokens"].split(",")]:
        for r in range(int(opts["--runs"])):
            for label, binary in builds:
                cmd = [binary, "generate", model, "--raw", "--temperature", "0", "--max-tokens", str(tokens),
                       "--prompt", opts["--prompt"]]
                p = subprocess.run(cmd, capture_output=True, text=True)
                m = STATS.search(p.stderr)
                if p.returncode != 0 or not m:
                    raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
                runs.append({"build": label, "tokens": tokens, "run": r + 1, "command": cmd,
                             "prompt_tokens": int(m.group(1)), "ttft_ms": float(m.group(2)),
                             "tpot_ms": float(m.group(3)), "weights_mb_per_token": float(m.group(4)),
                             "stats_line": p.stderr.strip().splitlines()[-1]})
                print(f"{label:>8} {tokens:>4} tokens run {r + 1}: TPOT {m.group(3)} ms", flush=True)
    medians = {f"{label} {t}": statistics.median(x["tpot_ms"] for x in runs if x["build"] == label and x["tokens"] == t)
               for label, _ in builds for t in sorted({x["tokens"] for x in runs})}
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": model,
               "builds": dict(builds), "median_tpot_ms": medians, "runs": runs}, open(out, "w"), indent=1)
    print(json.dumps(medians, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
