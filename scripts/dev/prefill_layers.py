#!/usr/bin/env python3
"""Summarises the prefill (token 0) of runtime traces (zipmoe generate --trace OUT.json) layer by layer:
the milliseconds from the end of the dense work before the layer to its first read (what the model
thread does in between, before the I/O thread can start: routing, planning, building the schedule),
the layer's span from that dense end to its last operation, and how long the I/O thread was busy
in it. Then the prefill's totals: span, I/O busy time and share, bytes read and their rate. Prints
one JSON object per trace file, keyed by its name. Standard library only."""
import json
import os
import sys


def summarise(path):
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    lanes = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ops = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("token") == 0]
    if not ops:
        raise SystemExit(f"{path}: no operations of token 0 (the prefill)")
    io = [e for e in ops if lanes.get(e["tid"], "").startswith("I/O")]
    layers = []
    for layer in sorted({e["args"].get("layer") for e in ops if e["args"].get("layer") is not None}):
        mine = [e for e in ops if e["args"].get("layer") == layer]
        dense = [e for e in mine if e["name"] == "dense"]
        reads = [e for e in io if e["args"].get("layer") == layer]
        if not dense or not reads:
            continue  # the first layer has no dense event before it; a layer of hits reads nothing
        start = dense[0]["ts"] + dense[0]["dur"]
        end = max(e["ts"] + e["dur"] for e in mine)
        layers.append({"layer": layer,
                       "dense_end_to_first_read_ms": round((min(e["ts"] for e in reads) - start) / 1e3, 2),
                       "span_ms": round((end - start) / 1e3, 1),
                       "io_busy_ms": round(sum(e["dur"] for e in reads) / 1e3, 1)})
    t0 = min(e["ts"] for e in ops)
    t1 = max(e["ts"] + e["dur"] for e in ops)
    busy = sum(e["dur"] for e in io)
    read = sum(e["args"].get("bytes", 0) for e in io)
    return {"layers": layers,
            "span_ms": round((t1 - t0) / 1e3, 1),
            "io_busy_ms": round(busy / 1e3, 1),
            "io_busy_share": round(busy / (t1 - t0), 3),
            "reads": len(io),
            "mib_read": round(read / 2**20, 1),
            "read_gb_per_s": round(read / (busy / 1e6) / 1e9, 2) if busy else 0}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    json.dump({os.path.basename(p): summarise(p) for p in sys.argv[1:]}, sys.stdout, indent=1)
    print()
