#!/bin/bash
# Run 28: warm start. TTFT (and TPOT) at 25 % with both systems planning/ranking from the same 8
# history prompts, cold (pools empty at the first prompt) against warm (bench suite --warm-start:
# every offloading system fills its pools from that history before the first prompt), three
# measurements each (median), both orders, per model. No resident reference (TTFT needs none).
# Build of the commit that adds this file's parent change (54776b7).
cd "$(dirname "$0")/../../.."
R=docs/bench/run28
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16"
COMMON="--budgets 25 --history 8 --no-resident --repeat 3"
for order in zipmoe,full-lru full-lru,zipmoe; do
  n=${order%%,*}
  for start in cold warm; do
    extra=""
    [ $start = warm ] && extra="--warm-start"
    date
    $D $COMMON --systems $order $extra --out $R/deepseek-$start-$n-first > $R/deepseek-$start-$n-first.log 2>&1
    date
    $S $COMMON --systems $order $extra --out $R/qwen8-$start-$n-first > $R/qwen8-$start-$n-first.log 2>&1
  done
done
date
echo ALL_DONE
