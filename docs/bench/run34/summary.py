#!/usr/bin/env python3
"""Run 34's table from its JSON (docs/bench/run34/{before,after}-{first,reversed}/budget-nibble.json):
per budget, ZipMoE ÷ full-tensor LRU's TPOT, TTFT and stall (TPOT − the sitting's all-resident TPOT)
by the binary before the bench suites drove the generation core and by the one after, in each system
order, and the MiB each system read a token (deterministic for a store, trace and budget: the two
binaries should read the same bytes). Prints Markdown; with a path, also writes the figures as JSON.

    summary.py [JSON_OUT]"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
out = {}
for binary in ("before", "after"):
    for order in ("first", "reversed"):
        path = os.path.join(here, f"{binary}-{order}", "budget-nibble.json")
        d = json.load(open(path))
        for r in d["results"]:
            cell = out.setdefault(str(int(r["budget_percent"])), {}).setdefault(binary, {}).setdefault(order, {})
            cell[r["system"]] = {k: r[k] for k in ("tpot_ms", "ttft_ms", "stall_ms_per_token", "mib_read_per_token",
                                                   "miss_percent")}


def ratio(cell, key):
    return cell["zipmoe"][key] / cell["full-lru"][key]


print("| budget | binary | TPOT ZipMoE / LRU ms (first; reversed) | TPOT ÷ LRU | TTFT ÷ LRU | stall ÷ LRU | MiB/token ZipMoE / LRU |")
print("|---|---|---|---|---|---|---|")
table = {}
for b in sorted(out, key=int):
    for binary in ("before", "after"):
        f, v = out[b][binary]["first"], out[b][binary]["reversed"]
        row = {k: [ratio(f, k), ratio(v, k)] for k in ("tpot_ms", "ttft_ms", "stall_ms_per_token")}
        row["mib_read_per_token"] = {s: [f[s]["mib_read_per_token"], v[s]["mib_read_per_token"]] for s in ("zipmoe", "full-lru")}
        table.setdefault(b, {})[binary] = row
        print(f"| {b} % | {binary} | {f['zipmoe']['tpot_ms']:.1f} / {f['full-lru']['tpot_ms']:.1f}; "
              f"{v['zipmoe']['tpot_ms']:.1f} / {v['full-lru']['tpot_ms']:.1f} "
              f"| {row['tpot_ms'][0]:.2f} / {row['tpot_ms'][1]:.2f} "
              f"| {row['ttft_ms'][0]:.2f} / {row['ttft_ms'][1]:.2f} "
              f"| {row['stall_ms_per_token'][0]:.2f} / {row['stall_ms_per_token'][1]:.2f} "
              f"| {f['zipmoe']['mib_read_per_token']:.0f} / {f['full-lru']['mib_read_per_token']:.0f} |")
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fh:
        json.dump(table, fh, indent=1)
