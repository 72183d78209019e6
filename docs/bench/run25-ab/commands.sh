#!/bin/bash
# Run 25 A/B: budgets 25 and 75 %, ZipMoE and LRU, two builds alternating (old, new, new, old).
# old = a build of 99a963d, new = the build of the commit that adds this file (one sequential stream
# per pool item); the binaries were in /work/old and /work/new when this ran.
cd /work/main
R=docs/bench/run25-ab
mkdir -p $R
for pair in old:/work/old/zipmoe new:/work/new/zipmoe new:/work/new/zipmoe old:/work/old/zipmoe; do
  label=${pair%%:*}; bin=${pair#*:}
  n=$(ls $R | grep -c "^$label-.*log$"); n=$((n+1))
  date
  $bin bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store --label dsv2lite5-nibble \
    --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --budgets 25,75 --systems zipmoe,full-lru --trace-continuation 16 \
    --out $R/$label-$n > $R/$label-$n.log 2>&1
done
date
echo ALL_DONE
