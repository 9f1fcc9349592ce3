"""Writing new keys and values into the KV cache, one program per token.

``reshape_and_cache`` is vLLM's Triton reshape_and_cache_flash: key and value (tokens, kv_heads,
head_size) go to slot ``slot_mapping[token]`` of a paged cache (num_blocks, block_size, kv_heads,
head_size); a slot of -1 (a padding token) returns early. Each token's heads * head_size values are
copied in 2048-element tiles on the grid's second axis (bf16).

``destindex_copy_kv`` is LightLLM's: a contiguous cache (cache_tokens, heads, head_dim) indexed by
a destination row per token, one [heads, head_dim] tile per program, heads padded to a power of two
(fp16).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def reshape_and_cache_kernel(key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_mapping_ptr, key_stride,
                             value_stride, block_stride, page_stride, num_heads: tl.constexpr,
                             head_size: tl.constexpr, block_size: tl.constexpr, TILE_SIZE: tl.constexpr):
    token_idx = tl.program_id(axis=0)
    slot_idx = tl.load(slot_mapping_ptr + token_idx).to(tl.int64)
    if slot_idx < 0:
        return
    tile_i = tl.program_id(axis=1)
    tile_pos = tile_i * TILE_SIZE + tl.arange(0, TILE_SIZE)
    mask = tile_pos < num_heads * head_size
    block_idx = slot_idx // block_size
    block_offset = slot_idx % block_size
    tgt_idx = block_idx * block_stride + block_offset * page_stride
    key_tile = tl.load(key_ptr + token_idx * key_stride + tile_pos, mask=mask)
    value_tile = tl.load(value_ptr + token_idx * value_stride + tile_pos, mask=mask)
    tl.store(key_cache_ptr + tgt_idx + tile_pos, key_tile, mask=mask)
    tl.store(value_cache_ptr + tgt_idx + tile_pos, value_tile, mask=mask)


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                      slot_mapping: torch.Tensor):
    num_tokens, num_heads, head_size = key.shape
    block_size = key_cache.shape[1]
    n = num_heads * head_size
    TILE_SIZE = min(2048, triton.next_power_of_2(n))
    grid = (num_tokens, triton.cdiv(n, TILE_SIZE))
    reshape_and_cache_kernel[grid](key, value, key_cache, value_cache, slot_mapping, key.stride(0), value.stride(0),
                                   key_cache.stride(0), key_cache.stride(1), num_heads=num_heads,
                                   head_size=head_size, block_size=block_size, TILE_SIZE=TILE_SIZE)
    return key_cache, value_cache


@triton.jit
def destindex_copy_kv_kernel(K, Dest_loc, Out, stride_k_bs, stride_k_h, stride_k_d, stride_o_bs, stride_o_h,
                             stride_o_d, head_num, BLOCK_DMODEL: tl.constexpr, BLOCK_HEAD: tl.constexpr):
    cur_index = tl.program_id(0)
    offs_h = tl.arange(0, BLOCK_HEAD)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    dest_index = tl.load(Dest_loc + cur_index)
    k_ptrs = K + cur_index * stride_k_bs + stride_k_h * offs_h[:, None] + stride_k_d * offs_d[None, :]
    o_ptrs = Out + dest_index * stride_o_bs + stride_o_h * offs_h[:, None] + stride_o_d * offs_d[None, :]
    k = tl.load(k_ptrs, mask=offs_h[:, None] < head_num, other=0.0)
    tl.store(o_ptrs, k, mask=offs_h[:, None] < head_num)


def destindex_copy_kv(k: torch.Tensor, dest_loc: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    seq_len, head_num, head_dim = k.shape
    destindex_copy_kv_kernel[(seq_len,)](k, dest_loc, out, k.stride(0), k.stride(1), k.stride(2), out.stride(0),
                                         out.stride(1), out.stride(2), head_num, BLOCK_DMODEL=head_dim,
                                         BLOCK_HEAD=triton.next_power_of_2(head_num))
    return out
