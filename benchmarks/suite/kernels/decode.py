"""Decode attention: one query token per sequence, one program per (sequence, query head), GQA
(query head h reads kv head h // group), a ``range`` loop over the KV blocks with the online
softmax; the scores are the GEMV form ``tl.sum(q[None, :] * k, 1)`` and the output
``tl.sum(p[:, None] * v, 0)``, all in fp32 (fp16 q, caches and output).

``paged_decode_attention``: vLLM's paged cache (num_blocks, 16, kv_heads, head_dim) and a block
table per sequence; one 16-token page per iteration.

``decode_attention``: SGLang's/LightLLM's token-indexed cache (cache_tokens, kv_heads, head_dim)
and a req_to_token table giving each position's cache row; 64 tokens per iteration (the
single-pass form of their split-KV stage 1).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_attention_kernel(out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, seq_lens_ptr,
                                  scale, stride_qb, stride_qh, stride_kb, stride_ks, stride_kh, stride_bt,
                                  QUERY_GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // QUERY_GROUP
    seq_len = tl.load(seq_lens_ptr + seq)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_SIZE)
    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + offs_d).to(tl.float32)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    num_blocks = tl.cdiv(seq_len, BLOCK_SIZE)
    for i in range(num_blocks):
        block = tl.load(block_tables_ptr + seq * stride_bt + i)
        tok = i * BLOCK_SIZE + offs_n
        valid = tok < seq_len
        kv_off = block * stride_kb + offs_n[:, None] * stride_ks + kv_head * stride_kh + offs_d[None, :]
        k = tl.load(k_cache_ptr + kv_off, mask=valid[:, None], other=0.0).to(tl.float32)
        qk = tl.sum(q[None, :] * k, axis=1) * scale
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new)
        v = tl.load(v_cache_ptr + kv_off, mask=valid[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    tl.store(out_ptr + seq * stride_qb + head * stride_qh + offs_d, (acc / l_i).to(tl.float16))


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    batch, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    out = torch.empty_like(q)
    paged_decode_attention_kernel[(batch, num_heads)](
        out, q, k_cache, v_cache, block_tables, seq_lens, head_dim ** -0.5, q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
        QUERY_GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size)
    return out


@triton.jit
def decode_attention_kernel(Q, K_Buffer, V_Buffer, sm_scale, Req_to_tokens, B_req_idx, B_Seqlen, Out,
                            stride_req_to_tokens_b, stride_qbs, stride_qh, stride_buf_kbs, stride_buf_kh,
                            stride_buf_vbs, stride_buf_vh, stride_obs, stride_oh, kv_group_num: tl.constexpr,
                            BLOCK_DMODEL: tl.constexpr, BLOCK_N: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head = tl.program_id(1)
    cur_kv_head = cur_head // kv_group_num
    offs_d = tl.arange(0, BLOCK_DMODEL)
    cur_batch_seq_len = tl.load(B_Seqlen + cur_batch)
    cur_batch_req_idx = tl.load(B_req_idx + cur_batch)
    q = tl.load(Q + cur_batch * stride_qbs + cur_head * stride_qh + offs_d).to(tl.float32)
    e_max = -float("inf")
    e_sum = 0.0
    acc = tl.zeros([BLOCK_DMODEL], dtype=tl.float32)
    for start_n in range(0, cur_batch_seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_loc = tl.load(Req_to_tokens + stride_req_to_tokens_b * cur_batch_req_idx + offs_n,
                         mask=offs_n < cur_batch_seq_len, other=0)
        offs_buf_k = kv_loc[:, None] * stride_buf_kbs + cur_kv_head * stride_buf_kh + offs_d[None, :]
        k = tl.load(K_Buffer + offs_buf_k, mask=offs_n[:, None] < cur_batch_seq_len, other=0.0)
        qk = tl.sum(q[None, :] * k, 1)
        qk *= sm_scale
        qk = tl.where(offs_n < cur_batch_seq_len, qk, float("-inf"))
        offs_buf_v = kv_loc[:, None] * stride_buf_vbs + cur_kv_head * stride_buf_vh + offs_d[None, :]
        v = tl.load(V_Buffer + offs_buf_v, mask=offs_n[:, None] < cur_batch_seq_len, other=0.0)
        n_e_max = tl.maximum(tl.max(qk, 0), e_max)
        re_scale = tl.exp(e_max - n_e_max)
        p = tl.exp(qk - n_e_max)
        acc *= re_scale
        acc += tl.sum(p[:, None] * v, 0)
        e_sum = e_sum * re_scale + tl.sum(p, 0)
        e_max = n_e_max
    tl.store(Out + cur_batch * stride_obs + cur_head * stride_oh + offs_d, (acc / e_sum).to(tl.float16))


def decode_attention(q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, req_to_token: torch.Tensor,
                     b_req_idx: torch.Tensor, b_seq_len: torch.Tensor) -> torch.Tensor:
    batch, head_num, head_dim = q.shape
    out = torch.empty_like(q)
    decode_attention_kernel[(batch, head_num)](
        q, k_buffer, v_buffer, head_dim ** -0.5, req_to_token, b_req_idx, b_seq_len, out, req_to_token.stride(0),
        q.stride(0), q.stride(1), k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1),
        out.stride(0), out.stride(1), kv_group_num=head_num // k_buffer.shape[1], BLOCK_DMODEL=head_dim, BLOCK_N=64)
    return out
