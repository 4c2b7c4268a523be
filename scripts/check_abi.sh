#!/usr/bin/env bash
# The ABI check (docs/versioning.md): libdeepinfer.so of this tree against the baseline of the last
# release in packaging/abi/ (an abidw dump of its public interface and the header's constants).
#
#   scripts/check_abi.sh [BUILD_DIR]            check (default build directory: build)
#   scripts/check_abi.sh --update [BUILD_DIR]   write the baseline of this version (at a release)
#
# Fails on an incompatible change (a function removed or its signature changed, a symbol moved to
# another version node, a constant's value changed) unless the ABI version was bumped in the same
# change (the library's SONAME differs from the baseline's); additions pass when their symbols are in
# a version node the baseline does not have. Then proves that it fires: a copy of the library with
# di_code_name's parameter widened to int64_t must fail, and pass once its SONAME is bumped; a header
# with a constant changed must fail. Needs abigail-tools and patchelf (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

update=0
if [ "${1:-}" = --update ]; then update=1; shift; fi
build=${1:-build}
[ -f "$build/CMakeCache.txt" ] || { echo "check_abi: $build is not a configured build directory" >&2; exit 2; }
for tool in abidw abidiff patchelf readelf; do
  command -v $tool >/dev/null || { echo "check_abi: $tool not found (scripts/setup.sh installs it)" >&2; exit 2; }
done
baselines=packaging/abi
headers=capi/include
version=$(sed -n 's/^project(DeepInfer VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

probe_targets=(deepinfer_abi_probe)
[ $update = 1 ] || probe_targets+=(deepinfer_abi_break)
cmake --build "$build" --target "${probe_targets[@]}" >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; echo "check_abi: building ${probe_targets[*]} failed" >&2; exit 1; }
probe=$build/abi/probe/libdeepinfer.so.0

abidw_flags=(--drop-private-types --exported-interfaces-only --no-corpus-path --no-comp-dir-path
  --no-show-locs --no-elf-needed --type-id-style hash)

# "NAME VALUE" for every numeric constant of a header, but the version numbers (they change by design).
constants() {
  {
    sed -nE 's/^#define (DI_[A-Z0-9_]+) (-?[0-9]+)$/\1 \2/p' "$1"
    grep -oE '\bDI_[A-Z0-9_]+ = -?[0-9]+' "$1" | sed 's/ = / /'
  } | grep -vE '^DI_(VERSION_[A-Z]+|ABI_VERSION) ' | sort -u
}

if [ $update = 1 ]; then
  mkdir -p $baselines
  abidw --headers-dir $headers "${abidw_flags[@]}" --out-file "$baselines/libdeepinfer-$version.abi" "$probe"
  constants $headers/deepinfer.h >"$baselines/deepinfer-$version.constants"
  echo "check_abi: wrote $baselines/libdeepinfer-$version.abi and deepinfer-$version.constants"
  exit 0
fi

baseline=$(ls $baselines/libdeepinfer-*.abi 2>/dev/null | sort -V | tail -1)
[ -n "$baseline" ] || { echo "check_abi: no baseline in $baselines (scripts/check_abi.sh --update)" >&2; exit 2; }
base_version=$(basename "$baseline" .abi | sed 's/^libdeepinfer-//')
base_constants=$baselines/deepinfer-$base_version.constants

