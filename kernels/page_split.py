"""Triton page-split of footer-layout FP8 KV-cache pages into 64-token pages.

The public entry point is :func:`split_kv_pages_to_64`. Its two persistent scratch tensors
(the destination pages and the int8 page mask) come from small provider functions,
:func:`get_dst_buffer` and :func:`get_page_mask`, that the caller can replace; that is how
the fixtures in ``fixtures/kernels/`` reproduce the unguarded-allocation hazard with the same
kernels.
"""

import contextlib
from collections.abc import Callable, Hashable, MutableMapping

import torch
import triton
import triton.language as tl

from .claim import claim_split_kernel
from .launch import Constexprs, constexprs, launch
from .layout import (
    DST_DATA_BYTES,
    DST_PAGE_BYTES,
    DST_PAGE_SIZE,
    DST_SCALE_BYTES,
    DST_USED_BYTES,
    TOKEN_BYTES,
    PageGeometry,
    check_index_range,
    check_indices,
    check_scratch,
    page_geometry,
)
from .page_copy import copy_dst_page

Registry = MutableMapping[Hashable, torch.Tensor]
ScratchProvider = Callable[[Registry, torch.device, int], torch.Tensor]

DST_KEY = "imlint.kernels.page_split.dst"
MASK_KEY = "imlint.kernels.page_split.mask"

# Process-wide default registry: persistent, grow-only scratch per device.
SCRATCH: dict[Hashable, torch.Tensor] = {}

# Launch configuration of the split kernel (see NOTES.md for the sweep on an H200): bytes
# copied per step (must divide 36864; the register tile is the next power of two; 36864 loads
# a whole destination page before storing it) and warps per program. The masked split uses
# its own (chunk, warps) and scans the mask MASK_GROUP source pages per program.
SPLIT_CHUNK_BYTES = 36864
SPLIT_NUM_WARPS = 32
MASKED_CONFIG = (36864, 16)
MASK_GROUP = 16
MARK_BLOCK = 1024
# Streaming cache hints on the copy's loads and stores (see NOTES.md).
SPLIT_STREAM = False
# The masked split's programs per destination part at most (0: one per mask group): each
# goes on through the groups ``programs`` apart.
MASK_PROGRAMS = 0
# How the masked split finds the marked pages of a group: False, one read of each mask byte
# (measured); True, reductions over the bytes already loaded (a benchmark knob until measured).
MASK_FIND = False
# The masked split's algorithm: "scan" (mark, then scan every mask group: measured), or
# "claim" (one launch: each program claims and copies the pages its indices touch; see
# claim.py; a benchmark knob until measured), with CLAIM_BLOCK indices per program.
MASK_MODE = "scan"
CLAIM_BLOCK = 256


@triton.jit
def _page_split_kernel(
    src_ptr,
    dst_ptr,
    mask_ptr,
    n_src_pages,
    src_page_stride,
    dst_page_stride,
    SPLIT: tl.constexpr,
    HAS_MASK: tl.constexpr,
    GROUP: tl.constexpr,
    CHUNK: tl.constexpr,
    TILE: tl.constexpr,
    DATA_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
    STREAM: tl.constexpr,
    FIND: tl.constexpr,
):
    """Split source pages into 64-token destination pages.

    Without a mask: grid ``(n_dst_pages,)``, one program per destination page ``q`` (source
    page ``q // SPLIT``, part ``q % SPLIT``). With a mask: grid ``(cdiv(n_src_pages, GROUP),
    SPLIT)`` at most (``MASK_PROGRAMS`` caps the first axis); program ``(g, j)`` reads the
    mask bytes of source pages ``g*GROUP ..`` at once, skips the group if none is set, else
    writes part ``j`` of each marked page, then goes on to group ``g + programs``. Few
    programs then scan the mask, and the pages' parts are still copied in parallel. A marked
    group's pages are found by one read of each mask byte, or with ``FIND`` by reductions
    over the group's bytes already loaded (a loop over the marked pages only).
    """
    if HAS_MASK:
        j = tl.program_id(1)
        lanes = tl.arange(0, GROUP)
        for g in range(tl.program_id(0), tl.cdiv(n_src_pages, GROUP), tl.num_programs(0)):
            p0 = g * GROUP
            pages = p0 + lanes
            marks = tl.load(mask_ptr + pages, mask=pages < n_src_pages, other=0)
            marked = marks != 0
            if FIND:  # a loop over the marked pages only, lowest first
                n = tl.sum(marked.to(tl.int32), axis=0)
            else:  # a loop over the group's pages if any is marked
                n = tl.where(tl.max(marks.to(tl.int32), axis=0) != 0, GROUP, 0)
            for k in range(n):
                if FIND:
                    i = tl.min(tl.where(marked, lanes, GROUP), axis=0)
                    marked = marked & (lanes != i)
                    take = True
                else:
                    i = k
                    take = tl.load(mask_ptr + p0 + k, mask=p0 + k < n_src_pages, other=0) != 0
                if take:
                    p = (p0 + i).to(tl.int64)
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
    else:
        q = tl.program_id(0)
        p = q // SPLIT
        j = q % SPLIT
        copy_dst_page(
            src_ptr + p.to(tl.int64) * src_page_stride,
            dst_ptr + q.to(tl.int64) * dst_page_stride,
            j,
            SPLIT,
            CHUNK,
            TILE,
            DATA_BYTES,
            SCALE_BYTES,
            STREAM,
        )


