#!/bin/bash
# Run 33, batch 16: run 27's batch commands (batch 16 at 25 %, both orders, both models) on this
# host, with the warm start and history of the budget sweep. One measurement each, nothing else running.
cd "$(dirname "$0")/../../.."
R=docs/bench/run33
B="build/app/zipmoe bench suite batch --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32 --history 8 --warm-start"
E="build/app/zipmoe bench suite batch --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16 --history 8 --warm-start"
run() { local out=$1; shift; date -u; "$@" --out $R/$out > $R/$out.log 2>&1; }
run batch16-deepseek-first    $E --budget 25 --batches 16 --systems zipmoe,full-lru
run batch16-qwen8-first       $B --budget 25 --batches 16 --systems zipmoe,full-lru
run batch16-deepseek-reversed $E --budget 25 --batches 16 --systems full-lru,zipmoe
run batch16-qwen8-reversed    $B --budget 25 --batches 16 --systems full-lru,zipmoe
date -u
echo ALL_DONE
