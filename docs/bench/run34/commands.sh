#!/bin/bash
# Run 34: the budget sweep before and after the benchmark suites became clients of the generation core
# (issue #44): the same Qwen1.5-MoE-shaped workload and flags as run 33's, measured by the binary of
# 74ce13c (the harness's own token loop; copied to /tmp/zipmoe-before) and by this commit's, alternating
# before / after / after / before, each in one system order, nothing else running. Each binary has a
# copy of the store of its own, so that neither re-measures the cost profile the other wrote.
# Store: zipmoe make-model --family qwen2_moe --preset qwen1.5-moe-a2.7b --layers 8 out/bench/qwen8-hf;
# zipmoe convert out/bench/qwen8-hf out/bench/qwen8-nibble-store --codec nibble; cp -r it to
# out/bench/qwen8-nibble-store-before.
cd "$(dirname "$0")/../../.."
R=docs/bench/run34
BEFORE=${BEFORE:-/tmp/zipmoe-before}
AFTER=${AFTER:-build/app/zipmoe}
F="bench suite budget --hf out/bench/qwen8-hf --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32 --history 8 --warm-start"
run() { local out=$1; shift; date -u; "$@" --out $R/$out > $R/$out.log 2>&1; }
run before-first    $BEFORE $F --store out/bench/qwen8-nibble-store-before --budgets 10,25,50,75 --systems zipmoe,full-lru
run after-first     $AFTER  $F --store out/bench/qwen8-nibble-store        --budgets 10,25,50,75 --systems zipmoe,full-lru
run after-reversed  $AFTER  $F --store out/bench/qwen8-nibble-store        --budgets 75,50,25,10 --systems full-lru,zipmoe
run before-reversed $BEFORE $F --store out/bench/qwen8-nibble-store-before --budgets 75,50,25,10 --systems full-lru,zipmoe
date -u
echo ALL_DONE
