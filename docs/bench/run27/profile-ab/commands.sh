#!/bin/bash
# Run 27, profile A/B: DeepSeek at 75 %, the same binary (ecf5502's build), planned with the profile
# it measured at 13:39 (profile-1339.json) or with the 04:23 profile's measured values under this
# build's identity (profile-0423-values.json; the values as run 25 used them, no observed costs),
# alternating 0423, 1339, 1339, 0423. The profile is copied into the store before each run.
cd "$(dirname "$0")/../../../.."
R=docs/bench/run27/profile-ab
for p in 0423-values 1339 1339 0423-values; do
  n=$(ls $R | grep -c "^$p-.*log$"); n=$((n+1))
  cp $R/profile-$p.json out/bench/dsv2lite5-nibble-store/profile.json
  date
  build/app/zipmoe bench suite budget --hf out/bench/dsv2lite5-hf --store out/bench/dsv2lite5-nibble-store \
    --label dsv2lite5-nibble --trace-file ../shared/data/traces/deepseek-v2-lite.tsv --no-plot --trace-continuation 16 \
    --budgets 75 --systems zipmoe,full-lru --out $R/$p-$n > $R/$p-$n.log 2>&1
done
cp $R/profile-1339.json out/bench/dsv2lite5-nibble-store/profile.json
date
echo ALL_DONE
