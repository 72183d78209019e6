#!/usr/bin/env bash
# Release check: does the .deb install with `apt install ./zipmoe_….deb` on a fresh Debian 12, and do
# the app and the engine start there? Not part of CI. Needs root (debootstrap, chroot, mounts) and
# the Debian mirror.
#   sudo bash packaging/test-install-fresh-debian.sh build-deb/zipmoe_0.1.0_amd64.deb
# A minimal bookworm root is made once with debootstrap and cached as a tarball in
# build-deb/fresh-root-cache/; every run installs into a pristine copy of it, removed at the end
# (ZIPMOE_KEEP_ROOT=1 keeps it for a look). Logs go to build-deb/fresh-install-logs/.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 PATH/TO/zipmoe_VERSION_ARCH.deb" >&2; exit 2; }
deb="$(realpath "$1")"
[ -f "$deb" ] || { echo "no such file: $deb" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "install debootstrap first" >&2; exit 2; }

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mirror="http://deb.debian.org/debian"
cache_dir="$root_dir/build-deb/fresh-root-cache"
cache="$cache_dir/bookworm-minbase.tar.gz"
logs="$root_dir/build-deb/fresh-install-logs"
mkdir -p "$cache_dir" "$logs"
find "$logs" -name '*.log' ! -name debootstrap.log -delete  # no stale result from an earlier run

