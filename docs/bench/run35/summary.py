#!/usr/bin/env python3
"""Run 35's figures from its JSON: python3 docs/bench/run35/summary.py (from the repository root)."""
import json
import statistics

R = "docs/bench/run35"
print("Budget sweep at 25 %, the suite's defaults (history 8, warm start, fitted continuation, prompt by seed 1)")
for run in ("defaults-first", "defaults-reversed", "defaults2-reversed", "defaults2-first"):  # sitting 1, then 2
    order = run
    d = json.load(open(f"{R}/{run}/budget-nibble.json"))
    r = {x["system"]: x for x in d["results"]}
    z, l = r["zipmoe"], r["full-lru"]
    print(f"  {order:18s} prompt {d['settings']['prompts']} TPOT {z['tpot_ms']:.1f} / {l['tpot_ms']:.1f} ms = {z['tpot_ms'] / l['tpot_ms']:.2f}; "
          f"TTFT {z['ttft_ms']:.0f} / {l['ttft_ms']:.0f} ms = {z['ttft_ms'] / l['ttft_ms']:.2f}; "
          f"stall {z['stall_ms_per_token']:.1f} / {l['stall_ms_per_token']:.1f} ms = {z['stall_ms_per_token'] / l['stall_ms_per_token']:.2f}; "
          f"MiB/token {z['mib_read_per_token']:.0f} / {l['mib_read_per_token']:.0f}; resident TPOT {z['resident_tpot_ms']:.0f} ms")

d = json.load(open(f"{R}/budget-auto/budget_auto.json"))
print("\n--budget auto beside a memory hog:", d["limits"], f"OOM kills {d['oom_kills']}, pages swapped out {d['swapped_out_pages']},",
      f"server exit {d['server_exit']}, failed requests {sum(1 for r in d['requests'] if 'error' in r)}")
req = [r for r in d["requests"] if r.get("tpot_ms")]
bounds = [0.0] + [s["t"] for s in d["steps"]] + [1e9]
names = ["before the hog"] + [f"hog leaves {s['share']:.0%} (target {s['target_budget_mib']:.0f} MiB)" if s["share"] else "hog freed"
                              for s in d["steps"]]
for i, name in enumerate(names):
    a, b = bounds[i], bounds[i + 1]
    tp = [r["tpot_ms"] for r in req if a <= r["end"] < b]
    ms = [m for m in d["moves"] if a <= m["t"] < b]
    sm = [s for s in d["samples"] if a <= s["t"] < b]
    first = f", first move {ms[0]['t'] - a:.1f} s after the step began" if ms and i > 0 else ""
    print(f"  {name:40s} budget at the end {ms[-1]['to_mib'] if ms else '-':>5} MiB after {len(ms):2d} moves{first}; "
          f"TPOT median {statistics.median(tp) if tp else float('nan'):.0f} ms over {len(tp)} replies; "
          f"server RSS max {max(s['server_rss_mib'] for s in sm) if sm else 0:.0f} MiB; MemAvailable min {min(s['available_mib'] for s in sm) if sm else 0:.0f} MiB")
