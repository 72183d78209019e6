#!/usr/bin/env python3
"""Run 36's budget sweep (sweep.sh) from its JSON: per workload and budget, ZipMoE ÷ LRU for TPOT,
TTFT and stall in each order of each sitting, and the medians over all of them; written to
sweep_summary.json.

    python3 docs/bench/run36/sweep_summary.py   (from the repository root)"""
import json
import os
import statistics
import sys

# The run's directory: this script's, or the one given (a later run's copy of the same command).
here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
out = {}
ORDERS = ("first", "reversed", "2-first", "2-reversed")  # sitting 1, then sitting 2 (sweep2-*)
for workload in ("qwen8", "deepseek"):
    for order in ORDERS:
        sitting = "sweep2" if order.startswith("2-") else "sweep"
        path = os.path.join(here, f"{sitting}-{workload}-{order.removeprefix('2-')}", "budget-nibble.json")
        if not os.path.exists(path):
            continue
        d = json.load(open(path))
        by = {}
        for r in d["results"]:
            by.setdefault(r["budget_percent"], {})[r["system"]] = r
        for budget, r in sorted(by.items()):
            z, l = r["zipmoe"], r["full-lru"]
            e = out.setdefault(workload, {}).setdefault(f"{budget:g}%", {})
            e[order] = {
                "tpot_ms": [z["tpot_ms"], l["tpot_ms"]], "tpot": z["tpot_ms"] / l["tpot_ms"],
                "ttft": z["ttft_ms"] / l["ttft_ms"],
                "stall_ms": [z["stall_ms_per_token"], l["stall_ms_per_token"]],
                "stall": z["stall_ms_per_token"] / l["stall_ms_per_token"] if l["stall_ms_per_token"] > 0 else None,
                "mib_per_token": [z["mib_read_per_token"], l["mib_read_per_token"]],
                "prompt": d["settings"]["prompts"],
            }
for workload, budgets in out.items():
    for budget, e in budgets.items():
        orders = [e[o] for o in ORDERS if o in e]
        e["median_tpot"] = statistics.median(o["tpot"] for o in orders)
        e["sitting_medians_tpot"] = [statistics.median(e[o]["tpot"] for o in pair if o in e)
                                     for pair in (ORDERS[:2], ORDERS[2:]) if any(o in e for o in pair)]
        stalls = [o["stall"] for o in orders if o["stall"] is not None]
        e["median_stall"] = statistics.median(stalls) if stalls else None
        print(f"{workload:8s} {budget:>4s}  TPOT " + "  ".join(f"{o['tpot_ms'][0]:.0f}/{o['tpot_ms'][1]:.0f} ms = {o['tpot']:.2f}" for o in orders)
              + f"  (median {e['median_tpot']:.2f}; sittings " + " ".join(f"{m:.2f}" for m in e["sitting_medians_tpot"]) + ");  TTFT " + " ".join(f"{o['ttft']:.2f}" for o in orders)
              + "  stall " + " ".join(f"{o['stall']:.2f}" if o["stall"] is not None else "-" for o in orders)
              + "  MiB/token " + " ".join(f"{o['mib_per_token'][0]:.0f}/{o['mib_per_token'][1]:.0f}" for o in orders))
json.dump(out, open(os.path.join(here, "sweep_summary.json"), "w"), indent=1)
