#!/usr/bin/env bash
# Installs the Debian packages into a clean Debian 12 root and uses them there, the way a user
# would: nothing of the build tree is visible in the root, only the .debs and test sources.
#
#   packaging/install_test.sh [--no-sdks] DEBDIR      (e.g. build/debian/out or dist)
#   packaging/install_test.sh --prepare               only make the cached root
#
# In the root (debootstrap --variant=minbase bookworm, then the test tools from Debian's mirror;
# cached as a tarball in build/install-test/cache, so later runs start in seconds):
#   - apt-get installs the CPU packages from DEBDIR (their dependencies from the mirror);
#     libdeepinfer-cuda0 is not installed (its CUDA 13 dependencies come from NVIDIA's repository),
#     nor the -dbgsym packages;
#   - `deepinfer generate` on the demo model (the command's default model, deepinfer-demo-model);
#   - C: tests/install/consumer.c and tests/capi/abi_c99.c (every function of the ABI) built with
#     `pkg-config --cflags --libs deepinfer`; CMake: tests/install/consumer with find_package(DeepInfer);
#   - the Python SDK's tests (bindings/python/tests) against python3-deepinfer;
#   - unless --no-sdks: the Rust and Go SDKs' test scripts against the installed library
#     (`bindings/rust/test.sh /usr`, `bindings/go/test.sh /usr`; pkg-config finds it in /usr).
# Needs root, debootstrap and network access to the mirror (DEBIAN_MIRROR, default
# http://deb.debian.org/debian). The log is build/install-test/install_test.log.
set -euo pipefail
sdks=1 prepare=0 debs=
case ${1:-} in
  --no-sdks) sdks=0; shift ;;
  --prepare) prepare=1; shift ;;
