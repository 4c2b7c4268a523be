#!/usr/bin/env bash
# Every place that states DeepInfer's version agrees (docs/versioning.md): CMakeLists.txt's project
# version, deepinfer.h's DI_VERSION_*, the Python package's version (setup.py reads it from the
# header), both crates, the Go package's HeaderVersion, the top of packaging/debian/changelog and of
# CHANGELOG.md; the ABI version of CMakeLists.txt and deepinfer.h; and, given a built command,
# `deepinfer --version` (which prints di_version() of the library it loaded).
#
#   scripts/check_versions.sh [path/to/deepinfer]
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${1:-}

failed=0
check() {  # check WHAT VALUE
  if [ "$2" = "$version" ]; then
    printf '  %-44s %s\n' "$1" "$2"
  else
    printf '  %-44s %s   <- expected %s\n' "$1" "${2:-(none)}" "$version"
    failed=1
  fi
}

version=$(sed -n 's/^project(DeepInfer VERSION \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "check_versions: no project(DeepInfer VERSION x.y.z) in CMakeLists.txt" >&2; exit 1; }
echo "check_versions: $version"
check "CMakeLists.txt project()" "$version"

header=capi/include/deepinfer.h
define() { sed -n "s/^#define $1 \([0-9]*\)$/\1/p" $header; }
check "deepinfer.h DI_VERSION_MAJOR.MINOR.PATCH" "$(define DI_VERSION_MAJOR).$(define DI_VERSION_MINOR).$(define DI_VERSION_PATCH)"

# The wheel's version as its build computes it: setup.py against this header.
include=$(mktemp -d)
trap 'rm -rf "$include"' EXIT
mkdir -p "$include/include"
cp $header "$include/include/"
python=${PYTHON:-/usr/bin/python3}  # Debian's, with setuptools and wheel (as build_wheel.sh)
[ -x "$python" ] || python=python3
wheel=$( (cd bindings/python && DEEPINFER_PREFIX="$include" PYTHONDONTWRITEBYTECODE=1 "$python" setup.py --version 2>/dev/null) | tail -1)
check "bindings/python (setup.py --version)" "$wheel"

for crate in deepinfer-sys deepinfer; do
  check "bindings/rust/$crate/Cargo.toml" "$(sed -n 's/^version = "\(.*\)"$/\1/p' bindings/rust/$crate/Cargo.toml)"
done
check "bindings/rust/deepinfer: deepinfer-sys =" \
  "$(sed -n 's/^deepinfer-sys = .*version = "=\([^"]*\)".*/\1/p' bindings/rust/deepinfer/Cargo.toml)"
check "bindings/go HeaderVersion" "$(sed -n 's/^const HeaderVersion = "\(.*\)"$/\1/p' bindings/go/version.go)"
check "packaging/debian/changelog" "$(dpkg-parsechangelog -l packaging/debian/changelog -S Version | sed 's/-[^-]*$//')"
check "CHANGELOG.md (latest release)" "$(sed -n 's/^## \[\([0-9.]*\)\].*/\1/p' CHANGELOG.md | head -1)"
if [ -n "$cli" ]; then
  check "deepinfer --version (di_version())" "$("$cli" --version | sed -n 's/^deepinfer \([0-9.]*\) (ABI [0-9]*)$/\1/p')"
fi

abi=$(sed -n 's/^set(DEEPINFER_ABI_VERSION \([0-9]*\))$/\1/p' CMakeLists.txt)
header_abi=$(define DI_ABI_VERSION)
if [ -n "$abi" ] && [ "$abi" = "$header_abi" ]; then
  echo "  ABI version (CMakeLists.txt, deepinfer.h)      $abi"
else
  echo "  ABI version: CMakeLists.txt says ${abi:-(none)}, deepinfer.h DI_ABI_VERSION ${header_abi:-(none)}"
  failed=1
fi
if [ -n "$cli" ] && ! "$cli" --version | grep -q "(ABI $abi)$"; then
  echo "  deepinfer --version reports another ABI: $("$cli" --version)"
  failed=1
fi

if [ $failed != 0 ]; then
  echo "check_versions: FAILED: the versions disagree (docs/versioning.md says where each one lives)"
  exit 1
fi
echo "check_versions: passed"
