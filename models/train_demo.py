#!/usr/bin/env python3
"""Trains DeepInfer's embedded demo model: a small DeepSeek-V4 on the Python standard library.

Run on a machine with one GPU, PyTorch and HF transformers (with `deepseek_v4`) and `tokenizers`:

    python3 train_demo.py OUT_DIR [TRAIN_SECONDS]

Writes OUT_DIR/demo/ (the checkpoint as the engine loads it: config.json, model.safetensors in bf16,
generation_config.json, tokenizer.json, tokenizer_config.json) and OUT_DIR/training/ (train_log.csv:
the loss curve; heldout.txt: held-out text; eval.json: PyTorch's held-out perplexity on it, measured
with the saved bf16 weights in fp32, and greedy samples for a few prompts).

Corpus: the .py files of the standard library installed on that machine (no download), split into
train / held-out by file, plus up to 60 MB of the installed packages' Python source for training. Tokenizer: byte-level BPE trained with HF `tokenizers` using DeepSeek's
pre-tokenizer, plus DeepSeek's control tokens (bos=0, eos=1, pad=2 as in DeepSeek's vocabulary).
Model: every architectural feature on (mHC, sliding window, CSA with indexer, HCA, hash and learned MoE).
"""
import glob
import hashlib
import json
import math
import os
import random
import sys
import sysconfig
import time

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = sys.argv[1]
TRAIN_SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 420.0
SEQ = 512
BATCH = 32
VOCAB = 4096
EVAL_TOKENS = 32768
MAX_TRAIN_BYTES = 60_000_000
PROMPTS = ["def fibonacci(n):", "import os\n\n\ndef ", "class Stack:\n    def __init__(self):", "# Sort a list"]

t_start = time.time()
torch.manual_seed(0)
random.seed(0)
dev = "cuda"
demo_dir = os.path.join(OUT, "demo")
log_dir = os.path.join(OUT, "training")
os.makedirs(demo_dir, exist_ok=True)
os.makedirs(log_dir, exist_ok=True)


def log(msg):
    print(f"[{time.time() - t_start:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------- corpus
# The standard library, plus the installed packages' Python source for more (held out: stdlib only).
stdlib = sysconfig.get_paths()["stdlib"]
purelib = sysconfig.get_paths()["purelib"]


def python_files(root, exclude):
    return sorted(f for f in glob.glob(os.path.join(root, "**", "*.py"), recursive=True)
                  if not any(x in f for x in exclude) and os.path.getsize(f) < 400_000)


def read(f):
    try:
        return open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        return None


train_text, heldout_text = [], []
for f in python_files(stdlib, ("site-packages", "dist-packages", "/test", "/idlelib/")):
    text = read(f)
    if text is None:
        continue
    bucket = int(hashlib.sha1(os.path.relpath(f, stdlib).encode()).hexdigest(), 16) % 20
    (heldout_text if bucket == 0 else train_text).append(text)
extra = python_files(purelib, ("/test", "/tests/", "_test.py", "/testing/", "/_vendor/"))
random.Random(1).shuffle(extra)
budget = MAX_TRAIN_BYTES - sum(map(len, train_text))
for f in extra:
    text = read(f)
    if text is None or len(text) > budget:
        continue
    train_text.append(text)
    budget -= len(text)
log(f"corpus: {stdlib} + {purelib}: {len(train_text)} train files ({sum(map(len, train_text)) / 1e6:.1f} MB), "
    f"{len(heldout_text)} held-out files")

# ---------------------------------------------------------------------------- tokenizer
ds = json.load(open(os.path.join(REPO, "tests/golden/tokenizer/tokenizer.json"), encoding="utf-8"))
ds_config = json.load(open(os.path.join(REPO, "tests/golden/tokenizer/tokenizer_config.json"), encoding="utf-8"))
control = [t["content"] for t in sorted(ds["added_tokens"], key=lambda t: t["id"])
           if "place▁holder" not in t["content"]]
assert control[:3] == ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"], control[:3]

tok = Tokenizer(models.BPE())
splits = [s for s in ds["pre_tokenizer"]["pretokenizers"] if s["type"] == "Split"]
tok.pre_tokenizer = pre_tokenizers.Sequence(
    [pre_tokenizers.Split(Regex(s["pattern"]["Regex"]), behavior="isolated") for s in splits]
    + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=control, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(train_text, trainer)
tok.save(os.path.join(demo_dir, "tokenizer.json"))
tok_config = {k: ds_config[k] for k in ("bos_token", "eos_token", "pad_token", "chat_template",
                                        "add_bos_token", "add_eos_token", "clean_up_tokenization_spaces")}
tok_config.update({"model_max_length": 2048, "tokenizer_class": "PreTrainedTokenizerFast"})
json.dump(tok_config, open(os.path.join(demo_dir, "tokenizer_config.json"), "w"), indent=2, ensure_ascii=False)
BOS, EOS = tok.token_to_id(control[0]), tok.token_to_id(control[1])
assert (BOS, EOS) == (0, 1)
vocab_size = tok.get_vocab_size()
log(f"tokenizer: {vocab_size} tokens ({len(control)} control)")


def encode_docs(texts):
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.append(BOS)
        ids.extend(enc.ids)
        ids.append(EOS)
    return torch.tensor(ids, dtype=torch.long)


train_ids = encode_docs(train_text)
log(f"train tokens: {train_ids.numel() / 1e6:.2f} M")

# Held-out text for the perplexity check: whole held-out files until EVAL_TOKENS tokens; the engine's
# `deepinfer perplexity` reads the same file, tokenizes it as one text and uses the same windows.
heldout, n = [], 0
for text in heldout_text:
    heldout.append(text)
    n += len(tok.encode(text, add_special_tokens=False).ids)
    if n >= EVAL_TOKENS:
        break
heldout_str = "\n".join(heldout)
open(os.path.join(log_dir, "heldout.txt"), "w", encoding="utf-8").write(heldout_str)

# ---------------------------------------------------------------------------- model
config = DeepseekV4Config(
    vocab_size=vocab_size, hidden_size=256, moe_intermediate_size=128, num_hidden_layers=6,
    num_attention_heads=4, head_dim=64, q_lora_rank=128, partial_rotary_factor=0.5,
    num_experts_per_tok=2, n_routed_experts=8, n_shared_experts=1, routed_scaling_factor=1.5,
    layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention",
                 "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"],
    mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe", "moe", "moe"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 32},
    hc_mult=4, hc_sinkhorn_iters=20, sliding_window=64, o_groups=2, o_lora_rank=128,
    index_n_heads=4, index_head_dim=32, index_topk=16, swiglu_limit=10.0,
    max_position_embeddings=2048, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=2,
    router_aux_loss_coef=0.01, output_router_logits=True, tie_word_embeddings=False,
)
model = DeepseekV4ForCausalLM(config)
with torch.no_grad():  # hash routing: a frozen random token -> experts table (HF initialises it to zeros)
    for layer in model.model.layers:
        gate = layer.mlp.gate
        if hasattr(gate, "tid2eid"):
            g = torch.Generator().manual_seed(7)
            gate.tid2eid.copy_(torch.stack([torch.randperm(config.n_routed_experts, generator=g)[:2]
                                            for _ in range(vocab_size)]))
n_params = sum(p.numel() for p in model.parameters())
log(f"model: {n_params / 1e6:.2f} M parameters ({2 * n_params / 1e6:.1f} MB in bf16)")
assert 2 * n_params < 19.5e6, "checkpoint would exceed the size budget"
model.to(dev).train()

opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)


