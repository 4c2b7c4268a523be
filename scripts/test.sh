#!/usr/bin/env bash
# Builds everything (through setup.sh) and runs every test: the C++ suites, the SDKs against the
# installed library (Python wheel in a fresh venv, Rust crates, Go module), then the engine's
# concurrency tests and the C ABI's again under AddressSanitizer and UndefinedBehaviorSanitizer,
# the ABI check against the last release (docs/versioning.md), and the fuzz targets for a bounded time.
# GPU tests skip cleanly without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
jobs=$(nproc)
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== SDKs against the installed library"
rm -rf build/stage
cmake --install build --prefix build/stage >/dev/null
bindings/python/test.sh build/stage
bindings/rust/test.sh build/stage
bindings/go/test.sh build/stage

echo "== sanitizers: engine lifecycle and batching tests, C ABI behaviour and misuse tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_SANITIZE=ON -DDEEPINFER_CUDA=OFF \
  -DDEEPINFER_BUILD_CLI=OFF -DDEEPINFER_BUILD_BENCH=OFF >/dev/null
asan_targets=(test_engine abi_test abi_sessions_test abi_misuse_test abi_misuse_state_test abi_queue_test abi_process_test abi_exit)
cmake --build build-asan -j "$jobs" --target "${asan_targets[@]}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure \
  -R "^(EngineLifecycle|Sampling/BatchedEqualsAlone|Demo|DemoEngines|Misuse|TokenizerLess|Queues|Fork|Threads|Options|Progress|Facts|Done|AbiExit)\."

echo "== no environment variable and no mutable global in library code"
scripts/check_no_globals.sh

echo "== source layout (.clang-format) of the files listed in scripts/format_clean.txt"
scripts/check_format.sh

echo "== the ABI against the last release's baseline (packaging/abi), and the proof that the check fires"
scripts/check_abi.sh build

echo "== fuzzing: every libFuzzer target for a bounded time (scripts/fuzz.sh; findings fail the run)"
scripts/fuzz.sh --ci
