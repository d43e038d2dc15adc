"""Pure-torch reference of the page split and the page mark, used by the tests."""

from __future__ import annotations

import torch

from .layout import (
    DST_DATA_BYTES,
    DST_PAGE_BYTES,
    DST_PAGE_SIZE,
    DST_SCALE_BYTES,
    DST_USED_BYTES,
    TOKEN_DATA_BYTES,
    TOKEN_SCALE_BYTES,
    check_index_range,
    check_indices,
    flat_pages,
    page_geometry,
    paged_view,
)


def mark_pages_reference(indices: torch.Tensor, n_src_pages: int, src_pbs: int) -> torch.Tensor:
    """Boolean ``(n_src_pages,)`` mask of the source pages touched by valid token indices."""
    flat = indices.reshape(-1).to(torch.int64)
    valid = flat[(flat >= 0) & (flat < n_src_pages * src_pbs)]
    marked = torch.zeros(n_src_pages, dtype=torch.bool, device=indices.device)
    marked[valid // src_pbs] = True
    return marked


def split_kv_pages_to_64_reference(
    kv: torch.Tensor,
    src_pbs: int,
    indices: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference of :func:`imlint.kernels.split_kv_pages_to_64`, written with torch indexing.

    Args:
        kv: 2-D or 4-D uint8 footer-page view (same validation as the kernel path).
        src_pbs: tokens per source page; 64 returns ``kv``.
        indices: optional token indices; only destination pages of touched source pages are
            written.
        out: optional ``(n_dst_pages, 37440)`` uint8 tensor to write into (untouched pages and
            the padding keep its contents); a zero-filled one is allocated when omitted.

    Returns:
        The ``(n_dst_pages, 64, 1, 584)`` view over ``out``.
    """
    geometry = page_geometry(kv, src_pbs)
    if indices is not None:
        check_indices(indices, kv)
        check_index_range(indices, geometry.n_tokens)
    if geometry.split == 1:
        return kv
    n_dst, split = geometry.n_dst_pages, geometry.split
    if out is None:
        out = torch.zeros((n_dst, DST_PAGE_BYTES), dtype=torch.uint8, device=kv.device)
    if out.shape[0] != n_dst or out.shape[1] < DST_USED_BYTES or out.dtype != torch.uint8:
        raise ValueError(f"out must be ({n_dst}, >={DST_USED_BYTES}) uint8, got {out.shape}")
    pages = flat_pages(kv, geometry)
    data_end = src_pbs * TOKEN_DATA_BYTES
    # Token t of source page p -> token t % 64 of destination page p * split + t // 64.
    data = pages[:, :data_end].reshape(n_dst, DST_DATA_BYTES)
    scales = pages[:, data_end:].reshape(n_dst, DST_SCALE_BYTES)
    rows = torch.arange(n_dst, device=kv.device)
    if indices is not None:
        marked = mark_pages_reference(indices, geometry.n_pages, src_pbs)
        rows = rows[marked.repeat_interleave(split)]
    out[rows, :DST_DATA_BYTES] = data[rows]
    out[rows, DST_DATA_BYTES:DST_USED_BYTES] = scales[rows]
    return paged_view(out, DST_PAGE_SIZE)


def token_bytes_reference(kv: torch.Tensor, page_size: int, token: int) -> torch.Tensor:
    """The 584 bytes of global token ``token`` (data then scales) read from a footer pool."""
    geometry = page_geometry(kv, page_size)
    pages = flat_pages(kv, geometry)
    page, t = divmod(token, page_size)
    data = pages[page, t * TOKEN_DATA_BYTES : (t + 1) * TOKEN_DATA_BYTES]
    scale_at = page_size * TOKEN_DATA_BYTES + t * TOKEN_SCALE_BYTES
    scales = pages[page, scale_at : scale_at + TOKEN_SCALE_BYTES]
    return torch.cat([data, scales])
