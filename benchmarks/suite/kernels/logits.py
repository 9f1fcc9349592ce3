"""Kernels on the LM head's logits (rows of vocabulary size, fp32), one row per program unless said.

``cross_entropy_fwd_bwd`` is Liger-Kernel's fused cross entropy: the target logit is read first,
then an online log-sum-exp pass, then a second pass overwrites the logits in place with the
gradient of the mean loss ((softmax - onehot) / n_non_ignore); a row whose target is ignore_index
(-100) zeroes its gradient and returns early. 1024-column blocks, looped over the row.

``temperature_softmax``: sampling probabilities softmax(logits / temperature[row]) in two looped
passes; the row's temperature is loaded again in every iteration (it never changes).

``argmax_sample``: greedy sampling, the first index of each row's maximum, looped in 1024-column
blocks with a running (value, index) pair; int64 token ids out.

``softcap``: Gemma 2's final-logit soft-capping, cap * tanh(x / cap), over the flattened logits in
tiny 64-element blocks (tanh through exp: the interpreter has no libdevice).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_bwd_kernel(X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, n_non_ignore, ignore_index,
                                 BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    y = tl.load(Y_ptr + program_id)
    X_ptr += program_id * X_stride
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        return
    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y).cast(tl.float32)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
        block_max = tl.max(X_block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
        X_block = tl.exp(X_block - m) / d / n_non_ignore
        X_block = tl.where(X_offsets != y, X_block, X_block - 1 / n_non_ignore)
        tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)
    tl.debug_barrier()
    loss = (m + tl.log(d) - ori_X_y) / n_non_ignore
    tl.store(loss_ptr + program_id, loss)


def cross_entropy_fwd_bwd(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100):
    """The mean loss and its gradient, written over ``logits``."""
    n_rows, n_cols = logits.shape
    loss_1d = torch.zeros(n_rows, dtype=torch.float32, device=logits.device)
    n_non_ignore = (target != ignore_index).sum().item()
    cross_entropy_fwd_bwd_kernel[(n_rows,)](logits, logits.stride(0), target, loss_1d, n_cols, n_non_ignore,
                                            ignore_index, BLOCK_SIZE=1024)
    return loss_1d.sum(), logits


@triton.jit
def temperature_softmax_kernel(logits_ptr, temperature_ptr, probs_ptr, row_stride, n_cols,
                               BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    logits_row = logits_ptr + row * row_stride
    m = float("-inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        temperature = tl.load(temperature_ptr + row)
        x = tl.load(logits_row + cols, mask=cols < n_cols, other=float("-inf")) / temperature
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        temperature = tl.load(temperature_ptr + row)
        x = tl.load(logits_row + cols, mask=mask, other=float("-inf")) / temperature
        tl.store(probs_ptr + row * row_stride + cols, tl.exp(x - m) / d, mask=mask)


def temperature_softmax(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    probs = torch.empty_like(logits)
    temperature_softmax_kernel[(n_rows,)](logits, temperature, probs, logits.stride(0), n_cols, BLOCK_SIZE=1024)
    return probs


@triton.jit
def argmax_sample_kernel(logits_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    best_val = float("-inf")
    best_idx = 0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_ptr + row * row_stride + cols, mask=cols < n_cols, other=float("-inf"))
        block_max = tl.max(x, axis=0)
        block_idx = tl.argmax(x, axis=0) + start
        take = block_max > best_val
        best_idx = tl.where(take, block_idx, best_idx)
        best_val = tl.where(take, block_max, best_val)
    tl.store(out_ptr + row, best_idx)


def argmax_sample(logits: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    out = torch.empty(n_rows, dtype=torch.int64, device=logits.device)
    argmax_sample_kernel[(n_rows,)](logits, out, logits.stride(0), n_cols, BLOCK_SIZE=1024)
    return out


@triton.jit
def softcap_kernel(x_ptr, out_ptr, n_elements, cap, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(x_ptr + offsets, mask=mask) / cap
    t = tl.exp(-2.0 * tl.abs(y))
    tanh = (1.0 - t) / (1.0 + t)
    tanh = tl.where(y >= 0, tanh, -tanh)
    tl.store(out_ptr + offsets, cap * tanh, mask=mask)


def softcap(x: torch.Tensor, cap: float = 30.0) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    softcap_kernel[(triton.cdiv(n_elements, 64),)](x, out, n_elements, cap, BLOCK_SIZE=64)
    return out
