"""Suite entries that work row by row or reduce: softmax, cross entropy, norms, reductions, scans.
GPU sizes of (4096, 4096)-ish; the looped kernels get rows longer than their 1024 block (small
sizes too, so the loop and its tail run under the interpreter)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.suite.case import Case, Tolerance, generator, randn
from benchmarks.suite.kernels import norm, reduction, scan, softmax

ONE_BLOCK = "BLOCK_SIZE=next_pow2(n_cols)"
LOOPED = "BLOCK_SIZE=1024, looped over the row"
ROWS_SMALL, LONG_SMALL = (37, 129), (5, 2500)


def _matrix(dtype, scale=1.0):
    def make(size, device, seed):
        return {"x": randn(size, dtype, generator(device, seed), scale=scale)}
    return make


def _cross_entropy_inputs(size, device, seed):
    gen = generator(device, seed)
    target = torch.randint(0, size[1], size[:1], generator=gen, device=device)
    return {"logits": randn(size, torch.float32, gen, scale=3.0), "target": target}


def _layer_norm_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"x": randn(size, torch.float16, gen, scale=2.0, shift=0.5),
            "weight": randn(size[-1:], torch.float16, gen, scale=0.1, shift=1.0),
            "bias": randn(size[-1:], torch.float16, gen, scale=0.1)}


def _rms_norm_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"x": randn(size, torch.bfloat16, gen), "weight": randn(size[-1:], torch.bfloat16, gen, scale=0.1,
                                                                    shift=1.0)}


def _mse_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"pred": randn(size, torch.float32, gen), "target": randn(size, torch.float32, gen)}


def _int_matrix(size, device, seed):
    return {"x": torch.randint(-100, 101, size, generator=generator(device, seed), device=device,
                               dtype=torch.int32)}


def _layer_norm_reference(inputs):
    x, w, b = (inputs[k].double() for k in ("x", "weight", "bias"))
    return F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5)


def _rms_norm_reference(inputs):
    x, w = inputs["x"].double(), inputs["weight"].double()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w


CASES = [
    Case("row_softmax", "softmax", "softmax over each row, one block", "fp32", (4096, 4096), ROWS_SMALL, ONE_BLOCK,
         _matrix(torch.float32, 3.0), lambda i: softmax.row_softmax(i["x"]),
         lambda i: torch.softmax(i["x"].double(), dim=-1), kernel="row_softmax_kernel"),
    Case("online_softmax", "softmax", "softmax over each row, online max/sum, 2 passes", "fp16", (4096, 8192),
         LONG_SMALL, LOOPED, _matrix(torch.float16, 3.0), lambda i: softmax.online_softmax(i["x"]),
         lambda i: torch.softmax(i["x"].double(), dim=-1), kernel="online_softmax_kernel"),
    Case("cross_entropy", "other", "cross-entropy loss per row, online log-sum-exp", "fp32 logits, int64 target",
         (4096, 32000), (7, 2100), LOOPED, _cross_entropy_inputs,
         lambda i: softmax.cross_entropy(i["logits"], i["target"]),
         lambda i: F.cross_entropy(i["logits"].double(), i["target"], reduction="none"),
         kernel="cross_entropy_kernel"),
    Case("layer_norm", "norm", "LayerNorm forward", "fp16", (4096, 4096), ROWS_SMALL, ONE_BLOCK, _layer_norm_inputs,
         lambda i: norm.layer_norm_fwd(i["x"], i["weight"], i["bias"]), _layer_norm_reference,
         kernel="layer_norm_fwd_kernel"),
    Case("rms_norm", "norm", "RMSNorm forward, two passes over the row", "bf16", (4096, 8192), LONG_SMALL, LOOPED,
         _rms_norm_inputs, lambda i: norm.rms_norm_fwd(i["x"], i["weight"]), _rms_norm_reference,
         kernel="rms_norm_fwd_kernel"),
    Case("l2_normalize", "norm", "x / max(norm(row), eps)", "fp32", (8192, 2048), ROWS_SMALL, ONE_BLOCK,
         _matrix(torch.float32), lambda i: norm.l2_normalize(i["x"]),
         lambda i: F.normalize(i["x"].double(), dim=-1), kernel="l2_normalize_kernel"),
    Case("row_sum", "reduction", "sum of each row", "fp32", (4096, 8192), LONG_SMALL, LOOPED,
         _matrix(torch.float32), lambda i: reduction.row_sum(i["x"]), lambda i: i["x"].double().sum(dim=1),
         Tolerance(1e-4, 1e-4), kernel="row_sum_kernel"),
    Case("col_mean", "reduction", "mean of each column", "fp32", (8192, 4096), (75, 300),
         "BLOCK_M=32, BLOCK_N=128, looped over rows", _matrix(torch.float32), lambda i: reduction.col_mean(i["x"]),
         lambda i: i["x"].double().mean(dim=0), kernel="col_mean_kernel"),
    Case("max_abs", "reduction", "max abs(x) over the tensor, atomic_max of block maxima", "fp16 -> fp32",
         (1 << 25,), (2085,), "BLOCK_SIZE=1024", _matrix(torch.float16), lambda i: reduction.max_abs(i["x"]),
         lambda i: i["x"].double().abs().max().reshape(1), Tolerance(0, 0), kernel="max_abs_kernel"),
    Case("mse_loss", "reduction", "mean squared error, per-block partial sums", "fp32", (1 << 25,), (2085,),
         "BLOCK_SIZE=1024", _mse_inputs, lambda i: reduction.mse_loss(i["pred"], i["target"]),
         lambda i: (i["pred"].double() - i["target"].double()).pow(2).mean(), kernel="mse_partial_kernel"),
    Case("row_l2_norm", "reduction", "L2 norm of each row", "bf16 -> fp32", (8192, 4096), ROWS_SMALL, ONE_BLOCK,
         _matrix(torch.bfloat16), lambda i: reduction.row_l2_norm(i["x"]),
         lambda i: i["x"].double().norm(dim=1), kernel="row_l2_norm_kernel"),
    Case("cumsum_row", "scan", "inclusive prefix sum of each row, one block", "fp32", (4096, 4096), ROWS_SMALL,
         ONE_BLOCK, _matrix(torch.float32), lambda i: scan.cumsum_row(i["x"]),
         lambda i: i["x"].double().cumsum(dim=1), Tolerance(2e-3, 1e-4), kernel="cumsum_row_kernel"),
    Case("cumsum_looped", "scan", "inclusive prefix sum of long rows, carried across blocks", "int32",
         (256, 65536), (3, 2600), LOOPED, _int_matrix, lambda i: scan.cumsum_looped(i["x"]),
         lambda i: i["x"].long().cumsum(dim=1), kernel="cumsum_looped_kernel"),
]
