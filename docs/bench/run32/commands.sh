#!/bin/bash
# Run 32: a cold long prompt (no warm start: most experts are misses), before and after the commit
# that has a prefill's misses kept in C indexed in their kept buffers instead of decoded.
#   commands.sh BEFORE_ZIPMOE_BINARY AFTER_ZIPMOE_BINARY
# (zipmoe built at 8b8fb62 and at the commit after it). DeepSeek-shaped store, the 591-token raw
# prompt of run 31, 2 generated tokens, at 75 % and 25 %: ZipMoE before, ZipMoE after, full-tensor
# LRU (the BEFORE binary), rotating order, 4 rounds after one throwaway run (the first run after a
# pause is slow for every system). Nothing else running. Writes run32/cold-prompt.log; then
#   docs/bench/run31/summary.py docs/bench/run32/cold-prompt.log docs/bench/run32/cold-prompt.json
cd "$(dirname "$0")/../../.."
R=docs/bench/run32
BEFORE=$1; AFTER=$2
P="$(sed -n 100,130p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | head -c 900)"
run() {  # system budget
  local bin=$BEFORE extra=""
  case $1 in
    zipmoe-before) ;;
    zipmoe-after) bin=$AFTER ;;
    full-lru) extra="--offload full --checkpoint out/bench/dsv2lite5-hf" ;;
  esac
  local reply
  reply=$($bin generate out/bench/dsv2lite5-nibble-store --raw --max-tokens 2 --prompt "$P" --budget $2 $extra \
          2>/tmp/run32.err | md5sum | cut -c1-12)
  echo "system=$1 budget=$2 reply=$reply $(grep -o 'time to first token [0-9.]* ms' /tmp/run32.err)"
}
{
date -u
run zipmoe-before 75% > /dev/null  # throwaway
for round in 1 2 3 4; do
  for budget in 75% 25%; do
    case $round in
      1|3) order="zipmoe-before zipmoe-after full-lru" ;;
      *) order="full-lru zipmoe-after zipmoe-before" ;;
    esac
    for s in $order; do run $s $budget; done
  done
done
date -u
} > $R/cold-prompt.log 2>&1
