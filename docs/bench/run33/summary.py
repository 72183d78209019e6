#!/usr/bin/env python3
"""Run 33's tables from its JSON (the budget suites in docs/bench/run33/*-first and *-reversed) and
what the stall goal would take. Prints Markdown; with a path, also writes the figures as JSON.

    summary.py [JSON_OUT]

Per budget and model, first order then reversed: TPOT, TTFT and stall (TPOT − the sitting's
all-resident TPOT) of ZipMoE ÷ full-tensor LRU's, and MiB read a token by each. Then, at 25 %:
 - bytes ÷ LRU: the share of LRU's bytes ZipMoE reads;
 - ms/MiB: each system's stall per MiB read (how fast a read stalls the token);
 - reads alone: ZipMoE's MiB at LRU's stall per MiB, i.e. ZipMoE's stall if it stalled on a byte as
   LRU does, ÷ LRU's stall (= bytes ÷ LRU);
 - overlap needed: how many ms of ZipMoE's reading would have to run under compute (hidden) for its
   stall to reach ⅓ of LRU's, against the all-resident token's whole compute time."""
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
models = {"deepseek": "budget-dsv2lite5-nibble.json", "qwen8": "budget-nibble.json"}
out = {}
for model, name in models.items():
    for order in ("first", "reversed"):
        d = json.load(open(os.path.join(here, f"{model}-{order}", name)))
        ref = d["reference"]["resident"][0]
        for r in d["results"]:
            cell = out.setdefault(model, {}).setdefault(str(int(r["budget_percent"])), {}).setdefault(order, {})
            cell[r["system"]] = {k: r[k] for k in ("tpot_ms", "ttft_ms", "stall_ms_per_token", "mib_read_per_token",
                                                   "miss_percent", "resident_tpot_ms")}
            cell["resident_over_floor"] = ref["tpot_over_floor"]
            cell["read_bandwidth_gb_per_s"] = ref["read_bandwidth_gb_per_s"]

def ratio(cell, key):
    return cell["zipmoe"][key] / cell["full-lru"][key]

print("| model | budget | TPOT ZipMoE / LRU ms (first; reversed) | TPOT ÷ LRU | TTFT ÷ LRU | stall ÷ LRU | MiB/token ZipMoE / LRU |")
print("|---|---|---|---|---|---|---|")
for model, budgets in out.items():
    for b in sorted(budgets, key=int):
        c = budgets[b]
        f, v = c["first"], c["reversed"]
        print(f"| {model} | {b} % | {f['zipmoe']['tpot_ms']:.1f} / {f['full-lru']['tpot_ms']:.1f}; "
              f"{v['zipmoe']['tpot_ms']:.1f} / {v['full-lru']['tpot_ms']:.1f} "
              f"| {ratio(f, 'tpot_ms'):.2f} / {ratio(v, 'tpot_ms'):.2f} "
              f"| {ratio(f, 'ttft_ms'):.2f} / {ratio(v, 'ttft_ms'):.2f} "
              f"| {ratio(f, 'stall_ms_per_token'):.2f} / {ratio(v, 'stall_ms_per_token'):.2f} "
              f"| {f['zipmoe']['mib_read_per_token']:.0f} / {f['full-lru']['mib_read_per_token']:.0f} |")
print()
print("| model, order | resident ÷ floor | bandwidth GB/s |")
print("|---|---|---|")
for model, budgets in out.items():
    for order in ("first", "reversed"):
        c = budgets["25"][order]
        print(f"| {model}, {order} | {c['resident_over_floor']:.2f} | {c['read_bandwidth_gb_per_s']:.1f} |")
print()
print("At 25 %:")
print()
print("| model, order | bytes ÷ LRU | stall ms/MiB ZipMoE / LRU | ZipMoE stall / ⅓ of LRU's (ms) "
      "| reads to hide for ⅓ (ms) | all-resident token (ms) |")
print("|---|---|---|---|---|---|")
goal = {}
for model, budgets in out.items():
    for order in ("first", "reversed"):
        c = budgets["25"][order]
        z, l = c["zipmoe"], c["full-lru"]
        per_mib_z = z["stall_ms_per_token"] / z["mib_read_per_token"]
        per_mib_l = l["stall_ms_per_token"] / l["mib_read_per_token"]
        third = l["stall_ms_per_token"] / 3
        # ZipMoE's reads at LRU's stall per MiB, minus a third of LRU's stall: what would have to be hidden.
        hide = z["mib_read_per_token"] * per_mib_l - third
        goal[f"{model}-{order}"] = {"bytes_over_lru": z["mib_read_per_token"] / l["mib_read_per_token"],
                                    "stall_ms_per_mib": [per_mib_z, per_mib_l], "third_of_lru_stall_ms": third,
                                    "reads_to_hide_ms": hide, "resident_tpot_ms": z["resident_tpot_ms"]}
        print(f"| {model}, {order} | {z['mib_read_per_token'] / l['mib_read_per_token']:.2f} "
              f"| {per_mib_z:.3f} / {per_mib_l:.3f} | {z['stall_ms_per_token']:.1f} / {third:.1f} "
              f"| {hide:.1f} | {z['resident_tpot_ms']:.1f} |")
if len(sys.argv) > 1:
    json.dump({"cells": out, "stall_goal_at_25": goal}, open(sys.argv[1], "w"), indent=1)
