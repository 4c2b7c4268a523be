#!/bin/bash
# Device-side A/B of whole prefill runs: one `deepinfer bench --no-decode` per argument, each under
# that DEEPINFER_OPTIONS setting ("key=value,..." of `deepinfer options`; "" for the defaults),
# printing the prefill rows. Wall-clock effects (host time of library calls, syncs) show here, not
# in --compare's op sums. Environment: AB_LENS (default 4096,8192), AB_BATCHES (default 1), AB_EXTRA
# (more bench flags), AB_BIN (the deepinfer binary; default the bundle's: another build's binary
# copied beside it A/Bs two trees). pack_for_device.sh puts it in the bundle folder; run there as
# `bash ab_on_device.sh "" "pdl=0"`.
source "$(dirname "$0")/device_env.sh"
i=0
for opt in "$@"; do
  i=$((i + 1))
  DEEPINFER_OPTIONS="$opt" timeout 150 "${AB_BIN:-bin/deepinfer}" bench --model "$PWD/v4-flash-4l.json" --dummy-weights --device cuda \
    --input-len "${AB_LENS:-4096,8192}" --no-decode --batch-sizes "${AB_BATCHES:-1}" --prefill-max-tokens 65536 --max-seconds 90 \
    --out "$OUT/ab_$i.md" $AB_EXTRA > /dev/null 2> "$OUT/ab_$i.err"
  echo "== ${AB_BIN:+$AB_BIN }[$opt] rc=$?"
  grep -E "^\| [0-9]+ \| [0-9]+ \|" "$OUT/ab_$i.md"
done
