#!/bin/bash
# bench kernels, old (99a963d) and new build alternating (old, new, new, old). OMP_WAIT_POLICY=passive
# for both: the old build measures libtorch first, whose spinning OpenMP worker would slow the rows
# after it (MODEL.md, "The large products' slow second thread was the benchmark's").
cd /work/main
D=docs/model/stream-items
n=0
for pair in old:/work/old/zipmoe new:/work/new/zipmoe new:/work/new/zipmoe old:/work/old/zipmoe; do
  n=$((n+1)); label=${pair%%:*}; bin=${pair#*:}
  date
  OMP_WAIT_POLICY=passive $bin bench kernels --shapes 1408x2048,2048x1408,4096x512,3072x2048,10944x2048,102400x2048 \
    --mb 1190 --repeat 3 --huge-pages --json $D/kernels-$n-$label.json > $D/kernels-$n-$label.txt 2>&1
done
date
echo ALL_DONE
