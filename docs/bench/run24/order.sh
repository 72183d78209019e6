#!/bin/bash
# DeepSeek budget sweep in one order, /proc/vmstat sampled every 0.5 s beside the bench's log lines
# usage: order.sh NAME BUDGETS SYSTEMS
cd "$(dirname "$0")/../../.."
name=$1; budgets=$2; systems=$3
out=docs/bench/run24/deepseek-$name; mkdir -p $out
( while :; do echo "$(date +%s.%N) $(grep -E '^(compact_stall|compact_fail|compact_success|thp_fault_alloc|thp_fault_fallback|pgfault|pgmajfault) ' /proc/vmstat | awk '{printf "%s=%s ", $1, $2}')"; sleep 0.5; done ) > $out/vmstat.txt &
sampler=$!
build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble \
  --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --budgets $budgets --systems $systems --out $out $EXTRA 2>&1 |
  while IFS= read -r line; do echo "$(date +%s.%N) $line"; done > $out/bench.log
kill $sampler
grep -E "^[0-9.]+ +(zipmoe|full-lru)" $out/bench.log | cut -c1-170
