#!/bin/bash
# Run 33: the budget sweep on fe8037e (every change of issue #15, the last before resolving it): run 31's
# commands in both orders on both models, one measurement each, nothing else running. Stores made on a
# fresh machine: zipmoe make-model --family deepseek_v2 --preset deepseek-v2-lite --layers 5 out/bench/dsv2lite5-hf;
# zipmoe make-model --family qwen2_moe --preset qwen1.5-moe-a2.7b --layers 8 out/bench/qwen8-hf; then
# zipmoe convert HF STORE --codec nibble for each (out/bench/dsv2lite5-nibble-store, out/bench/qwen8-nibble-store).
cd "$(dirname "$0")/../../.."
R=docs/bench/run33
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --trace-continuation 32 --history 8 --warm-start"
D="build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16 --history 8 --warm-start"
run() { local out=$1; shift; date -u; "$@" --out $R/$out > $R/$out.log 2>&1; }
run deepseek-first    $D --budgets 10,25,50,75 --systems zipmoe,full-lru
run qwen8-first       $S --budgets 10,25,50,75 --systems zipmoe,full-lru
run deepseek-reversed $D --budgets 75,50,25,10 --systems full-lru,zipmoe
run qwen8-reversed    $S --budgets 75,50,25,10 --systems full-lru,zipmoe
date -u
echo ALL_DONE
# Then, 08:02–08:05 UTC, qwen8-first once more (its 75 % point had been 1.04 of LRU's TPOT), with
# /proc/meminfo sampled every 2 s beside it (qwen8-first-2-meminfo.log):
#   $S --budgets 10,25,50,75 --systems zipmoe,full-lru --out $R/qwen8-first-2 > $R/qwen8-first-2.log
#   ( while true; do echo "$(date +%T) $(grep -E 'AnonHugePages|MemFree|^Cached' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"; sleep 2; done )
# Tables: docs/bench/run33/summary.py docs/bench/run33/summary.json
# Then batch16.sh (batch 16 at 25 %, both orders, both models) and cold-prompt.sh (run 32's cold
# 591-token prompt, ZipMoE against LRU), after the loaded CI of the same commit had finished.
