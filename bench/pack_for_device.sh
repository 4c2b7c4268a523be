#!/bin/bash
# Packs what the lent GPU machine needs into .carry/ (git-ignored): the binaries of a build made
# here with -DDEEPINFER_CUDA_ARCHS=90a (targets deepinfer_cli test_cuda_backend engine_bench), the
# shared libraries its Ubuntu image lacks, the two device-side runners and the V4-Flash-4L config.
# Then run there with carry [".carry"]:
#   cd .carry && QUIET_OPS=1 PER_TEST=90 bash run_tests.sh; TESTS=0 BENCH_SECONDS=280 bash run_bench.sh
# (and per-kernel decode times under Nsight Compute: bash ncu_decode_step.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry && mkdir -p .carry/stage
cp build/bin/deepinfer build/tests/gpu/test_cuda_backend build/bench/engine_bench .carry/stage/
for lib in libpcre2-8.so.0 libutf8proc.so.2 libfmt.so.9 libcudart.so.13; do
  path=$(ldd build/bin/deepinfer | awk -v l="$lib" '$1 == l {print $3}')
  [ -n "$path" ] || { echo "pack: $lib not found by ldd" >&2; exit 1; }
  cp -L "$path" .carry/stage/
done
tar -cJf .carry/bundle.tar.xz -C .carry/stage .
rm -rf .carry/stage
cp tests/gpu/run_on_device.sh .carry/run_tests.sh
cp bench/run_on_device.sh .carry/run_bench.sh
cp bench/ncu_decode_step.sh bench/ncu_step_table.py bench/ncu_sass_top.py bench/ab_on_device.sh .carry/
cp bench/configs/v4-flash-4l.json .carry/
du -sh .carry
