"""Rotary position embedding (RoPE, the "neox" rotate-half form), in place on q and k.

``rope``: Liger-Kernel's layout and tiling. q (batch, seq, heads, head_dim) and k (batch, seq,
kv_heads, head_dim), cos/sin (seq, head_dim) as Hugging Face builds them (both halves equal); one
program per token rotates all heads at once as [heads, head_dim / 2] tiles, padded to powers of
two (bf16 in and out, fp32 math).

``rope_heads_loop``: vLLM's layout: q and k flattened to (tokens, heads * head_dim), an int64
position per token and a cos_sin_cache (max_position, head_dim) holding cos in its first half and
sin in its second. One program per token loops over the heads with ``range`` and reads cos and sin
inside the loop, as vLLM's CUDA kernel reads them per head: those loads do not change across
iterations, but the loop also stores to q and k (fp16, fp32 math).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(q_ptr, q_row_stride, k_ptr, k_row_stride, cos_ptr, cos_row_stride, sin_ptr, sin_row_stride,
                seq_len, n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr, pad_n_qh: tl.constexpr,
                pad_n_kh: tl.constexpr, pad_hd: tl.constexpr):
    pid = tl.program_id(0)
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride
    cos_row = pid % seq_len
    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos = tl.load(cos_ptr + cos_row * cos_row_stride + cos_offsets, mask=cos_mask, other=0).to(tl.float32)
    sin = tl.load(sin_ptr + cos_row * sin_row_stride + cos_offsets, mask=cos_mask, other=0).to(tl.float32)

    first_q = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_k = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    q_mask = (tl.arange(0, pad_n_qh)[:, None] < n_qh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    k_mask = (tl.arange(0, pad_n_kh)[:, None] < n_kh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    q1 = tl.load(q_ptr + first_q, mask=q_mask, other=0).to(tl.float32)
    k1 = tl.load(k_ptr + first_k, mask=k_mask, other=0).to(tl.float32)
    second_q = first_q + hd // 2
    second_k = first_k + hd // 2
    q2 = tl.load(q_ptr + second_q, mask=q_mask, other=0).to(tl.float32)
    k2 = tl.load(k_ptr + second_k, mask=k_mask, other=0).to(tl.float32)

    new_q1 = q1 * cos - q2 * sin
    new_q2 = q2 * cos + q1 * sin
    tl.store(q_ptr + first_q, new_q1.to(tl.bfloat16), mask=q_mask)
    tl.store(q_ptr + second_q, new_q2.to(tl.bfloat16), mask=q_mask)
    new_k1 = k1 * cos - k2 * sin
    new_k2 = k2 * cos + k1 * sin
    tl.store(k_ptr + first_k, new_k1.to(tl.bfloat16), mask=k_mask)
    tl.store(k_ptr + second_k, new_k2.to(tl.bfloat16), mask=k_mask)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    batch, seq_len, n_qh, hd = q.shape
    n_kh = k.shape[2]
    rope_kernel[(batch * seq_len,)](q, q.stride(1), k, k.stride(1), cos, cos.stride(0), sin, sin.stride(0), seq_len,
                                    n_qh, n_kh, hd, triton.next_power_of_2(n_qh), triton.next_power_of_2(n_kh),
                                    triton.next_power_of_2(hd))
    return q, k


@triton.jit
def rope_heads_loop_kernel(positions_ptr, q_ptr, k_ptr, cache_ptr, q_stride, k_stride, n_q_heads, n_k_heads,
                           HEAD_DIM: tl.constexpr):
    token = tl.program_id(0)
    pos = tl.load(positions_ptr + token)
    half = tl.arange(0, HEAD_DIM // 2)
    for h in range(n_q_heads):
        cos = tl.load(cache_ptr + pos * HEAD_DIM + half)
        sin = tl.load(cache_ptr + pos * HEAD_DIM + HEAD_DIM // 2 + half)
        base = q_ptr + token * q_stride + h * HEAD_DIM
        x1 = tl.load(base + half).to(tl.float32)
        x2 = tl.load(base + HEAD_DIM // 2 + half).to(tl.float32)
        tl.store(base + half, (x1 * cos - x2 * sin).to(tl.float16))
        tl.store(base + HEAD_DIM // 2 + half, (x2 * cos + x1 * sin).to(tl.float16))
    for h in range(n_k_heads):
        cos = tl.load(cache_ptr + pos * HEAD_DIM + half)
        sin = tl.load(cache_ptr + pos * HEAD_DIM + HEAD_DIM // 2 + half)
        base = k_ptr + token * k_stride + h * HEAD_DIM
        x1 = tl.load(base + half).to(tl.float32)
        x2 = tl.load(base + HEAD_DIM // 2 + half).to(tl.float32)
        tl.store(base + half, (x1 * cos - x2 * sin).to(tl.float16))
        tl.store(base + HEAD_DIM // 2 + half, (x2 * cos + x1 * sin).to(tl.float16))


def rope_heads_loop(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
                    head_dim: int):
    n_tokens = positions.numel()
    rope_heads_loop_kernel[(n_tokens,)](positions, q, k, cos_sin_cache, q.stride(0), k.stride(0),
                                        q.shape[1] // head_dim, k.shape[1] // head_dim, HEAD_DIM=head_dim)
    return q, k
