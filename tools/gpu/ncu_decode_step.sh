#!/bin/bash
# Device-side: per-kernel times of eager batch-1 decode steps of V4-Flash-4L under Nsight Compute
# (caches and clocks left as they are; kernels serialized, so programmatic dependent launch overlaps
# nothing here). pack_for_device.sh puts this script and ncu_step_table.py in the bundle folder. COUNT:
# kernels profiled (>= two steps after the model's weight fills and the ceiling measurements; 1000
# holds ~9 steps).
# DETAIL=<kernel name regex> instead profiles the first DETAIL_COUNT (default 2) matching kernels of
# the decode steps with ncu's speed-of-light, memory, warp-state and occupancy sections.
# SOURCE=1 (with DETAIL) also keeps the report and writes its per-SASS-instruction samples
# (warp stalls by instruction) as ncu_<tag>_sass.csv.
# PREFILL=<tokens> profiles eager prefill forwards of that many tokens instead of decode steps;
# PREFILL_CONTEXT=<tokens> (a multiple of 8192) prefills that long a prompt in 8192-token chunks, and
# DETAIL_SKIP=<n> skips the first n matching kernels: e.g. PREFILL=8192 PREFILL_CONTEXT=32768
# DETAIL='indexer_scores|topk' with DETAIL_SKIP = 3 x (matches a chunk) reaches the 4th chunk
# (positions 24576..32767) of the first warm-up prompt (count a chunk's matches first).
source "$(dirname "$0")/device_env.sh"
NCU=$(command -v ncu || ls "$CUDA_HOME"/bin/ncu 2>/dev/null)
BENCH=(bin/deepinfer bench --model "$PWD/v4-flash-4l.json" --dummy-weights --device cuda --input-len "${INPUT_LEN:-4096}" --output-len 2
       --batch-sizes 1 --no-prefill --no-graphs --max-seconds 60 --out "$OUT/ncu_bench.md")
[ -n "$PREFILL" ] && BENCH=(bin/deepinfer bench --model "$PWD/v4-flash-4l.json" --dummy-weights --device cuda
                           --input-len "${PREFILL_CONTEXT:-$PREFILL}" --prefill-chunk "$PREFILL" --batch-sizes 1 --no-decode
                           --prefill-max-tokens "${PREFILL_CONTEXT:-$PREFILL}" --max-seconds 60 --out "$OUT/ncu_bench.md")
if [ -n "$DETAIL" ]; then
  tag=$(echo "$DETAIL" | tr -c 'a-zA-Z0-9_\n' '_')
  timeout 300 $NCU --cache-control none --clock-control none -k "regex:$DETAIL" --launch-skip "${DETAIL_SKIP:-0}" --launch-count "${DETAIL_COUNT:-2}" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    ${SOURCE:+--section SourceCounters -o "$OUT/ncu_$tag"} \
    "${BENCH[@]}" > "$OUT/ncu_$tag.txt" 2> "$OUT/ncu_$tag.err"
  echo "ncu rc=$?"
  if [ -n "$SOURCE" ]; then
    $NCU -i "$OUT/ncu_$tag.ncu-rep" --page details > "$OUT/ncu_$tag.txt" 2>&1
    $NCU -i "$OUT/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${tag}_sass.csv" 2> "$OUT/ncu_${tag}_sass.err"
    echo "sass rc=$? $(wc -l < "$OUT/ncu_${tag}_sass.csv") lines"
    python3 ncu_sass_top.py "$OUT/ncu_${tag}_sass.csv" 40
    rm -f "$OUT/ncu_$tag.ncu-rep"  # (large; the tables above are what is read)
  fi
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Block Size|Grid Size" \
    "$OUT/ncu_$tag.txt" | head -60
  exit 0
fi
timeout 300 $NCU --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv --launch-count ${COUNT:-1000} \
  "${BENCH[@]}" > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$?"
python3 ncu_step_table.py "$OUT/ncu.csv"
