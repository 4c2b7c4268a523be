#!/usr/bin/env python3
"""Reference fixtures for the CPU forward: small random DeepSeek-V4 checkpoints and HF's fp32 logits.

Run where PyTorch and HF transformers (with `deepseek_v4`) are installed (the GPU machine has both;
the reference itself runs on the CPU in fp32, so no TF32 or kernel nondeterminism enters it):

    python3 make_fixtures.py OUT_DIR [DEBUG_DIR]

For each fixture OUT_DIR/<name>/ holds the checkpoint directory exactly as the engine loads it, the
token ids (ids.txt), HF's logits for every position (logits.f32: little-endian float32, row-major
[n_tokens x vocab]) and meta.json (config summary, the smallest top-k margins, HF's own chunked vs
full agreement). DEBUG_DIR (optional) receives per-layer residual streams of the first fixture.

Every parameter is randomised, including those HF initialises to zero or one (sinks, position
biases, mHC bases and scales, router bias, tid2eid). A fixture whose indexer or router top-k is
ambiguous (k-th and (k+1)-th visible scores closer than 1e-5) is rejected and re-drawn.
"""
import copy
import json
import math
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf_v4

MARGIN = 1e-5

FIXTURES = [
    {
        # Every layer type, hash + learned routing, hc_mult 4, YaRN on the compressed layers, fp32 storage.
        "name": "hc4_yarn_f32",
        "n_tokens": 288,
        "config": dict(
            vocab_size=384, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=5,
            num_attention_heads=4, head_dim=32, q_lora_rank=32, partial_rotary_factor=0.5,
            num_experts_per_tok=2, n_routed_experts=8, routed_scaling_factor=1.5,
            layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                         "compressed_sparse_attention", "heavily_compressed_attention"],
            mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
            hc_mult=4, hc_sinkhorn_iters=20, sliding_window=8, o_groups=2, o_lora_rank=16,
            index_n_heads=8, index_head_dim=16, index_topk=6, swiglu_limit=2.0,
            max_position_embeddings=4096,
            rope_parameters={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512,
                             "beta_fast": 32, "beta_slow": 1},
        ),
        "storage": "f32",
    },
    {
        # hc_mult 2, plain RoPE, bf16 linears, sharded files, legacy config keys (compress_ratios,
        # compress_rate_csa/hca, num_hash_layers, qk_rope_head_dim) that HF folds at load.
        "name": "hc2_plain_bf16_sharded",
        "n_tokens": 256,
        "config": dict(
            vocab_size=320, hidden_size=48, moe_intermediate_size=24, num_hidden_layers=4,
            num_attention_heads=2, head_dim=64, q_lora_rank=24, partial_rotary_factor=0.25,
            num_experts_per_tok=3, n_routed_experts=6, routed_scaling_factor=2.5,
            layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention",
                         "compressed_sparse_attention"],
            mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 8},
            hc_mult=2, hc_sinkhorn_iters=6, sliding_window=16, o_groups=2, o_lora_rank=12,
            index_n_heads=8, index_head_dim=24, index_topk=8, swiglu_limit=3.0,
            max_position_embeddings=2048,
        ),
        "storage": "bf16",
        "legacy_config": True,
        "max_shard_size": "150KB",
    },
    {
        # DeepSeek's released storage: fp8-e4m3 linears with 128x128 block scales (UE8M0 `.scale`, and
        # float `weight_scale_inv` on the shared experts), MXFP4 routed experts, bf16 compressor /
        # indexer / router weights, f32 mHC and sinks; native names without the `model.` prefix;
        # legacy `rope_scaling` for YaRN.
        "name": "hc4_fp8_mxfp4_native",
        "n_tokens": 240,
        "config": dict(
            vocab_size=256, hidden_size=64, moe_intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=4, head_dim=32, q_lora_rank=32, partial_rotary_factor=0.5,
            num_experts_per_tok=2, n_routed_experts=4, routed_scaling_factor=1.5,
            layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention"],
            mlp_layer_types=["hash_moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
            hc_mult=4, hc_sinkhorn_iters=20, sliding_window=8, o_groups=2, o_lora_rank=16,
            index_n_heads=8, index_head_dim=16, index_topk=4, swiglu_limit=10.0,
            max_position_embeddings=4096,
            rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                             "beta_fast": 32, "beta_slow": 1},
        ),
        "storage": "fp8_mxfp4",
    },
]


