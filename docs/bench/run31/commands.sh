#!/bin/bash
# Run 31: a long prompt's prefill after a warm start, where most experts are routed more than 8 of
# the prompt's tokens. DeepSeek-shaped store, 591-token raw prompt (tinyshakespeare lines 100-130),
# 2 generated tokens, --warm-start, at 75 % and 50 %: ZipMoE (C hits' nibble codes turned into
# BF16 words in one pass by the model, 13cf92f), ZipMoE --decoded-planes (C hits decoded into a
# plane by a worker and merged by the model, as before 13cf92f) and full-tensor LRU, in rotating
# order, 4 rounds. Nothing else running. Writes run31/long-prompt.log; summary.py makes the JSON.
cd "$(dirname "$0")/../../.."
R=docs/bench/run31
P="$(sed -n 100,130p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | head -c 900)"
G="build/app/zipmoe generate out/bench/dsv2lite5-nibble-store --raw --max-tokens 2 --warm-start"
run() {  # system budget
  local extra=""
  case $1 in
    zipmoe) extra="" ;;
    zipmoe-decoded-planes) extra="--decoded-planes" ;;
    full-lru) extra="--offload full --checkpoint out/bench/dsv2lite5-hf" ;;
  esac
  local reply
  reply=$($G --prompt "$P" --budget $2 $extra 2>/tmp/run31.err | md5sum | cut -c1-12)
  echo "system=$1 budget=$2 reply=$reply $(grep -o 'time to first token [0-9.]* ms' /tmp/run31.err) | $(grep -o 'warm-start: [0-9]* experts' /tmp/run31.err)"
}
{
date -u
for round in 1 2 3 4; do
  for budget in 75% 50%; do
    case $round in
      1|3) order="zipmoe zipmoe-decoded-planes full-lru" ;;
      *) order="full-lru zipmoe-decoded-planes zipmoe" ;;
    esac
    for s in $order; do run $s $budget; done
  done
done
date -u
} > $R/long-prompt.log 2>&1
