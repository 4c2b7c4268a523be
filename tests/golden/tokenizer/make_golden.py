#!/usr/bin/env python3
"""Golden data for the tokenizer and chat encoder, from HF `tokenizers` and `transformers`.

Run on a machine that has both (the GPU machine does):  python3 make_golden.py OUT_DIR
Writes OUT_DIR/expected.jsonl (per corpus text: HF ids, plain-text ids, decoded text),
OUT_DIR/chat_expected.jsonl (per conversation and add_generation_prompt: rendered text and ids), and
OUT_DIR/hf_speed.json (HF encode speed on one core over bench text built as in tests/unit/text).
"""
import json
import os
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import tokenizers  # noqa: E402
import transformers  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else here
os.makedirs(out, exist_ok=True)

tok = tokenizers.Tokenizer.from_file(os.path.join(here, "tokenizer.json"))
# Plain-text mode reference: the same tokenizer with no added tokens, so lookalikes are plain text.
spec = json.load(open(os.path.join(here, "tokenizer.json"), encoding="utf-8"))
spec["added_tokens"] = []
plain = tokenizers.Tokenizer.from_str(json.dumps(spec))

texts = [json.loads(line)["text"] for line in open(os.path.join(here, "corpus.jsonl"), encoding="utf-8")]
with open(os.path.join(out, "expected.jsonl"), "w", encoding="utf-8") as f:
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        f.write(json.dumps({
            "text": t,
            "ids": ids,
            "plain_ids": plain.encode(t, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        }, ensure_ascii=False) + "\n")

hf = transformers.AutoTokenizer.from_pretrained(here)
convs = json.load(open(os.path.join(here, "conversations.json"), encoding="utf-8"))
mismatch = 0
with open(os.path.join(out, "chat_expected.jsonl"), "w", encoding="utf-8") as f:
    for c in convs:
        for agp in (False, True):
            text = hf.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=agp)
            ids = tok.encode(text, add_special_tokens=False).ids
            hf_ids = hf.apply_chat_template(c["messages"], tokenize=True, add_generation_prompt=agp)
            if hasattr(hf_ids, "keys"):
                hf_ids = hf_ids["input_ids"]
            if list(hf_ids) != ids:
                mismatch += 1
            f.write(json.dumps({"name": c["name"], "add_generation_prompt": agp, "text": text, "ids": ids},
                               ensure_ascii=False) + "\n")
print(f"chat: transformers' tokenize=True differs from tokenizers on the rendered text in {mismatch} cases")

# Speed: the corpus joined by newlines, repeated to at least 4 MiB, encoded line by line on one thread.
base = "\n".join(texts)
reps = (4 * 1024 * 1024) // len(base.encode("utf-8")) + 1
lines = (base + "\n").split("\n") * reps
n_bytes = sum(len(line.encode("utf-8")) + 1 for line in lines)
best = None
for _ in range(3):
    t0 = time.perf_counter()
    n_tokens = sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines)
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
result = {"tokenizers": tokenizers.__version__, "bytes": n_bytes, "lines": len(lines), "tokens": n_tokens,
          "seconds": best, "tokens_per_s": n_tokens / best, "mb_per_s": n_bytes / best / 1e6,
          "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")}
json.dump(result, open(os.path.join(out, "hf_speed.json"), "w"), indent=1)
print(json.dumps(result))
