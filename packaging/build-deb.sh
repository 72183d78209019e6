#!/usr/bin/env bash
# Builds the Debian package of ZipMoE (the chat app, the CLI and the demo model) into build-deb/
# and prints its path. Release build, installed under /usr. Re-run at any time: the build is incremental.
#   bash packaging/build-deb.sh          (ZIPMOE_JOBS=N to choose the number of compile jobs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
zipmoe_install_packages "${ZIPMOE_APT_PACKAGES[@]}"

build="$root/build-deb"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
# Only the two executables: the tests are not packaged and take long to build.
cmake --build "$build" --target zipmoe zipmoe-chat -j "${ZIPMOE_JOBS:-$(zipmoe_jobs)}"

# A stale .deb of another version must not be mistaken for this one.
rm -f "$build"/zipmoe_*.deb
(cd "$build" && cpack -G DEB)

deb="$(ls "$build"/zipmoe_*.deb)"
echo
dpkg-deb --field "$deb" Package Version Installed-Size Depends
echo
echo "[zipmoe] package: $deb"