# ---------------------------------------------------------------------------------------------
# Randomisation


def randomise(model, cfg, gen):
    """Draws every parameter and buffer the forward reads (not the rotary tables)."""
    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=gen) * std + mean)

    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if p.ndim == 2 and leaf in ("weight",):
                fan_in = p.shape[1]
                normal(p, 1.0 / math.sqrt(fan_in))
            elif leaf in ("gate_up_proj", "down_proj"):  # experts [E, out, in]
                normal(p, 1.0 / math.sqrt(p.shape[2]))
            elif leaf == "weight":  # RMSNorm weights
                normal(p, 0.2, 1.0)
            elif leaf == "sinks":
                normal(p, 1.0)
            elif leaf == "position_bias":
                normal(p, 0.5)
            elif leaf in ("fn", "hc_fn"):
                normal(p, 1.0 / math.sqrt(p.shape[1]))
            elif leaf in ("base", "hc_base"):
                normal(p, 0.5)
            elif leaf in ("scale", "hc_scale"):
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            else:
                raise RuntimeError(f"unhandled parameter {name}")
        for name, b in model.named_buffers():
            leaf = name.split(".")[-1]
            if leaf == "e_score_correction_bias":
                normal(b, 0.1)
            elif leaf == "tid2eid":
                rows = [torch.randperm(cfg.n_routed_experts, generator=gen)[: cfg.num_experts_per_tok]
                        for _ in range(b.shape[0])]
                b.copy_(torch.stack(rows))


def round_to(model, dtype):
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                p.copy_(p.to(dtype).float())


# ---------------------------------------------------------------------------------------------
# Top-k margins (reject ambiguous fixtures)


class MarginProbe:
    """Records the smallest gap between the k-th and (k+1)-th visible scores of indexers and routers
    during a full forward of one sequence (positions 0..S-1)."""

    def __init__(self, model, cfg):
        self.indexer_gap = math.inf
        self.router_gap = math.inf
        self.handles = []
        ratio = cfg.compress_rates["compressed_sparse_attention"]
        topk = cfg.index_topk
        for mod in model.modules():
            if isinstance(mod, hf_v4.DeepseekV4IndexerScorer):
                self.handles.append(mod.register_forward_hook(self._indexer_hook(ratio, topk)))
            if isinstance(mod, hf_v4.DeepseekV4TopKRouter):
                self.handles.append(mod.register_forward_hook(self._router_hook(mod)))

    def _indexer_hook(self, ratio, topk):
        def hook(mod, args, out):
            scores = out[0].float()  # [S, T]
            for t in range(scores.shape[0]):
                visible = (t + 1) // ratio
                if visible > topk:
                    s = scores[t, :visible].sort(descending=True).values
                    self.indexer_gap = min(self.indexer_gap, (s[topk - 1] - s[topk]).item())
        return hook

    def _router_hook(self, router):
        def hook(mod, args, out):
            logits = out[0].float()
            s = (router.score_fn(logits) + router.e_score_correction_bias).sort(dim=-1, descending=True).values
            k = router.top_k
            if s.shape[-1] > k:
                self.router_gap = min(self.router_gap, (s[:, k - 1] - s[:, k]).min().item())
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()


# ---------------------------------------------------------------------------------------------
# Quantisation to DeepSeek's released formats (the reference uses the dequantised values)

FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e8m0(scale):
    """Power-of-two scales as UE8M0 (F8_E8M0 where torch and safetensors have it, else raw exponent
    bytes as U8, which the engine also accepts)."""
    try:
        t = scale.to(torch.float8_e8m0fnu)
        with tempfile.TemporaryDirectory() as tmp:
            save_file({"probe": t}, os.path.join(tmp, "probe.safetensors"))
        return t
    except Exception:  # noqa: BLE001 - any missing support falls back to raw bytes
        return (torch.log2(scale).round() + 127).to(torch.uint8)


def quant_fp8_block(w, block=128):
    n, k = w.shape
    rb, cb = math.ceil(n / block), math.ceil(k / block)
    scale = torch.empty(rb, cb)
    for i in range(rb):
        for j in range(cb):
            blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            amax = blk.abs().max().clamp(min=1e-12).item()
            scale[i, j] = 2.0 ** math.ceil(math.log2(amax / 448.0))
    full = scale.repeat_interleave(block, 0)[:n].repeat_interleave(block, 1)[:, :k]
    q = (w / full).to(torch.float8_e4m3fn)
    return q, scale, q.float() * full


def quant_mxfp4(w, group=32):
    n, k = w.shape
    assert k % group == 0
    blocks = w.view(n, k // group, group)
    amax = blocks.abs().amax(-1).clamp(min=1e-12)
    scale = torch.pow(2.0, torch.ceil(torch.log2(amax / 6.0)))
    x = blocks / scale[..., None]
    idx = (x.abs()[..., None] - FP4_VALUES).abs().argmin(-1)
    codes = (idx | ((x < 0).to(torch.long) << 3)).view(n, k).to(torch.uint8)
    deq = (torch.where(x < 0, -1.0, 1.0) * FP4_VALUES[idx] * scale[..., None]).view(n, k)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # low nibble = even column
    return packed.view(torch.int8), scale, deq


def to_native(name):
    """save_pretrained's names -> DeepSeek's released names (no prefix, kv_norm, embed, hc_head_*)."""
    if name.startswith("model."):
        name = name[len("model."):]
    name = {"embed_tokens.weight": "embed.weight", "hc_head.hc_fn": "hc_head_fn",
            "hc_head.hc_base": "hc_head_base", "hc_head.hc_scale": "hc_head_scale"}.get(name, name)
    return name.replace(".attn.norm.weight", ".attn.kv_norm.weight")


FP8_LINEARS = (".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight", ".attn.wo_a.weight",
               ".attn.wo_b.weight", ".attn.indexer.wq_b.weight")
FP8_SCALE_INV = (".ffn.shared_experts.w1.weight", ".ffn.shared_experts.w2.weight", ".ffn.shared_experts.w3.weight")
BF16_NAMES = ("embed.weight", "head.weight", ".compressor.wkv.weight", ".compressor.wgate.weight",
              ".indexer.weights_proj.weight", ".ffn.gate.weight", "norm.weight")


def write_quantised(saved, out_dir):
    """Writes the native quantised checkpoint; returns the dequantised state in save_pretrained naming."""
    stored, dequant = {}, {}
    for name, t in saved.items():
        native = to_native(name)
        if native.endswith(FP8_LINEARS) or native.endswith(FP8_SCALE_INV):
            q, scale, deq = quant_fp8_block(t.float())
            stored[native] = q
            base = native[: -len(".weight")]
            if native.endswith(FP8_SCALE_INV):
                stored[base + ".weight_scale_inv"] = scale
            else:
                stored[base + ".scale"] = e8m0(scale)
            dequant[name] = deq
        elif ".ffn.experts." in native:
            q, scale, deq = quant_mxfp4(t.float())
            stored[native] = q
            stored[native[: -len(".weight")] + ".scale"] = e8m0(scale)
            dequant[name] = deq
        elif native.endswith(BF16_NAMES):
            b = t.to(torch.bfloat16)
            stored[native] = b
            dequant[name] = b.float()
        else:
            stored[native] = t.contiguous()
            dequant[name] = t
    save_file({k: v.contiguous() for k, v in stored.items()}, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})
    return dequant


