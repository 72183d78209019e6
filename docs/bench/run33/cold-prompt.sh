#!/bin/bash
# Run 33: run 32's cold long prompt on this host. The 591-token raw prompt of run 31, no warm start
# (most experts are misses), DeepSeek-shaped store, 2 generated tokens, at 75 % and 25 %: ZipMoE
# against full-tensor LRU, alternating order, 4 rounds after one throwaway run. Nothing else running.
# Writes run33/cold-prompt.log; then
#   docs/bench/run31/summary.py docs/bench/run33/cold-prompt.log docs/bench/run33/cold-prompt.json
cd "$(dirname "$0")/../../.."
R=docs/bench/run33
P="$(sed -n 100,130p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | head -c 900)"
run() {  # system budget
  local extra=""
  [ "$1" = full-lru ] && extra="--offload full --checkpoint out/bench/dsv2lite5-hf"
  local reply
  reply=$(build/app/zipmoe generate out/bench/dsv2lite5-nibble-store --raw --max-tokens 2 --prompt "$P" --budget $2 $extra \
          2>/tmp/run33.err | md5sum | cut -c1-12)
  echo "system=$1 budget=$2 reply=$reply $(grep -o 'time to first token [0-9.]* ms' /tmp/run33.err)"
}
{
date -u
run zipmoe 75% > /dev/null  # throwaway
for round in 1 2 3 4; do
  for budget in 75% 25%; do
    case $round in
      1|3) order="zipmoe full-lru" ;;
      *) order="full-lru zipmoe" ;;
    esac
    for s in $order; do run $s $budget; done
  done
done
date -u
} > $R/cold-prompt.log 2>&1
