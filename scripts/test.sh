#!/usr/bin/env bash
# Installs what is needed, builds everything with warnings as errors, and runs every test:
#   1. the full build (engine, CLI, QtTest suites) under CTest;
#   2. the engine tests again in an AddressSanitizer + UndefinedBehaviorSanitizer build;
#   3. the threaded expert-runtime tests (no libtorch: label `threads`) again under ThreadSanitizer;
#   4. a short libFuzzer run of every parser of untrusted bytes (store manifest, safetensors header,
#      exponent chunks, tokenizer.json, chat templates, the server's request bodies);
#   5. the CUDA compute backend (backend/cuda/: recovery kernel, cuBLAS products) and its tests compiled
#      and linked with nvcc whenever the CUDA toolkit is installed; run where there is a GPU.
# Exits non-zero when anything fails. ZIPMOE_FUZZ_SECONDS sets the fuzzing time per target.
# ZIPMOE_PRUNE_BUILDS=1 (set by .ci/run) deletes each stage's build directory once the stage has
# passed, so the run needs the disk of its largest stage rather than of all five (about 10 GB);
# a failed stage keeps its directory for inspection.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
zipmoe_install_packages "${ZIPMOE_APT_PACKAGES[@]}" "${ZIPMOE_TEST_PACKAGES[@]}"
jobs="$(zipmoe_jobs)"
export QT_QPA_PLATFORM=offscreen
# Debug information in every CI build is line tables only (-g1): sanitizer reports and backtraces
# still name file and line, and the compiler and linker do a quarter less work than with -g.
# Variables and types for a debugger come with a local build (scripts/quickstart.sh keeps -g).
relwithdebinfo=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
                "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# Each stage's wall time (build and tests apart) goes into the summary, so a slow CI shows where.
timings=()
stage_start=$SECONDS
# Notes the time since the last mark under the given name.
mark() {
  timings+=("$(printf '%-28s %4d s' "$1" $((SECONDS - stage_start)))")
  stage_start=$SECONDS
}

