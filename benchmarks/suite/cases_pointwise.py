"""Suite entries whose kernels touch each element once: elementwise, activations, quantization,
the AdamW step, the transpose and the embedding gather. Memory-bound; GPU sizes of 16-64M elements."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.suite.case import Case, Tolerance, generator, randn
from benchmarks.suite.kernels import activation, elementwise, memory, quantize

EXACT = Tolerance(0, 0)
FLAT_GPU, FLAT_SMALL = (1 << 25,), (2085,)  # 2085 = 2 * 1024 + 37: a tail in every block size


def _one(dtype):
    def make(size, device, seed):
        return {"x": randn(size, dtype, generator(device, seed), scale=2.0)}
    return make


def _two(dtype, first="x", second="y"):
    def make(size, device, seed):
        gen = generator(device, seed)
        return {first: randn(size, dtype, gen), second: randn(size, dtype, gen)}
    return make


def _scale_bias_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"x": randn(size, torch.float16, gen), "bias": randn(size[-1:], torch.float16, gen), "scale": 1.7}


def _residual_inputs(size, device, seed):
    return {**_two(torch.bfloat16, "x", "residual")(size, device, seed), "alpha": 0.3}


def _adamw_inputs(size, device, seed):
    gen = generator(device, seed)
    return {"param": randn(size, torch.float32, gen), "grad": randn(size, torch.float32, gen, scale=0.1),
            "exp_avg": randn(size, torch.float32, gen, scale=0.01),
            "exp_avg_sq": randn(size, torch.float32, gen, scale=1e-3).abs(), "step": 10}


def _adamw_reference(inputs, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2):
    param, grad, m, v = (inputs[k].double() for k in ("param", "grad", "exp_avg", "exp_avg_sq"))
    step = inputs["step"]
    param = param * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    param = param - lr * (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps)
    return param, m, v


def _adamw_run(inputs):
    return elementwise.adamw_step(inputs["param"], inputs["grad"], inputs["exp_avg"], inputs["exp_avg_sq"],
                                  inputs["step"])


def _quantize_reference(inputs):
    x = inputs["x"].double()
    scale = x.abs().amax(dim=1).clamp_min(1e-8) / 127
    q = x / scale[:, None]
    return torch.trunc(q + 0.5 * torch.sign(q)), scale


def _dequantize_inputs(size, device, seed):
    gen = generator(device, seed)
    q = torch.randint(-127, 128, size, generator=gen, device=device, dtype=torch.int8)
    return {"q": q, "scale": torch.rand(size[:1], generator=gen, device=device) * 0.1}


def _embedding_inputs(size, device, seed):
    tokens, vocab, dim = size
    gen = generator(device, seed)
    return {"ids": torch.randint(0, vocab, (tokens,), generator=gen, device=device),
            "table": randn((vocab, dim), torch.float16, gen)}


CASES = [
    Case("vector_add", "elementwise", "vector add", "fp32", FLAT_GPU, FLAT_SMALL, "BLOCK_SIZE=1024",
         _two(torch.float32), lambda i: elementwise.add(i["x"], i["y"]),
         lambda i: i["x"].double() + i["y"].double(), kernel="add_kernel"),
    Case("scale_bias", "elementwise", "x * scale + bias[col]", "fp16", (8192, 4096), (37, 129), "BLOCK_SIZE=1024",
         _scale_bias_inputs, lambda i: elementwise.scale_bias(i["x"], i["bias"], i["scale"]),
         lambda i: i["x"].double() * i["scale"] + i["bias"].double(), kernel="scale_bias_kernel"),
    Case("residual_add_scale", "elementwise", "residual + alpha * x", "bf16", FLAT_GPU, FLAT_SMALL,
         "BLOCK_SIZE=512", _residual_inputs,
         lambda i: elementwise.residual_add_scale(i["x"], i["residual"], i["alpha"]),
         lambda i: i["residual"].double() + i["alpha"] * i["x"].double(), kernel="residual_add_scale_kernel"),
    Case("gelu_tanh", "activation", "GELU, tanh approximation", "fp32", FLAT_GPU, FLAT_SMALL, "BLOCK_SIZE=1024",
         _one(torch.float32), lambda i: activation.gelu_tanh(i["x"]),
         lambda i: F.gelu(i["x"].double(), approximate="tanh"), kernel="gelu_tanh_kernel"),
    Case("silu", "activation", "x * sigmoid(x)", "bf16", FLAT_GPU, FLAT_SMALL, "BLOCK_SIZE=512",
         _one(torch.bfloat16), lambda i: activation.silu(i["x"]), lambda i: F.silu(i["x"].double()),
         kernel="silu_kernel"),
    Case("swiglu", "activation", "silu(gate) * up", "fp16", (8192, 4096), (37, 129), "BLOCK_SIZE=1024",
         _two(torch.float16, "gate", "up"), lambda i: activation.swiglu(i["gate"], i["up"]),
         lambda i: F.silu(i["gate"].double()) * i["up"].double(), kernel="swiglu_kernel"),
    Case("leaky_relu", "activation", "leaky ReLU, slope 0.01", "fp16", FLAT_GPU, FLAT_SMALL, "BLOCK_SIZE=256",
         _one(torch.float16), lambda i: activation.leaky_relu(i["x"]),
         lambda i: F.leaky_relu(i["x"].double(), 0.01), kernel="leaky_relu_kernel"),
    Case("relu_squared", "activation", "relu(x) ** 2", "bf16", (1 << 24,), FLAT_SMALL, "BLOCK_SIZE=128",
         _one(torch.bfloat16), lambda i: activation.relu_squared(i["x"]),
         lambda i: F.relu(i["x"].double()) ** 2, kernel="relu_squared_kernel"),
    Case("quantize_int8", "quantize", "per-row absmax int8 quantization", "fp16 -> int8 + fp32 scale",
         (4096, 4096), (37, 129), "BLOCK_SIZE=next_pow2(n_cols)", _one(torch.float16),
         lambda i: quantize.quantize_int8(i["x"]), _quantize_reference, kernel="quantize_int8_kernel"),
    Case("dequantize_int8", "quantize", "int8 * per-row scale", "int8 + fp32 scale -> bf16", (4096, 4096),
         (37, 129), "BLOCK_SIZE=1024", _dequantize_inputs, lambda i: quantize.dequantize_int8(i["q"], i["scale"]),
         lambda i: i["q"].double() * i["scale"].double()[:, None], kernel="dequantize_int8_kernel"),
    Case("adamw_step", "other", "AdamW step, in place on param and moments", "fp32", (1 << 24,), FLAT_SMALL,
         "BLOCK_SIZE=1024", _adamw_inputs, _adamw_run, _adamw_reference, kernel="adamw_kernel"),
    Case("transpose", "other", "2D transpose, tiled", "fp32", (8192, 4096), (37, 129), "BLOCK_M=32, BLOCK_N=32",
         _one(torch.float32), lambda i: memory.transpose(i["x"]), lambda i: i["x"].double().t(), EXACT,
         kernel="transpose_kernel"),
    Case("embedding", "other", "embedding gather (tokens, vocab, dim)", "fp16 table, int64 ids",
         (32768, 50000, 1024), (19, 50, 300), "BLOCK_SIZE=256 (grid: tokens x dim blocks)", _embedding_inputs,
         lambda i: memory.embedding(i["ids"], i["table"]), lambda i: i["table"].double()[i["ids"]], EXACT,
         kernel="embedding_kernel"),
]