# ---------------------------------------------------------------------------------------------


def legacy_config(path):
    """Rewrites config.json with the legacy keys HF folds at load."""
    c = json.load(open(path))
    ratio_of = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    c["compress_ratios"] = [ratio_of[t] for t in c.pop("layer_types")] + [0]  # + the MTP layer's entry
    rates = c.pop("compress_rates")
    c["compress_rate_csa"] = rates["compressed_sparse_attention"]
    c["compress_rate_hca"] = rates["heavily_compressed_attention"]
    c["num_hash_layers"] = c.pop("mlp_layer_types").count("hash_moe")
    c["qk_rope_head_dim"] = int(c["head_dim"] * c.pop("partial_rotary_factor"))
    c.pop("rope_parameters", None)
    json.dump(c, open(path, "w"), indent=2)


def rope_scaling_config(path):
    c = json.load(open(path))
    comp = c.pop("rope_parameters")["compress"]
    c["rope_scaling"] = {"type": comp["rope_type"], "factor": comp["factor"],
                         "original_max_position_embeddings": comp["original_max_position_embeddings"],
                         "beta_fast": comp["beta_fast"], "beta_slow": comp["beta_slow"]}
    json.dump(c, open(path, "w"), indent=2)


def hf_logits(model, ids, chunk=None):
    """Logits [S, V] of one sequence: one full forward, or chunks through HF's own cache."""
    with torch.no_grad():
        if chunk is None:
            return model(ids[None], use_cache=False).logits[0]
        cache = hf_v4.DynamicCache(config=model.config)
        parts = []
        for s in range(0, ids.shape[0], chunk):
            parts.append(model(ids[None, s:s + chunk], past_key_values=cache, use_cache=True).logits[0])
        return torch.cat(parts)


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def make_fixture(spec, out_root, debug_dir):
    name = spec["name"]
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for attempt in range(20):
        seed = 1000 * (FIXTURES.index(spec) + 1) + attempt
        gen = torch.Generator().manual_seed(seed)
        cfg = DeepseekV4Config(**spec["config"])
        model = DeepseekV4ForCausalLM(cfg).float().eval()
        randomise(model, cfg, gen)
        if spec["storage"] == "bf16":
            round_to(model, torch.bfloat16)
        ids = torch.randint(0, cfg.vocab_size, (spec["n_tokens"],), generator=gen)

        ckpt = os.path.join(out, "checkpoint")
        shutil.rmtree(ckpt, ignore_errors=True)
        if spec["storage"] == "fp8_mxfp4":
            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)
                saved = load_file(os.path.join(tmp, "model.safetensors"))
                os.makedirs(ckpt)
                for f in ("config.json", "generation_config.json"):
                    shutil.copy(os.path.join(tmp, f), ckpt)
                rope_scaling_config(os.path.join(ckpt, "config.json"))
                dequant = write_quantised(saved, ckpt)
                ref_dir = os.path.join(tmp, "dequantised")
                os.makedirs(ref_dir)
                shutil.copy(os.path.join(ckpt, "config.json"), ref_dir)
                save_file(dequant, os.path.join(ref_dir, "model.safetensors"), metadata={"format": "pt"})
                ref = DeepseekV4ForCausalLM.from_pretrained(ref_dir, dtype=torch.float32).eval()
        else:
            if spec["storage"] == "bf16":
                with torch.no_grad():
                    for mod in model.modules():
                        for pname, p in list(mod.named_parameters(recurse=False)):
                            if p.ndim >= 2:
                                p.data = p.data.to(torch.bfloat16)
            model.save_pretrained(ckpt, max_shard_size=spec.get("max_shard_size", "50GB"))
            if spec.get("legacy_config"):
                legacy_config(os.path.join(ckpt, "config.json"))
            ref = DeepseekV4ForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()

        probe = MarginProbe(ref, ref.config)
        full = hf_logits(ref, ids)
        probe.remove()
        print(f"{name} seed {seed}: indexer margin {probe.indexer_gap:.3g}, router margin {probe.router_gap:.3g}")
        if probe.indexer_gap >= MARGIN and probe.router_gap >= MARGIN:
            break
    else:
        raise RuntimeError(f"{name}: no unambiguous draw in 20 attempts")

    chunk7 = hf_logits(ref, ids, chunk=7)
    token = hf_logits(ref, ids, chunk=1)
    try:  # how far HF's own fp32 result is from fp64 (informative; some HF ops force fp32)
        fp32_vs_fp64 = rel(full.double(), hf_logits(copy.deepcopy(ref).double(), ids))
    except Exception as e:  # noqa: BLE001
        fp32_vs_fp64 = f"failed: {e}"
    c = ref.config
    rotary = ref.model.rotary_emb
    meta = {
        "name": name, "seed": seed, "n_tokens": int(ids.shape[0]), "vocab_size": ref.config.vocab_size,
        "storage": spec["storage"], "indexer_margin": probe.indexer_gap, "router_margin": probe.router_gap,
        "hf_chunk7_vs_full_rel": rel(chunk7, full), "hf_token_vs_full_rel": rel(token, full),
        "hf_chunk7_vs_full_max_abs": (chunk7 - full).abs().max().item(),
        "hf_token_vs_full_max_abs": (token - full).abs().max().item(),
        "hf_fp32_vs_fp64_rel": fp32_vs_fp64,
        "logits_abs_max": full.abs().max().item(),
        "torch": torch.__version__,
        "folded_config": {"layer_types": c.layer_types, "mlp_layer_types": c.mlp_layer_types,
                          "compress_rates": c.compress_rates, "partial_rotary_factor": c.partial_rotary_factor,
                          "qk_rope_head_dim": c.qk_rope_head_dim, "rope_parameters": c.rope_parameters},
        "inv_freq": {"main": rotary.main_inv_freq.tolist(), "compress": rotary.compress_inv_freq.tolist()},
    }
    print(json.dumps(meta))
    with open(os.path.join(out, "ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    full.float().numpy().astype("<f4").tofile(os.path.join(out, "logits.f32"))
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)

    if debug_dir:
        dump_debug(ref, ids, os.path.join(debug_dir, name))


def dump_debug(model, ids, out):
    """Per-layer residual streams [S, hc, D] and a few sublayer outputs, as raw float32 files."""
    os.makedirs(out, exist_ok=True)
    hooks = []

    def save(tag):
        def hook(mod, args, output):
            t = output[0] if isinstance(output, tuple) else output
            t.detach().float().contiguous().numpy().astype("<f4").tofile(os.path.join(out, tag + ".f32"))
        return hook

    m = model.model
    hooks.append(m.embed_tokens.register_forward_hook(save("embed")))
    for i, layer in enumerate(m.layers):
        hooks.append(layer.register_forward_hook(save(f"layer{i}")))
        hooks.append(layer.self_attn.register_forward_hook(save(f"layer{i}_attn")))
        hooks.append(layer.mlp.register_forward_hook(save(f"layer{i}_moe")))
    hooks.append(m.hc_head.register_forward_hook(save("hc_head")))
    with torch.no_grad():
        model(ids[None], use_cache=False)
    for h in hooks:
        h.remove()


def main():
    torch.set_num_threads(max(1, os.cpu_count() // 2))
    out_root = sys.argv[1]
    debug_dir = sys.argv[2] if len(sys.argv) > 2 else None
    for i, spec in enumerate(FIXTURES):
        make_fixture(spec, out_root, debug_dir if i == 0 else None)


if __name__ == "__main__":
    main()
