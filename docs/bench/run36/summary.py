#!/usr/bin/env python3
"""Summarises run36's logs (cold-prompt.sh) into JSON: per workload and case (cold, warm, and before:
the cold case on the build before AMX tiles) and system, every time to first token, the median and
ZipMoE's median over full-lru's at 25 %; the resident runs' TTFT.

    summary.py            (reads every *-prompt-*.log beside this script, writes summary.json)"""
import glob
import json
import os
import re
import statistics
import sys

# The run's directory: this script's, or the one given (a later run's copy of the same command).
here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
out = {}
for log in sorted(glob.glob(os.path.join(here, "*-prompt-*.log"))):
    case, sitting, workload = re.match(r"(cold|warm|before)-prompt-(2-)?([a-z0-9]+)\.log", os.path.basename(log)).groups()
    if sitting:
        case += " (sitting 2)"
    runs = {}
    for line in open(log):
        m = re.match(r"system=(\S+) budget=(\S+) reply=\S+ time to first token ([0-9.]+) ms", line)
        if m:
            key = m.group(1) if m.group(2) != "resident" else "resident"
            runs.setdefault(key, []).append(float(m.group(3)))
    entry = {k: {"ttft_ms": v, "median_ms": statistics.median(v)} for k, v in runs.items()}
    entry["zipmoe_over_lru"] = entry["zipmoe"]["median_ms"] / entry["full-lru"]["median_ms"]
    out.setdefault(workload, {})[case] = entry
json.dump(out, open(os.path.join(here, "summary.json"), "w"), indent=1)
for w, cases in out.items():
    for c, e in cases.items():
        print(w, c, "zipmoe", e["zipmoe"]["median_ms"], "lru", e["full-lru"]["median_ms"],
              "ratio", round(e["zipmoe_over_lru"], 3), "resident", e.get("resident", {}).get("median_ms"))
