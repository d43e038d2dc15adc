"""Geometry of the FP8 "footer" KV-cache page layout, and input validation.

A page of ``P`` tokens stores all token data first and all token scales after it::

    [ token 0 data (576 B) | token 1 data | ... | token P-1 data |
      token 0 scales (8 B) | ... | token P-1 scales | padding ]

so a token's 584 bytes are *not* contiguous: its data sits at ``t * 576`` and its scales at
``P * 576 + t * 8`` inside the page. Pages may be padded at the end (the 64-token destination
page is padded to ``65 * 576 = 37440`` bytes so that every page starts 576-byte aligned).

Two views of a paged pool are accepted, both ``torch.uint8``:

* 2-D ``(pages, page_bytes)``: one row per page, rows contiguous, any row (page) stride;
  ``page_bytes`` is the packed ``P * 584`` or the padded ``round_up(P * 584, 576)``.
* 4-D ``(pages, P, 1, 584)`` with strides ``(page_stride, 584, 584, 1)``: the shape that
  attention kernels take. It reinterprets the first ``P * 584`` meaningful bytes of each page
  as ``P`` rows of 584 bytes; row ``t`` is *not* token ``t`` (the layout is footer, not
  interleaved), it merely covers the page's bytes. Padding bytes lie outside the view, between
  one page's last row and the next page's first row, which is why the kernels address pages
  through ``base + page * page_stride`` and never assume the pool is contiguous.

This module needs only torch; it is shared by the Triton path and the pure-torch reference.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

TOKEN_DATA_BYTES = 576
TOKEN_SCALE_BYTES = 8
TOKEN_BYTES = TOKEN_DATA_BYTES + TOKEN_SCALE_BYTES  # 584
PAGE_ALIGN_BYTES = 576

DST_PAGE_SIZE = 64
DST_DATA_BYTES = DST_PAGE_SIZE * TOKEN_DATA_BYTES  # 36864
DST_SCALE_BYTES = DST_PAGE_SIZE * TOKEN_SCALE_BYTES  # 512
DST_USED_BYTES = DST_PAGE_SIZE * TOKEN_BYTES  # 37376
SUPPORTED_SRC_PBS = (64, 128, 256, 512)


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is ``>= value``."""
    return -(-value // multiple) * multiple


def packed_page_bytes(page_size: int) -> int:
    """Meaningful bytes of a footer page of ``page_size`` tokens (data then scales)."""
    return page_size * TOKEN_BYTES


def padded_page_bytes(page_size: int) -> int:
    """Bytes of a footer page padded up to a multiple of 576."""
    return round_up(packed_page_bytes(page_size), PAGE_ALIGN_BYTES)


DST_PAGE_BYTES = padded_page_bytes(DST_PAGE_SIZE)  # 37440 == 65 * 576


class PageGeometry(NamedTuple):
    """Where the pages of a validated source view live (a named tuple, every field computed
    once when the view is validated: it is read several times on every eager call).

    Attributes:
        n_pages: number of source pages.
        page_size: tokens per source page (``src_pbs``).
        page_stride: elements (bytes) between the starts of consecutive pages.
        split: destination pages per source page.
        n_dst_pages: destination pages produced by a full split.
        n_tokens: token slots in the pool; valid token indices are ``0 .. n_tokens - 1``.
    """

    n_pages: int
    page_size: int
    page_stride: int
    split: int
    n_dst_pages: int
    n_tokens: int

    @classmethod
    def of(cls, n_pages: int, page_size: int, page_stride: int) -> PageGeometry:
        split = page_size // DST_PAGE_SIZE
        return cls(n_pages, page_size, page_stride, split, n_pages * split, n_pages * page_size)


def check_src_pbs(src_pbs: object) -> int:
    """Validate a source page size and return it as an ``int``."""
    if isinstance(src_pbs, bool) or not isinstance(src_pbs, int):
        raise TypeError(f"src_pbs must be an int, got {type(src_pbs).__name__}")
    if src_pbs <= 0 or src_pbs % DST_PAGE_SIZE != 0:
        raise ValueError(
            f"src_pbs={src_pbs} is not a positive multiple of {DST_PAGE_SIZE}; "
            f"supported page sizes are {SUPPORTED_SRC_PBS}"
        )
    if src_pbs not in SUPPORTED_SRC_PBS:
        raise ValueError(f"src_pbs={src_pbs} is not supported; supported: {SUPPORTED_SRC_PBS}")
    return src_pbs


def page_geometry(kv: torch.Tensor, src_pbs: int) -> PageGeometry:
    """Validate a 2-D or 4-D uint8 footer-page view and describe its pages.

    Raises:
        TypeError: ``kv`` is not a tensor, is not ``torch.uint8``, or ``src_pbs`` is not an int.
        ValueError: unsupported ``src_pbs``, wrong rank, wrong bytes per page or per token,
            a page size that disagrees with ``src_pbs``, or pages that are not byte-contiguous.
    """
    src_pbs = check_src_pbs(src_pbs)
    if not isinstance(kv, torch.Tensor):
        raise TypeError(f"kv must be a torch.Tensor, got {type(kv).__name__}")
    if kv.dtype != torch.uint8:
        raise TypeError(f"kv must be a torch.uint8 view of the paged cache, got {kv.dtype}")
    packed = packed_page_bytes(src_pbs)
    if kv.dim() == 2:
        n_pages, row_bytes = kv.shape
        if row_bytes != packed and row_bytes != padded_page_bytes(src_pbs):
            allowed = sorted({packed, padded_page_bytes(src_pbs)})
            raise ValueError(
                f"wrong byte size per page: a 2-D view of {src_pbs}-token footer pages has "
                f"{' or '.join(map(str, allowed))} bytes per page (data {src_pbs}*"
                f"{TOKEN_DATA_BYTES} + scales {src_pbs}*{TOKEN_SCALE_BYTES}, optionally padded "
                f"to a multiple of {PAGE_ALIGN_BYTES}), got {row_bytes}"
            )
        if row_bytes > 1 and kv.stride(1) != 1:
            raise ValueError(f"the bytes of a page must be contiguous, got strides {kv.stride()}")
    elif kv.dim() == 4:
        n_pages, page_size, heads, token_bytes = kv.shape
        if token_bytes != TOKEN_BYTES or heads != 1:
            raise ValueError(
                f"wrong byte size per token: a 4-D view must be (pages, page_size, 1, "
                f"{TOKEN_BYTES}), got {tuple(kv.shape)}"
            )
        if page_size != src_pbs:
            raise ValueError(f"the 4-D view has {page_size} tokens per page but src_pbs={src_pbs}")
        if kv.stride(3) != 1 or (page_size > 1 and kv.stride(1) != TOKEN_BYTES):
            raise ValueError(
                f"the {packed} meaningful bytes of a page must be contiguous: expected strides "
                f"(page_stride, {TOKEN_BYTES}, *, 1), got {kv.stride()}"
            )
    else:
        raise ValueError(
            f"kv must be a 2-D (pages, page_bytes) or 4-D (pages, page_size, 1, {TOKEN_BYTES}) "
            f"view, got shape {tuple(kv.shape)}"
        )
    page_stride = kv.stride(0) if n_pages > 1 else packed
    if page_stride < packed:
        raise ValueError(
            f"pages overlap: page stride {page_stride} is smaller than the {packed} bytes of a "
            f"{src_pbs}-token page"
        )
    return PageGeometry.of(n_pages, src_pbs, page_stride)


def paged_view(pages: torch.Tensor, page_size: int) -> torch.Tensor:
    """Return the 4-D ``(pages, page_size, 1, 584)`` view of a 2-D ``(pages, bytes)`` pool.

    The view keeps the pool's page stride (padding included) and covers the first
    ``page_size * 584`` bytes of every page.
    """
    packed = packed_page_bytes(page_size)
    if pages.dim() != 2 or pages.shape[1] < packed:
        raise ValueError(f"expected a 2-D pool with at least {packed} bytes per page")
    return pages[:, :packed].view(pages.shape[0], page_size, 1, TOKEN_BYTES)


def flat_pages(kv: torch.Tensor, geometry: PageGeometry) -> torch.Tensor:
    """Return a 2-D ``(pages, page_size * 584)`` view of a validated 2-D or 4-D input."""
    packed = packed_page_bytes(geometry.page_size)
    return kv.as_strided((geometry.n_pages, packed), (geometry.page_stride, 1))


def check_indices(indices: torch.Tensor, kv: torch.Tensor, name: str = "kv") -> None:
    """Validate the dtype and device (``kv``'s, called ``name``) of a token-index tensor
    (values are checked elsewhere)."""
    if not isinstance(indices, torch.Tensor):
        raise TypeError(f"indices must be a torch.Tensor, got {type(indices).__name__}")
    if indices.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"indices must be torch.int32 or torch.int64, got {indices.dtype}")
    if indices.device != kv.device:
        raise ValueError(f"indices are on {indices.device} but {name} is on {kv.device}")