@triton.jit
def _mark_pages_kernel(
    idx_ptr, mask_ptr, n_idx, idx_stride, n_tokens, SRC_PBS: tl.constexpr, BLOCK: tl.constexpr
):
    """Set ``mask[t // SRC_PBS] = 1`` for every index ``t`` in ``[0, n_tokens)``; skip others.
    Index ``k`` is at ``idx_ptr + k * idx_stride`` (a strided 1-D view is read in place)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < n_idx
    t = tl.load(idx_ptr + offs * idx_stride, mask=inb, other=-1).to(tl.int64)
    ok = inb & (t >= 0) & (t < n_tokens)
    page = tl.where(ok, t // SRC_PBS, 0)
    tl.store(mask_ptr + page, tl.full([BLOCK], 1, tl.int8), mask=ok)


INTERPRETED = not isinstance(_page_split_kernel, triton.runtime.jit.JITFunction)
"""True when the kernels were defined under ``TRITON_INTERPRET=1`` (they then run on the CPU)."""


def get_dst_buffer(registry: Registry, device: torch.device, n_dst_pages: int) -> torch.Tensor:
    """Return ``(n_dst_pages, 37440)`` uint8 destination pages from a grow-only buffer."""
    key = (DST_KEY, device)
    buf = registry.get(key)
    if buf is None or buf.shape[0] < n_dst_pages:
        # First use may run under inference mode (autotune); keep the persistent buffer normal.
        with torch.inference_mode(False):
            buf = torch.empty((n_dst_pages, DST_PAGE_BYTES), dtype=torch.uint8, device=device)
        registry[key] = buf
    return buf[:n_dst_pages]


def get_page_mask(registry: Registry, device: torch.device, n_src_pages: int) -> torch.Tensor:
    """Return a cleared int8 mask of ``n_src_pages`` from a grow-only buffer."""
    key = (MASK_KEY, device)
    mask = registry.get(key)
    if mask is None or mask.shape[0] < n_src_pages:
        # First use may run under inference mode (autotune); mask.zero_() below runs outside it.
        with torch.inference_mode(False):
            mask = torch.empty(n_src_pages, dtype=torch.int8, device=device)
        registry[key] = mask
    mask.zero_()
    return mask[:n_src_pages]


def _cdiv(a: int, b: int) -> int:
    """``triton.cdiv`` without its cost: from Python, a call of a Triton ``jit`` helper
    goes through the JIT's call path (microseconds, on every eager call)."""
    return -(-a // b)


#: validated geometries by the view's layout (shape, strides, dtype, src_pbs): an eager call
#: on the same pool validates it once (bounded: cleared when it grows past _GEOMETRIES_MAX)
_GEOMETRIES: dict[tuple[object, ...], PageGeometry] = {}
_GEOMETRIES_MAX = 256


def _geometry(kv: torch.Tensor, src_pbs: int) -> PageGeometry:
    """``layout.page_geometry``, remembered for a layout it has validated."""
    if not isinstance(kv, torch.Tensor) or type(src_pbs) is not int:
        return page_geometry(kv, src_pbs)  # raises the right error
    key = (kv.shape, kv.stride(), kv.dtype, src_pbs)
    known = _GEOMETRIES.get(key)
    if known is None:
        known = page_geometry(kv, src_pbs)
        if len(_GEOMETRIES) >= _GEOMETRIES_MAX:
            _GEOMETRIES.clear()
        _GEOMETRIES[key] = known
    return known


def _check_device(device: torch.device) -> None:
    if device.type == "cpu":
        if not INTERPRETED:
            raise ValueError(
                "kv is a CPU tensor but the Triton kernels were compiled for a GPU; run on a "
                "CUDA tensor, or set TRITON_INTERPRET=1 before importing triton/imlint.kernels "
                "to run the kernels in the Triton interpreter"
            )
    elif device.type != "cuda":
        raise ValueError(f"unsupported device {device}; expected a CUDA or CPU tensor")


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


_NO_GUARD = contextlib.nullcontext()


def _device_guard(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Make ``device`` current for a Triton launch (Triton launches on the current device);
    nothing to do, and no guard's host time, when it is current already."""
    if device.type == "cuda" and device.index is not None:
        if device.index != torch.cuda.current_device():
            return torch.cuda.device(device)
    return _NO_GUARD


def mark_pages(
    indices: torch.Tensor, mask: torch.Tensor, src_pbs: int, block: int | None = None
) -> None:
    """Launch the page-mark kernel: ``mask[t // src_pbs] = 1`` for each valid index ``t``.

    ``indices`` may have any shape and strides; ``-1`` and (defensively) any value outside
    ``[0, mask.numel() * src_pbs)`` is skipped. ``mask`` must already be cleared, 1-D and
    contiguous (int8 or uint8) on the indices' device.
    """
    check_indices(indices, mask, "mask")
    check_scratch("mask", mask, 0, 0, mask.device)
    _mark(indices, mask, src_pbs, block)


def _mark(indices: torch.Tensor, mask: torch.Tensor, src_pbs: int, block: int | None) -> None:
    """:func:`mark_pages` on validated arguments (the split's path)."""
    flat = indices.reshape(-1)
    n_idx = flat.numel()
    if n_idx == 0 or mask.numel() == 0:
        return
    block = MARK_BLOCK if block is None else block
    grid = (_cdiv(n_idx, block),)
    with _device_guard(mask.device):
        launch(
            _mark_pages_kernel,
            grid,
            (flat, mask, n_idx, flat.stride(0), mask.numel() * src_pbs),
            _mark_constexprs(src_pbs, block),
            4,
            mask.device,
        )


#: the kernels' compile-time arguments, made once per distinct set (the eager hot path)
_CONSTEXPRS: dict[tuple[object, ...], Constexprs] = {}


def _memo(key: tuple[object, ...], make: Callable[[], Constexprs]) -> Constexprs:
    known = _CONSTEXPRS.get(key)
    if known is None:
        known = _CONSTEXPRS[key] = make()
    return known


def _copy_constexprs(chunk: int, stream: bool) -> dict[str, object]:
    """``copy_dst_page``'s compile-time arguments, in the kernels' parameter order."""
    return {
        "CHUNK": chunk,
        "TILE": 1 << (chunk - 1).bit_length(),
        "DATA_BYTES": DST_DATA_BYTES,
        "SCALE_BYTES": DST_SCALE_BYTES,
        "STREAM": stream,
    }


def _split_constexprs(
    split: int, masked: bool, group: int, chunk: int, stream: bool, find: bool
) -> Constexprs:
    masked, stream, find = bool(masked), bool(stream), bool(find)
    return _memo(
        ("split", split, masked, group, chunk, stream, find),
        lambda: constexprs(
            SPLIT=split, HAS_MASK=masked, GROUP=group, **_copy_constexprs(chunk, stream), FIND=find
        ),
    )


def _mark_constexprs(src_pbs: int, block: int) -> Constexprs:
    return _memo(("mark", src_pbs, block), lambda: constexprs(SRC_PBS=src_pbs, BLOCK=block))


def _claim_constexprs(split: int, src_pbs: int, block: int, chunk: int) -> Constexprs:
    stream = bool(SPLIT_STREAM)
    return _memo(
        ("claim", split, src_pbs, block, chunk, stream),
        lambda: constexprs(
            SPLIT=split, SRC_PBS=src_pbs, BLOCK=block, **_copy_constexprs(chunk, stream)
        ),
    )


def launch_split(
    kv: torch.Tensor,
    geometry: PageGeometry,
    dst: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    chunk: int | None = None,
    num_warps: int | None = None,
    group: int | None = None,
    stream: bool | None = None,
    programs: int | None = None,
    find: bool | None = None,
) -> None:
    """Launch the split kernel from a validated view into ``dst`` (``(n_dst, >=37376)`` pages).

    With ``mask`` only destination pages of source pages whose mask byte is non-zero are
    written; the others keep their previous contents. ``chunk``, ``num_warps`` and ``group``
    override the tuned launch configuration (for benchmarks), and so do ``stream``
    (streaming cache hints on the copy), ``programs`` (the masked grid's first axis at
    most; 0: one program per mask group) and ``find`` (how a marked group's pages are found).
    """
    cfg_chunk, cfg_warps = (SPLIT_CHUNK_BYTES, SPLIT_NUM_WARPS) if mask is None else MASKED_CONFIG
    chunk = cfg_chunk if chunk is None else chunk
    num_warps = cfg_warps if num_warps is None else num_warps
    if DST_DATA_BYTES % chunk != 0:
        raise ValueError(f"chunk={chunk} must divide {DST_DATA_BYTES}")
    if geometry.n_dst_pages == 0:
        return
    group = MASK_GROUP if group is None else group
    if mask is None:
        grid: tuple[int, ...] = (geometry.n_dst_pages,)
    else:
        programs = MASK_PROGRAMS if programs is None else programs
        groups = _cdiv(geometry.n_pages, group)
        grid = (min(groups, programs) if programs > 0 else groups, geometry.split)
    device = kv.device
    with _device_guard(device):
        launch(
            _page_split_kernel,
            grid,
            (
                kv,
                dst,
                mask if mask is not None else dst,
                geometry.n_pages,
                geometry.page_stride,
                dst.stride(0),
            ),
            _split_constexprs(
                geometry.split,
                mask is not None,
                group,
                chunk,
                SPLIT_STREAM if stream is None else stream,
                MASK_FIND if find is None else find,
            ),
            num_warps,
            device,
        )


def launch_claim_split(
    kv: torch.Tensor,
    geometry: PageGeometry,
    dst: torch.Tensor,
    indices: torch.Tensor,
    claims: torch.Tensor,
    *,
    block: int | None = None,
    chunk: int | None = None,
    num_warps: int | None = None,
) -> None:
    """Launch the one-step masked split (:mod:`.claim`): ``claims`` is a zeroed int32
    tensor of at least ``n_dst_pages`` slots; ``block`` indices per program."""
    block = CLAIM_BLOCK if block is None else block
    if block < 1 or block & (block - 1):
        raise ValueError(f"block={block} must be a power of two")
    n_dst = geometry.n_dst_pages
    if not (
        isinstance(claims, torch.Tensor)
        and claims.dtype == torch.int32
        and claims.device == kv.device
        and claims.dim() == 1
        and claims.numel() >= n_dst
        and claims.stride(0) == 1
    ):
        raise ValueError(
            f"claims must be a contiguous int32 tensor of {n_dst} slots on {kv.device}"
        )
    check_indices(indices, kv)
    flat = indices.reshape(-1)
    n_idx = flat.numel()
    if n_idx == 0 or n_dst == 0:
        return
    chunk = MASKED_CONFIG[0] if chunk is None else chunk
    if DST_DATA_BYTES % chunk != 0:
        raise ValueError(f"chunk={chunk} must divide {DST_DATA_BYTES}")
    device = kv.device
    with _device_guard(device):
        launch(
            claim_split_kernel,
            (_cdiv(n_idx, block), geometry.split),
            (
                flat,
                claims,
                kv,
                dst,
                n_idx,
                flat.stride(0),
                geometry.n_tokens,
                geometry.page_stride,
                dst.stride(0),
            ),
            _claim_constexprs(geometry.split, geometry.page_size, block, chunk),
            MASKED_CONFIG[1] if num_warps is None else num_warps,
            device,
        )


def _split_marked(
    kv: torch.Tensor,
    geometry: PageGeometry,
    dst: torch.Tensor,
    indices: torch.Tensor,
    registry: Registry,
    get_mask: ScratchProvider,
) -> None:
    """The masked split, as ``MASK_MODE`` says: mark then scan (a mask byte per source
    page), or claim (an int32 claim slot per destination page, in the same cleared buffer)."""
    device = kv.device
    if MASK_MODE == "claim":
        n_bytes = 4 * geometry.n_dst_pages
        mask = get_mask(registry, device, n_bytes)
        check_scratch("the mask from get_mask", mask, n_bytes, 0, device)
        if mask.data_ptr() % 4:
            raise ValueError("the mask from get_mask must start at a 4-byte boundary")
        launch_claim_split(kv, geometry, dst, indices, mask[:n_bytes].view(torch.int32))
        return
    mask = get_mask(registry, device, geometry.n_pages)
    check_scratch("the mask from get_mask", mask, geometry.n_pages, 0, device)
    _mark(indices, mask, geometry.page_size, None)
    launch_split(kv, geometry, dst, mask)


def split_kv_pages_to_64(
    kv: torch.Tensor,
    src_pbs: int,
    indices: torch.Tensor | None = None,
    *,
    registry: Registry | None = None,
    get_dst: ScratchProvider = get_dst_buffer,
    get_mask: ScratchProvider = get_page_mask,
    validate_indices: bool = False,
) -> torch.Tensor:
    """Split footer-layout pages of ``src_pbs`` tokens into 64-token pages.

    Args:
        kv: uint8 paged pool, 2-D ``(pages, page_bytes)`` or 4-D ``(pages, src_pbs, 1, 584)``
            (see :mod:`imlint.kernels.layout`).
        src_pbs: tokens per source page, one of 64, 128, 256, 512. 64 is a no-op: ``kv`` is
            validated and returned as is.
        indices: optional token indices (any shape, int32/int64, ``-1`` = unused slot). When
            given, only the source pages they touch are split; the destination pages of the
            others keep stale contents. Token indices are unchanged by the split.
        registry: where the persistent scratch lives (default: the module-level ``SCRATCH``).
        get_dst: provider of the destination pages, ``(registry, device, n) -> (n, 37440)``.
        get_mask: provider of the cleared int8 page mask, ``(registry, device, n) -> (n,)``.
        validate_indices: raise ``ValueError`` on an index outside ``-1 .. pages*src_pbs-1``.
            Off by default: the check reads the indices back on the host, a sync that stalls
            every eager call (about 50-70 us on an H200, more than the split of 1% of a 2 GiB
            pool). Without it nothing unsafe happens: the mark kernel skips such an index (no
            read or write outside the pool or the mask), so its page is simply not split. Turn
            it on in tests and when debugging; it is skipped during CUDA-graph capture.

    Returns:
        The destination as a strided ``(pages * src_pbs // 64, 64, 1, 584)`` uint8 view over
        padded 37440-byte pages (page stride 37440). It aliases persistent scratch: the next
        call on the same device overwrites it.

    Raises:
        TypeError: wrong dtype of ``kv`` or ``indices``, or ``src_pbs`` not an int.
        ValueError: unsupported ``src_pbs``, wrong bytes per page, a CPU tensor without the
            Triton interpreter, or indices out of range of the pool.
    """
    geometry = _geometry(kv, src_pbs)
    device = kv.device
    _check_device(device)
    if indices is not None:
        check_indices(indices, kv)
        if validate_indices and not _capturing(device):
            check_index_range(indices, geometry.n_tokens)
    if geometry.split == 1:
        return kv
    if registry is None:
        registry = SCRATCH
    dst = get_dst(registry, device, geometry.n_dst_pages)
    check_scratch("the destination from get_dst", dst, geometry.n_dst_pages, DST_USED_BYTES, device)
    if indices is None:
        launch_split(kv, geometry, dst, None)
    else:
        _split_marked(kv, geometry, dst, indices, registry, get_mask)
    # ``layout.paged_view(dst, 64)``, in one call (this is the eager hot path)
    return dst.as_strided(
        (geometry.n_dst_pages, DST_PAGE_SIZE, 1, TOKEN_BYTES),
        (dst.stride(0), TOKEN_BYTES, TOKEN_BYTES, 1),
    )