def batch():
    starts = torch.randint(0, train_ids.numel() - SEQ - 1, (BATCH,))
    x = torch.stack([train_ids[s:s + SEQ] for s in starts]).to(dev)
    return x


def step(x, lr):
    for g in opt.param_groups:
        g["lr"] = lr
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(input_ids=x, labels=x, use_cache=False)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return out.loss.item()


log_rows = ["step,tokens,loss,lr,elapsed_s"]
warmup = 100
s, t_train = 0, time.time()
total_steps = None
while True:
    elapsed = time.time() - t_train
    if total_steps is None and s == 30:
        total_steps = int(30 * TRAIN_SECONDS / elapsed)
        log(f"{elapsed / 30:.3f} s/step -> {total_steps} steps")
    if total_steps is not None and s >= total_steps:
        break
    horizon = total_steps or 10 ** 9
    lr = 3e-3 * min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / horizon))))
    loss = step(batch(), lr)
    s += 1
    if s % 25 == 0 or s == 1:
        log_rows.append(f"{s},{s * BATCH * SEQ},{loss:.4f},{lr:.6f},{elapsed:.1f}")
        if s % 100 == 0 or s == 1:
            log(f"step {s} loss {loss:.4f} lr {lr:.2e}")
open(os.path.join(log_dir, "train_log.csv"), "w").write("\n".join(log_rows) + "\n")

# ---------------------------------------------------------------------------- save (bf16) + evaluate
model.config.output_router_logits = False
model.to(torch.bfloat16).save_pretrained(demo_dir, max_shard_size="10MB")  # files under 16 MB
with open(os.path.join(demo_dir, "generation_config.json"), "w") as f:
    json.dump({"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": 2, "do_sample": True,
               "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 128}, f, indent=2)
ref = DeepseekV4ForCausalLM.from_pretrained(demo_dir, dtype=torch.float32).to(dev).eval()

ids = tok.encode(heldout_str, add_special_tokens=False).ids
windows = [ids[i:i + SEQ] for i in range(0, len(ids) - SEQ + 1, SEQ)]
nll, count = 0.0, 0
with torch.no_grad():
    for w in windows:
        x = torch.tensor(w, device=dev)[None]
        logp = torch.log_softmax(ref(x, use_cache=False).logits[0, :-1].double(), -1)
        nll -= logp.gather(1, x[0, 1:, None]).sum().item()
        count += len(w) - 1
samples = {}
with torch.no_grad():
    for p in PROMPTS:
        x = torch.tensor(tok.encode(p, add_special_tokens=False).ids, device=dev)[None]
        y = ref.generate(x, max_new_tokens=64, do_sample=False)
        samples[p] = {"prompt_ids": x[0].tolist(), "greedy_ids": y[0, x.shape[1]:].tolist(),
                      "greedy_text": tok.decode(y[0, x.shape[1]:].tolist())}
result = {"heldout_tokens": len(ids), "windows": len(windows), "window": SEQ, "predicted_tokens": count,
          "nll_per_token": nll / count, "perplexity": math.exp(nll / count), "params": n_params,
          "train_steps": s, "train_tokens": s * BATCH * SEQ, "train_seconds": time.time() - t_train,
          "final_loss": float(log_rows[-1].split(",")[2]), "samples": samples,
          "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
json.dump(result, open(os.path.join(log_dir, "eval.json"), "w"), indent=1, ensure_ascii=False)
log(f"held-out perplexity {result['perplexity']:.3f} over {count} tokens")
for p, r in samples.items():
    log(f"{p!r} -> {r['greedy_text']!r}")