echo "== [1/5] build and test (warnings are errors)"
cmake -S "$root" -B "$root/build-test" -G Ninja "${relwithdebinfo[@]}" -DZIPMOE_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build "$root/build-test" -j "$jobs"
mark "[1] build"
summary=()
# Runs ctest over BUILD_DIR with the given arguments, keeps its log, and notes "what: N tests" for
# the summary, with every skipped test by name: whole suites CTest skipped, and the test functions
# that skipped inside a suite (QSKIP; each suite writes BUILD_DIR/test-logs/<suite>.txt).
run_ctest() {
  local what="$1" dir="$2"; shift 2
  local log; log="$(mktemp)"
  rm -f "$dir"/test-logs/*.txt
  ctest --test-dir "$dir" "$@" 2>&1 | tee "$log"
  summary+=("$what: $(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)")
  local skipped
  skipped="$( { grep -E '\*+(Not Run|Skipped)' "$log" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*/  skipped suite: \1/';
                cat "$dir"/test-logs/*.txt 2>/dev/null | grep -E '^SKIP +: ' | sed -E 's/^SKIP +: /  skipped: /'; } || true)"
  if [ -n "$skipped" ]; then
    summary+=("$what, skipped tests:")
    while IFS= read -r line; do summary+=("$line"); done <<<"$skipped"
  fi
  rm -f "$log"
}
# Deletes a passed stage's build directory when ZIPMOE_PRUNE_BUILDS=1.
prune_build() {
  if [ "${ZIPMOE_PRUNE_BUILDS:-0}" = 1 ]; then
    echo "-- removing $1 (ZIPMOE_PRUNE_BUILDS=1)"
    rm -rf "$1"
  fi
}
run_ctest "[1] build and test" "$root/build-test" --output-on-failure -j "$jobs"
mark "[1] tests"
prune_build "$root/build-test"

echo "== [2/5] engine tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# A Debug build (assertions on) at -O1, as AddressSanitizer's authors advise: the suites take about
# 30 % less time than at -O0 (455 -> 316 s) for about 50 s more compiling, and reports keep their stacks.
cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
  "-DCMAKE_C_FLAGS_DEBUG=-O1 -g1" -DZIPMOE_SANITIZE=ON \
  -DZIPMOE_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build "$root/build-asan" -j "$jobs"
mark "[2] build"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0" \
  run_ctest "[2] ASan/UBSan" "$root/build-asan" --output-on-failure -j "$jobs" -LE no-sanitizer
mark "[2] tests"
prune_build "$root/build-asan"

echo "== [3/5] threaded expert-runtime tests under ThreadSanitizer"
cmake -S "$root" -B "$root/build-tsan" -G Ninja "${relwithdebinfo[@]}" -DZIPMOE_SANITIZE=thread \
  -DZIPMOE_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build "$root/build-tsan" -j "$jobs" --target zipmoe_thread_tests
mark "[3] build"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
  run_ctest "[3] TSan" "$root/build-tsan" --output-on-failure -j "$jobs" -L threads
mark "[3] tests"
prune_build "$root/build-tsan"

echo "== [4/5] fuzzing (libFuzzer + ASan/UBSan)"
cmake -S "$root" -B "$root/build-fuzz" -G Ninja "${relwithdebinfo[@]}" -DZIPMOE_FUZZ=ON \
  -DZIPMOE_WITH_QT=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fuzz_targets=(fuzz_manifest fuzz_safetensors_header fuzz_chunk_decode fuzz_tokenizer_json fuzz_chat_template
              fuzz_openai_request fuzz_anthropic_request fuzz_placement fuzz_state_files fuzz_json_schema)
cmake --build "$root/build-fuzz" -j "$jobs" --target "${fuzz_targets[@]}"
mark "[4] build"
seconds="${ZIPMOE_FUZZ_SECONDS:-45}"
# Runs one target for $seconds into build-fuzz/TARGET.log; a failure leaves build-fuzz/TARGET.failed.
fuzz_one() {
  local target="$1"
  local corpus="$root/build-fuzz/corpus-$target"
  mkdir -p "$corpus"
  cp -n "$root/tests/fuzz/seeds/$target"/* "$corpus"/ 2>/dev/null || true
  "$root/build-fuzz/tests/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$root/build-fuzz/$target-" "$corpus" >"$root/build-fuzz/$target.log" 2>&1 \
    || touch "$root/build-fuzz/$target.failed"
}
# libFuzzer runs one thread: the targets run $jobs at a time, each for its full $seconds.
running=0
for target in "${fuzz_targets[@]}"; do
  echo "-- $target: ${seconds}s"
  rm -f "$root/build-fuzz/$target.failed"
  fuzz_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
fuzz_failed=0
for target in "${fuzz_targets[@]}"; do
  log="$root/build-fuzz/$target.log"
  echo "-- $target"
  if [ -e "$root/build-fuzz/$target.failed" ]; then
    tail -n 80 "$log"
    echo "fuzz target $target failed (crash input saved as build-fuzz/$target-crash-*)" >&2
    fuzz_failed=1
  else
    grep -E '^stat::(number_of_executed_runs|new_units_added|peak_rss_mb)' "$log" || tail -n 4 "$log"
  fi
done
[ "$fuzz_failed" = 0 ] || exit 1
summary+=("[4] fuzzing: ${seconds}s per target, no crash")
mark "[4] fuzzing"
prune_build "$root/build-fuzz"

echo "== [5/5] CUDA compute backend (compile and link; it runs only where a GPU is)"
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
  cmake -S "$root" -B "$root/build-cuda" -G Ninja "${relwithdebinfo[@]}" -DZIPMOE_CUDA=ON -DZIPMOE_WITH_QT=OFF \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DZIPMOE_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$root/build-cuda" -j "$jobs" --target zipmoe_cuda zipmoe_engine test_cuda_recovery test_cuda_backend
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    run_ctest "[5] CUDA backend" "$root/build-cuda" --output-on-failure -R "test_cuda_(recovery|backend)"
  else
    summary+=("[5] CUDA backend: compiled and linked with nvcc; not run (no GPU on this machine)")
  fi
  mark "[5] CUDA backend"
  prune_build "$root/build-cuda"
else
  summary+=("[5] CUDA backend: skipped (no nvcc)")
fi
echo "== summary"
printf '  %s\n' "${summary[@]}"
echo "== time per stage (total $SECONDS s)"
printf '  %s\n' "${timings[@]}"
echo "all tests passed"
