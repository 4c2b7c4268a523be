#!/usr/bin/env bash
# Runs the Python SDK's tests on a GPU machine from what pack_for_device.sh packed (no network
# needed): installs the wheel into a fresh folder with pip, then runs pytest on the installed
# package with every engine on the GPU.
#
#   bindings/python/run_on_device.sh PACKED [pytest arguments...]
#
# Environment: DEEPINFER_TEST_DEVICE (default cuda), PYTHON (default python3).
# The CUDA backend module needs libcudart.so.13 and libcublas.so.13: from the system's loader path
# or LD_LIBRARY_PATH, or NVIDIA's pip wheels (nvidia-cuda-runtime, nvidia-cublas) on sys.path.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
packed=$(cd "$1" && pwd)
shift
python=${PYTHON:-python3}
site=$(mktemp -d)
"$python" -V
"$python" -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$packed"/deepinfer-*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# The packed pytest must not load that machine's plugins (made for another pytest).
"$python" -c "import pytest, jsonschema" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$packed/site" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
command -v nvidia-smi >/dev/null && nvidia-smi -L

nvidia_dirs=$("$python" -c "from deepinfer import _lib; print(':'.join(_lib._nvidia_library_dirs()))")
has_cudart=$("$python" -c "
import ctypes, os, sys
dirs = [d for d in sys.argv[1].split(':') if d]
try:
    ctypes.CDLL('libcudart.so.13')
    print(1)
except OSError:
    print(int(any(os.path.exists(os.path.join(d, 'libcudart.so.13')) for d in dirs)))
" "$nvidia_dirs")
if [ "$has_cudart" = 0 ] && [ -d "$packed/cuda" ]; then
  echo "run_on_device: this machine has no libcudart.so.13: using the packed one"
  export LD_LIBRARY_PATH="$packed/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -x "$packed/cli/deepinfer" ]; then
  export DEEPINFER_TEST_CLI="$packed/cli/deepinfer"
  export DEEPINFER_TEST_LIBRARY_PATH="$packed/cli/lib:$site/deepinfer/_libs:$nvidia_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cd "$site" || exit 1  # not the checkout: `import deepinfer` must find the installed package
DEEPINFER_TEST_DEVICE=${DEEPINFER_TEST_DEVICE:-cuda} DEEPINFER_TEST_README="$here/README.md" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -p no:cacheprovider -p no:warnings -q -rs "$here/tests" "$@"
