#!/bin/bash
# Run 26: the resident step against a floor measured between its two runs (the median bandwidth
# pass, the best pass beside it), with ZipMoE and LRU at 25 %, three sittings per model, the models
# alternating; then TTFT over 4 prompts a measurement (4 tokens each, one of them warm-up), two sittings per model in
# both orders. Build of the commit that adds this file (cost profiles re-measured by it: a profile
# now names the code that timed it).
cd "$(dirname "$0")/../../.."
R=docs/bench/run26
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16"
if [ "$1" != ttft ]; then
for i in 1 2 3; do
  date
  $D --budgets 25 --systems zipmoe,full-lru --out $R/deepseek-$i > $R/deepseek-$i.log 2>&1
  date
  $S --budgets 25 --systems full-lru,zipmoe --out $R/qwen8-$i > $R/qwen8-$i.log 2>&1
done
fi
for order in zipmoe,full-lru full-lru,zipmoe; do
  n=${order%%,*}
  date
  $D --budgets 25 --systems $order --prompts 0,1,2,3 --tokens 4 --warmup 1 --out $R/ttft-deepseek-$n-first > $R/ttft-deepseek-$n-first.log 2>&1
  date
  $S --budgets 25 --systems $order --prompts 0,1,2,3 --tokens 4 --warmup 1 --out $R/ttft-qwen8-$n-first > $R/ttft-qwen8-$n-first.log 2>&1
done
date
echo ALL_DONE
