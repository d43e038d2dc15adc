"""The masked split in one launch: claim each touched (page, part) and copy it.

The default masked split is three steps on the device: clear the page mask, mark the pages
the indices touch (one launch), then scan every mask group and copy the marked pages (a
second launch, one program per group and part). Its fixed cost, measured with no page
touched, is about half of a 1% split (``NOTES.md``). Here the program that reads a block of
indices copies the pages they touch: for each index it exchanges 1 into the claim slot of
``(page, part)`` with an atomic; the lane that got 0 back owns that slot, and its program
copies that part. Every touched part is copied exactly once, with no scan of untouched
pages and no separate mark launch; the claim slots (int32, one per destination page) must
be zero before the launch, which the mask provider's clear does.

What it trades: which program wins a page depends on timing, so one program can end up
copying several pages one after another. And a slot left at 1 (a mask provider that does not
clear) makes its part silently not copied, where the default's stale mask byte only copies a
page more. It is a benchmark knob (``MASK_MODE``, set before the first call: the claim slots
need a larger mask buffer, and a CUDA graph captured before the switch keeps the old one)
until a GPU has measured it against the default.
"""

import triton
import triton.language as tl

from .page_copy import copy_dst_page


@triton.jit
def claim_split_kernel(
    idx_ptr,
    claim_ptr,
    src_ptr,
    dst_ptr,
    n_idx,
    idx_stride,
    n_tokens,
    src_page_stride,
    dst_page_stride,
    SPLIT: tl.constexpr,
    SRC_PBS: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    DATA_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
    STREAM: tl.constexpr,
):
    """Grid ``(cdiv(n_idx, BLOCK), SPLIT)``: program ``(b, j)`` reads indices ``b*BLOCK ..``
    (index ``k`` at ``idx_ptr + k * idx_stride``), skips ``-1`` and anything outside
    ``[0, n_tokens)``, claims slot ``page * SPLIT + j`` of each touched page, and copies
    part ``j`` of the pages it won, lowest lane first."""
    j = tl.program_id(1)
    lanes = tl.arange(0, BLOCK)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + lanes
    inb = offs < n_idx
    t = tl.load(idx_ptr + offs * idx_stride, mask=inb, other=-1).to(tl.int64)
    ok = inb & (t >= 0) & (t < n_tokens)
    page = tl.where(ok, t // SRC_PBS, 0)
    # relaxed: the slot guards no data written in this launch, only who copies the part
    old = tl.atomic_xchg(claim_ptr + page * SPLIT + j, 1, mask=ok, sem="relaxed")
    won = ok & (old == 0)  # a masked-off lane reads 0 back: `ok &` must stay
    for _ in range(tl.sum(won.to(tl.int32), axis=0)):
        i = tl.min(tl.where(won, lanes, BLOCK), axis=0)
        here = lanes == i
        won = won & (lanes != i)
        p = tl.max(tl.where(here, page, -1), axis=0)
        copy_dst_page(
            src_ptr + p * src_page_stride,
            dst_ptr + (p * SPLIT + j) * dst_page_stride,
            j,
            SPLIT,
            CHUNK,
            TILE,
            DATA_BYTES,
            SCALE_BYTES,
            STREAM,
        )
