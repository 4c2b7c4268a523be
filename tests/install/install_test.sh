#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs a consumer twice: with pkg-config
# and with the CMake package DeepInfer::deepinfer.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libdeepinfer.so' | head -1)")
test -f "$prefix/include/deepinfer.h"
test -f "$libdir/pkgconfig/deepinfer.pc"
test -f "$libdir/cmake/DeepInfer/DeepInferConfig.cmake"
readelf -d "$libdir/libdeepinfer.so" | grep -q 'SONAME.*libdeepinfer.so.0'

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/consumer.c" $(pkg-config --define-variable=prefix="$prefix" --cflags --libs deepinfer) -o "$prefix/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$prefix/consumer_pc"

cmake -S "$src/consumer" -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cmake-build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cmake-build/consumer"
echo "install test passed"
