#!/bin/bash
# Run 36: run 33's cold long prompt after prefill moved to AMX tiles (kernels/amx_gemm.h). The
# 591-token raw prompt of run 31 (corpus lines 100-130), a fresh process with no history and no warm
# start (almost every expert a miss), 2 generated tokens, at 25 %: ZipMoE (default flags otherwise)
# against full-tensor LRU, alternating order, 4 rounds after one throwaway run, on both workload
# shapes; and the same prompt all resident (no --budget), twice. Then the app's case (WARM=1): the
# statistics of earlier runs kept (three runs of another text, corpus lines 300-330, first) and the
# pools filled from them before the prompt comes (--warm-start waits for what the app does while
# its user types), against LRU again. Nothing else running. Stores:
#   zipmoe make-model --family deepseek_v2 --preset deepseek-v2-lite --layers 5 out/bench/dsv2lite5-hf
#   zipmoe convert out/bench/dsv2lite5-hf out/bench/dsv2lite5-store      (the codec it chose: nibble)
#   out/bench/qwen8-hf, out/bench/qwen8-nibble-store as in run 33.
# BEFORE=BINARY runs the cold case with that zipmoe (the build of the commit before the tiles,
# 40ac7fa: `git stash; ninja -C build app/zipmoe; cp build/app/zipmoe /work/zipmoe-40ac7fa`).
# Writes run36/cold-prompt-{deepseek,qwen8}.log (WARM=1: warm-prompt-*, BEFORE: before-prompt-*);
# SITTING=2 writes *-prompt-2-W.log. Then docs/bench/run36/summary.py → summary.json. RUN_DIR=DIR
# writes into DIR instead (a later run's cold-prompt.sh, which may set BEFORE).
cd "$(dirname "$0")/../../.."
R=${RUN_DIR:-docs/bench/run36}
P="$(sed -n 100,130p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | head -c 900)"
run() {  # workload system budget
  local store=out/bench/dsv2lite5-store hf=out/bench/dsv2lite5-hf extra="" budget=""
  [ "$1" = qwen8 ] && store=out/bench/qwen8-nibble-store hf=out/bench/qwen8-hf
  [ "$2" = full-lru ] && extra="--offload full --checkpoint $hf"
  [ "$3" != resident ] && budget="--budget $3 --no-warm-start --no-history"
  [ "$2" = zipmoe ] && [ "${WARM:-0}" = 1 ] && budget="--budget $3 --warm-start"
  [ "$3" = resident ] && budget="--no-history"
  local reply
  reply=$(${BEFORE:-build/app/zipmoe} generate $store --raw --max-tokens 2 --prompt "$P" $budget $extra \
          2>/tmp/cold-prompt.err | md5sum | cut -c1-12)
  echo "system=$2 budget=$3 reply=$reply $(grep -o 'time to first token [0-9.]* ms' /tmp/cold-prompt.err)"
}
name=cold-prompt
[ "${WARM:-0}" = 1 ] && name=warm-prompt
[ -n "${BEFORE:-}" ] && name=before-prompt
[ "${SITTING:-1}" = 2 ] && name=$name-2  # a second sitting: *-prompt-2-W.log
for w in deepseek qwen8; do
  if [ "${WARM:-0}" = 1 ]; then
    store=out/bench/dsv2lite5-store
    [ $w = qwen8 ] && store=out/bench/qwen8-nibble-store
    OTHER="$(sed -n 300,330p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | head -c 900)"
    for i in 1 2 3; do
      build/app/zipmoe generate $store --raw --max-tokens 24 --ignore-eos --prompt "$OTHER" --budget 25% > /dev/null 2>&1
    done
  fi
  {
  date -u
  run $w zipmoe 25% > /dev/null  # throwaway
  for round in 1 2 3 4; do
    case $round in
      1|3) order="zipmoe full-lru" ;;
      *) order="full-lru zipmoe" ;;
    esac
    for s in $order; do run $w $s 25%; done
  done
  if [ "${WARM:-0}" != 1 ]; then
    run $w zipmoe resident
    run $w zipmoe resident
  fi
  date -u
  } > $R/$name-$w.log 2>&1
done
