#!/usr/bin/env bash
# The main command of the README: installs what is needed, builds ZipMoE (the chat app and the CLI)
# and launches the chat app on the built-in demo model (converted to a store on first start).
# Without a display (a server, CI) it starts the app under Xvfb, waits until the demo model is
# ready and exits, so the command still proves the app runs. Extra arguments go to zipmoe-chat.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
zipmoe_install_packages "${ZIPMOE_APT_PACKAGES[@]}"

build="$root/build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target zipmoe zipmoe-chat -j "$(zipmoe_jobs)"
app="$build/app/chat/zipmoe-chat"

if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  echo "[zipmoe] launching the chat app on the demo model"
  exec "$app" "$@"
fi
echo "[zipmoe] no display: starting the chat app under Xvfb until the demo model is ready"
xvfb-run -a "$app" --smoke-test "$@"
echo "[zipmoe] the app started and opened the demo model; on a desktop, run: $app"