_SCRATCH_DTYPES = (torch.uint8, torch.int8)


def check_scratch(what: str, t: object, rows: int, row_bytes: int, device: torch.device) -> None:
    """Validate what a scratch provider returned before a kernel writes into it: a uint8 or
    int8 tensor on ``device`` with at least ``rows`` rows; with ``row_bytes``, 2-D rows of at
    least that many contiguous bytes that do not overlap (destination pages), else 1-D and
    contiguous (the mask).
    A wrong one would be written out of bounds, so it raises ``ValueError`` instead."""
    ok = isinstance(t, torch.Tensor) and t.dtype in _SCRATCH_DTYPES and t.device == device
    if ok:
        shape, strides = t.shape, t.stride()
        if row_bytes:
            ok = len(shape) == 2 and shape[0] >= rows and shape[1] >= row_bytes
            ok = ok and (shape[0] == 1 or strides[0] >= row_bytes)  # rows do not overlap
        else:
            ok = len(shape) == 1 and shape[0] >= rows
        ok = ok and strides[-1] == 1
    if not ok:
        if row_bytes:
            shape = f"at least {rows} separate rows of {row_bytes} contiguous bytes"
        else:
            shape = f"at least {rows} contiguous bytes" if rows else "contiguous bytes, 1-D"
        got = (
            f"{tuple(t.shape)} {t.dtype} on {t.device} with strides {t.stride()}"
            if isinstance(t, torch.Tensor)
            else type(t).__name__
        )
        raise ValueError(f"{what} must be uint8/int8 {shape} on {device}; got {got}")


def check_index_range(indices: torch.Tensor, n_tokens: int) -> None:
    """Raise ``ValueError`` unless every index is ``-1`` or in ``[0, n_tokens)``.

    This reads the result back on the host, so it synchronizes with the device.
    """
    if indices.numel() == 0:
        return
    bad = (indices < -1) | (indices >= n_tokens)
    if bool(bad.any()):
        lo, hi = int(indices.min()), int(indices.max())
        raise ValueError(
            f"token indices out of range of the pool: valid are -1 (invalid slot) and "
            f"0..{n_tokens - 1}, got values in [{lo}, {hi}]"
        )
