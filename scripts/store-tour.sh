#!/usr/bin/env bash
# A tour of the lossless store: installs what is needed, builds the CLI, generates a test model,
# converts it into a lossless store, verifies the store bit for bit and prints the compression report.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
zipmoe_install_packages "${ZIPMOE_APT_PACKAGES[@]}"

build="$root/build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target zipmoe -j "$(zipmoe_jobs)"
zipmoe="$build/app/zipmoe"

work="$root/out/quickstart"
mkdir -p "$work"
family="${ZIPMOE_FAMILY:-qwen2_moe}"
preset="${ZIPMOE_PRESET:-small}"
echo "[zipmoe] generating a $family/$preset test model"
"$zipmoe" make-model --family "$family" --preset "$preset" "$work/hf"
echo "[zipmoe] converting it into a store"
"$zipmoe" convert "$work/hf" "$work/store"
echo "[zipmoe] verifying the store against the source, bit for bit"
"$zipmoe" verify "$work/store" "$work/hf"
echo
"$zipmoe" inspect "$work/store"
