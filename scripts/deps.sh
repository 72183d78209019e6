# Sourced by the other scripts: installs the Debian 12 packages ZipMoE needs, once.
# Idempotent: packages already installed are not touched, and apt is not called when nothing is missing.

ZIPMOE_APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-declarative-dev qml6-module-qtquick qml6-module-qtquick-controls
  qml6-module-qtquick-layouts qml6-module-qtquick-window qml6-module-qtquick-templates
  qml6-module-qtqml qml6-module-qtqml-models qml6-module-qtqml-workerscript qml6-module-qttest
  qml6-module-qtquick-dialogs qml6-module-qt-labs-folderlistmodel fonts-wqy-microhei
  qt6-l10n-tools qt6-tools-dev libqt6sql6-sqlite
  libtorch-dev libopenblas0-pthread liblz4-dev libzstd-dev libsqlite3-dev nlohmann-json3-dev libcpp-httplib-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  xvfb xauth
)
# Only the test command needs these (libFuzzer comes with clang's runtime; the server's tests speak
# to it with curl and Python's http.client).
ZIPMOE_TEST_PACKAGES=(clang libclang-rt-14-dev curl python3)

zipmoe_install_packages() {
  local missing=()
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "[zipmoe] all ${#} required packages are installed"
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "[zipmoe] need root or sudo to install: ${missing[*]}" >&2; return 1; }
    sudo="sudo"
  fi
  echo "[zipmoe] installing ${#missing[@]} packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

zipmoe_jobs() { nproc 2>/dev/null || echo 2; }
