"""The device function both page splits share: copy one 64-token destination page."""

import triton
import triton.language as tl


@triton.jit
def copy_dst_page(
    src_page,
    dst_page,
    j,
    SPLIT: tl.constexpr,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    DATA_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
    STREAM: tl.constexpr,
):
    """Copy destination page ``j`` of one source page: its data block, then its scales.
    ``STREAM``: each byte is read and written once, so loads may leave L2 first and stores
    bypass it (streaming cache hints)."""
    offs = tl.arange(0, TILE)
    data_src = src_page + j * DATA_BYTES
    for c in tl.static_range(DATA_BYTES // CHUNK):
        src = data_src + c * CHUNK + offs
        dst = dst_page + c * CHUNK + offs
        if TILE == CHUNK:
            if STREAM:
                tl.store(dst, tl.load(src, eviction_policy="evict_first"), cache_modifier=".cs")
            else:
                tl.store(dst, tl.load(src))
        else:
            live = offs < CHUNK
            if STREAM:
                x = tl.load(src, mask=live, eviction_policy="evict_first")
                tl.store(dst, x, mask=live, cache_modifier=".cs")
            else:
                tl.store(dst, tl.load(src, mask=live), mask=live)
    s_offs = tl.arange(0, SCALE_BYTES)
    s = tl.load(src_page + SPLIT * DATA_BYTES + j * SCALE_BYTES + s_offs)
    tl.store(dst_page + DATA_BYTES + s_offs, s)
