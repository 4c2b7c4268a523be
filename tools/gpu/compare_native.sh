#!/bin/bash
# Issue 32's CPU-vs-CUDA check of native weights, on a GPU machine in the bundle folder
# (pack_for_device.sh): a random V4-Flash-shaped model in DeepSeek's released formats
# (v4-flash-2l-32e.json through native_checkpoint: FP8 linears, MXFP4 experts) and the demo model
# quantized likewise, each run by the CPU backend (fp32 from the stored values) and by the CUDA backend
# with native_weights on and off; relative error and top-1 agreement against the CPU's logits. Then
# the quantized demo model's held-out perplexity with native weights.
source "$(dirname "$0")/device_env.sh"  # (before set -e: it probes for optional libraries)
set -euo pipefail
work=${WORK:-/tmp/compare_native}
mkdir -p "$work"
python3 -c "import random; random.seed(7); print(' '.join(str(random.randrange(2, 4096)) for _ in range(96)))" > "$work/ids.txt"
bin/native_checkpoint v4-flash-2l-32e.json "$work/v4" > /dev/null
bin/native_checkpoint --from ../models/demo "$work/demo" > /dev/null
for model in v4 demo; do
  vocab=$(python3 -c "import json; print(json.load(open('$work/$model/config.json'))['vocab_size'])")
  bin/deepinfer logits --model "$work/$model" --ids-file "$work/ids.txt" --out "$work/$model.cpu.f32" --device cpu 2> /dev/null
  for native in 1 0; do
    DEEPINFER_OPTIONS=native_weights=$native bin/deepinfer logits --model "$work/$model" --ids-file "$work/ids.txt" \
      --out "$work/$model.cuda$native.f32" --device cuda 2> /dev/null
    python3 compare_logits.py "$work/$model.cuda$native.f32" "$work/$model.cpu.f32" "$vocab" "$model: CUDA native_weights=$native vs CPU"
  done
done
for native in 1 0; do
  echo "demo (FP8 + MXFP4) perplexity, CUDA native_weights=$native:"
  DEEPINFER_OPTIONS=native_weights=$native bin/deepinfer perplexity --model "$work/demo" \
    --text-file ../models/demo_training/heldout.txt --device cuda 2>&1 | tail -2
done
