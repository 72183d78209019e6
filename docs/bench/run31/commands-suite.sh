#!/bin/bash
# Run 31, suite part: run 30's budget sweep in the first order on both models, on 13cf92f (C hits of a
# prefill read in place), to re-take run 30's one outlier (Qwen8, first order, 75 %, 1.28× LRU's TPOT)
# and to check the 16-token prompts of the suite. One measurement each, nothing else running.
cd "$(dirname "$0")/../../.."
R=docs/bench/run31
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32 --history 8 --warm-start"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16 --history 8 --warm-start"
run() { local out=$1; shift; date; "$@" --out $R/$out > $R/$out.log 2>&1; }
run qwen8-first       $S --budgets 10,25,50,75 --systems zipmoe,full-lru
run deepseek-first    $D --budgets 10,25,50,75 --systems zipmoe,full-lru
date
echo ALL_DONE
