#!/usr/bin/env bash
# Installs every Debian build dependency (idempotent) and builds DeepInfer into ./build.
# Usage: scripts/setup.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libboost-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libpcre2-dev libutf8proc-dev
  libflatbuffers-dev flatbuffers-compiler
  libgtest-dev libgmock-dev
  python3 python3-dev python3-pytest python3-jsonschema swig golang-go
  python3-venv python3-build python3-setuptools python3-wheel patchelf   # the Python wheel (bindings/python)
  cargo rustc rustfmt rust-clippy   # the Rust crates (rustup's newer cargo is used when on PATH)
  abigail-tools                     # the ABI check (scripts/check_abi.sh)
  debhelper dh-python python3-installer help2man lintian debootstrap zstd   # Debian packages (packaging/)
  clang-16 libclang-rt-16-dev   # the libFuzzer targets (tests/fuzz)
  clang-format-16   # scripts/check_format.sh
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js with npm runs the Go example server's end-to-end test with the official OpenAI client.
# Any install will do (NodeSource's nodejs brings npm itself), so only its absence asks Debian's.
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CUDA 13 is expected at /usr/local/cuda (not a Debian package); without it the CPU backend builds alone.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs"

# The OpenAI client for that test, pinned by its package-lock.json.
(cd bindings/go/examples/openai-server/e2e && npm ci --prefer-offline --no-audit --no-fund)
