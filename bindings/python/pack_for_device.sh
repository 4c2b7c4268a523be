#!/usr/bin/env bash
# Packs what the Python SDK's tests need on a GPU machine without network access (Python 3.12 there):
#
#   DEEPINFER_EXTRA_PYTHONS=/path/to/python3.12 bindings/python/pack_for_device.sh PREFIX OUTDIR
#
# PREFIX: an install prefix of a CUDA build (it has lib/libdeepinfer-cuda.so.0). OUTDIR gets
#   - the wheel, with the module built for this machine's Python and for DEEPINFER_EXTRA_PYTHONS;
#   - site/: pytest and jsonschema with their pure-Python dependencies, from this machine's Debian
#     packages, used there only when that machine's Python lacks them;
#   - cli/: the `deepinfer` command and the libraries it links beside libdeepinfer, for the tests
#     that compare with it;
#   - cuda/: libcudart.so.13, used there only when that machine has none.
# Then, there, from the checkout: bindings/python/run_on_device.sh OUTDIR
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
[ -n "${DEEPINFER_EXTRA_PYTHONS:-}" ] || echo "pack_for_device: DEEPINFER_EXTRA_PYTHONS is empty: the wheel serves only $(/usr/bin/python3 -V)" >&2
[ -e "$prefix/lib/libdeepinfer-cuda.so.0" ] || echo "pack_for_device: $prefix has no CUDA backend module: the wheel will run on the CPU only" >&2
rm -rf "$out/site" "$out/cli" "$out/cuda" "$out"/deepinfer-*.whl
"$here/build_wheel.sh" "$prefix" "$out"

mkdir -p "$out/site"
dist=/usr/lib/python3/dist-packages
for m in pytest _pytest pluggy iniconfig packaging attr attrs jsonschema pyrsistent py.py _pyrsistent_version.py; do
  cp -r "$dist/$m" "$out/site/"
done
for m in pytest pluggy iniconfig packaging attrs jsonschema pyrsistent; do
  cp -r "$dist"/"$m"-*.*-info "$out/site/" 2>/dev/null || true
done
find "$out/site" \( -name '__pycache__' -o -name '*.so' \) -prune -exec rm -rf {} +  # pyrsistent runs without its C part

if [ -x "$prefix/bin/deepinfer" ]; then
  # The command links the wheel's own libdeepinfer.so.0 there; only its other libraries travel.
  mkdir -p "$out/cli/lib"
  cp "$prefix/bin/deepinfer" "$out/cli/"
  LD_LIBRARY_PATH="$prefix/lib" ldd "$prefix/bin/deepinfer" | awk '$3 ~ /^\// { print $1, $3 }' | while read -r name path; do
    case "$name" in libfmt* | libpcre2* | libutf8proc*) cp -L "$path" "$out/cli/lib/$name" ;; esac
  done
fi
# The CUDA runtime, for a machine whose image lacks it (the backend module needs libcudart.so.13).
cudart=$(ldconfig -p | awk '/libcudart\.so\.13 / { print $NF; exit }')
[ -n "$cudart" ] || cudart=$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null || true)
if [ -n "$cudart" ]; then
  mkdir -p "$out/cuda"
  cp -L "$cudart" "$out/cuda/libcudart.so.13"
fi
du -sh "$out"
