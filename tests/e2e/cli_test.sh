#!/usr/bin/env bash
# End-to-end checks of the deepinfer command on the demo model: generate (seeded runs repeat, JSON
# events, structured output), chat, logits and perplexity; a bad flag fails cleanly.
set -euo pipefail
bin=$1
model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

a=$("$bin" generate --model "$model" --prompt "def f(x):" --seed 5 --max-tokens 20 --device cpu 2>/dev/null)
b=$("$bin" generate --model "$model" --prompt "def f(x):" --seed 5 --max-tokens 20 --device cpu 2>/dev/null)
[ "$a" = "$b" ] || fail "seeded generations differ"
[ "${a#def f(x):}" != "$a" ] || fail "the prompt is not echoed"

"$bin" generate --model "$model" --prompt "x" --seed 1 --max-tokens 4 --n 2 --json --logprobs 2 --device cpu >"$tmp/events" 2>/dev/null
[ "$(grep -c '"event":"finished"' "$tmp/events")" = 2 ] || fail "expected two finished events"
grep -q '"logprobs"' "$tmp/events" || fail "no logprobs in the JSON events"

out=$("$bin" generate --model "$model" --prompt "Date: " --no-echo --regex '[0-9]{4}-[0-9]{2}-[0-9]{2}' --seed 2 --device cpu 2>/dev/null)
[[ $out =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || fail "regex-constrained output: '$out'"

echo '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["n"], "additionalProperties": false}' >"$tmp/schema.json"
out=$("$bin" generate --model "$model" --prompt "JSON: " --no-echo --json-schema "$tmp/schema.json" --compact-json --seed 3 --device cpu 2>/dev/null)
[[ $out =~ ^\{\"n\":[1-9]\}$ ]] || fail "schema-constrained output: '$out'"

"$bin" chat --model "$model" --message "Hello" --message "Again" --max-tokens 8 --seed 1 --device cpu >/dev/null 2>&1 || fail "chat"

printf '1 2 3 4 5 6 7 8 9 10' >"$tmp/ids.txt"
"$bin" logits --model "$model" --ids-file "$tmp/ids.txt" --out "$tmp/logits.f32" --chunk 3 2>/dev/null
[ "$(stat -c %s "$tmp/logits.f32")" = $((10 * 4096 * 4)) ] || fail "logits file size"

head -c 20000 "$model/../demo_training/heldout.txt" >"$tmp/text.txt"
"$bin" perplexity --model "$model" --text-file "$tmp/text.txt" --window 128 2>/dev/null | grep -q "perplexity" || fail "perplexity"

if "$bin" generate --model "$model" --prompt x --top-p 2 --device cpu >/dev/null 2>"$tmp/err"; then fail "top_p=2 accepted"; fi
grep -q "top_p" "$tmp/err" || fail "the error does not name top_p"
if "$bin" generate --model "$tmp/missing" --prompt x >/dev/null 2>"$tmp/err"; then fail "missing model accepted"; fi
# Hostile input: devices are refused as input files (not read for ever), a thread count no system
# gives fails cleanly, and a model whose logits are NaN is an error (not a file of NaNs, exit 0).
if "$bin" generate --model "$model" --prompt-file /dev/zero --device cpu >/dev/null 2>"$tmp/err"; then fail "--prompt-file /dev/zero accepted"; fi
grep -q "character device" "$tmp/err" || fail "--prompt-file /dev/zero: $(cat "$tmp/err")"
if "$bin" logits --model "$model" --ids-file /dev/zero --out "$tmp/zero.f32" 2>"$tmp/err"; then fail "--ids-file /dev/zero accepted"; fi
grep -q "character device" "$tmp/err" || fail "--ids-file /dev/zero: $(cat "$tmp/err")"
if "$bin" generate --model "$model" --prompt x --threads 100000 --device cpu >/dev/null 2>"$tmp/err"; then fail "--threads 100000 accepted"; fi
grep -q "threads" "$tmp/err" || fail "--threads 100000: $(cat "$tmp/err")"
python3 - "$model" "$tmp/nan" <<'PY'
# A copy of the model whose final norm weights are NaN (each file a symlink except that shard).
import json, os, struct, sys
src, dst = sys.argv[1:]
os.mkdir(dst)
shard = json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]["model.norm.weight"]
for name in os.listdir(src):
    if name != shard:
        os.symlink(os.path.realpath(os.path.join(src, name)), os.path.join(dst, name))
data = bytearray(open(os.path.join(src, shard), "rb").read())
n = struct.unpack("<Q", data[:8])[0]
entry = json.loads(data[8:8 + n])["model.norm.weight"]
begin, end = (8 + n + o for o in entry["data_offsets"])
nan = b"\x00\x00\xc0\x7f" if entry["dtype"] == "F32" else b"\xc0\x7f"
data[begin:end] = nan * ((end - begin) // len(nan))
open(os.path.join(dst, shard), "wb").write(data)
PY
if "$bin" logits --model "$tmp/nan" --ids-file "$tmp/ids.txt" --out "$tmp/nan.f32" 2>"$tmp/err"; then fail "NaN logits written with exit 0"; fi
grep -q "the model produced" "$tmp/err" || fail "NaN logits: $(cat "$tmp/err")"
echo "cli tests passed"
