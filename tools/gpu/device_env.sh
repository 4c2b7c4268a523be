# Sourced by the device-side scripts of tools/gpu (packed beside them by pack_for_device.sh): unpacks
# the bundle into bin/ and lib/ beside the script, finds the CUDA libraries (the toolkit under
# CUDA_HOME, default /usr/local/cuda, and python's nvidia.cublas package) and the checkout's golden
# fixtures, and sets OUT (where results go; default out/).
cd "$(dirname "${BASH_SOURCE[0]}")"
tar -xJf bundle.tar.xz  # bin/, lib/
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUBLAS_PY=$(python3 -c "import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + '/lib')" 2>/dev/null)
# lib/ first: the CLI also finds the CUDA backend module there (../lib from bin/).
export LD_LIBRARY_PATH=$PWD/lib:$(ls -d "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/x86_64-linux/lib 2>/dev/null | tr '\n' ':')$CUBLAS_PY:$LD_LIBRARY_PATH
export DI_GOLDEN_DIR=$(cd .. && pwd)/tests/golden
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
