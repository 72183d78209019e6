#!/usr/bin/env python3
"""Sums a runtime trace (zipmoe generate --trace OUT.json) per token: milliseconds in each lane's
operations (stall, dense, expert, recover, decompress, reads) and the number of recoveries. Prints
JSON: {"token": N, "ms": {...}, "recoveries": K} per token. Standard library only."""
import collections
import json
import sys

def main(path):
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    per = collections.defaultdict(collections.Counter)
    recoveries = collections.Counter()
    for e in events:
        token = e.get("args", {}).get("token")
        if e.get("ph") != "X" or token is None:
            continue
        per[token][e["name"]] += e["dur"] / 1000.0
        if e["name"] == "recover":
            recoveries[token] += 1
    rows = [{"token": t, "ms": {k: round(v, 3) for k, v in sorted(per[t].items())}, "recoveries": recoveries[t]}
            for t in sorted(per)]
    json.dump(rows, sys.stdout, indent=1)
    print()

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: trace_per_token.py TRACE.json")
    main(sys.argv[1])
