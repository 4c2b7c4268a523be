#!/usr/bin/env bash
# Checks C, C++ and CUDA sources (src/, capi/, kernels/, tests/, tools/) against .clang-format with
# clang-format-16 (Debian 12's; versions format differently, so the check pins one).
#
# The tree was not reformatted in one commit (that would bury every file's history under one
# change). Instead scripts/format_clean.txt lists the files that match the style as a whole, and
# CI keeps them matching; a file joins the list once it is formatted (a new file is formatted from
# its first commit and listed). Lines changed in other files are checked with --changed before a
# commit.
#
#   scripts/check_format.sh                  the listed files (what scripts/test.sh runs)
#   scripts/check_format.sh --changed [BASE] the lines changed since BASE (default: the merge base
#                                            with main), listed files or not
#   scripts/check_format.sh --list-clean     prints every file that matches (to refresh the list)
#   scripts/check_format.sh FILE...          those files
#
# Exits 1 naming each file that differs (with --changed: the diff of the lines to fix);
# `clang-format-16 -i FILE` (or `git clang-format --binary clang-format-16 BASE`) fixes them.
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=$(command -v clang-format-16 || true)
[ -n "$clang_format" ] || { echo "check_format: clang-format-16 is not installed (scripts/setup.sh installs it)" >&2; exit 2; }
extensions='c|h|cc|cpp|hpp|cu|cuh'

# Sources the style covers; the generated Unicode tables stay as their generator writes them.
all_files() {
  git ls-files -- src capi kernels tests tools | grep -E "\.($extensions)$" | grep -v -x 'src/text/unicode_additions.cpp'
}

# Prints each given file that clang-format would change (one process for all of them).
differing() {
  (($#)) || return 0
  local f
  for f in "$@"; do [ -f "$f" ] || echo "$f (missing)"; done
  "$clang_format" --style=file --dry-run "$@" 2>&1 | sed -n -E 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' |
    sort -u
}

case "${1:-}" in
  --changed)
    base=${2:-$(git merge-base HEAD main)}
    out=$(git clang-format --binary "$clang_format" --style=file --diff --extensions "${extensions//|/,}" "$base" -- src capi kernels tests tools ||
      true)
    if [ -z "$out" ] || grep -q -x -E 'no modified files to format|clang-format did not modify any files' <<<"$out"; then
      echo "check_format: the lines changed since ${base:0:12} match .clang-format"
      exit 0
    fi
    echo "$out"
    echo "check_format: lines changed since ${base:0:12} differ from .clang-format (fix: git clang-format --binary clang-format-16 $base)" >&2
    exit 1
    ;;
  --list-clean)
    mapfile -t files < <(all_files)
    bad=$(differing "${files[@]}")
    for f in "${files[@]}"; do grep -q -x -F "$f" <<<"$bad" || echo "$f"; done
    exit 0
    ;;
  "") mapfile -t files < <(grep -v -E '^(#|$)' scripts/format_clean.txt) ;;
  *) files=("$@") ;;
esac

bad=$(differing "${files[@]}")
if [ -n "$bad" ]; then
  echo "check_format: these files differ from .clang-format (fix: clang-format-16 -i FILE):" >&2
  sed 's/^/  /' <<<"$bad" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files match .clang-format"
