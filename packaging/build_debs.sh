#!/usr/bin/env bash
# Builds DeepInfer's Debian packages from this tree, then checks them with lintian.
#
#   packaging/build_debs.sh [OUTDIR] [more dpkg-buildpackage options]
#
# Copies the tree (the files git tracks, and untracked ones it does not ignore) to
# build/debian/deepinfer-VERSION with packaging/debian as its debian/ folder, and runs
# `dpkg-buildpackage -us -uc -b` there. Without nvcc (CUDA_HOME, default /usr/local/cuda) the
# build profile pkg.deepinfer.nocuda is added to DEB_BUILD_PROFILES (e.g. nocheck: no build-time
# tests): every package but libdeepinfer-cuda0. The .debs and
# the build's .changes and .buildinfo land in OUTDIR (default build/debian/out); lintian's report in
# build/debian/lintian.txt. Fails when the build fails or lintian reports an error. ccache is used when
# installed (CCACHE_DIR and CCACHE_BASEDIR are the caller's).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${1:-build/debian/out}
shift || true
extra=("$@")
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
work=$repo/build/debian
src=$work/deepinfer-$version
# A fresh copy, unless -nc (no pre-clean: dpkg-buildpackage reuses the last build's objects).
[[ " ${extra[*]} " == *" -nc "* ]] || rm -rf "$src"
mkdir -p "$src"
git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$src"
rm -rf "$src/debian"
cp -r packaging/debian "$src/debian"

# Profiles from the environment (e.g. DEB_BUILD_PROFILES=nocheck), plus nocuda without nvcc.
profiles=${DEB_BUILD_PROFILES:-}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda_home/bin/nvcc" ] && [[ " $profiles " != *" pkg.deepinfer.nocuda "* ]]; then
  echo "build_debs: no $cuda_home/bin/nvcc: building without the CUDA backend (profile pkg.deepinfer.nocuda)"
  profiles="$profiles pkg.deepinfer.nocuda"
fi
export DEB_BUILD_PROFILES="${profiles# }"

start=$(date +%s)
echo "build_debs: dpkg-buildpackage -us -uc -b ${extra[*]} (profiles: ${DEB_BUILD_PROFILES:-none}; log: $work/build.log)"
rc=0
(cd "$src" && nice -n 10 dpkg-buildpackage -us -uc -b "${extra[@]}") >"$work/build.log" 2>&1 || rc=$?
[ $rc = 0 ] || { tail -40 "$work/build.log" >&2; echo "build_debs: dpkg-buildpackage failed (log: $work/build.log)" >&2; exit 1; }
echo "build_debs: built in $(($(date +%s) - start)) s"

changes=$work/deepinfer_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).changes
rm -f "$out"/*.deb
for f in $(sed -n '/^Files:/,$ s/^ [0-9a-f]\{32\} [0-9]* [^ ]* [^ ]* \(.*\)$/\1/p' "$changes"); do
  mv "$work/$f" "$out/"
done
mv "$changes" "$out/"
(cd "$out" && ls -l --block-size=K *.deb)

echo "== lintian"
lintian_rc=0
lintian --info --display-info --pedantic --fail-on error "$out/$(basename "$changes")" >"$work/lintian.txt" 2>&1 || lintian_rc=$?
cat "$work/lintian.txt"
echo "build_debs: lintian: $(grep -c '^E: ' "$work/lintian.txt" || true) errors, $(grep -c '^W: ' "$work/lintian.txt" || true) warnings"
[ $lintian_rc = 0 ] || { echo "build_debs: lintian reports errors" >&2; exit 1; }
echo "build_debs: packages in $out"
