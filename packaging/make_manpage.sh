#!/usr/bin/env bash
# Writes the deepinfer(1) manual page from the command's own help (help2man), with every
# subcommand's --help as a section of its own:   packaging/make_manpage.sh path/to/deepinfer OUT
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)
out=$2
include=$(mktemp)
trap 'rm -f "$include"' EXIT
# Run as plain `deepinfer` (the usage lines name argv[0]), without the caller's model override.
export PATH="$bin:$PATH"
unset DEEPINFER_MODEL DEEPINFER_OPTIONS
commands=$(deepinfer --help | sed -n '/^Subcommands:/,$ s/^  \([a-z]\+\) .*/\1/p')
[ -n "$commands" ] || { echo "make_manpage: no subcommands in deepinfer --help" >&2; exit 1; }
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
{
  echo "[DESCRIPTION]"
  echo "deepinfer runs DeepSeek-V4-family language models on the CPU, or on an NVIDIA GPU when the"
  echo "CUDA backend (libdeepinfer-cuda.so.0) is installed. Without --model it uses the demo model."
  echo "[COMMANDS]"
  for c in $commands; do
    echo ".SS $c"
    echo ".nf"
    deepinfer "$c" --help | roff
    echo ".fi"
  done
  echo "[ENVIRONMENT]"
  echo ".TP"
  echo ".B DEEPINFER_MODEL"
  echo "Model directory used when --model is not given."
  echo ".TP"
  echo ".B DEEPINFER_OPTIONS"
  echo "Engine options as key=value,... (deepinfer options lists them)."
  echo ".TP"
  echo ".B DEEPINFER_LOG"
  echo "Log level: debug, info, warn, error or off."
  echo "[SEE ALSO]"
  echo "The C API: /usr/include/deepinfer.h (package libdeepinfer-dev)."
} >"$include"
help2man --no-info --no-discard-stderr --section 1 \
  --name "run DeepSeek-V4-family language models" --include "$include" --output "$out" deepinfer
