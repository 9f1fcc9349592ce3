"""Training-step kernels: dropout, the embedding gradient, gradient clipping.

``dropout`` is the Triton tutorial's seeded dropout: keep x / (1 - p) where ``tl.rand(seed,
offset) > p``, zero elsewhere, 1024-element blocks (bf16). The mask depends only on (seed, offset),
so a Philox written in numpy reproduces it.

``embedding_bwd`` is Liger-Kernel's embedding backward: 64 tokens x 128 columns per program,
``tl.atomic_add`` of the output gradient into the rows of the weight gradient its token ids name
(fp32; tokens that share an id add in no fixed order).

``clip_grad_scale`` is the last step of clip_grad_norm_: every gradient element times min(1,
max_norm / norm), the coefficient read from device memory by every program (no host sync), in
place, in tiny 64-element blocks (fp32).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    output = torch.empty_like(x)
    n_elements = x.numel()
    dropout_kernel[(triton.cdiv(n_elements, 1024),)](x, output, n_elements, p, seed, BLOCK_SIZE=1024)
    return output


@triton.jit
def embedding_bwd_kernel(grad_output_ptr, grad_weight_ptr, indices_ptr, n_elements, embedding_dim: tl.constexpr,
                         BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offsets_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    mask_m = offsets_m < n_elements
    indices = tl.load(indices_ptr + offsets_m, mask=mask_m, other=0)
    offsets_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    mask_n = offsets_n < embedding_dim
    grad_output = tl.load(grad_output_ptr + offsets_m[:, None] * embedding_dim + offsets_n[None, :],
                          mask=mask_m[:, None] & mask_n[None, :], other=0.0)
    grad_weight_offsets = indices[:, None] * embedding_dim + offsets_n[None, :]
    tl.atomic_add(grad_weight_ptr + grad_weight_offsets, grad_output, mask=mask_m[:, None] & mask_n[None, :])


def embedding_bwd(grad_output: torch.Tensor, indices: torch.Tensor, num_embeddings: int) -> torch.Tensor:
    n_elements, embedding_dim = grad_output.shape
    grad_weight = torch.zeros((num_embeddings, embedding_dim), device=grad_output.device, dtype=torch.float32)
    grid = (triton.cdiv(n_elements, 64), triton.cdiv(embedding_dim, 128))
    embedding_bwd_kernel[grid](grad_output, grad_weight, indices, n_elements, embedding_dim=embedding_dim,
                               BLOCK_SIZE_M=64, BLOCK_SIZE_N=128)
    return grad_weight


@triton.jit
def clip_grad_scale_kernel(grad_ptr, clip_coef_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    clip_coef = tl.minimum(tl.load(clip_coef_ptr), 1.0)
    g = tl.load(grad_ptr + offsets, mask=mask)
    tl.store(grad_ptr + offsets, g * clip_coef, mask=mask)


def clip_grad_scale(grad: torch.Tensor, max_norm: float = 1.0) -> torch.Tensor:
    clip_coef = max_norm / (torch.linalg.vector_norm(grad) + 1e-6)
    n_elements = grad.numel()
    clip_grad_scale_kernel[(triton.cdiv(n_elements, 64),)](grad, clip_coef, n_elements, BLOCK_SIZE=64)
    return grad
