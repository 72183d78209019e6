#!/bin/bash
# The budget suite's all-resident step beside `zipmoe generate`'s, alternating, one sitting: is the
# suite's step slower? (BENCHMARKS.md run 25.) The suite measures the "resident" system at 25 % (all
# experts resident, the budget unused) and then its resident reference (batch 1).
cd /work/main
for i in 1 2 3; do
  date -u "+%H:%M:%S"
  build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store \
    --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --budgets 25 \
    --systems resident --trace-continuation 16 --out /tmp/resonly 2>&1 | grep -E "TPOT|bandwidth"
  build/app/zipmoe generate out/bench/dsv2lite5-hf --raw --temperature 0 --max-tokens 64 \
    --prompt "The quick brown fox jumps over the lazy dog and keeps on running" 2>&1 >/dev/null | tail -1
done
