#!/usr/bin/env python3
"""Summarises a log of `system=… budget=… reply=… time to first token … ms` lines (run31/commands.sh,
run32/commands.sh) into JSON: per budget and system, every time to first token, the median, and the
median over full-lru's; and whether every reply was the same.

    summary.py [LOG [JSON]]   (default: long-prompt.log → long-prompt.json beside this script)"""
import json
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
log = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "long-prompt.log")
target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "long-prompt.json")
runs = {}
replies = set()
for line in open(log):
    m = re.match(r"system=(\S+) budget=(\S+) reply=(\S+) time to first token ([0-9.]+) ms", line)
    if m:
        runs.setdefault(m.group(2), {}).setdefault(m.group(1), []).append(float(m.group(4)))
        replies.add(m.group(3))
out = {"same_reply_everywhere": len(replies) == 1, "budgets": {}}
for budget, systems in runs.items():
    lru = statistics.median(systems["full-lru"])
    out["budgets"][budget] = {
        s: {"ttft_ms": v, "median_ms": statistics.median(v), "median_over_lru": statistics.median(v) / lru}
        for s, v in systems.items()
    }
json.dump(out, open(target, "w"), indent=1)
print(json.dumps({b: {s: round(x["median_over_lru"], 3) for s, x in v.items()} for b, v in out["budgets"].items()}))
