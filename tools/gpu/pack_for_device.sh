#!/bin/bash
# Packs what a GPU machine needs for the CUDA checks and benchmarks into the bundle folder of this
# checkout (`.carry/`, git-ignored): bundle.tar.xz with bin/ (deepinfer, test_cuda_backend, engine_bench, sampler_bench,
# native_checkpoint, native_gemv_bench, fp8_prefill_bench) and lib/ (the core
# library libdeepinfer.so.0, the CUDA backend module libdeepinfer-cuda.so.0, and the shared libraries
# a bare CUDA image lacks), the device-side scripts of tools/gpu and the V4-Flash-4L config.
# Build first, here: -DDEEPINFER_CUDA_ARCHS=90a, targets deepinfer deepinfer_cuda deepinfer_cli
# test_cuda_backend engine_bench sampler_bench native_checkpoint native_gemv_bench fp8_prefill_bench. Copy the checkout with its bundle folder to the GPU machine; there,
# in the bundle folder: QUIET_OPS=1 PER_TEST=90 bash run_tests.sh; TESTS=0 BENCH_SECONDS=280 bash run_bench.sh
# (per-kernel decode times under Nsight Compute: bash ncu_decode_step.sh; native weights against the CPU:
# bash compare_native.sh). The scripts write their
# results to out/ there (or to the folder the environment variable OUT names). cuBLAS comes from the machine: its CUDA toolkit, or
# python's nvidia.cublas package.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .carry && mkdir -p .carry/stage/bin .carry/stage/lib
cp build/bin/deepinfer build/tests/gpu/test_cuda_backend build/tools/bench/engine_bench build/tools/bench/sampler_bench build/tools/bench/native_checkpoint \
  build/tools/bench/native_gemv_bench build/tools/bench/fp8_prefill_bench .carry/stage/bin/
cp -L build/lib/libdeepinfer.so.0 build/lib/libdeepinfer-cuda.so.0 .carry/stage/lib/
needed=$(for f in build/bin/deepinfer build/tests/gpu/test_cuda_backend build/lib/libdeepinfer.so.0 build/lib/libdeepinfer-cuda.so.0; do ldd "$f"; done)
for lib in libpcre2-8.so.0 libutf8proc.so.2 libfmt.so.9 libcudart.so.13; do
  path=$(echo "$needed" | awk -v l="$lib" '$1 == l {print $3; exit}')
  [ -n "$path" ] || { echo "pack: $lib not found by ldd" >&2; exit 1; }
  cp -L "$path" .carry/stage/lib/
done
tar -cJf .carry/bundle.tar.xz -C .carry/stage .
rm -rf .carry/stage
cp tools/gpu/device_env.sh .carry/
cp tools/gpu/run_tests_on_device.sh .carry/run_tests.sh
cp tools/gpu/run_bench_on_device.sh .carry/run_bench.sh
cp tools/gpu/ncu_decode_step.sh tools/gpu/ncu_step_table.py tools/gpu/ncu_sass_top.py tools/gpu/ab_on_device.sh \
  tools/gpu/compare_native.sh tools/gpu/compare_logits.py .carry/
cp tools/bench/configs/v4-flash-4l.json tools/bench/configs/v4-flash-2l-32e.json .carry/
du -sh .carry