esac
if [ $prepare = 0 ]; then
  [ $# = 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
  debs=$(cd "$1" && pwd)
  ls "$debs"/libdeepinfer0_*.deb >/dev/null 2>&1 || { echo "install_test: no libdeepinfer0_*.deb in $debs" >&2; exit 2; }
fi
cd "$(dirname "$0")/.."
repo=$(pwd)
[ "$(id -u)" = 0 ] || { echo "install_test: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "install_test: debootstrap not found (scripts/setup.sh)" >&2; exit 2; }

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$repo/build/install-test
root=$work/root
# The test tools: compilers and CMake for the consumers, pytest for Python, cargo and go (and
# node for the Go example server's OpenAI-client test) for the SDKs.
tools=(ca-certificates gcc g++ libc6-dev make cmake pkg-config python3 python3-pytest python3-jsonschema
  cargo rustc rustfmt rust-clippy golang-go nodejs npm)
key=$(printf '%s\n' bookworm "$mirror" "${tools[@]}" | sha256sum | cut -c1-12)
tarball=$work/cache/bookworm-$key.tar.zst

unmount_all() {  # everything mounted below the root, deepest first
  local m
  for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount "$m" || umount -l "$m"
  done
}
remove_root() {
  unmount_all
  if awk -v r="$root/" 'index($2, r) == 1' /proc/mounts | grep -q .; then
    echo "install_test: $root still has mounts; not removing it" >&2
    exit 1
  fi
  rm -rf --one-file-system "$root"
}
trap unmount_all EXIT
in_root() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
mount_root() {
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
  # Pseudo-terminals of the root's own (a test runs a program on one).
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
  ln -sf pts/ptmx "$root/dev/ptmx"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
}

mkdir -p "$work/cache"
exec > >(tee "$work/install_test.log") 2>&1
start=$(date +%s)
remove_root
if [ ! -f "$tarball" ]; then
  echo "== debootstrap bookworm from $mirror (once; cached in $tarball)"
  mkdir -p "$work/cache/debs"
  debootstrap --variant=minbase --cache-dir="$work/cache/debs" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; echo "install_test: debootstrap failed (log: $work/debootstrap.log)" >&2; exit 1; }
  mount_root
  in_root apt-get update -qq
  in_root apt-get install -y -qq --no-install-recommends "${tools[@]}" >"$work/tools.log" 2>&1 ||
    { tail -20 "$work/tools.log"; echo "install_test: installing the test tools failed" >&2; exit 1; }
  in_root apt-get clean
  unmount_all
  tar -C "$root" -I "zstd -T0" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
else
  echo "== a clean bookworm root from $tarball"
  mkdir -p "$root"
  tar -C "$root" -I zstd -xf "$tarball"
fi
echo "root ready in $(($(date +%s) - start)) s"
[ $prepare = 0 ] || exit 0
mount_root

echo "== install the packages (apt-get, dependencies from the mirror)"
mkdir -p "$root/tmp/debs"
cp "$debs"/*.deb "$root/tmp/debs/"
rm -f "$root"/tmp/debs/libdeepinfer-cuda0_*.deb "$root"/tmp/debs/*-dbgsym_*.deb
in_root apt-get update -qq
in_root sh -c 'apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends /tmp/debs/*.deb' | grep -E '^(Setting up|Unpacking) ' | grep -i deepinfer
in_root dpkg-query -W 'libdeepinfer*' deepinfer 'deepinfer-*' python3-deepinfer

# The sources of the tests only (no build output): consumers, the ABI's C program, the SDKs, and the
# header and symbol list the Rust SDK's declarations are checked against (beside the installed header).
src=$root/src
mkdir -p "$src"
(git ls-files -z tests/install tests/capi/abi_c99.c capi/exported_symbols.txt capi/include/deepinfer.h bindings/python/tests \
   bindings/python/README.md bindings/rust bindings/go | tar --null -T - -cf -) | tar -xf - -C "$src"
# The Go example's OpenAI-client test needs npm's `openai` package: the checkout's copy when
# bindings/go/test.sh installed it there before (a root may not reach the npm registry).
e2e_modules=bindings/go/examples/openai-server/e2e/node_modules
if [ -d "$e2e_modules/openai" ]; then cp -r "$e2e_modules" "$src/$e2e_modules"; fi

check() { echo "== $1"; shift; in_root bash -euo pipefail -c "$*"; }

check "deepinfer --version, and the library needs no CUDA library" '
  deepinfer --version
  lib=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/libdeepinfer.so.0
  ! readelf -d "$lib" | grep -iE "cuda|cublas"
  man -w deepinfer 2>/dev/null || test -f /usr/share/man/man1/deepinfer.1.gz'

check "deepinfer generate on the demo model (its default model)" '
  deepinfer generate --prompt "def fibonacci(n):" --max-tokens 40 --seed 0 --device cpu > /tmp/out.txt
  cat /tmp/out.txt; echo
  test "$(wc -c < /tmp/out.txt)" -gt 20
  a=$(deepinfer generate --prompt "import os" --temperature 0 --max-tokens 16 --no-echo --device cpu)
  b=$(deepinfer generate --prompt "import os" --temperature 0 --max-tokens 16 --no-echo --device cpu)
  test "$a" = "$b" && echo "greedy output repeats: ${a:0:60}..."
  if deepinfer generate --prompt x --device cuda 2>/tmp/err; then echo "cuda without the module?"; exit 1; fi
  echo "--device cuda without libdeepinfer-cuda0: $(tail -1 /tmp/err)"'

check "C: pkg-config --cflags --libs deepinfer" '
  cd /tmp
  echo "pkg-config: $(pkg-config --modversion deepinfer) [$(pkg-config --cflags --libs deepinfer)]"
  cc -std=c99 -Wall -Wextra -Werror -pedantic /src/tests/install/consumer.c $(pkg-config --cflags --libs deepinfer) -o consumer
  ./consumer
  cc -std=c99 -Wall -Wextra -Werror -pedantic /src/tests/capi/abi_c99.c $(pkg-config --cflags --libs deepinfer) -lpthread -lm -o abi_c99
  ./abi_c99 /usr/share/deepinfer/models/demo && echo "abi_c99: every function of the ABI called"'

check "CMake: find_package(DeepInfer) in tests/install/consumer" '
  cmake -S /src/tests/install/consumer -B /tmp/cmake-consumer > /tmp/cmake.log
  grep -i "deepinfer" /tmp/cmake-consumer/CMakeCache.txt | grep -i "_DIR:"
  cmake --build /tmp/cmake-consumer > /dev/null
  /tmp/cmake-consumer/consumer'

check "Python: the SDK tests against python3-deepinfer" '
  python3 -c "import deepinfer, sys; print(\"deepinfer\", deepinfer.__version__, \"from\", deepinfer.__file__)"
  cd /tmp
  DEEPINFER_TEST_CLI=/usr/bin/deepinfer DEEPINFER_TEST_README=/src/bindings/python/README.md PYTHONDONTWRITEBYTECODE=1 \
    python3 -m pytest -p no:cacheprovider -q -rs /src/bindings/python/tests 2>&1 | tail -15'

if [ $sdks = 1 ]; then
  check "Rust: bindings/rust/test.sh /usr" '
    cd /src && DEEPINFER_TEST_MODEL=/usr/share/deepinfer/models/demo bindings/rust/test.sh /usr 2>&1 | grep -E "^(== rust|rust:|test result|running|error|warning: unused)" '
  check "Go: bindings/go/test.sh /usr" '
    cd /src && DEEPINFER_TEST_MODEL=/usr/share/deepinfer/models/demo bindings/go/test.sh /usr 2>&1 | grep -vE "^(npm (notice|warn)|$)" | tail -20'
fi
echo "install_test: passed in $(($(date +%s) - start)) s"