# ---- 1. the cached fresh Debian 12 root ----
if [ ! -f "$cache" ]; then
  echo "[fresh] no cached root: running debootstrap (a few minutes, once)"
  boot="$(mktemp -d "$cache_dir/debootstrap.XXXXXX")"
  debootstrap --variant=minbase bookworm "$boot" "$mirror" >"$logs/debootstrap.log" 2>&1 ||
    { echo "[fresh] debootstrap failed, see $logs/debootstrap.log" >&2; rm -rf --one-file-system "$boot"; exit 1; }
  # The sources a Debian 12 installation has: main, its updates and the security archive.
  cat >"$boot/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$boot"/var/cache/apt/archives/*.deb "$boot"/var/lib/apt/lists/*
  chmod 755 "$boot"  # mktemp made it 0700: as "/" of the root, ordinary users and _apt could not enter
  tar -C "$boot" --numeric-owner -czf "$cache.partial" .
  mv "$cache.partial" "$cache"
  rm -rf --one-file-system "$boot"
fi

# ---- 2. a pristine copy, with /proc, /sys and /dev mounted; all undone on exit ----
chroot_dir="$(mktemp -d "$root_dir/build-deb/fresh-root.XXXXXX")"
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
  done
  # Never delete while something is still mounted inside: rm would reach into the host's /dev.
  if findmnt -rn -o TARGET | grep -q "^$chroot_dir/"; then
    echo "[fresh] WARNING: mounts left under $chroot_dir, not deleting it" >&2
  elif [ "${ZIPMOE_KEEP_ROOT:-0}" = 1 ]; then
    echo "[fresh] kept the root: $chroot_dir"
  else
    rm -rf --one-file-system "$chroot_dir"
  fi
}
trap cleanup EXIT
tar -C "$chroot_dir" --numeric-owner -xpzf "$cache"
chmod 755 "$chroot_dir"  # it is "/" inside: mktemp's 0700 would lock out every user but root
bind() {  # bind(source, target inside the root)
  mount --bind "$1" "$chroot_dir$2"
  mounts+=("$chroot_dir$2")
}
mount -t proc proc "$chroot_dir/proc"; mounts+=("$chroot_dir/proc")
mount -t sysfs sysfs "$chroot_dir/sys"; mounts+=("$chroot_dir/sys")
bind /dev /dev
bind /dev/pts /dev/pts
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
# No daemon of an installed package may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$chroot_dir/usr/sbin/policy-rc.d"
chmod +x "$chroot_dir/usr/sbin/policy-rc.d"
# /tmp: apt reads a local .deb as its sandbox user _apt, who cannot enter /root.
cp "$deb" "$chroot_dir/tmp/" && chmod 644 "$chroot_dir/tmp/$(basename "$deb")"
deb_name="$(basename "$deb")"

in_root() { chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
# The app runs as an ordinary user, as it would on a desktop (its data goes to ~/.local/share).
as_user() { chroot "$chroot_dir" /usr/sbin/runuser -u tester -- /usr/bin/env -i \
  PATH=/usr/bin:/bin LANG=C.UTF-8 HOME=/home/tester USER=tester QT_QPA_PLATFORM=offscreen "$@"; }

results=()
failed=0
check() {  # check NAME LOGFILE COMMAND...: runs it, records PASS/FAIL, shows the end of its output
  local name="$1" log="$logs/$2"; shift 2
  echo
  echo "[fresh] ---- $name"
  echo "[fresh] \$ ${*}" | sed "s|$chroot_dir|<root>|g"
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  tail -n 15 "$log"
  if [ $rc -eq 0 ]; then results+=("PASS  $name"); else results+=("FAIL  $name (exit $rc, $log)"); failed=1; fi
  return 0
}

# ---- 3. install the package, the way a user would ----
used_before=$(du -sxk "$chroot_dir" | cut -f1)
check "apt-get update" apt-update.log in_root apt-get update
check "apt install ./$deb_name" apt-install.log in_root sh -c "cd /tmp && apt install -y ./$deb_name"
used_after=$(du -sxk "$chroot_dir" | cut -f1)
grep -E "newly installed|additional disk space" "$logs/apt-install.log" || true
if ! in_root dpkg-query -W zipmoe >/dev/null 2>&1; then
  printf '%s\n' "${results[@]}"
  echo "[fresh] FAILED: the package did not install; see $logs/apt-install.log" >&2
  exit 1
fi
echo "[fresh] zipmoe's own Installed-Size: $(in_root dpkg-query -W -f='${Installed-Size}' zipmoe) KiB;" \
  "the root grew by $(( (used_after - used_before) / 1024 )) MiB (the package and all its dependencies)"

in_root useradd --create-home --shell /bin/bash tester

# ---- 4. does it run? ----
check "no missing libraries (ldd)" ldd.log in_root sh -c \
  'out="$(ldd /usr/bin/zipmoe /usr/bin/zipmoe-chat 2>&1)" || { echo "$out"; exit 1; }
   echo "$out" | grep "not found" && exit 1; echo "all libraries found"'
check "desktop file, metainfo and icons installed" desktop.log in_root ls -l \
  /usr/share/applications/io.github.zipmoe.ZipMoE.desktop \
  /usr/share/metainfo/io.github.zipmoe.ZipMoE.metainfo.xml \
  /usr/share/icons/hicolor/scalable/apps/io.github.zipmoe.ZipMoE.svg \
  /usr/share/icons/hicolor/256x256/apps/io.github.zipmoe.ZipMoE.png \
  /usr/share/zipmoe/demo-model/model.safetensors
check "zipmoe info" zipmoe-info.log as_user zipmoe info
check "zipmoe generate with the demo model" zipmoe-generate.log as_user timeout 300 \
  zipmoe generate /usr/share/zipmoe/demo-model --prompt "ROMEO:" --max-tokens 8
check "zipmoe-chat --help" chat-help.log as_user timeout 60 zipmoe-chat --help
if grep -q -- "--smoke-test" "$logs/chat-help.log"; then
  # Opens the window, opens the demo model (converting it to a store) and exits 0 once the chat is ready.
  check "zipmoe-chat --smoke-test" chat-smoke.log as_user timeout 300 zipmoe-chat --smoke-test
else
  # No --smoke-test yet: the app must at least load its QML and keep running for 20 s (timeout's
  # exit 124 = it was still running); a QML import that fails makes it exit 1 at once.
  check "zipmoe-chat starts and stays up 20 s (no --smoke-test flag yet)" chat-smoke.log as_user sh -c \
    'timeout 20 zipmoe-chat; rc=$?; [ $rc -eq 124 ] || { echo "exited early with $rc"; exit 1; }'
fi
if grep -q -- "--quit-after-reply" "$logs/chat-help.log"; then
  # A whole chat turn through the GUI app: send a message, stream the reply, quit.
  check "zipmoe-chat --send ROMEO: --quit-after-reply" chat-reply.log as_user timeout 300 \
    zipmoe-chat --send "ROMEO:" --quit-after-reply
fi
# A QML module missing from Depends shows up as a warning even when the exit code is 0.
check "no missing QML module in the app's output" qml-modules.log sh -c \
  "! grep -h 'is not installed' $logs/chat-*.log"
echo
echo "[fresh] ======== results ($(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version), fresh Debian 12 minbase)"
printf '  %s\n' "${results[@]}"
[ $failed -eq 0 ] && echo "[fresh] all checks passed" || echo "[fresh] SOME CHECKS FAILED (logs: $logs)"
# The figures docs/APP.md quotes, as JSON (build-deb/fresh-install-logs/summary.json).
newly="$(grep -Eo '[0-9]+ newly installed' "$logs/apt-install.log" | grep -Eo '[0-9]+' | head -n 1 || true)"
{
  echo "{"
  echo "  \"date\": \"$(date -u +%Y-%m-%d)\","
  echo "  \"package\": \"$deb_name\","
  echo "  \"deb_bytes\": $(stat -c %s "$deb"),"
  echo "  \"installed_size_kib\": $(dpkg-deb -f "$deb" Installed-Size),"
  echo "  \"packages_newly_installed\": ${newly:-null},"
  echo "  \"root_growth_mib\": $(( (used_after - used_before) / 1024 )),"
  echo "  \"checks\": ["
  for i in "${!results[@]}"; do
    sep=","; [ "$i" -eq $((${#results[@]} - 1)) ] && sep=""
    echo "    \"$(printf '%s' "${results[i]}" | sed 's/"/\\"/g')\"$sep"
  done
  echo "  ],"
  echo "  \"all_passed\": $([ $failed -eq 0 ] && echo true || echo false)"
  echo "}"
} >"$logs/summary.json"
echo "[fresh] summary: $logs/summary.json"
exit $failed
