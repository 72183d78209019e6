#!/bin/bash
# Run 25 A/B on Qwen8: budget 25 %, ZipMoE and LRU, two builds alternating (old, new, new, old).
# old = a build of 99a963d, new = a build of a38907b (one sequential stream per pool item); the
# binaries were in /work/old and /work/new when this ran.
cd /work/main
R=docs/bench/run25-ab-qwen8
mkdir -p $R
for pair in old:/work/old/zipmoe new:/work/new/zipmoe new:/work/new/zipmoe old:/work/old/zipmoe; do
  label=${pair%%:*}; bin=${pair#*:}
  n=$(ls $R | grep -c "^$label-.*log$"); n=$((n+1))
  date
  $bin bench suite budget --hf out/bench/qwen8-hf --store out/bench/qwen8-nibble-store --label nibble \
    --trace-file ../shared/data/traces/qwen1.5-moe.tsv --no-plot --budgets 25 --systems zipmoe,full-lru \
    --out $R/$label-$n > $R/$label-$n.log 2>&1
done
date
echo ALL_DONE
