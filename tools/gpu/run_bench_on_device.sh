#!/bin/bash
# Device-side runner of `deepinfer bench` on the V4-Flash-4L shape (pack_for_device.sh packs it into
# the bundle folder as run_bench.sh, with the binaries and the config). Environment: INPUT_LENS (default
# 4096,32768), BENCH_SECONDS (the bench's own budget, default 170), TESTS=0 to skip the GPU tests,
# ENGINE=0 to skip the engine runs (greedy and sampled, on the V4-Flash-4L shape), EXTRA (more bench
# flags).
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv
CFG=$PWD/v4-flash-4l.json
set -o pipefail
timeout $((${BENCH_SECONDS:-170} + 60)) bin/deepinfer bench --model "$CFG" --dummy-weights --device cuda \
  --input-len ${INPUT_LENS:-4096,32768} --output-len 32 --breakdown --breakdown-batches 1,64 --compare \
  --max-seconds ${BENCH_SECONDS:-170} --out "$OUT/bench.md" $EXTRA 2> "$OUT/bench.err" > /dev/null
rc=$?
echo "bench rc=$rc"; tail -5 "$OUT/bench.err"
if [ $rc -ne 0 ]; then  # keep numbers even if graph replay is what broke
  timeout 90 bin/deepinfer bench --model "$CFG" --dummy-weights --device cuda --input-len 4096 --output-len 8 \
    --no-graphs --no-prefill --max-seconds 40 --out "$OUT/bench_nographs.md" 2> "$OUT/bench_nographs.err" > /dev/null
  echo "bench --no-graphs rc=$?"; tail -3 "$OUT/bench_nographs.err"
fi
if [ "${TESTS:-1}" != 0 ]; then
  timeout 90 bin/test_cuda_backend > "$OUT/tests.log" 2>&1
  echo "tests rc=$?"
  grep -E "^\[ (op|golden) \] random|FAILED|PASSED|Failure" "$OUT/tests.log" | head -30
fi
if [ "${ENGINE:-1}" != 0 ]; then  # the engine end to end: host sampling, logits or greedy tokens back
  for sampling in "" "--temperature 0.8 --top-p 0.95"; do
    timeout 240 bin/engine_bench --model "$CFG" --dummy-weights --device cuda --prompt 512 --gen 64 \
      --concurrency 1,16,64 $sampling 2>&1 | tee -a "$OUT/engine.md" | tail -6
  done
fi
cat "$OUT/bench.md" 2>/dev/null | grep -E "^\| |^- device|^#" | head -120
