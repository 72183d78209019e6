#!/bin/bash
# Run 36: the budget sweep (10, 25, 50, 75 %) with the product's defaults (no tuning flag: history of
# 8 other trace prompts, warm start, the trace continuation fitted for each trace, the measured
# prompt drawn by seed 1), ZipMoE against full-tensor LRU, both orders, both workload shapes; one
# sitting, nothing else running (SITTING=2: a second sitting, into sweep2-*). Stores as in
# cold-prompt.sh. Figures: docs/bench/run36/sweep_summary.py. RUN_DIR=DIR writes into DIR instead.
cd "$(dirname "$0")/../../.."
R=${RUN_DIR:-docs/bench/run36}
N=sweep
[ "${SITTING:-1}" = 2 ] && N=sweep2
Q="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --budgets 10,25,50,75"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-store --label nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --budgets 10,25,50,75"
date -u
$Q --systems zipmoe,full-lru --out $R/$N-qwen8-first > $R/$N-qwen8-first.log 2>&1; date -u
$D --systems zipmoe,full-lru --out $R/$N-deepseek-first > $R/$N-deepseek-first.log 2>&1; date -u
$Q --systems full-lru,zipmoe --out $R/$N-qwen8-reversed > $R/$N-qwen8-reversed.log 2>&1; date -u
$D --systems full-lru,zipmoe --out $R/$N-deepseek-reversed > $R/$N-deepseek-reversed.log 2>&1; date -u
echo ALL_DONE
