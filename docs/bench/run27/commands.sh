#!/bin/bash
# Run 27: the budget sweep (10, 25, 50, 75 %) in both orders on both models, and batch 16 at 25 %
# in both orders, on ecf5502's build (the floor taken between two resident runs; profiles named by
# the code that timed them). One measurement each, nothing else running.
cd "$(dirname "$0")/../../.."
R=docs/bench/run27
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16"
B="build/app/zipmoe bench suite batch --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32"
E="build/app/zipmoe bench suite batch --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16"
run() { local out=$1; shift; date; "$@" --out $R/$out > $R/$out.log 2>&1; }
run deepseek-first   $D --budgets 10,25,50,75 --systems zipmoe,full-lru
run qwen8-first      $S --budgets 10,25,50,75 --systems zipmoe,full-lru
run deepseek-reversed $D --budgets 75,50,25,10 --systems full-lru,zipmoe
run qwen8-reversed   $S --budgets 75,50,25,10 --systems full-lru,zipmoe
run batch16-deepseek-first    $E --budget 25 --batches 16 --systems zipmoe,full-lru
run batch16-qwen8-first       $B --budget 25 --batches 16 --systems zipmoe,full-lru
run batch16-deepseek-reversed $E --budget 25 --batches 16 --systems full-lru,zipmoe
run batch16-qwen8-reversed    $B --budget 25 --batches 16 --systems full-lru,zipmoe
date
echo ALL_DONE
