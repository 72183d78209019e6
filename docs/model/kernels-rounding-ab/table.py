#!/usr/bin/env python3
"""Prints the avx512-bf16 GB/s of every shape in the runs of this directory (N-BUILD.json), each
build's median, and the two-thread read bandwidth of each run. Standard library only."""
import glob
import json
import os
import statistics

here = os.path.dirname(os.path.abspath(__file__))
runs = []
for path in sorted(glob.glob(os.path.join(here, "*.json")), key=lambda p: int(os.path.basename(p).split("-")[0])):
    build = os.path.basename(path)[:-5].split("-", 1)[1]
    d = json.load(open(path))
    rates = {g["shape"]: next(k["gb_per_s"] for k in g["kernels"] if k["kernel"] == "avx512-bf16") for g in d["gemv"]}
    read = next(b["gb_per_s"] for b in d["bandwidth"] if b["threads"] == 2)
    runs.append((os.path.basename(path), build, rates, read))
shapes = list(runs[0][2])
print("| run | " + " | ".join(shapes) + " | read, 2 threads |")
print("|---" * (len(shapes) + 2) + "|")
for name, _, rates, read in runs:
    print(f"| {name} | " + " | ".join(f"{rates[s]:.1f}" for s in shapes) + f" | {read:.1f} |")
for build in sorted({r[1] for r in runs}, reverse=True):
    mine = [r for r in runs if r[1] == build]
    print(f"| median, {build} | " + " | ".join(f"{statistics.median(r[2][s] for r in mine):.1f}" for s in shapes) +
          f" | {statistics.median(r[3] for r in mine):.1f} |")
