#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in ./build-fuzz, then runs
# each for a bounded time from its seed corpus. Findings (crash-*, leak-*, timeout-*, oom-*) land in
# build-fuzz/artifacts/ and make the script exit 1; turn each into a file under
# tests/fuzz/regressions/<target>/ (replayed by every test build) with its fix.
#
# Usage: scripts/fuzz.sh [--ci] [--seconds N] [target...]
#   --ci          the CI step: every target for 30 s (FUZZ_SECONDS overrides), ~7 min with the build
#   --seconds N   seconds per target (default 60)
#   target        tokenizer_json tokenizer_text chat config safetensors grammar_regex grammar_json_schema
#                 grammar_ebnf (default: all)
# Long runs (the corpus in build-fuzz/corpus/ grows across runs), e.g. an hour per target:
#   nice -n 19 scripts/fuzz.sh --seconds 3600
# FUZZ_RSS_MB (default 2560) is the process's memory limit. ASan's own bookkeeping (allocation
# stacks, the freed-memory quarantine) grows with every input: with its defaults the grammar_ebnf
# corpus replays in 2.2 GB under ASan but 38 MB in a release build, and hour-long runs stopped at the
# limit. So ASAN_OPTIONS defaults to shorter allocation stacks and a 32 MB quarantine (the corpus
# then replays in 210 MB); replay an "oom" finding in a release build (build/tests/fuzz/replay_*)
# before calling it a defect.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(tokenizer_json tokenizer_text chat config safetensors grammar_regex grammar_json_schema grammar_ebnf)
seconds=60
targets=()
while (($#)); do
  case $1 in
    --ci) seconds=${FUZZ_SECONDS:-30}; shift ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")

dict_of() {
  case $1 in
    tokenizer_json|chat|config|safetensors) echo tests/fuzz/dict/json.dict ;;
    grammar_regex) echo tests/fuzz/dict/regex.dict ;;
    grammar_json_schema) echo tests/fuzz/dict/json_schema.dict ;;
    grammar_ebnf) echo tests/fuzz/dict/ebnf.dict ;;
  esac
}

# clang 16: clang 14 cannot capture structured bindings in lambdas (C++20), which the grammar code does.
command -v clang++-16 >/dev/null || { echo "fuzz: clang++-16 not found (scripts/setup.sh installs clang-16)" >&2; exit 1; }
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
  -DDEEPINFER_FUZZ=ON -DDEEPINFER_CUDA=OFF -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_BUILD_CLI=OFF \
  -DDEEPINFER_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=8:quarantine_size_mb=32}
mkdir -p build-fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  dict=$(dict_of "$t")
  echo "== fuzz_$t: ${seconds} s"
  # -timeout: one input taking longer is a finding (a hang; wall time, so a starved process on a
  # busy machine may need FUZZ_TIMEOUT raised); -rss_limit_mb: so is runaway memory.
  if ! build-fuzz/fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb="${FUZZ_RSS_MB:-2560}" -print_final_stats=1 \
      ${dict:+-dict="$dict"} -artifact_prefix=build-fuzz/artifacts/"$t"- "$corpus" tests/fuzz/corpus/"$t" \
      >build-fuzz/"$t".log 2>&1; then
    status=1
    echo "fuzz_$t FOUND A PROBLEM (build-fuzz/$t.log):"
    grep -E "ERROR|SUMMARY|Test unit written" build-fuzz/"$t".log | head -5
  fi
  grep -E "^#[0-9]+[[:space:]]+DONE|^Done|stat::number_of_executed_units|stat::peak_rss_mb" build-fuzz/"$t".log | tr '\n' ' '
  echo
done
exit $status