# compare LIB HEADERS_DIR: 0 when LIB keeps the baseline's ABI or bumps its SONAME; reports why not.
compare() {
  local lib=$1 hdrs=$2 rc=0 base_soname soname bumped=0
  base_soname=$(sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$baseline" | head -1)
  soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" != "$base_soname" ] && bumped=1

  # Everything but additions (--no-added-syms): exit status 0, or 4 (changed) / 12 (incompatible).
  abidiff --no-added-syms --headers-dir2 "$hdrs" --drop-private-types --exported-interfaces-only --no-show-locs \
    "$baseline" "$lib" >"$work/diff.txt" 2>&1 || rc=$?
  if ((rc & 3)); then
    cat "$work/diff.txt" >&2
    echo "check_abi: abidiff failed (status $rc)" >&2
    return 2
  fi
  if ((rc)); then
    sed 's/^/  /' "$work/diff.txt"
    if [ $bumped = 0 ]; then
      echo "check_abi: FAILED: $lib changes the ABI of $base_version ($base_soname) without bumping the ABI version."
      echo "  Keep the old function and add a new one in a new version node, or bump the ABI version:"
      echo "  DEEPINFER_ABI_VERSION in CMakeLists.txt and DI_ABI_VERSION in deepinfer.h (docs/versioning.md)."
      return 1
    fi
    echo "check_abi: incompatible changes allowed: the ABI version is bumped ($base_soname -> $soname)"
  fi

  # Additions: a symbol the baseline lacks must be in a version node the baseline lacks.
  local base_nodes new_syms sym node failed=0
  base_nodes=$(grep -o "<elf-symbol name='[^']*' version='[^']*'" "$baseline" | sed "s/.* version='\(.*\)'/\1/" | sort -u)
  new_syms=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | grep '^di_' || true)
  for sym in $new_syms; do
    grep -q "<elf-symbol name='${sym%%@*}' " "$baseline" && continue
    node=${sym##*@}
    echo "check_abi: added ${sym%%@*} in $node"
    if [ $bumped = 0 ] && grep -qx "$node" <<<"$base_nodes"; then
      echo "check_abi: FAILED: ${sym%%@*} is new since $base_version but in its version node $node: give it a new node"
      echo "  in capi/exported_symbols.txt (DEEPINFER_<major>.<minor> of the release that adds it)."
      failed=1
    fi
  done
  [ $failed = 0 ] || return 1

  compare_constants "$hdrs/deepinfer.h" $bumped
}

# compare_constants HEADER BUMPED: every constant of the baseline keeps its value.
compare_constants() {
  local changed
  changed=$(constants "$1" | comm -13 - "$base_constants" || true)
  [ -z "$changed" ] && return 0
  echo "$changed" | while read -r name value; do
    now=$(constants "$1" | awk -v n="$name" '$1 == n { print $2 }')
    echo "  $name: $value in $base_version, ${now:-removed} now"
  done
  if [ "$2" = 0 ]; then
    echo "check_abi: FAILED: constants of deepinfer.h changed value or went away without bumping the ABI version"
    return 1
  fi
  echo "check_abi: constant changes allowed: the ABI version is bumped"
}

echo "== ABI of this tree against $base_version ($baseline)"
compare "$probe" $headers

echo "== the check fires: di_code_name(int64_t) instead of di_code_name(di_code)"
broken=$build/abi/break/libdeepinfer.so.0
[ -e "$broken" ] || { echo "check_abi: no $broken (see deepinfer_abi_break in capi/CMakeLists.txt)" >&2; exit 1; }
rc=0
compare "$broken" "$build/abi/break-src/include" >"$work/broken.txt" || rc=$?
if [ $rc != 1 ] || ! grep -q "FAILED" "$work/broken.txt" || ! grep -q "di_code_name" "$work/broken.txt"; then
  cat "$work/broken.txt"
  echo "check_abi: the deliberately changed signature was not reported (status $rc)" >&2
  exit 1
fi
grep -E "di_code_name|FAILED" "$work/broken.txt" | head -3

echo "== ... and accepts it with the ABI version bumped (SONAME libdeepinfer.so.1)"
cp "$(readlink -f "$broken")" "$work/libdeepinfer.so.1"
patchelf --set-soname libdeepinfer.so.1 "$work/libdeepinfer.so.1"
rc=0
compare "$work/libdeepinfer.so.1" "$build/abi/break-src/include" >"$work/bumped.txt" || rc=$?
if [ $rc != 0 ]; then
  cat "$work/bumped.txt"
  echo "check_abi: a bumped SONAME was not accepted (status $rc)" >&2
  exit 1
fi
grep "allowed" "$work/bumped.txt"

echo "== ... and catches a changed constant (DI_ERR_INTERNAL = 101)"
sed 's/DI_ERR_INTERNAL = 100/DI_ERR_INTERNAL = 101/' $headers/deepinfer.h >"$work/deepinfer.h"
rc=0
compare_constants "$work/deepinfer.h" 0 >"$work/constant.txt" || rc=$?
if [ $rc != 1 ] || ! grep -q "DI_ERR_INTERNAL: 100 in $base_version, 101 now" "$work/constant.txt"; then
  cat "$work/constant.txt"
  echo "check_abi: the changed constant was not reported (status $rc)" >&2
  exit 1
fi
grep "DI_ERR_INTERNAL" "$work/constant.txt"

echo "== ... and a function added in a released version node (a baseline without di_version_number)"
python3 - "$baseline" "$work/older.abi" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"\n *<elf-symbol name='di_version_number' [^>]*/>", "", text)
text = re.sub(r"\n *<function-decl name='di_version_number' .*?</function-decl>", "", text, flags=re.S)
open(sys.argv[2], "w").write(text)
EOF
baseline=$work/older.abi
rc=0
compare "$probe" $headers >"$work/old_node.txt" || rc=$?
if [ $rc != 1 ] || ! grep -q "FAILED: di_version_number is new since" "$work/old_node.txt"; then
  cat "$work/old_node.txt"
  echo "check_abi: a new function in a released version node was not reported (status $rc)" >&2
  exit 1
fi
grep "FAILED" "$work/old_node.txt"
echo "check_abi: passed"
