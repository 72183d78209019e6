#!/usr/bin/env python3
"""Summarises `zipmoe bench serve` JSON files whose configurations were run more than once (ABBA
order): per configuration, the mean and the spread (min-max) over its runs of throughput, TTFT
p50/p99, inter-token latency p50, expert loads per step and bytes read per generated token.
Each file is one table; with --merge, the runs of all files make one table (a sweep run in both
orders, one file per order). Dev-time only: prints Markdown.

usage: scripts/dev/serve_ab_summary.py [--merge] FILE.json [FILE.json ...]
"""
import json
import statistics
import sys
from collections import OrderedDict

FIELDS = [("throughput_tokens_per_s", "tokens/s", 1, 1.0), ("ttft_ms_p50", "TTFT p50 ms", 0, 1.0),
          ("ttft_ms_p99", "TTFT p99 ms", 0, 1.0), ("itl_ms_p50", "ITL p50 ms", 0, 1.0),
          ("expert_loads_per_step", "loads / step", 2, 1.0), ("bytes_read_per_token", "MB read / token", 1, 1e6)]


def cell(values, digits):
    mean = statistics.mean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def table(title, runs):
    groups = OrderedDict()
    for run in runs:
        groups.setdefault(run["config"], []).append(run)
    print(f"\n{title}: {len(runs)} runs")
    print("| config | runs | requests | " + " | ".join(h for _, h, _, _ in FIELDS) + " |")
    print("|---|---|---|" + "---|" * len(FIELDS))
    for name, rs in groups.items():
        cells = [cell([r[field] / scale for r in rs], digits) for field, _, digits, scale in FIELDS]
        reqs = "+".join(str(r["requests"]) for r in rs)
        print(f"| {name} | {len(rs)} | {reqs} | " + " | ".join(cells) + " |")


def main(args):
    merge = bool(args) and args[0] == "--merge"
    paths = args[1:] if merge else args
    if not paths:
        sys.exit(__doc__)
    docs = [(path, json.load(open(path))["runs"]) for path in paths]
    if merge:
        table(" + ".join(p for p, _ in docs), [r for _, runs in docs for r in runs])
    else:
        for path, runs in docs:
            table(path, runs)


if __name__ == "__main__":
    main(sys.argv[1:])
