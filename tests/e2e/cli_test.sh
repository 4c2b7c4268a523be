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
echo "cli tests passed"
