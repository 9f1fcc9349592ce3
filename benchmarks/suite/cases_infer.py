"""Suite entries from LLM inference engines (vLLM, SGLang, LightLLM, DeepSeek-V3's kernels): RoPE
over cached positions, fused residual RMSNorm, activations, KV-cache writes, decode attention,
sampling, fine-grained quantization and the GEMV family of decode-time linear layers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.suite.case import Case, Tolerance, generator, randn
from benchmarks.suite.kernels import decode, gemv, kv_cache, mlp, norm_fused, quant_group, rotary
from benchmarks.suite.kernels import logits as logits_kernels

ROWS_SMALL = (37, 129)
EXACT = Tolerance(0, 0)
# Probabilities over a vocabulary are ~1/vocab: the default fp32 atol (1e-5) would pass zeros.
PROBS = Tolerance(1e-12, 1e-4)
# silu(gate) is rounded to fp16 before the product, which is rounded again: two roundings.
TWO_FP16_ROUNDINGS = Tolerance(2e-3, 2e-3)
DECODE = "(batch, heads, kv_heads, head_dim, max_seq)"


def _rope_heads_inputs(size, device, seed):
    tokens, n_q, n_k, hd, max_pos = size
    gen = generator(device, seed)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    freqs = torch.outer(torch.arange(max_pos, device=device, dtype=torch.float32), inv_freq)
    return {"positions": torch.randint(0, max_pos, (tokens,), generator=gen, device=device),
            "q": randn((tokens, n_q * hd), torch.float16, gen), "k": randn((tokens, n_k * hd), torch.float16, gen),
            "cos_sin_cache": torch.cat((freqs.cos(), freqs.sin()), dim=-1), "head_dim": hd}


def _rope_heads_reference(inputs):
    hd = inputs["head_dim"]
    cos, sin = inputs["cos_sin_cache"].double()[inputs["positions"]].chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]

    def rotate(x):
        x = x.double().reshape(x.shape[0], -1, hd)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).reshape(x.shape[0], -1)
    return rotate(inputs["q"]), rotate(inputs["k"])


def _rms_inputs(dtype, residual=False):
    def make(size, device, seed):
        gen = generator(device, seed)
        inputs = {"x": randn(size, dtype, gen), "weight": randn(size[-1:], dtype, gen, scale=0.1, shift=1.0)}
        if residual:
            inputs["residual"] = randn(size, dtype, gen)
        return inputs
    return make


def _rms(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def _fused_add_rms_reference(inputs):
    s = inputs["x"].double() + inputs["residual"].double()
    return _rms(s, inputs["weight"].double()), s


def _packed_inputs(size, device, seed):
    tokens, d = size
    return {"x": randn((tokens, 2 * d), torch.float16, generator(device, seed))}


def _silu_and_mul_reference(inputs):
    gate, up = inputs["x"].double().chunk(2, dim=-1)
    return F.silu(gate) * up


def _bias_gelu_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"x": randn(size, torch.float16, gen, scale=2.0), "bias": randn(size[-1:], torch.float16, gen)}


def _paged_cache_inputs(size, device, seed):
    tokens, heads, head_size, num_blocks, block_size = size
    gen = generator(device, seed)
    slots = torch.randperm(num_blocks * block_size, generator=gen, device=device)[:tokens]
    slots[3::7] = -1  # padding tokens: not written
    shape = (num_blocks, block_size, heads, head_size)
    return {"key": randn((tokens, heads, head_size), torch.bfloat16, gen),
            "value": randn((tokens, heads, head_size), torch.bfloat16, gen),
            "key_cache": randn(shape, torch.bfloat16, gen), "value_cache": randn(shape, torch.bfloat16, gen),
            "slot_mapping": slots}


def _paged_cache_reference(inputs):
    slots = inputs["slot_mapping"]
    written = slots >= 0
    caches = []
    for new, cache in (("key", "key_cache"), ("value", "value_cache")):
        out = inputs[cache].double().clone()
        flat = out.view(-1, *out.shape[2:])
        flat[slots[written]] = inputs[new][written].double()
        caches.append(out)
    return tuple(caches)


def _destindex_inputs(size, device, seed):
    tokens, heads, head_dim, cache_tokens = size
    gen = generator(device, seed)
    return {"k": randn((tokens, heads, head_dim), torch.float16, gen),
            "dest_loc": torch.randperm(cache_tokens, generator=gen, device=device)[:tokens],
            "out": randn((cache_tokens, heads, head_dim), torch.float16, gen)}


def _destindex_reference(inputs):
    out = inputs["out"].double().clone()
    out[inputs["dest_loc"]] = inputs["k"].double()
    return out


def _seq_lens(batch, max_seq, gen, device):
    lens = torch.randint(max_seq // 2, max_seq + 1, (batch,), generator=gen, device=device, dtype=torch.int32)
    lens[-1] = max_seq
    return lens


def _attend(q, keys, values):
    """softmax(q k^T / sqrt(d)) v for one sequence: q (heads, d), keys/values (len, kv_heads, d)."""
    group = q.shape[0] // keys.shape[1]
    keys, values = keys.double().repeat_interleave(group, dim=1), values.double().repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,lhd->hl", q.double(), keys) / q.shape[-1] ** 0.5
    return torch.einsum("hl,lhd->hd", torch.softmax(scores, dim=-1), values)


def _paged_decode_inputs(size, device, seed, block_size=16):
    batch, heads, kv_heads, hd, max_seq = size
    gen = generator(device, seed)
    lens = _seq_lens(batch, max_seq, gen, device)
    max_blocks = -(-max_seq // block_size)
    num_blocks = batch * max_blocks
    table = torch.randperm(num_blocks, generator=gen, device=device).to(torch.int32).reshape(batch, max_blocks)
    shape = (num_blocks, block_size, kv_heads, hd)
    return {"q": randn((batch, heads, hd), torch.float16, gen), "k_cache": randn(shape, torch.float16, gen),
            "v_cache": randn(shape, torch.float16, gen), "block_tables": table, "seq_lens": lens}


def _paged_decode_reference(inputs):
    block_size = inputs["k_cache"].shape[1]
    out = []
    for b, length in enumerate(inputs["seq_lens"].tolist()):
        blocks = inputs["block_tables"][b, :-(-length // block_size)].long()
        keys, values = (inputs[c][blocks].flatten(0, 1)[:length] for c in ("k_cache", "v_cache"))
        out.append(_attend(inputs["q"][b], keys, values))
    return torch.stack(out)


def _token_decode_inputs(size, device, seed):
    batch, heads, kv_heads, hd, max_seq = size
    gen = generator(device, seed)
    n_reqs = batch + 2
    cache_tokens = n_reqs * max_seq
    req_to_token = torch.randperm(cache_tokens, generator=gen, device=device).to(torch.int32).reshape(n_reqs,
                                                                                                   max_seq)
    return {"q": randn((batch, heads, hd), torch.float16, gen),
            "k_buffer": randn((cache_tokens, kv_heads, hd), torch.float16, gen),
            "v_buffer": randn((cache_tokens, kv_heads, hd), torch.float16, gen), "req_to_token": req_to_token,
            "b_req_idx": torch.randperm(n_reqs, generator=gen, device=device)[:batch].to(torch.int32),
            "b_seq_len": _seq_lens(batch, max_seq, gen, device)}


def _token_decode_reference(inputs):
    out = []
    for b, (req, length) in enumerate(zip(inputs["b_req_idx"].tolist(), inputs["b_seq_len"].tolist())):
        rows = inputs["req_to_token"][req, :length].long()
        out.append(_attend(inputs["q"][b], inputs["k_buffer"][rows], inputs["v_buffer"][rows]))
    return torch.stack(out)


def _temperature_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"logits": randn(size, torch.float32, gen, scale=5.0),
            "temperature": 0.5 + torch.rand(size[:1], generator=gen, device=device)}


def _logits_inputs(scale):
    def make(size, device, seed):
        return {"logits": randn(size, torch.float32, generator(device, seed), scale=scale)}
    return make


def _quant_group_reference(inputs, group=128):
    x = inputs["x"].double()
    groups = x.reshape(*x.shape[:-1], -1, group)
    scale = groups.abs().amax(dim=-1).clamp_min(1e-10) / 127
    q = groups / scale[..., None]
    return torch.trunc(q + 0.5 * torch.sign(q)).clamp(-127, 127).reshape(x.shape), scale


def _fp8_block_inputs(size, device, seed, block=128):
    gen = generator(device, seed)
    x = (torch.randn(size, generator=gen, device=device) * 100).clamp(-448, 448).to(torch.float8_e4m3fn)
    n_blocks = (-(-size[0] // block), -(-size[1] // block))
    return {"x": x, "s": 1e-3 + 1e-2 * torch.rand(n_blocks, generator=gen, device=device)}


def _fp8_block_reference(inputs, block=128):
    x = inputs["x"].float().double()
    s = inputs["s"].double().repeat_interleave(block, 0).repeat_interleave(block, 1)
    return x * s[:x.shape[0], :x.shape[1]]


def _gemv_inputs(size, device, seed):
    n, k = size
    gen = generator(device, seed)
    return {"w": randn((n, k), torch.float16, gen), "x": randn((k,), torch.float16, gen)}


def _w8a16_inputs(size, device, seed):
    n, k = size
    gen = generator(device, seed)
    return {"w": torch.randint(-127, 128, (n, k), generator=gen, device=device, dtype=torch.int8),
            "scale": 1e-3 + 1e-2 * torch.rand(n, generator=gen, device=device),
            "x": randn((k,), torch.float16, gen)}


def _bvm_inputs(size, device, seed):
    b, k, n = size
    gen = generator(device, seed)
    return {"x": randn((b, k), torch.float16, gen), "w": randn((k, n), torch.float16, gen)}


CASES = [
    Case("rope_heads_loop", "elementwise", "rotary embedding from a cos_sin_cache by position, loop over heads",
         "fp16 q/k, fp32 cache, int64 positions", (8192, 32, 8, 128, 8192), (37, 3, 1, 16, 64),
         "HEAD_DIM/2 per head, range loop over heads (cos/sin loaded in the loop)", _rope_heads_inputs,
         lambda i: rotary.rope_heads_loop(i["positions"], i["q"], i["k"], i["cos_sin_cache"], i["head_dim"]),
         _rope_heads_reference, kernel="rope_heads_loop_kernel"),
    Case("fused_add_rms_norm", "norm", "residual += x; x = RMSNorm(residual) * w, both in place", "bf16",
         (8192, 4096), ROWS_SMALL, "BLOCK_SIZE=next_pow2(n_cols)", _rms_inputs(torch.bfloat16, residual=True),
         lambda i: norm_fused.fused_add_rms_norm(i["x"], i["residual"], i["weight"]), _fused_add_rms_reference,
         kernel="fused_add_rms_norm_kernel"),
    Case("rms_norm_persistent", "norm", "RMSNorm, grid-stride loop over rows (tl.num_programs)", "fp16",
         (16384, 4096), ROWS_SMALL, "BLOCK_SIZE=next_pow2(n_cols), grid: 4 x SMs, weight loaded in the loop",
         _rms_inputs(torch.float16), lambda i: norm_fused.rms_norm_persistent(i["x"], i["weight"]),
         lambda i: _rms(i["x"].double(), i["weight"].double()), kernel="rms_norm_persistent_kernel"),
    Case("silu_and_mul", "activation", "silu(gate) * up from a packed (tokens, 2d) projection", "fp16",
         (8192, 11008), ROWS_SMALL, "BLOCK_M=128, BLOCK_N=128", _packed_inputs, lambda i: mlp.silu_and_mul(i["x"]),
         _silu_and_mul_reference, TWO_FP16_ROUNDINGS, kernel="silu_and_mul_kernel"),
    Case("bias_gelu", "activation", "GELU (erf) of x + bias[col], tiny blocks on a huge 1D grid", "fp16",
         (8192, 4096), ROWS_SMALL, "BLOCK_SIZE=128", _bias_gelu_inputs, lambda i: mlp.bias_gelu(i["x"], i["bias"]),
         lambda i: F.gelu(i["x"].double() + i["bias"].double()), kernel="bias_gelu_kernel"),
    Case("softcap", "elementwise", "cap * tanh(logits / cap), cap 30, tiny blocks on a huge 1D grid", "fp32",
         (2048, 32000), ROWS_SMALL, "BLOCK_SIZE=64", _logits_inputs(20.0), lambda i: logits_kernels.softcap(i["logits"]),
         lambda i: 30.0 * torch.tanh(i["logits"].double() / 30.0), kernel="softcap_kernel"),
    Case("reshape_and_cache", "other", "key/value into a paged KV cache by slot (-1: skip)",
         "bf16, int64 slots", (4096, 8, 128, 2048, 16), (37, 3, 16, 5, 16),
         "TILE_SIZE=min(2048, next_pow2(heads*head_size)), grid: tokens x tiles", _paged_cache_inputs,
         lambda i: kv_cache.reshape_and_cache(i["key"], i["value"], i["key_cache"], i["value_cache"],
                                              i["slot_mapping"]),
         _paged_cache_reference, EXACT, kernel="reshape_and_cache_kernel"),
    Case("destindex_copy_kv", "other", "k rows into a contiguous KV cache at destination indices", "fp16, int64 index",
         (16384, 8, 128, 65536), (37, 3, 16, 80), "BLOCK_HEAD=next_pow2(heads) x BLOCK_DMODEL=head_dim, grid: tokens",
         _destindex_inputs, lambda i: kv_cache.destindex_copy_kv(i["k"], i["dest_loc"], i["out"]),
         _destindex_reference, EXACT, kernel="destindex_copy_kv_kernel"),
    Case("paged_decode_attention", "attention", f"one query per head over a paged KV cache, GQA {DECODE}",
         "fp16, int32 block tables", (32, 32, 8, 128, 4096), (3, 4, 2, 16, 37),
         "BLOCK_SIZE=16 (page), range loop over pages", _paged_decode_inputs,
         lambda i: decode.paged_decode_attention(i["q"], i["k_cache"], i["v_cache"], i["block_tables"], i["seq_lens"]),
         _paged_decode_reference, kernel="paged_decode_attention_kernel"),
    Case("decode_attention", "attention", f"one query per head over a token-indexed KV cache, GQA {DECODE}",
         "fp16, int32 req_to_token", (32, 32, 8, 128, 4096), (3, 4, 2, 16, 75), "BLOCK_N=64, range loop over keys",
         _token_decode_inputs,
         lambda i: decode.decode_attention(i["q"], i["k_buffer"], i["v_buffer"], i["req_to_token"], i["b_req_idx"],
                                           i["b_seq_len"]),
         _token_decode_reference, kernel="decode_attention_kernel"),
    Case("temperature_softmax", "softmax", "softmax(logits / temperature[row]), two looped passes", "fp32",
         (256, 128256), (5, 2500), "BLOCK_SIZE=1024, looped (temperature loaded in the loop)", _temperature_inputs,
         lambda i: logits_kernels.temperature_softmax(i["logits"], i["temperature"]),
         lambda i: torch.softmax(i["logits"].double() / i["temperature"].double()[:, None], dim=-1), PROBS,
         kernel="temperature_softmax_kernel"),
    Case("argmax_sample", "reduction", "greedy sampling: first argmax of each row", "fp32 -> int64", (256, 128256),
         (5, 2500), "BLOCK_SIZE=1024, looped over the row", _logits_inputs(1.0),
         lambda i: logits_kernels.argmax_sample(i["logits"]), lambda i: i["logits"].double().argmax(dim=-1),
         kernel="argmax_sample_kernel"),
    Case("quantize_int8_group", "quantize", "int8 with one absmax scale per 128-value group, a program per group",
         "bf16 -> int8 + fp32 scales", (4096, 7168), (7, 384), "BLOCK=128 (group), grid: numel / 128",
         lambda size, device, seed: {"x": randn(size, torch.bfloat16, generator(device, seed), scale=2.0)},
         lambda i: quant_group.quantize_int8_group(i["x"]), _quant_group_reference,
         kernel="quantize_int8_group_kernel"),
    Case("dequantize_fp8_block", "quantize", "fp8 e4m3 weight * per-128x128-block scale", "fp8e4m3 + fp32 -> bf16",
         (4096, 14336), (150, 299), "BLOCK_SIZE=128 (2D grid of blocks)", _fp8_block_inputs,
         lambda i: quant_group.dequantize_fp8_block(i["x"], i["s"]), _fp8_block_reference,
         kernel="dequantize_fp8_block_kernel"),
    Case("gemv", "matmul", "y = W x, tl.sum(x[None, :] * w, axis=1) looped over K (N, K)", "fp16", (11008, 4096),
         ROWS_SMALL, "BLOCK_N=64, BLOCK_K=64", _gemv_inputs, lambda i: gemv.gemv(i["w"], i["x"]),
         lambda i: i["w"].double() @ i["x"].double(), kernel="gemv_kernel"),
    Case("gemv_w8a16", "matmul", "y = scale * (W x), int8 weight, per-row scale (N, K)", "int8 + fp32 scale, fp16 x",
         (11008, 4096), (37, 300), "BLOCK_N=64, BLOCK_K=128", _w8a16_inputs,
         lambda i: gemv.gemv_w8a16(i["w"], i["scale"], i["x"]),
         lambda i: i["scale"].double() * (i["w"].double() @ i["x"].double()), kernel="gemv_w8a16_kernel"),
    Case("batched_vecmat", "matmul", "Y = X W for a few rows, tl.sum(a[:, :, None] * b[None, :, :], axis=1) (B, K, N)",
         "fp16", (16, 4096, 4096), (5, 37, 70), "BLOCK_B=16, BLOCK_N=32, BLOCK_K=16", _bvm_inputs,
         lambda i: gemv.batched_vecmat(i["x"], i["w"]), lambda i: i["x"].double() @ i["w"].double(),
         kernel="batched_vecmat_kernel"),
]
