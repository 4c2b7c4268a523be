#!/usr/bin/env bash
# The Python SDK's tests, as CI runs them: builds the wheel from an installed library, installs
# it into a fresh virtual environment (offline) and runs pytest there against the INSTALLED
# package, never the source tree.
#
#   bindings/python/test.sh PREFIX [pytest arguments...]
#
# PREFIX: the library's install prefix (e.g. build/stage, or /usr for a Debian-installed library).
# Environment: DEEPINFER_TEST_DEVICE (cpu, the default, or cuda), PYTHON (default
# /usr/bin/python3). Outputs go to bindings/python/build/ (git-ignored).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cd "$1" && pwd)
shift
python=${PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
work="$here/build/test"
rm -rf "$work"
mkdir -p "$work"

start=$(date +%s)
PYTHON="$python" "$here/build_wheel.sh" "$prefix" "$work/dist"
wheel=$(ls "$work"/dist/deepinfer-*.whl)
# --system-site-packages: Debian's pytest and jsonschema; nothing comes from an index.
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
echo "test.sh: wheel built and installed in $(($(date +%s) - start)) s"

cli="$prefix/bin/deepinfer"
cd "$work"  # not the source folder: `import deepinfer` must find the installed package
DEEPINFER_TEST_CLI=$([ -x "$cli" ] && echo "$cli" || true) \
DEEPINFER_TEST_LIBRARY_PATH="$prefix/lib:$prefix/lib/$(gcc -print-multiarch 2>/dev/null)" \
DEEPINFER_TEST_README="$here/README.md" \
PYTHONDONTWRITEBYTECODE=1 \
  "$work/venv/bin/python" -m pytest -p no:cacheprovider -q "$here/tests" "$@"
