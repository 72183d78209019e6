#!/bin/bash
# Run 35 (issue #45): the product's defaults, measured as a user gets them.
#  1. `zipmoe serve --budget auto` while another process takes memory in steps until the budget can
#     be 75, 50 and 25 % of the experts, then frees it (scripts/dev/budget_auto_bench.py): the budget
#     moves, TPOT over time, MemAvailable, RSS, swap-outs and OOM kills.
#  2. The budget sweep at 25 % with no flag but the workload's: the suite's defaults are now the
#     product's (history of 8 other trace prompts, warm start, the fitted trace continuation, the
#     measured prompt drawn by seed 1), ZipMoE against full-tensor LRU, both orders.
# Store: zipmoe make-model --family qwen2_moe --preset qwen1.5-moe-a2.7b --layers 8 out/bench/qwen8-hf;
# zipmoe convert out/bench/qwen8-hf out/bench/qwen8-nibble-store --codec nibble (what `convert`
# measures as cheapest on this machine: docs/CODECS.md).
cd "$(dirname "$0")/../../.."
R=docs/bench/run35
date -u
python3 scripts/dev/budget_auto_bench.py --zipmoe build/app/zipmoe --store out/bench/qwen8-nibble-store \
  --out $R/budget-auto --shares 0.75,0.5,0.25 --hold 40 > $R/budget-auto.log 2>&1
build/app/zipmoe-plot --all $R/budget-auto
S="build/app/zipmoe bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot"
date -u
$S --budgets 25 --systems zipmoe,full-lru --out $R/defaults-first > $R/defaults-first.log 2>&1
date -u
$S --budgets 25 --systems full-lru,zipmoe --out $R/defaults-reversed > $R/defaults-reversed.log 2>&1
date -u
echo ALL_DONE  # (the second sitting, below, was run by hand afterwards)
# Second sitting of step 2 (08:09 UTC, after the llama.cpp comparison), the orders swapped:
#   $S --budgets 25 --systems full-lru,zipmoe --out $R/defaults2-reversed
#   $S --budgets 25 --systems zipmoe,full-lru --out $R/defaults2-first
