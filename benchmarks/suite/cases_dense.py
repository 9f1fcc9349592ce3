"""Suite entries built on ``tl.dot``: matmuls and attention, fp16 with fp32 accumulation.

Tolerances: products of fp16 values are exact in fp32, so the error is the fp32 accumulation
(~1e-4 absolute over K = 4096 terms of magnitude ~1) plus the fp16 rounding of the output
(4.9e-4 relative); attention also rounds P to fp16 before P @ V.
"""

from __future__ import annotations

import torch

from benchmarks.suite.case import Case, Tolerance, generator, randn
from benchmarks.suite.kernels import attention, matmul

MATMUL = Tolerance(2e-2, 2e-3)


def _matmul_inputs(size, device, seed):
    m, n, k = size
    gen = generator(device, seed)
    return {"a": randn((m, k), torch.float16, gen), "b": randn((k, n), torch.float16, gen),
            "bias": randn((n,), torch.float32, gen)}


def _bmm_inputs(size, device, seed):
    batch, m, n, k = size
    gen = generator(device, seed)
    return {"a": randn((batch, m, k), torch.float16, gen), "b": randn((batch, k, n), torch.float16, gen)}


def _attention_inputs(size, device, seed):
    gen = generator(device, seed)
    return {name: randn(size, torch.float16, gen) for name in ("q", "k", "v")}


def _attention_reference(inputs):
    q, k, v = (inputs[name].double() for name in ("q", "k", "v"))
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ v


CASES = [
    Case("matmul", "matmul", "C = A @ B", "fp16", (4096, 4096, 4096), (33, 47, 70),
         "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32", _matmul_inputs, lambda i: matmul.matmul(i["a"], i["b"]),
         lambda i: i["a"].double() @ i["b"].double(), MATMUL, kernel="matmul_kernel"),
    Case("matmul_bias_relu", "matmul", "relu(A @ B + bias)", "fp16, fp32 bias", (2048, 2048, 2048), (33, 47, 70),
         "BLOCK_M=32, BLOCK_N=32, BLOCK_K=32", _matmul_inputs,
         lambda i: matmul.matmul_bias_relu(i["a"], i["b"], i["bias"]),
         lambda i: torch.relu(i["a"].double() @ i["b"].double() + i["bias"].double()), MATMUL,
         kernel="matmul_bias_relu_kernel"),
    Case("bmm", "matmul", "batched C = A @ B (batch, M, N, K)", "fp16", (16, 1024, 1024, 1024), (3, 33, 47, 70),
         "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32", _bmm_inputs, lambda i: matmul.bmm(i["a"], i["b"]),
         lambda i: i["a"].double() @ i["b"].double(), MATMUL, kernel="bmm_kernel"),
    Case("attention", "attention", "softmax(Q K^T / sqrt(d)) V, non-causal (B*H, seq, d)", "fp16", (32, 1024, 64),
         (3, 75, 16), "BLOCK_M=64, BLOCK_N=64", _attention_inputs,
         lambda i: attention.attention(i["q"], i["k"], i["v"]), _attention_reference, Tolerance(1e-2, 1e-2),
         kernel="attention_fwd_kernel"),
]
