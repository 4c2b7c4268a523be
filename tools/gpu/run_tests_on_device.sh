#!/bin/bash
# Device-side runner of the CUDA backend's checks on a GPU machine (pack_for_device.sh packs it, with
# the binaries, into the bundle folder as run_tests.sh). Options (environment): PER_TEST seconds, QUIET_OPS=1,
# MEMCHECK=<seconds> with MEMCHECK_FILTER=<gtest filter>.
#
# Runs the tests one process per test (a sticky CUDA fault cannot hide later tests), the CLI on the
# demo model (cpu vs cuda, timed), then compute-sanitizer memcheck.
source "$(dirname "$0")/device_env.sh"
nvidia-smi -L
tests=$(bin/test_cuda_backend --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}')
for t in $tests; do
  timeout ${PER_TEST:-60} bin/test_cuda_backend --gtest_filter="$t" > "$OUT/t.log" 2>&1
  rc=$?
  cat "$OUT/t.log" >> "$OUT/tests.log"
  if [ -n "$QUIET_OPS" ] && [[ $t == CudaOps* || $t == Shapes* ]]; then
    grep -E "Failure|Expected|Which is|error|state ops|top-k:" "$OUT/t.log" | head -20
  else
    grep -E "^\[ (op|golden) \]|Failure|Expected|Which is|error" "$OUT/t.log" | head -80
  fi
  echo "== $t rc=$rc"
done
rm -f "$OUT/t.log"
python3 -c "print(' '.join(str((i*37+11)%4000+5) for i in range(512)))" > ids.txt
for dev in cpu cuda; do
  for ch in 0 1; do
    s=$(date +%s.%N); bin/deepinfer logits --model ../models/demo --ids-file ids.txt --out $OUT/$dev$ch.f32 --chunk $ch --device $dev 2>&1 | tail -1
    echo "cli $dev chunk=$ch: $(python3 -c "print(round($(date +%s.%N)-$s,3))") s"
  done
done
python3 - <<'PY'
import numpy as np, os
o=os.environ["OUT"]; V=4096
r=np.fromfile(f"{o}/cpu0.f32",dtype=np.float32).reshape(-1,V)
for n in ["cpu1","cuda0","cuda1"]:
    g=np.fromfile(f"{o}/{n}.f32",dtype=np.float32).reshape(-1,V)
    print(f"cli {n} vs cpu0: rel {np.linalg.norm(g-r)/np.linalg.norm(r):.3g} top1 {(g.argmax(1)==r.argmax(1)).mean():.4f}")
PY
rm -f $OUT/*.f32
if [ -n "$MEMCHECK" ]; then
  timeout "$MEMCHECK" compute-sanitizer --tool memcheck --print-limit 20 bin/test_cuda_backend --gtest_filter="$MEMCHECK_FILTER" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|out of bounds|PASSED|FAILED" "$OUT/memcheck.log" | head -20
fi
