#!/usr/bin/env python3
"""For each measurement in DIR/bench.log (lines stamped by order.sh), the change of /proc/vmstat's
compaction, THP and page-fault counters (DIR/vmstat.txt, sampled every 0.5 s) since the log's
previous line, i.e. over the measurement and what ran just before it.
usage: vmstat_deltas.py DIR... Standard library only."""
import re
import sys

KEYS = ["compact_stall", "thp_fault_alloc", "thp_fault_fallback", "pgfault"]
for d in sys.argv[1:]:
    samples = []
    for line in open(f"{d}/vmstat.txt"):
        parts = line.split()
        samples.append((float(parts[0]), {k: int(v) for k, v in (p.split("=") for p in parts[1:])}))

    def at(t):
        best = samples[0][1]
        for ts, v in samples:
            if ts <= t:
                best = v
        return best

    print(d)
    previous = None
    for line in open(f"{d}/bench.log"):
        t = float(line.split()[0])
        m = re.search(r"(zipmoe|full-lru)\s+(\d+) % #(\d)\s+TPOT\s+([0-9.]+)", line)
        if m and previous is not None:
            a, b = at(previous), at(t)
            print(f"  {m.group(1):8} {m.group(2):>2} % #{m.group(3)} TPOT {m.group(4):>6} ms  " +
                  "  ".join(f"{k} {b[k] - a[k]}" for k in KEYS))
        previous = t
