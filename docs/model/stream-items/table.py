#!/usr/bin/env python3
"""The kernels A/B of docs/MODEL.md ("One stream per item") as a Markdown table: avx512-bf16 GB/s
(the median product) per shape and source, each build's two runs and their mean; the new build's
sustained figure (all products' bytes ÷ their time; the old build did not print it) in brackets.
usage: python3 docs/model/stream-items/table.py"""
import glob
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
runs = {}
for path in sorted(glob.glob(os.path.join(here, "kernels-*-*.json"))):
    n, build = os.path.basename(path)[len("kernels-"):-len(".json")].split("-")
    runs.setdefault(build, []).append(json.load(open(path)))
shapes = [g["shape"] for g in runs["old"][0]["gemv"]]
print("| shape | source | old | new (sustained) |")
print("|---|---|---|---|")
for shape in shapes:
    for source in ["", " split", " nibble"]:
        cells = []
        for build in ["old", "new"]:
            figures = []
            for run in runs[build]:
                row = next(g for g in run["gemv"] if g["shape"] == shape)
                k = next(k for k in row["kernels"] if k["kernel"] == "avx512-bf16" + source)
                figures.append((k["gb_per_s"], k.get("sustained_gb_per_s")))
            text = " / ".join(f"{g:.1f}" + (f" ({s:.1f})" if s else "") for g, s in figures)
            cells.append(text)
        print(f"| {shape} | {'words' if not source else source.strip()} | {cells[0]} | {cells[1]} |")
bw = {b: " / ".join(f"{next(x['gb_per_s'] for x in r['bandwidth'] if x['threads'] == 2):.1f}" for r in runs[b])
      for b in runs}
print(f"| read, 2 threads | | {bw['old']} | {bw['new']} |")
