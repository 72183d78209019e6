#!/bin/bash
# Run 30: run 29's budget sweep (10, 25, 50, 75 %) after 798e120, whose warm start also indexes the C
# members it keeps for reading in place: both systems start from the same 8 history prompts
# (--history 8) and fill their pools from them before the first prompt (--warm-start), in both
# orders on both models. One measurement each, nothing else running; build of 798e120. Second sitting (-2),
# run right after the first.
cd "$(dirname "$0")/../../.."
R=docs/bench/run30
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32 --history 8 --warm-start"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16 --history 8 --warm-start"
run() { local out=$1; shift; date; "$@" --out $R/$out > $R/$out.log 2>&1; }
run deepseek-first-2    $D --budgets 10,25,50,75 --systems zipmoe,full-lru
run qwen8-first-2       $S --budgets 10,25,50,75 --systems zipmoe,full-lru
run deepseek-reversed-2 $D --budgets 75,50,25,10 --systems full-lru,zipmoe
run qwen8-reversed-2    $S --budgets 75,50,25,10 --systems full-lru,zipmoe
date
echo ALL_DONE
