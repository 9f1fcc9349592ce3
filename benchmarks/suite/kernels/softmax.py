"""Row softmax kernels, one row per program, default warps.

``row_softmax`` is the Triton tutorial's: the whole row in one block, BLOCK_SIZE =
next_power_of_2(n_cols) (fp32). ``online_softmax`` streams the row in fixed 1024-column blocks,
keeping a running max and sum, then writes in a second pass (fp16 in and out, fp32 math).
``cross_entropy`` uses the same online log-sum-exp over the vocabulary (fp32 logits, int64
targets, one loss per row), as Liger-Kernel writes it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                       BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, softmax_output, mask=mask)


def row_softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    y = torch.empty_like(x)
    row_softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return y


@triton.jit
def online_softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    in_row = in_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    m = float("-inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / d
        tl.store(out_row + cols, y.to(tl.float16), mask=mask)


def online_softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    online_softmax_kernel[(n_rows,)](y, x, x.stride(0), n_cols, BLOCK_SIZE=1024)
    return y


@triton.jit
def cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    logits_row = logits_ptr + row * row_stride
    target = tl.load(target_ptr + row)
    m = float("-inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        block_max = tl.max(x, axis=0)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    target_logit = tl.load(logits_row + target).to(tl.float32)
    loss = m + tl.log(d) - target_logit
    tl.store(loss_ptr + row, loss)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-row loss, like ``F.cross_entropy(logits, target, reduction="none")``."""
    n_rows, n_cols = logits.shape
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    cross_entropy_kernel[(n_rows,)](logits, target, loss, logits.stride(0), n_cols, BLOCK_SIZE=1024)
    return loss
