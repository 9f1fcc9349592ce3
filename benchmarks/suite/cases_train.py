"""Suite entries from LLM training code (Liger-Kernel, the Triton tutorials, accelerated-scan,
flash-linear-attention): RoPE, backward kernels, the fused cross entropy, dropout, the embedding
gradient, gradient clipping and scans.

Backward references take the forward's saved statistics (rstd, mean) as given, computed from the
inputs in fp32 as a forward kernel would have stored them, so only the backward is checked.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.suite.case import TOLERANCE, Case, Tolerance, generator, randn
from benchmarks.suite.kernels import mlp, norm_bwd, recurrence, rotary, training
from benchmarks.suite.kernels import logits as logits_kernels

ROWS_SMALL = (37, 129)
FLAT_GPU, FLAT_SMALL = (1 << 25,), (2085,)
# Weight gradients sum one term per row in fp32, in an order the kernel picks: about 1e-6 relative
# to the sum of |terms|, which is far above 1e-5 absolute where the terms cancel.
PARTIAL_SUMS = Tolerance(1e-3, 1e-4)
# The gradient of a mean loss has entries of order 1 / (rows * vocab), about 1e-8 at GPU sizes:
# the default fp32 atol (1e-5) would pass an all-zero gradient.
MEAN_GRAD = Tolerance(1e-10, 1e-4)


def _rope_inputs(size, device, seed):
    batch, seq, n_qh, n_kh, hd = size
    gen = generator(device, seed)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return {"q": randn((batch, seq, n_qh, hd), torch.bfloat16, gen), "k": randn((batch, seq, n_kh, hd), torch.bfloat16,
                                                                             gen),
            "cos": emb.cos(), "sin": emb.sin()}


def _rope_reference(inputs):
    cos, sin = inputs["cos"].double()[None, :, None, :], inputs["sin"].double()[None, :, None, :]

    def rotate(x):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin
    return rotate(inputs["q"].double()), rotate(inputs["k"].double())


def _rms_norm_bwd_inputs(size, device, seed):
    gen = generator(device, seed)
    x = randn(size, torch.bfloat16, gen)
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1) + 1e-6)
    return {"dy": randn(size, torch.bfloat16, gen), "x": x,
            "w": randn(size[-1:], torch.bfloat16, gen, scale=0.1, shift=1.0), "rstd": rstd}


def _rms_norm_bwd_reference(inputs):
    dy, x, w = (inputs[k].double() for k in ("dy", "x", "w"))
    rstd = inputs["rstd"].double()[:, None]
    m = dy * w
    dx = rstd * m - rstd ** 3 / x.shape[-1] * (m * x).sum(dim=-1, keepdim=True) * x
    return dx, (dy * x * rstd).sum(dim=0)


def _layer_norm_bwd_inputs(size, device, seed):
    gen = generator(device, seed)
    x = randn(size, torch.float16, gen, scale=2.0, shift=0.5)
    mean = x.float().mean(dim=-1)
    rstd = torch.rsqrt(x.float().var(dim=-1, unbiased=False) + 1e-5)
    return {"dy": randn(size, torch.float16, gen), "x": x, "w": randn(size[-1:], torch.float16, gen, scale=0.1,
                                                                       shift=1.0),
            "mean": mean, "rstd": rstd}


def _layer_norm_bwd_reference(inputs):
    dy, x, w = (inputs[k].double() for k in ("dy", "x", "w"))
    mean, rstd = inputs["mean"].double()[:, None], inputs["rstd"].double()[:, None]
    xhat = (x - mean) * rstd
    wdy = w * dy
    c1 = (xhat * wdy).mean(dim=-1, keepdim=True)
    c2 = wdy.mean(dim=-1, keepdim=True)
    return (wdy - (xhat * c1 + c2)) * rstd, (dy * xhat).sum(dim=0), dy.sum(dim=0)


def _swiglu_bwd_inputs(size, device, seed):
    gen = generator(device, seed)
    return {name: randn(size, torch.bfloat16, gen) for name in ("a", "b", "dc")}


def _swiglu_bwd_reference(inputs):
    a, b, dc = (inputs[k].double() for k in ("a", "b", "dc"))
    sig = torch.sigmoid(a)
    silu = a * sig
    return dc * (silu * (1 - sig) + sig) * b, dc * silu


def _cross_entropy_inputs(size, device, seed):
    gen = generator(device, seed)
    target = torch.randint(0, size[1], size[:1], generator=gen, device=device)
    target[1::8] = -100  # padding positions, ignored
    return {"logits": randn(size, torch.float32, gen, scale=3.0), "target": target}


def _cross_entropy_reference(inputs):
    logits, target = inputs["logits"].double(), inputs["target"]
    valid = target != -100
    loss = F.cross_entropy(logits, target, ignore_index=-100)
    grad = torch.softmax(logits, dim=-1)
    grad[valid, target[valid]] -= 1
    grad[~valid] = 0
    return loss, grad / int(valid.sum())


M32 = np.uint64(0xFFFFFFFF)


def philox_uniform(seed: int, n: int) -> np.ndarray:
    """``tl.rand(seed, offsets)`` for offsets 0..n-1, in numpy: Philox4x32-10 on (offset, 0, 0, 0)
    with key (seed low, seed high) as triton/language/random.py runs it, then its int32 -> [0, 1)
    mapping, in fp32 like the kernel."""
    c0, c1 = np.arange(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)
    c2, c3 = c1.copy(), c1.copy()
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    round_a, round_b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        prod_b, prod_a = round_b * c2, round_a * c0
        c0, c2 = (prod_b >> np.uint64(32)) ^ c1 ^ k0, (prod_a >> np.uint64(32)) ^ c3 ^ k1
        c1, c3 = prod_b & M32, prod_a & M32
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & M32, (k1 + np.uint64(0xBB67AE85)) & M32
    x = c0.astype(np.uint32).view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def _dropout_inputs(size, device, seed):
    return {"x": randn(size, torch.bfloat16, generator(device, seed)), "p": 0.1, "seed": 1234 + seed}


def _dropout_reference(inputs):
    x = inputs["x"]
    keep = torch.from_numpy(philox_uniform(inputs["seed"], x.numel()) > np.float32(inputs["p"])).to(x.device)
    return torch.where(keep.reshape(x.shape), x.double() / (1 - inputs["p"]), 0.0)


def _embedding_bwd_inputs(size, device, seed):
    tokens, vocab, dim = size
    gen = generator(device, seed)
    return {"grad_output": randn((tokens, dim), torch.float32, gen),
            "ids": torch.randint(0, vocab, (tokens,), generator=gen, device=device), "vocab": vocab}


def _embedding_bwd_reference(inputs):
    grad = inputs["grad_output"].double()
    weight = torch.zeros((inputs["vocab"], grad.shape[1]), dtype=torch.float64, device=grad.device)
    return weight.index_add_(0, inputs["ids"], grad)


def _clip_reference(inputs):
    grad = inputs["grad"].double()
    return grad * min(1.0, 1.0 / (float(torch.linalg.vector_norm(grad)) + 1e-6))


def _recurrence_inputs(size, device, seed):
    gen = generator(device, seed)
    a = 0.5 + 0.5 * torch.rand(size, generator=gen, device=device)
    return {"a": a, "x": randn(size, torch.float32, gen)}


def _recurrence_reference(inputs):
    a, x = inputs["a"].double(), inputs["x"].double()
    h = torch.empty_like(x)
    state = torch.zeros_like(x[:, 0])
    for t in range(x.shape[1]):
        state = a[:, t] * state + x[:, t]
        h[:, t] = state
    return h


def _gates_inputs(size, device, seed):
    return {"g": F.logsigmoid(randn(size, torch.float32, generator(device, seed)))}


def _chunk_cumsum_reference(inputs, chunk=64):
    g = inputs["g"].double()
    batch, T, heads = g.shape
    padded = F.pad(g, (0, 0, 0, -T % chunk))
    out = padded.reshape(batch, -1, chunk, heads).cumsum(dim=2).reshape(batch, -1, heads)
    return out[:, :T]


CASES = [
    Case("rope", "elementwise", "rotary embedding (neox) of q and k in place, all heads of a token per program",
         "bf16, fp32 cos/sin", (4, 2048, 32, 8, 128), (2, 19, 6, 2, 16),
         "pad_n_qh x pad_hd/2 tiles (next_pow2), grid: tokens", _rope_inputs,
         lambda i: rotary.rope(i["q"], i["k"], i["cos"], i["sin"]), _rope_reference, kernel="rope_kernel"),
    Case("rms_norm_bwd", "norm", "RMSNorm backward: dx, partial dW per program over its rows", "bf16, fp32 rstd",
         (8192, 4096), ROWS_SMALL, "BLOCK_SIZE=next_pow2(n_cols), grid: SMs, range loop over rows",
         _rms_norm_bwd_inputs, lambda i: norm_bwd.rms_norm_bwd(i["dy"], i["x"], i["w"], i["rstd"]),
         _rms_norm_bwd_reference, (TOLERANCE[torch.bfloat16], PARTIAL_SUMS), kernel="rms_norm_bwd_kernel"),
    Case("layer_norm_bwd", "norm", "LayerNorm backward: dx, dw/db partial rows under spin locks", "fp16, fp32 stats",
         (4096, 4096), (131, 1031), "BLOCK_SIZE_N=next_pow2(N), GROUP_SIZE_M=96..256", _layer_norm_bwd_inputs,
         lambda i: norm_bwd.layer_norm_bwd(i["dy"], i["x"], i["w"], i["mean"], i["rstd"]),
         _layer_norm_bwd_reference, (TOLERANCE[torch.float16], PARTIAL_SUMS, PARTIAL_SUMS),
         kernel="layer_norm_bwd_kernel"),
    Case("swiglu_bwd", "activation", "SwiGLU backward, da and db in place over a and b", "bf16", (8192, 4096),
         ROWS_SMALL, "BLOCK_SIZE=next_pow2(n_cols)", _swiglu_bwd_inputs,
         lambda i: mlp.swiglu_bwd(i["a"], i["b"], i["dc"]), _swiglu_bwd_reference, kernel="swiglu_bwd_kernel"),
    Case("cross_entropy_fwd_bwd", "other", "mean cross entropy and its gradient in place over the logits",
         "fp32 logits, int64 target", (4096, 32000), (7, 2100), "BLOCK_SIZE=1024, looped over the row twice",
         _cross_entropy_inputs, lambda i: logits_kernels.cross_entropy_fwd_bwd(i["logits"], i["target"]),
         _cross_entropy_reference, (TOLERANCE[torch.float32], MEAN_GRAD), kernel="cross_entropy_fwd_bwd_kernel"),
    Case("dropout", "elementwise", "seeded dropout, p = 0.1, Philox mask from (seed, offset)", "bf16", FLAT_GPU,
         FLAT_SMALL, "BLOCK_SIZE=1024", _dropout_inputs, lambda i: training.dropout(i["x"], i["p"], i["seed"]),
         _dropout_reference, kernel="dropout_kernel"),
    Case("embedding_bwd", "other", "embedding gradient, atomic_add into weight rows (tokens, vocab, dim)", "fp32",
         (32768, 32000, 1024), (75, 7, 300), "BLOCK_SIZE_M=64, BLOCK_SIZE_N=128", _embedding_bwd_inputs,
         lambda i: training.embedding_bwd(i["grad_output"], i["ids"], i["vocab"]), _embedding_bwd_reference,
         kernel="embedding_bwd_kernel"),
    Case("clip_grad_scale", "elementwise", "grad *= min(1, max_norm / norm), coefficient read from memory", "fp32",
         (1 << 24,), FLAT_SMALL, "BLOCK_SIZE=64", lambda size, device, seed: {"grad": randn(size, torch.float32,
                                                                                            generator(device, seed))},
         lambda i: training.clip_grad_scale(i["grad"]), _clip_reference, kernel="clip_grad_scale_kernel"),
    Case("linear_recurrence", "scan", "h[t] = a[t] * h[t-1] + x[t], tl.associative_scan", "fp32", (16384, 2048),
         (5, 129), "BLOCK_SIZE=next_pow2(T)", _recurrence_inputs,
         lambda i: recurrence.linear_recurrence(i["a"], i["x"]), _recurrence_reference,
         kernel="linear_recurrence_kernel"),
    Case("chunk_local_cumsum", "scan", "cumsum within 64-step chunks of (batch, T, heads) gates", "fp32",
         (8, 8192, 32), (2, 75, 3), "BT=64 (block pointers), grid: chunks x batch*heads", _gates_inputs,
         lambda i: recurrence.chunk_local_cumsum(i["g"]), _chunk_cumsum_reference, kernel="chunk_local_cumsum_kernel"),
]
