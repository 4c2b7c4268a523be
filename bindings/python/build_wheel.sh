#!/usr/bin/env bash
# Builds the deepinfer wheel from an installed DeepInfer (offline, with Debian's tools):
#
#   bindings/python/build_wheel.sh PREFIX OUTDIR [--system-library] [--no-demo]
#
# PREFIX is an install prefix of the library (include/deepinfer.h, lib/libdeepinfer.so* or
# lib/<multiarch>/, e.g. `cmake --install build --prefix build/stage`, or /usr). The wheel lands in OUTDIR. By default it
# bundles lib/libdeepinfer.so.0, the CUDA backend module lib/libdeepinfer-cuda.so.0 (when the
# prefix has it) and the third-party libraries they link outside the manylinux set (fmt, pcre2,
# utf8proc), renamed with a content hash as auditwheel does, all with $ORIGIN runpaths; and the
# repository's demo model (Engine() loads it by default).
#   --system-library  bundle nothing: the module links the system's libdeepinfer.so.0 (what a
#                     distribution package such as Debian's python3-deepinfer does)
#   --no-demo         leave the demo model out
# Environment:
#   PYTHON                   the interpreter that builds (default /usr/bin/python3, Debian's)
#   DEEPINFER_EXTRA_PYTHONS  more CPython interpreters (with their headers) to build the module
#                            for, e.g. a 3.12 beside Debian 12's 3.11: one wheel then serves both
# Needs: swig, gcc, python3-dev, python3-build, python3-setuptools, python3-wheel, patchelf,
# binutils (scripts/setup.sh installs them).
set -euo pipefail

usage() { sed -n '2,22p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
prefix=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
shift 2
bundle=1 demo=1
for arg in "$@"; do
  case "$arg" in
    --system-library) bundle=0 ;;
    --no-demo) demo=0 ;;
    *) usage ;;
  esac
done
python=${PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
[ -f "$prefix/include/deepinfer.h" ] || { echo "build_wheel: $prefix/include/deepinfer.h not found" >&2; exit 1; }
# lib/, or a distribution's lib/<multiarch>/ (Debian: /usr/lib/x86_64-linux-gnu).
libdir=
for d in "$prefix/lib" "$prefix/lib/$(gcc -print-multiarch 2>/dev/null)" "$prefix/lib64"; do
  [ -e "$d/libdeepinfer.so.0" ] && { libdir=$d; break; }
done
[ -n "$libdir" ] || { echo "build_wheel: libdeepinfer.so.0 not found under $prefix/lib" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/deepinfer-wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp -r "$here/deepinfer" "$here/deepinfer.i" "$here/setup.py" "$here/pyproject.toml" "$here/README.md" "$stage/"
find "$stage/deepinfer" \( -name __pycache__ -o -name '_native*.so' -o -name _libs -o -name models \) -prune -exec rm -rf {} +

if [ "$bundle" = 1 ]; then
  libs="$stage/deepinfer/_libs"
  mkdir -p "$libs"
  cp -L "$libdir/libdeepinfer.so.0" "$libs/"
  [ -e "$libdir/libdeepinfer-cuda.so.0" ] && cp -L "$libdir/libdeepinfer-cuda.so.0" "$libs/"
  # Third-party libraries outside the manylinux set: copied under a hashed name and relinked.
  keep='^(libc|libm|libdl|librt|libpthread|libutil|libnsl|libresolv|libstdc\+\+|libgcc_s)\.so\.[0-9]+$|^ld-linux|^libdeepinfer|^libcuda|^libcudart|^libcublas'
  for lib in "$libs"/*.so.0; do
    for dep in $(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ "$dep" =~ $keep ]] && continue
      path=$(LD_LIBRARY_PATH="$libdir" ldd "$lib" | awk -v d="$dep" '$1 == d { print $3 }')
      [ -f "$path" ] || { echo "build_wheel: $lib needs $dep, which was not found" >&2; exit 1; }
      hash=$(sha256sum "$path" | cut -c1-8)
      renamed="${dep%%.so*}-$hash.so${dep#*.so}"
      if [ ! -e "$libs/$renamed" ]; then
        cp -L "$path" "$libs/$renamed"
        patchelf --set-soname "$renamed" "$libs/$renamed"
      fi
      patchelf --replace-needed "$dep" "$renamed" "$lib"
    done
  done
  for lib in "$libs"/*; do
    patchelf --set-rpath '$ORIGIN' "$lib"
  done
  platform=$("$python" "$here/platform_tag.py" "$libs"/*)
else
  platform="linux_$(uname -m)"
fi
if [ "$demo" = 1 ] && [ -f "$repo/models/demo/config.json" ]; then
  mkdir -p "$stage/deepinfer/models"
  cp -r "$repo/models/demo" "$stage/deepinfer/models/demo"
fi

echo "build_wheel: building for $platform (bundled library: $([ "$bundle" = 1 ] && echo yes || echo no))"
(
  cd "$stage"
  export DEEPINFER_PREFIX="$prefix" DEEPINFER_LIBDIR="$libdir" DEEPINFER_WHEEL_PLATFORM="$platform"
  PYTHONDONTWRITEBYTECODE=1 "$python" -m build --no-isolation --wheel --outdir "$stage/dist" . >"$stage/build.log" 2>&1 ||
    { tail -40 "$stage/build.log" >&2; exit 1; }
)
wheel=$(ls "$stage"/dist/*.whl)

# Check the claim against everything the wheel carries (the extension modules included).
"$python" -m zipfile -e "$wheel" "$stage/unpacked"
if [ "$bundle" = 1 ]; then
  claimed=$("$python" "$here/platform_tag.py" $(find "$stage/unpacked" -name '*.so*' -type f))
  [ "$claimed" = "$platform" ] || { echo "build_wheel: the wheel's files give $claimed, not $platform" >&2; exit 1; }
fi
cp "$wheel" "$out/"
echo "build_wheel: $out/$(basename "$wheel")"
