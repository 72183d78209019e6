#!/usr/bin/env bash
# ZipMoE side by side with llama.cpp on the same BF16 weights (issue #45, point 5). A development tool:
# nothing a user or CI installs. Steps (each skipped when its result is already there):
#   1. llama.cpp from the llama-cpp-python source distribution on PyPI (its vendored llama.cpp, a
#      pinned version), built with CMake: llama-bench only;
#   2. its converter's Python (torch, transformers, its own gguf-py) in a virtual environment;
#   3. the generated Qwen1.5-MoE-shaped checkpoint (`bench suite --workload qwen` makes it), with the
#      real model's vocabulary from ../shared/data/models/, converted to BF16 GGUF with llama.cpp's
#      convert_hf_to_gguf.py;
#   4. llama-bench and `zipmoe generate` at the same thread count: all resident, then for each share
#      with the machine's available memory held to ZipMoE's RSS at that budget by a process that
#      occupies the rest (scripts/dev/memory_hog.py; no cgroups needed).
# Prints a table and writes OUT/peer.json (every figure and the commands that made it).
#
#   scripts/dev/peer-llamacpp.sh [--hf DIR] [--store DIR] [--out DIR] [--shares "10 25 50"] [--threads N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PEER=${ZIPMOE_PEER_DIR:-out/peer}
VERSION=0.3.36
HF=out/bench/qwen8-hf
STORE=out/bench/qwen8-nibble-store
OUT=$PEER/results
SHARES="10 25 50"
THREADS=2
TG=32          # tokens generated per measurement
PP=512         # prompt tokens of the prompt-processing measurement
while [ $# -gt 0 ]; do
  case "$1" in
    --hf) HF=$2; shift 2 ;;
    --store) STORE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --shares) SHARES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for d in "$HF" "$STORE"; do [ -d "$d" ] || { echo "$d: not found (bench suite --workload qwen generates it)" >&2; exit 1; }; done
ZIPMOE=build/app/zipmoe
[ -x $ZIPMOE ] || { echo "$ZIPMOE: build the project first" >&2; exit 1; }
mkdir -p "$PEER" "$OUT"

echo "== 1. llama.cpp $VERSION (llama-cpp-python's vendored copy)"
LLAMA=$PEER/llama.cpp
if [ ! -x $LLAMA/build/bin/llama-bench ]; then
  [ -f $PEER/llama_cpp_python-$VERSION.tar.gz ] ||
    python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d $PEER
  rm -rf $LLAMA $PEER/llama_cpp_python-$VERSION
  tar xzf $PEER/llama_cpp_python-$VERSION.tar.gz -C $PEER "llama_cpp_python-$VERSION/vendor/llama.cpp"
  mv $PEER/llama_cpp_python-$VERSION/vendor/llama.cpp $LLAMA
  cmake -S $LLAMA -B $LLAMA/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build $LLAMA/build --target llama-bench -j "$(nproc)"
fi

echo "== 2. the converter's Python"
PY=$PEER/venv/bin/python
if ! $PY -c 'import torch, transformers, gguf, numpy' 2>/dev/null; then
  python3 -m venv $PEER/venv
  $PEER/venv/bin/python -m pip install -q torch numpy sentencepiece "transformers==4.57.6" "protobuf>=4.21,<5" "$LLAMA/gguf-py"
fi

echo "== 3. $HF with the real vocabulary -> BF16 GGUF"
# The generated checkpoint's weights and config, and the real model's tokenizer files: the converter
# recognises a vocabulary by how it pre-tokenizes, and the generated one is a small stand-in.
VOCAB=${VOCAB:-../shared/data/models/qwen1.5-moe}
SRC=$PEER/$(basename "$HF")-realvocab
rm -rf "$SRC" && mkdir -p "$SRC"
for f in "$HF"/*.json "$HF"/*.safetensors; do
  case "$(basename "$f")" in tokenizer.json|tokenizer_config.json) ;; *) ln -s "$(realpath "$f")" "$SRC/" ;; esac
done
for f in vocab.json merges.txt tokenizer_config.json; do ln -s "$(realpath "$VOCAB/$f")" "$SRC/"; done
GGUF=$PEER/$(basename "$HF")-bf16.gguf
if [ ! -s "$GGUF" ]; then
  $PY $LLAMA/convert_hf_to_gguf.py "$SRC" --outtype bf16 --outfile "$GGUF.part"
  mv "$GGUF.part" "$GGUF"
fi

echo "== 4. measurements ($THREADS threads)"
# About PP tokens of text (the reply reports the exact count); llama-bench draws PP random tokens.
PROMPT="$(sed -n 100,400p ../shared/data/corpus/tinyshakespeare.txt | tr '\n' ' ' | cut -c 1-$((PP * 4)))"  # cut reads it all: no SIGPIPE
export XDG_STATE_HOME=$PEER/state  # ZipMoE's statistics of these runs only
# llama-bench: text generation (TG tokens) and prompt processing (PP tokens), the mean of 3 runs; with
# memory held, one run of a quarter of the prompt (paging makes each take minutes).
llama() {  # label
  local reps=3 pp=$PP
  case $1 in held-*) reps=1 pp=$((PP / 4)) ;; esac
  $LLAMA/build/bin/llama-bench -m "$GGUF" -t "$THREADS" -p $pp -n $TG -r $reps -o json > "$OUT/llama-$1.json"
}
# zipmoe generate, as llama-bench measures: TPOT over TG tokens after a one-word prompt (an empty
# context, like llama-bench's tg test), then the prefill rate of a raw prompt of about PP tokens
# (one token generated), in one process each; the larger RSS of the two is kept.
zipmoe() {  # label budget...
  local label=$1; shift
  /usr/bin/time -f "%M" -o "$OUT/zipmoe-$label.tg.maxrss" \
    $ZIPMOE generate "$STORE" --raw --prompt "Hello" --max-tokens $TG --ignore-eos \
      --threads "$THREADS" "$@" > /dev/null 2> "$OUT/zipmoe-$label.tg.log"
  /usr/bin/time -f "%M" -o "$OUT/zipmoe-$label.pp.maxrss" \
    $ZIPMOE generate "$STORE" --raw --prompt "$PROMPT" --max-tokens 1 \
      --threads "$THREADS" "$@" > /dev/null 2> "$OUT/zipmoe-$label.pp.log"
  sort -n "$OUT/zipmoe-$label".*.maxrss | tail -n 1 > "$OUT/zipmoe-$label.maxrss"
}
llama resident
zipmoe resident
for share in $SHARES; do
  zipmoe "probe-$share" --budget "$share%"  # its RSS at this budget
  rss_kb=$(cat "$OUT/zipmoe-probe-$share.maxrss")
  python3 scripts/dev/memory_hog.py --leave-kib "$rss_kb" --ready "$OUT/hog-$share.ready" > "$OUT/hog-$share.log" 2>&1 &
  hog=$!
  while [ ! -f "$OUT/hog-$share.ready" ]; do sleep 1; done
  llama "held-$share" || echo "llama-bench failed at $share %" >&2
  zipmoe "held-$share" --budget "$share%" || echo "zipmoe failed at $share %" >&2
  kill $hog; wait $hog 2>/dev/null || true
done
python3 scripts/dev/peer_summary.py "$OUT" --shares "$SHARES" --threads "$THREADS" --version "$VERSION" --gguf "$GGUF" --store "$STORE"
