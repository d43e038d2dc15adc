"""Tests of ``imlint.kernels``: the Triton page split, its scratch, and the fixture variants.

Without a CUDA GPU the kernels run in the Triton interpreter on CPU tensors: this module sets
``TRITON_INTERPRET=1`` before triton and the kernels are imported (it must be set when the
kernels are defined, so it stays set for the process). With a GPU the kernels are compiled and
the ``gpu``-marked tests run: ``pytest tests/test_kernels.py -m gpu``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import sys
import textwrap
import traceback
from collections.abc import Callable, Hashable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "kernels"
INFERENCE_ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"


def _import_kernels() -> ModuleType:
    """Import ``imlint.kernels`` installed, or from this source checkout by path."""
    try:
        return importlib.import_module("imlint.kernels")
    except Exception:  # not installed, or the linter package itself does not import here
        sys.modules.pop("imlint.kernels", None)
    pkg = ROOT / "kernels"
    spec = importlib.util.spec_from_file_location(
        "imlint.kernels", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["imlint.kernels"] = module
    spec.loader.exec_module(module)
    return module


K = _import_kernels()
page_split = sys.modules["imlint.kernels.page_split"]

DEVICES = [
    pytest.param(
        "cpu",
        marks=pytest.mark.skipif(
            not K.INTERPRETED, reason="kernels compiled for a GPU, not interpreted"
        ),
    ),
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU"),
        ],
    ),
]
SPLIT_PBS = [128, 256, 512]
VIEWS = ["2d_padded", "2d_packed", "4d_padded", "4d_gap"]
POISON = 0xAB


# ----------------------------------------------------------------------------- helpers


def _n_pages(device: str) -> int:
    """Source pages per test pool: tiny in the interpreter, larger on a GPU."""
    return 3 if device == "cpu" else 37


def make_pool(
    n_pages: int, src_pbs: int, view: str, device: str, gen: torch.Generator
) -> torch.Tensor:
    """Random source pages as the requested view over a larger random storage.

    ``2d_padded``/``2d_packed``: rows of the padded/packed page size. ``4d_padded``: the 4-D
    view over padded pages. ``4d_gap``: the 4-D view over pages with an odd extra gap and a
    non-zero storage offset, so that nothing but the page stride locates a page.
    """
    packed = K.packed_page_bytes(src_pbs)
    padded = K.padded_page_bytes(src_pbs)
    stride = {"2d_padded": padded, "2d_packed": packed, "4d_padded": padded}.get(view, padded + 48)
    offset = 16 if view == "4d_gap" else 0
    storage = torch.randint(0, 256, (offset + n_pages * stride,), dtype=torch.uint8, generator=gen)
    storage = storage.to(device)
    if view.startswith("2d"):
        return storage[offset:].view(n_pages, stride)
    return storage.as_strided(
        (n_pages, src_pbs, 1, K.TOKEN_BYTES), (stride, K.TOKEN_BYTES, K.TOKEN_BYTES, 1), offset
    )


def make_indices(
    n_pages: int, src_pbs: int, device: str, gen: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    """Token indices (2-D, with -1 holes) touching a random strict subset of the pages."""
    pages = torch.randperm(n_pages, generator=gen)[: max(1, n_pages // 2)]
    per_page = 5
    tokens = pages.repeat_interleave(per_page) * src_pbs + torch.randint(
        0, src_pbs, (pages.numel() * per_page,), generator=gen
    )
    holes = torch.full((tokens.numel(),), -1, dtype=torch.int64)
    idx = torch.stack([tokens, holes], dim=1)[torch.randperm(tokens.numel(), generator=gen)]
    return idx.to(dtype=dtype, device=device)


def poisoning(provider: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Wrap a destination provider so that every call hands out pages filled with POISON."""

    def provide(registry: Any, device: torch.device, n: int) -> torch.Tensor:
        buf = provider(registry, device, n)
        buf.fill_(POISON)
        return buf

    return provide


def expected_split(
    kv: torch.Tensor, src_pbs: int, indices: torch.Tensor | None = None
) -> torch.Tensor:
    """Reference result over destination pages poisoned like the kernel's."""
    n_dst = kv.shape[0] * src_pbs // K.DST_PAGE_SIZE
    out = torch.full((n_dst, K.DST_PAGE_BYTES), POISON, dtype=torch.uint8, device=kv.device)
    return K.split_kv_pages_to_64_reference(kv, src_pbs, indices, out=out)


