#!/usr/bin/env bash
# Builds everything (through setup.sh) and runs every test. GPU tests skip cleanly without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
ctest --test-dir build --output-on-failure -j "$(nproc)"
