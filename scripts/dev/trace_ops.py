#!/usr/bin/env python3
"""Summarises runtime traces (zipmoe generate --trace OUT.json, or bench suite --schedule-trace DIR)
per lane and operation: operations and milliseconds per token, MiB per token, and the median, 10th
and 90th percentile of one operation's duration in microseconds. Prints one JSON object per trace
file, keyed by its name. Standard library only."""
import collections
import json
import os
import sys


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0


def summarise(path):
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    lanes = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ops = collections.defaultdict(list)
    bytes_ = collections.Counter()
    tokens = set()
    for e in events:
        if e.get("ph") != "X":
            continue
        key = lanes.get(e["tid"], str(e["tid"])) + " / " + e["name"]
        ops[key].append(e["dur"])
        bytes_[key] += e.get("args", {}).get("bytes", 0)
        tokens.add(e.get("args", {}).get("token"))
    n = max(1, len(tokens))
    return {"tokens": len(tokens),
            "ops": {k: {"per_token": round(len(d) / n, 2), "ms_per_token": round(sum(d) / n / 1000, 2),
                        "mib_per_token": round(bytes_[k] / n / 2**20, 2), "median_us": round(quantile(d, 0.5)),
                        "p10_us": round(quantile(d, 0.1)), "p90_us": round(quantile(d, 0.9))}
                    for k, d in sorted(ops.items())}}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: trace_ops.py TRACE.json...")
    json.dump({os.path.basename(p): summarise(p) for p in sys.argv[1:]}, sys.stdout, indent=1)
    print()
