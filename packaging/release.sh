#!/usr/bin/env bash
# Makes every release artifact of this tree's version in dist/ (docs/packaging.md):
#
#   packaging/release.sh [--no-install-test] [--debs DIR]
#
# --debs DIR takes the .debs that packaging/build_debs.sh already wrote to DIR (of this version)
# instead of building them again.
#
#   dist/*.deb                       the Debian packages (packaging/build_debs.sh; lintian clean of errors)
#   dist/deepinfer-V-*.whl           the Python wheel, with the packaged library bundled (build_wheel.sh)
#   dist/deepinfer-sys-V.crate, dist/deepinfer-V.crate    the Rust crates (cargo package --offline)
#   dist/goproxy/<module>/@v/vV.{info,mod,zip}   the Go module as the module proxy serves it
#                                    (GOPROXY=file://$PWD/dist/goproxy go get <module>@vV)
#   dist/SHA256SUMS
#
# Each artifact is checked after it is made: the wheel and the crates build against the packaged
# library, the Go module is fetched through its proxy folder and a program using it runs. Then,
# unless --no-install-test, packaging/install_test.sh installs the .debs into a clean Debian 12 root
# and runs the C, CMake, Python, Rust and Go tests against them there.
set -euo pipefail
install_test=1
debs=
while (($#)); do
  case $1 in
    --no-install-test) install_test=0 ;;
    --debs) debs=$(cd "${2:?--debs needs a folder}" && pwd); shift ;;
    *) echo "release: unknown argument $1 (usage: packaging/release.sh [--no-install-test] [--debs DIR])" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.."
repo=$(pwd)
start=$(date +%s)
step() { printf '\n== release: %s\n' "$*"; }

step "versions"
scripts/check_versions.sh
version=$(sed -n 's/^project(DeepInfer VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
dist=$repo/dist
work=$repo/build/release
rm -rf "$dist" "$work"
mkdir -p "$dist" "$work"

step "Debian packages"
if [ -n "$debs" ]; then
  ls "$debs"/libdeepinfer0_"$version"_*.deb >/dev/null ||
    { echo "release: no libdeepinfer0 $version in $debs (packaging/build_debs.sh DIR)" >&2; exit 1; }
  cp "$debs"/*_"$version"_*.deb "$dist/"
  echo "the .debs of $debs (built and checked by packaging/build_debs.sh)"
else
  packaging/build_debs.sh "$dist"
  rm -f "$dist"/*.changes "$dist"/*.buildinfo
fi

# The packaged library as an install prefix: what the wheel bundles and the crates build against.
prefix=$work/prefix
for deb in "$dist"/libdeepinfer0_*.deb "$dist"/libdeepinfer-dev_*.deb "$dist"/libdeepinfer-cuda0_*.deb; do
  [ -e "$deb" ] && dpkg-deb -x "$deb" "$prefix"
done
pcdir=$(dirname "$(find "$prefix" -name deepinfer.pc)")
libdir=$(dirname "$pcdir")

step "Python wheel"
bindings/python/build_wheel.sh "$prefix/usr" "$dist"
wheel=$(ls "$dist"/deepinfer-"$version"-*.whl)
/usr/bin/python3 -m venv "$work/venv"  # Debian's, as build_wheel.sh
"$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
(cd "$work" && "$work/venv/bin/python" -c 'import deepinfer; print("wheel: deepinfer", deepinfer.__version__, "library", deepinfer.library_version())')

step "Rust crates"
export PKG_CONFIG_PATH=$pcdir LD_LIBRARY_PATH=$libdir
export CARGO_TARGET_DIR=$work/cargo
(
  cd bindings/rust
  cargo_minor=$(cargo --version | sed -E 's/^cargo 1\.([0-9]+).*/\1/')
  if [ "$cargo_minor" -ge 90 ]; then
    cargo package --offline --workspace
  else
    # Older cargo resolves deepinfer's dependency on crates.io: serve the packaged deepinfer-sys from a
    # directory source, as bindings/rust/test.sh does.
    cargo package --offline -p deepinfer-sys
    vendor=$work/vendor
    mkdir -p "$vendor"
    tar -xzf "$CARGO_TARGET_DIR/package/deepinfer-sys-$version.crate" -C "$vendor"
    sum=$(sha256sum "$CARGO_TARGET_DIR/package/deepinfer-sys-$version.crate" | cut -d' ' -f1)
    printf '{"files":{},"package":"%s"}' "$sum" >"$vendor/deepinfer-sys-$version/.cargo-checksum.json"
    cargo package --offline -p deepinfer --config 'source.crates-io.replace-with="packaged"' \
      --config "source.packaged.directory=\"$vendor\""
  fi
)
cp "$CARGO_TARGET_DIR/package/deepinfer-sys-$version.crate" "$CARGO_TARGET_DIR/package/deepinfer-$version.crate" "$dist/"

step "Go module"
module=$(sed -n 's/^module //p' bindings/go/go.mod)
go_version=v$(sed -n 's/^const HeaderVersion = "\(.*\)"$/\1/p' bindings/go/version.go)
# The proxy's paths spell capital letters as !lower (none here, but keep the rule).
escaped=$(sed 's/[A-Z]/!\L&/g' <<<"$module")
proxy=$dist/goproxy/$escaped/@v
mkdir -p "$proxy"
git ls-files bindings/go >"$work/go-files"
# Entries dated by the last commit, so that the zip (and its checksum) is the same every time.
python3 - "$module@$go_version" "$proxy/$go_version.zip" "$work/go-files" "$(git log -1 --format=%ct)" <<'EOF'
import sys, time, zipfile
prefix, out, listing, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for path in sorted(p for p in open(listing).read().split("\n") if p):
        info = zipfile.ZipInfo(prefix + "/" + path[len("bindings/go/"):], time.gmtime(epoch)[:6])
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(path, "rb") as f:
            z.writestr(info, f.read())
EOF
cp bindings/go/go.mod "$proxy/$go_version.mod"
printf '{"Version":"%s","Time":"%s"}\n' "$go_version" "$(git log -1 --format=%cI -- bindings/go | sed 's/+00:00$/Z/')" >"$proxy/$go_version.info"
echo "$go_version" >"$proxy/list"
# A program that uses the module fetched through the proxy folder (cgo against the packaged library).
mkdir -p "$work/gouse"
cat >"$work/gouse/main.go" <<EOF
package main

import (
	"fmt"

	deepinfer "$module"
)

func main() { fmt.Println("go module: deepinfer", deepinfer.HeaderVersion, "library", deepinfer.Version()) }
EOF
(
  cd "$work/gouse"
  export GOPROXY=file://$dist/goproxy GOSUMDB=off GOFLAGS="-mod=mod -modcacherw" GOPATH=$work/gopath GOCACHE=$work/gocache
  printf 'module gouse\n\ngo 1.19\n' >go.mod
  go get "$module@$go_version"
  go run .
)

step "SHA256SUMS"
(cd "$dist" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum >SHA256SUMS)
(cd "$dist" && find . -type f | sed 's|^\./||' | sort | xargs ls -l --block-size=K | awk '{ printf "  %8s  %s\n", $5, $9 }')
echo "release: artifacts of $version in $dist ($(($(date +%s) - start)) s)"

if [ $install_test = 1 ]; then
  step "install test (clean Debian 12 root)"
  packaging/install_test.sh "$dist"
fi
