#!/bin/bash
# Run 23 A/B: budget 25 %, ZipMoE and LRU, two builds alternating (old, new, new, old).
# old = a build of bd613ae, new = a build of 210c010 (the binaries were in /tmp when this ran).
cd /work/main
R=docs/bench/run23-ab25
mkdir -p $R
for pair in old:/tmp/zipmoe-old new:/tmp/zipmoe-norm new:/tmp/zipmoe-norm old:/tmp/zipmoe-old; do
  label=${pair%%:*}; bin=${pair#*:}
  n=$(ls $R | grep -c "^$label-.*log$"); n=$((n+1))
  date
  $bin bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble \
    --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --budgets 25 --systems zipmoe,full-lru --trace-continuation 16 \
    --out $R/$label-$n > $R/$label-$n.log 2>&1
done
date
echo ALL_DONE