def touched_dst_pages(indices: torch.Tensor, n_pages: int, src_pbs: int) -> torch.Tensor:
    """Boolean mask of the destination pages that a masked split writes."""
    marked = K.mark_pages_reference(indices, n_pages, src_pbs)
    return marked.repeat_interleave(src_pbs // K.DST_PAGE_SIZE)


def load_fixture(name: str) -> ModuleType:
    """Load ``fixtures/kernels/<name>.py`` by path (the fixtures are not a package)."""
    path = FIXTURES / f"{name}.py"
    mod_name = "imlint_kernels_fixture_" + re.sub(r"\W", "_", name)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VARIANTS = {
    "module": None,
    "unguarded_both": "page_split_unguarded_both",
    "unguarded_dst": "page_split_unguarded_dst",
    "unguarded_both.fixed": "page_split_unguarded_both.fixed",
    "unguarded_dst.fixed": "page_split_unguarded_dst.fixed",
}


def variant_split(variant: str) -> tuple[Callable[..., torch.Tensor], str]:
    """The entry point of a variant and the file its scratch providers live in."""
    fixture = VARIANTS[variant]
    if fixture is None:
        return K.split_kv_pages_to_64, page_split.__file__
    module = load_fixture(fixture)
    return module.split_kv_pages_to_64, str(module.__file__)


def scratch(registry: dict[Hashable, torch.Tensor], device: str) -> tuple[torch.Tensor, ...]:
    """The persistent destination and mask tensors of a registry."""
    dev = torch.device(device) if device == "cpu" else torch.device("cuda", 0)
    return registry[(K.DST_KEY, dev)], registry[(K.MASK_KEY, dev)]


def assert_raised_at_mask_zero(excinfo: pytest.ExceptionInfo[RuntimeError], path: str) -> None:
    """The inference-tensor error came from the ``mask.zero_()`` line of ``path``."""
    last = traceback.extract_tb(excinfo.value.__traceback__)[-1]
    assert Path(last.filename).resolve() == Path(path).resolve()
    assert (last.line or "").strip() == "mask.zero_()"


# ----------------------------------------------------------------------------- correctness


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("src_pbs", SPLIT_PBS)
@pytest.mark.parametrize("masked", [False, True], ids=["full", "masked"])
def test_split_matches_reference(device: str, view: str, src_pbs: int, masked: bool) -> None:
    gen = torch.Generator().manual_seed(src_pbs * 7 + VIEWS.index(view) * 2 + masked)
    n_pages = _n_pages(device)
    kv = make_pool(n_pages, src_pbs, view, device, gen)
    before = kv.clone()
    registry: dict[Hashable, torch.Tensor] = {}
    get_dst = poisoning(K.get_dst_buffer)
    for dtype in (torch.int64, torch.int32) if masked else (None,):
        indices = make_indices(n_pages, src_pbs, device, gen, dtype) if dtype else None
        out = K.split_kv_pages_to_64(kv, src_pbs, indices, registry=registry, get_dst=get_dst)
        n_dst = n_pages * src_pbs // 64
        assert out.shape == (n_dst, 64, 1, K.TOKEN_BYTES)
        assert out.stride() == (K.DST_PAGE_BYTES, K.TOKEN_BYTES, K.TOKEN_BYTES, 1)
        assert out.dtype == torch.uint8 and out.device == kv.device
        torch.testing.assert_close(out, expected_split(kv, src_pbs, indices), rtol=0, atol=0)
        if indices is not None:  # pages of untouched source pages keep the poison
            untouched = ~touched_dst_pages(indices, n_pages, src_pbs)
            assert untouched.any() and bool((out[untouched] == POISON).all())
    assert torch.equal(kv, before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("programs", [0, 1, 3])
@pytest.mark.parametrize("find", [False, True], ids=["read", "find"])
def test_masked_split_scans_the_mask_in_groups(
    device: str, group: int, programs: int, find: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several mask groups, a partial last one, and several marked pages in one group;
    one program per group, or fewer programs that each go on through several groups; the
    marked pages found by reading each byte, or by reductions."""
    monkeypatch.setattr(page_split, "MASK_GROUP", group)
    monkeypatch.setattr(page_split, "MASK_PROGRAMS", programs)
    monkeypatch.setattr(page_split, "MASK_FIND", find)
    gen = torch.Generator().manual_seed(group)
    n_pages, src_pbs = 7, 128
    kv = make_pool(n_pages, src_pbs, "4d_gap", device, gen)
    for pages in ([0, 1, 6], [5], [2, 3, 4, 5]):
        idx = torch.tensor([p * src_pbs + 3 for p in pages] + [-1], device=device)
        out = K.split_kv_pages_to_64(
            kv, src_pbs, idx, registry={}, get_dst=poisoning(K.get_dst_buffer)
        )
        assert torch.equal(out, expected_split(kv, src_pbs, idx))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block", [2, 16, 1024])
@pytest.mark.parametrize("src_pbs", SPLIT_PBS)
def test_claim_mode_splits_each_touched_page_once(
    device: str, block: int, src_pbs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-launch masked split: the same bytes as the reference for every kind of
    index the default takes (holes, duplicates, out of range, strided, empty); blocks of 2
    spread the claims over many programs, 1024 leave them to one. Afterwards the claim
    slots say exactly which (page, part) was copied."""
    monkeypatch.setattr(page_split, "MASK_MODE", "claim")
    monkeypatch.setattr(page_split, "CLAIM_BLOCK", block)
    gen = torch.Generator().manual_seed(src_pbs + block)
    n_pages = _n_pages(device)
    kv = make_pool(n_pages, src_pbs, "4d_gap", device, gen)
    n_tokens = n_pages * src_pbs
    table = make_indices(n_pages, src_pbs, device, gen, torch.int64)
    cases = [
        table,
        table.to(torch.int32)[:, 0],  # a strided column
        torch.tensor([src_pbs + 1] * 5 + [-1, -7, n_tokens, n_tokens + 99], device=device),
        torch.empty(0, dtype=torch.int32, device=device),
    ]
    for idx in cases:
        registry: dict[Hashable, torch.Tensor] = {}
        out = K.split_kv_pages_to_64(
            kv, src_pbs, idx, registry=registry, get_dst=poisoning(K.get_dst_buffer)
        )
        valid = idx[(idx >= -1) & (idx < n_tokens)]  # what the reference accepts
        assert torch.equal(out, expected_split(kv, src_pbs, valid))
        if idx.numel():
            n_dst = n_pages * src_pbs // 64
            claims = registry[(K.MASK_KEY, kv.device)][: 4 * n_dst].view(torch.int32)
            assert torch.equal(claims.bool(), touched_dst_pages(valid, n_pages, src_pbs))


@pytest.mark.parametrize("device", DEVICES)
def test_claim_launch_checks_its_slots_and_block(device: str) -> None:
    gen = torch.Generator().manual_seed(23)
    kv = make_pool(3, 128, "2d_padded", device, gen)
    geometry = page_split._geometry(kv, 128)
    dst = K.get_dst_buffer({}, kv.device, geometry.n_dst_pages)
    idx = torch.tensor([0, 200], device=device)
    slots = torch.zeros(geometry.n_dst_pages, dtype=torch.int32, device=device)
    bad_slots = [
        slots[:-1],
        slots.to(torch.int64),
        torch.zeros(12, dtype=torch.int32, device=device)[::2],
    ]
    for claims in bad_slots:
        with pytest.raises(ValueError, match="claims must be a contiguous int32 tensor of 6 slots"):
            page_split.launch_claim_split(kv, geometry, dst, idx, claims)
    with pytest.raises(ValueError, match="block=3 must be a power of two"):
        page_split.launch_claim_split(kv, geometry, dst, idx, slots, block=3)
    with pytest.raises(TypeError, match="indices must be"):
        page_split.launch_claim_split(kv, geometry, dst, idx.float(), slots)
    page_split.launch_claim_split(kv, geometry, dst, idx, slots)
    # tokens 0 and 200 touch source pages 0 and 1: both parts of each are claimed
    assert slots.tolist() == [1, 1, 1, 1, 0, 0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streaming"])
def test_cache_hints_copy_the_same_bytes(
    device: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_split, "SPLIT_STREAM", stream)
    gen = torch.Generator().manual_seed(13)
    kv = make_pool(5, 256, "4d_gap", device, gen)
    idx = torch.tensor([3, 2 * 256 + 7, -1], device=device)
    for indices in (None, idx):
        out = K.split_kv_pages_to_64(
            kv, 256, indices, registry={}, get_dst=poisoning(K.get_dst_buffer)
        )
        assert torch.equal(out, expected_split(kv, 256, indices))


@pytest.mark.parametrize("device", DEVICES)
def test_a_column_of_an_index_table_splits_its_own_pages(device: str) -> None:
    """Indices given as a strided view (a column of a request-to-token table) split the
    pages of that column, not of the table's first elements."""
    gen = torch.Generator().manual_seed(17)
    n_pages, src_pbs = 6, 128
    kv = make_pool(n_pages, src_pbs, "2d_padded", device, gen)
    table = torch.tensor([[0, 5 * 128 + 1], [1 * 128, 4 * 128], [-1, 3 * 128 + 9]], device=device)
    column = table[:, 1]
    assert not column.is_contiguous()
    out = K.split_kv_pages_to_64(
        kv, src_pbs, column, registry={}, get_dst=poisoning(K.get_dst_buffer)
    )
    assert torch.equal(out, expected_split(kv, src_pbs, column))


@pytest.mark.parametrize("device", DEVICES)
def test_indices_outside_the_pool_are_skipped_without_a_check(device: str) -> None:
    """The default (no host sync): an index outside the pool marks nothing and nothing is
    read or written outside it; the pages of the valid indices are split. sglang's mark
    kernel has no upper bound check: it would write past the mask."""
    gen = torch.Generator().manual_seed(11)
    n_pages, src_pbs = 6, 128
    kv = make_pool(n_pages, src_pbs, "2d_padded", device, gen)
    idx = torch.tensor([2 * src_pbs + 5, n_pages * src_pbs, 10**9, -7, -1], device=device)
    out = K.split_kv_pages_to_64(kv, src_pbs, idx, registry={}, get_dst=poisoning(K.get_dst_buffer))
    valid = idx[:1]
    assert torch.equal(out, expected_split(kv, src_pbs, valid))
    untouched = ~touched_dst_pages(valid, n_pages, src_pbs)
    assert int(untouched.sum()) == (n_pages - 1) * 2 and bool((out[untouched] == POISON).all())


@pytest.mark.parametrize("device", DEVICES)
def test_an_empty_index_tensor_splits_no_page(device: str) -> None:
    """No index, no touched page: every destination page keeps what it held (sglang's
    kernel splits the whole pool when handed an empty tensor)."""
    gen = torch.Generator().manual_seed(12)
    kv = make_pool(4, 256, "2d_padded", device, gen)
    none = torch.empty(0, dtype=torch.int32, device=device)
    out = K.split_kv_pages_to_64(kv, 256, none, registry={}, get_dst=poisoning(K.get_dst_buffer))
    assert bool((out == POISON).all())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src_pbs", SPLIT_PBS)
def test_token_indices_are_unchanged(device: str, src_pbs: int) -> None:
    """Global token g has the same 584 bytes in the source pool and the 64-token result."""
    gen = torch.Generator().manual_seed(src_pbs)
    kv = make_pool(_n_pages(device), src_pbs, "4d_gap", device, gen)
    out = K.split_kv_pages_to_64(kv, src_pbs, registry={})
    n_tokens = kv.shape[0] * src_pbs
    for g in [0, 63, 64, src_pbs - 1, src_pbs, n_tokens - 1, *torch.randint(0, n_tokens, (8,))]:
        g = int(g)
        assert torch.equal(
            K.token_bytes_reference(out, 64, g), K.token_bytes_reference(kv, src_pbs, g)
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_mark_pages_matches_reference(device: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(5)
    n_pages, src_pbs = 50, 128
    idx = torch.randint(-1, (n_pages - 10) * src_pbs, (3, 7, 101), generator=gen)
    idx[idx % 3 == 0] = -1
    idx = idx.to(device=device, dtype=dtype)
    mask = torch.zeros(n_pages, dtype=torch.int8, device=device)
    K.mark_pages(idx, mask, src_pbs)
    expected = K.mark_pages_reference(idx, n_pages, src_pbs)
    assert torch.equal(mask.bool(), expected) and 0 < int(expected.sum()) < n_pages
    assert set(mask.unique().tolist()) <= {0, 1}
    noncontiguous = idx.transpose(0, 2)
    mask.zero_()
    K.mark_pages(noncontiguous, mask, src_pbs)
    assert torch.equal(mask.bool(), expected)
    # A strided 1-D view (every other index, a column of a table) is read in place: its
    # reshape(-1) is itself, not a contiguous copy.
    for strided in (idx.reshape(-1)[::2], idx[:, :, 3], idx[0, 0, :1].expand(9)):
        mask.zero_()
        K.mark_pages(strided, mask, src_pbs)
        assert torch.equal(mask.bool(), K.mark_pages_reference(strided, n_pages, src_pbs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", ["2d_padded", "4d_gap"])
def test_src_pbs_64_is_a_noop(device: str, view: str) -> None:
    kv = make_pool(4, 64, view, device, torch.Generator().manual_seed(1))
    registry: dict[Hashable, torch.Tensor] = {}
    assert K.split_kv_pages_to_64(kv, 64, registry=registry) is kv
    idx = torch.tensor([0, 255, -1], device=device)
    assert K.split_kv_pages_to_64(kv, 64, idx, registry=registry) is kv
    assert K.split_kv_pages_to_64_reference(kv, 64) is kv
    assert registry == {}


@pytest.mark.parametrize("device", DEVICES)
def test_scratch_is_grow_only(device: str) -> None:
    gen = torch.Generator().manual_seed(3)
    src_pbs = 256
    big = make_pool(6, src_pbs, "2d_padded", device, gen)
    registry: dict[Hashable, torch.Tensor] = {}
    idx = torch.tensor([0, 2 * src_pbs + 1, -1], device=device)

    def call(n_pages: int) -> tuple[int, int]:
        kv = big[:n_pages]
        out = K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry)
        touched = expected_split(kv, src_pbs, idx)
        rows = touched_dst_pages(idx, n_pages, src_pbs)
        assert torch.equal(out[rows], touched[rows])
        dst, mask = scratch(registry, device)
        assert out.data_ptr() == dst.data_ptr()
        return dst.data_ptr(), mask.data_ptr()

    first = call(4)
    dst, mask = scratch(registry, device)
    assert dst.shape == (16, K.DST_PAGE_BYTES) and mask.shape == (4,)
    assert call(3) == first and call(4) == first  # smaller or equal: same storage, no realloc
    assert scratch(registry, device)[0] is dst and scratch(registry, device)[1] is mask
    grown = call(6)  # larger: both grow
    dst, mask = scratch(registry, device)
    assert dst.shape == (24, K.DST_PAGE_BYTES) and mask.shape == (6,)
    assert call(3) == grown and call(6) == grown
    assert len(registry) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_default_registry_is_per_device(device: str) -> None:
    kv = make_pool(2, 128, "2d_padded", device, torch.Generator().manual_seed(4))
    K.SCRATCH.clear()
    try:
        out = K.split_kv_pages_to_64(kv, 128)
        dev = kv.device
        assert set(K.SCRATCH) == {(K.DST_KEY, dev)}
        assert out.data_ptr() == K.SCRATCH[(K.DST_KEY, dev)].data_ptr()
    finally:
        K.SCRATCH.clear()


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("device", DEVICES)
def test_rejects_bad_input(device: str) -> None:
    gen = torch.Generator().manual_seed(9)
    kv = make_pool(2, 128, "2d_padded", device, gen)
    v4 = make_pool(2, 128, "4d_padded", device, gen)

    def fails(exc: type[Exception], pattern: str, *args: Any, validate: bool = False) -> None:
        with pytest.raises(exc, match=pattern):
            K.split_kv_pages_to_64(*args, registry={}, validate_indices=validate)

    fails(TypeError, "uint8", kv.view(torch.int8), 128)
    fails(TypeError, "uint8", kv.float(), 128)
    fails(TypeError, "torch.Tensor", kv.cpu().numpy(), 128)
    fails(TypeError, "src_pbs must be an int", kv, 128.0)
    fails(TypeError, "src_pbs must be an int", kv, True)
    fails(ValueError, "not a positive multiple of 64", kv, 96)
    fails(ValueError, "not a positive multiple of 64", kv, 0)
    fails(ValueError, "not supported", kv, 1024)
    fails(ValueError, "wrong byte size per page", kv[:, :-1], 128)
    fails(ValueError, "wrong byte size per page", kv, 256)
    fails(ValueError, "wrong byte size per token", v4[..., :576], 128)
    fails(ValueError, "tokens per page", v4, 256)
    fails(ValueError, "2-D", kv.reshape(-1), 128)
    fails(ValueError, "contiguous", kv.t().contiguous().t(), 128)
    fails(
        ValueError,
        "out of range",
        kv,
        128,
        torch.tensor([0, 2 * 128], device=device),
        validate=True,
    )
    fails(
        ValueError, "out of range", kv, 128, torch.tensor([[-2, 0]], device=device), validate=True
    )
    fails(TypeError, "int32 or torch.int64", kv, 128, torch.tensor([0.0], device=device))
    fails(
        TypeError,
        "int32 or torch.int64",
        kv,
        128,
        torch.tensor([0], dtype=torch.int16, device=device),
    )
    with pytest.raises(ValueError, match="out of range"):
        K.split_kv_pages_to_64_reference(kv, 128, torch.tensor([256], device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_rejects_scratch_a_kernel_would_write_out_of_bounds(device: str) -> None:
    """What a provider returns is checked before any kernel writes into it."""
    kv = make_pool(3, 256, "2d_padded", device, torch.Generator().manual_seed(4))
    idx = torch.tensor([0, 300], device=device)
    dst = K.get_dst_buffer
    bad_dsts = [
        lambda reg, dev, n: dst(reg, dev, n)[: n - 1],  # too few pages
        lambda reg, dev, n: dst(reg, dev, n)[:, :37000],  # pages too short
        lambda reg, dev, n: torch.zeros(K.DST_PAGE_BYTES, n, dtype=torch.uint8).t(),  # columns
        lambda reg, dev, n: torch.zeros(n, K.DST_PAGE_BYTES, device=dev),  # floats
        lambda reg, dev, n: dst(reg, dev, 1).expand(n, -1),  # every page the same bytes
    ]
    for bad in bad_dsts:
        with pytest.raises(ValueError, match="the destination from get_dst must be"):
            K.split_kv_pages_to_64(kv, 256, registry={}, get_dst=bad)
    bad_masks = [
        lambda reg, dev, n: torch.zeros(2 * n, dtype=torch.int8, device=dev)[::2],  # strided
        lambda reg, dev, n: torch.zeros(n - 1, dtype=torch.int8, device=dev),  # too short
    ]
    for bad in bad_masks:
        with pytest.raises(ValueError, match="the mask from get_mask must be"):
            K.split_kv_pages_to_64(kv, 256, idx, registry={}, get_mask=bad)
    with pytest.raises(ValueError, match="mask must be uint8/int8 contiguous bytes, 1-D"):
        K.mark_pages(idx, torch.zeros(8, dtype=torch.int8, device=device)[::2], 256)
    with pytest.raises(TypeError, match="indices must be"):
        K.mark_pages(idx.float(), torch.zeros(4, dtype=torch.int8, device=device), 256)


def test_rejects_cpu_tensor_without_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    kv = make_pool(2, 128, "2d_padded", "cpu", torch.Generator().manual_seed(2))
    monkeypatch.setattr(page_split, "INTERPRETED", False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        K.split_kv_pages_to_64(kv, 128, registry={})


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU")
def test_rejects_indices_on_another_device() -> None:
    kv = make_pool(2, 128, "2d_padded", "cuda", torch.Generator().manual_seed(2))
    with pytest.raises(ValueError, match="indices are on cpu"):
        K.split_kv_pages_to_64(kv, 128, torch.tensor([0]), registry={})


def test_launch_keys_hold_what_the_jit_specializes_on() -> None:
    """Two launches share a compiled kernel only when every argument's class is the same:
    dtype and 16-byte alignment of a tensor; an int equal to 1, divisible by 16, 32-bit."""
    arg_class = sys.modules["imlint.kernels.launch"]._arg_class
    storage = torch.zeros(64, dtype=torch.uint8)
    aligned, unaligned = storage[:32], storage[8:40]
    assert arg_class(storage[16:48]) == arg_class(aligned) != arg_class(unaligned)
    assert arg_class(aligned) != arg_class(aligned.view(torch.int8))
    assert arg_class(16) == arg_class(2**31 - 16) and arg_class(2) == arg_class(17)
    distinct = [arg_class(v) for v in (1, 2, 16, 2**31, 2**31 + 1, 2**63)]
    assert len(set(distinct)) == len(distinct)


def test_direct_launches_stop_while_a_launch_hook_or_debug_mode_is_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton's own knobs: an empty hook chain (the default) allows direct launches; a hook
    added to the chain, a function put in its place, or debug mode sends launches through
    the JIT, which calls the hooks and checks."""
    import triton

    launch = sys.modules["imlint.kernels.launch"]
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if not hasattr(getattr(runtime, "launch_enter_hook", None), "add"):
        pytest.skip("a triton without hook chains (< 3.5): every launch goes through the JIT")
    assert launch._direct_ok()
    hook = lambda metadata: None  # noqa: E731
    runtime.launch_enter_hook.add(hook)
    try:
        assert not launch._direct_ok()
    finally:
        runtime.launch_enter_hook.remove(hook)
    assert launch._direct_ok()
    monkeypatch.setattr(runtime, "launch_exit_hook", hook)
    assert not launch._direct_ok()
    monkeypatch.undo()
    monkeypatch.setattr(runtime, "debug", True)
    assert not launch._direct_ok()


class _FakeCompiled:
    """Stands for Triton's ``CompiledKernel``: its launcher ``run`` takes the grid, the
    stream, the function, the metadata, the launch metadata, two hooks, then every
    parameter of the kernel."""

    function, packed_metadata = "function", "packed"

    def __init__(self, log: list[tuple[object, ...]], fail: bool) -> None:
        self.log, self.fail = log, fail

    def run(self, gx: int, gy: int, gz: int, stream: int, *rest: object) -> None:
        if self.fail:
            raise TypeError("function takes exactly 13 arguments")
        assert rest[:5] == ("function", "packed", None, None, None)
        self.log.append(("direct", (gx, gy, gz), stream, rest[5:]))


class _FakeKernel:
    """Stands for a ``JITFunction``: ``fn[grid](...)`` launches through the JIT and returns
    the compiled kernel."""

    arg_names = ["x_ptr", "n", "BLOCK"]
    used_global_vals: dict[object, object] = {}
    pre_run_hooks: list[object] = []

    def __init__(self, fail: bool = False) -> None:
        self.log: list[tuple[object, ...]] = []
        self.compiled = _FakeCompiled(self.log, fail)

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., _FakeCompiled]:
        def run(*args: object, **kwargs: object) -> _FakeCompiled:
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled

        return run


@pytest.fixture
def fake_launch(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    from types import SimpleNamespace

    launch = sys.modules["imlint.kernels.launch"]
    monkeypatch.setattr(launch, "JITFunction", _FakeKernel)
    monkeypatch.setattr(launch, "_direct_ok", lambda: True)
    monkeypatch.setattr(launch, "_COMPILED", {})
    monkeypatch.setattr(launch._State, "direct", True)
    streams = SimpleNamespace(get_current_stream=lambda index: 100 + (index or 0))
    monkeypatch.setattr(launch, "_driver", SimpleNamespace(active=streams))
    return launch


def test_a_launch_reuses_the_compiled_kernel_for_the_same_argument_classes(
    fake_launch: ModuleType,
) -> None:
    fn, x = _FakeKernel(), torch.zeros(32, dtype=torch.uint8)
    dev, consts = torch.device("cpu"), fake_launch.constexprs
    for n in (32, 48, 1, 1):
        fake_launch.launch(fn, (4,), (x, n), consts(BLOCK=64), 4, dev)
    assert [entry[0] for entry in fn.log] == ["jit", "direct", "jit", "direct"]
    assert fn.log[0] == ("jit", (4,), (x, 32), {"BLOCK": 64, "num_warps": 4})
    # the current stream; every parameter, constexprs last; the grid in 3-D
    assert fn.log[1] == ("direct", (4, 1, 1), 100, (x, 48, 64))
    fake_launch.launch(fn, (4,), (x, 48), consts(BLOCK=128), 4, dev)  # another constexpr
    fake_launch.launch(fn, (4,), (x, 48), consts(BLOCK=True), 4, dev)  # True == 1, not the same
    fake_launch.launch(fn, (4,), (x, 48), consts(BLOCK=64), 8, dev)  # other warps
    fake_launch.launch(fn, (4,), (x[8:], 48), consts(BLOCK=64), 4, dev)  # unaligned
    assert [entry[0] for entry in fn.log[4:]] == ["jit", "jit", "jit", "jit"]
    fn.used_global_vals = {("G", 0): (1, {})}  # a kernel whose globals the JIT checks
    other = (torch.zeros(16, dtype=torch.int8), 32)
    for _ in range(2):
        fake_launch.launch(fn, (4,), other, consts(BLOCK=64), 4, dev)
    assert [entry[0] for entry in fn.log[8:]] == ["jit", "jit"]


def test_a_direct_launch_that_raises_turns_direct_launches_off(fake_launch: ModuleType) -> None:
    """A launcher that takes other arguments than expected: the launch still happens,
    through the JIT, and so does every later one."""
    fn, x = _FakeKernel(fail=True), torch.zeros(32, dtype=torch.uint8)
    dev, consts = torch.device("cpu"), fake_launch.constexprs
    fake_launch.launch(fn, (2,), (x, 32), consts(BLOCK=64), 4, dev)
    with pytest.warns(RuntimeWarning, match="direct Triton launches are off"):
        fake_launch.launch(fn, (2,), (x, 32), consts(BLOCK=64), 4, dev)
    fake_launch.launch(fn, (2,), (x, 32), consts(BLOCK=64), 4, dev)
    assert [entry[0] for entry in fn.log] == ["jit", "jit", "jit"]
    assert not fake_launch._COMPILED


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU")
def test_launches_after_the_first_skip_the_jit_per_specialization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The JIT runs once per argument specialization; later launches reuse its compiled
    kernel and write the same bytes. An unaligned pool is another specialization, and a
    launch hook (a profiler) sends every launch through the JIT again."""
    import triton
    from triton.runtime.jit import JITFunction

    sys.modules["imlint.kernels.launch"]._COMPILED.clear()
    through_jit: list[str] = []
    real_run = JITFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        through_jit.append(self.__name__)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "run", run)
    gen = torch.Generator().manual_seed(31)
    kv = make_pool(9, 256, "2d_padded", "cuda", gen)
    idx = make_indices(9, 256, "cuda", gen, torch.int32)
    registry: dict[Hashable, torch.Tensor] = {}
    provider = poisoning(K.get_dst_buffer)
    for _ in range(3):
        for indices in (None, idx):
            out = K.split_kv_pages_to_64(kv, 256, indices, registry=registry, get_dst=provider)
            assert torch.equal(out, expected_split(kv, 256, indices))
    assert sorted(through_jit) == ["_mark_pages_kernel", "_page_split_kernel", "_page_split_kernel"]
    storage = torch.randint(0, 256, (8 + kv.numel(),), dtype=torch.uint8, generator=gen).cuda()
    unaligned = storage[8:].view(kv.shape)
    assert unaligned.data_ptr() % 16 == 8
    for _ in range(2):
        out = K.split_kv_pages_to_64(unaligned, 256, registry=registry, get_dst=provider)
        assert torch.equal(out, expected_split(unaligned, 256))
    assert through_jit.count("_page_split_kernel") == 3
    hooked: list[object] = []
    triton.knobs.runtime.launch_enter_hook.add(hooked.append)
    try:
        out = K.split_kv_pages_to_64(kv, 256, registry=registry, get_dst=provider)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hooked.append)
    assert torch.equal(out, expected_split(kv, 256))
    assert through_jit.count("_page_split_kernel") == 4 and len(hooked) == 1


# ----------------------------------------------------------------------------- the seed's table


def first_touch_under_inference_mode(
    split: Callable[..., torch.Tensor],
    kv: torch.Tensor,
    src_pbs: int,
    idx: torch.Tensor,
    registry: dict[Hashable, torch.Tensor],
) -> None:
    """A simulated autotune warm-up: the first call of the process, under inference mode."""
    with torch.inference_mode():
        split(kv, src_pbs, idx, registry=registry)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_inference_mode_first_touch_on_cpu(variant: str) -> None:
    """The seed's rows without graph capture: a later call outside inference mode."""
    if not K.INTERPRETED:
        pytest.skip("kernels compiled for a GPU, not interpreted")
    split, path = variant_split(variant)
    gen = torch.Generator().manual_seed(11)
    kv = make_pool(2, 256, "4d_padded", "cpu", gen)
    idx = make_indices(2, 256, "cpu", gen, torch.int64)
    registry: dict[Hashable, torch.Tensor] = {}
    first_touch_under_inference_mode(split, kv, 256, idx, registry)
    dst, mask = scratch(registry, "cpu")
    if variant == "unguarded_both":  # row 2: the torch-level write at mask.zero_() raises
        assert dst.is_inference() and mask.is_inference()
        with pytest.raises(RuntimeError, match=re.escape(INFERENCE_ERROR)) as excinfo:
            split(kv, 256, idx, registry=registry)
        assert_raised_at_mask_zero(excinfo, path)
        return
    out = split(kv, 256, idx, registry=registry)
    rows = touched_dst_pages(idx, 2, 256)
    assert torch.equal(out[rows], expected_split(kv, 256, idx)[rows])
    assert not mask.is_inference()
    if variant == "unguarded_dst":  # row 3: runs, but the destination is an inference tensor
        assert dst.is_inference()
        with pytest.raises(RuntimeError, match=re.escape(INFERENCE_ERROR)):
            out.fill_(0)  # the latent hazard: any future torch-level write to it fails
    else:  # row 1 (and the fixed fixtures): ordinary tensors
        assert not dst.is_inference()
        out.fill_(0)


# ----------------------------------------------------------------------------- fixture files


def _function_bodies(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    lines = source.splitlines()
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in ("get_dst_buffer", "get_page_mask")
    }


def _strip_guards(code: str) -> str:
    """Remove guard lines, comments and the extra indentation the guard gave its body."""
    out: list[str] = []
    guard_indent: int | None = None
    for line in code.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.strip() == "with torch.inference_mode(False):":
            guard_indent = indent
            continue
        if line.strip().startswith("#"):
            continue
        if guard_indent is not None and indent > guard_indent:
            line = line[4:]
        else:
            guard_indent = None
        out.append(line.split("  # expect:")[0])
    return textwrap.dedent("\n".join(out))


@pytest.mark.parametrize("fixture", ["page_split_unguarded_both", "page_split_unguarded_dst"])
def test_fixtures_differ_from_module_only_by_guards(fixture: str) -> None:
    module = _function_bodies(Path(page_split.__file__).read_text())
    before = (FIXTURES / f"{fixture}.py").read_text()
    fixed = (FIXTURES / f"{fixture}.fixed.py").read_text()
    variant = _function_bodies(before)
    assert set(module) == set(variant) == {"get_dst_buffer", "get_page_mask"}
    for name in module:
        assert _strip_guards(variant[name]) == _strip_guards(module[name])
    # The fixed file is the fixture with each marked allocation wrapped, nothing else.
    rewrapped: list[str] = []
    for line in before.splitlines(keepends=True):
        if "# expect: IM00" in line:
            indent = line[: len(line) - len(line.lstrip())]
            rewrapped.append(f"{indent}with torch.inference_mode(False):\n")
            line = "    " + line
        rewrapped.append(line)
    assert fixed == "".join(rewrapped)
    markers = [line for line in before.splitlines() if "# expect:" in line]
    expected = {
        "page_split_unguarded_both": ["IM002", "IM001"],
        "page_split_unguarded_dst": ["IM002"],
    }
    assert [m.split("# expect: ")[1] for m in markers] == expected[fixture]
    assert all("torch.empty(" in m for m in markers)


# ----------------------------------------------------------------------------- GPU: CUDA graphs


def capture_and_replay(fn: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """Warm up on a side stream, capture ``fn`` into a CUDA graph, replay it once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph, out


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU")
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("view", ["2d_padded", "4d_gap"])
def test_cuda_graph_rows(variant: str, view: str) -> None:
    """The seed's table: inference-mode first touch, then warm-up, capture, replay outside."""
    split, path = variant_split(variant)
    gen = torch.Generator().manual_seed(21)
    n_pages = 40
    kv = make_pool(n_pages, 256, view, "cuda", gen)
    idx = make_indices(n_pages, 256, "cuda", gen, torch.int32)
    registry: dict[Hashable, torch.Tensor] = {}
    first_touch_under_inference_mode(split, kv, 256, idx, registry)
    torch.cuda.synchronize()

    def step() -> torch.Tensor:
        return split(kv, 256, idx, registry=registry)

    dst, mask = scratch(registry, "cuda")
    if variant == "unguarded_both":  # row 2: capture fails at the mask's zero
        with pytest.raises(RuntimeError, match=re.escape(INFERENCE_ERROR)) as excinfo:
            capture_and_replay(step)
        assert_raised_at_mask_zero(excinfo, path)
        assert dst.is_inference() and mask.is_inference()
        return
    graph, out = capture_and_replay(step)
    out_ref = expected_split(kv, 256, idx)
    rows = touched_dst_pages(idx, n_pages, 256)
    assert torch.equal(out[rows], out_ref[rows])
    # Replays recompute from the graph's static inputs: new bytes and new indices.
    kv.copy_(make_pool(n_pages, 256, view, "cuda", gen))
    idx.copy_(make_indices(n_pages, 256, "cuda", gen, torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    rows = touched_dst_pages(idx, n_pages, 256)
    assert torch.equal(out[rows], expected_split(kv, 256, idx)[rows])
    assert scratch(registry, "cuda") == (dst, mask)  # no reallocation across capture/replay
    assert not mask.is_inference()
    # Row 1 (and the fixed fixtures): ordinary; row 3: runs, destination latent inference.
    assert dst.is_inference() == (variant == "unguarded_dst")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU")
def test_claim_mode_graph_replays_clear_the_slots_and_follow_new_indices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claim mode depends on the captured clear: a replay that kept the last replay's claims
    would copy nothing new. Each replay, with new bytes and new indices, is right."""
    monkeypatch.setattr(page_split, "MASK_MODE", "claim")
    gen = torch.Generator().manual_seed(29)
    n_pages = 40
    kv = make_pool(n_pages, 256, "4d_gap", "cuda", gen)
    idx = make_indices(n_pages, 256, "cuda", gen, torch.int32)
    registry: dict[Hashable, torch.Tensor] = {}
    graph, out = capture_and_replay(lambda: K.split_kv_pages_to_64(kv, 256, idx, registry=registry))
    for replay in range(4):
        if replay:
            kv.copy_(make_pool(n_pages, 256, "4d_gap", "cuda", gen))
            idx.copy_(make_indices(n_pages, 256, "cuda", gen, torch.int32))
            graph.replay()
            torch.cuda.synchronize()
        rows = touched_dst_pages(idx, n_pages, 256)
        assert torch.equal(out[rows], expected_split(kv, 256, idx)[rows])


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or K.INTERPRETED, reason="needs a CUDA GPU")
def test_cuda_graph_capture_itself_aborts_at_mask_zero() -> None:
    """Row 2 with the autotune pass as the only warm-up: the error fires inside capture."""
    split, path = variant_split("unguarded_both")
    gen = torch.Generator().manual_seed(22)
    kv = make_pool(8, 128, "2d_padded", "cuda", gen)
    idx = make_indices(8, 128, "cuda", gen, torch.int64)
    registry: dict[Hashable, torch.Tensor] = {}
    first_touch_under_inference_mode(split, kv, 128, idx, registry)
    graph = torch.cuda.CUDAGraph()
    error = pytest.raises(RuntimeError, match=re.escape(INFERENCE_ERROR))
    with error as excinfo, torch.cuda.graph(graph):
        split(kv, 128, idx, registry=registry)
    assert_raised_at_mask_zero(excinfo, path)
    torch.cuda.synchronize()
