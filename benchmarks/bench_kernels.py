"""Benchmark of ``imlint.kernels`` on a CUDA GPU; numbers go into ``kernels/NOTES.md``.

For each source page size it builds a footer-layout pool of at least ``--gib`` GiB of random
bytes and reports, as medians of ``triton.testing.do_bench`` (CUDA events, L2 flushed before
every run):

* the full split, against a plain torch device-to-device copy of the same number of bytes
  (bandwidth counted as bytes read + bytes written);
* the masked split with 1% of the source pages touched (64k token indices), replayed from a
  CUDA graph (mask.zero_ + mark + split), against the same with no page touched (the fixed
  launch-and-scan cost, reported separately) and against the full split;
* the mark kernel alone for 64k indices;
* a sweep of the split kernel's launch configuration (``--sweep``), with the masked split's
  fixed cost broken down and the one-launch masked split (``MASK_MODE = "claim"``).

Usage: ``python3 benchmarks/bench_kernels.py [--gib 2] [--sweep]`` from the repository root;
``TRITON_INTERPRET=1 python3 benchmarks/bench_kernels.py --sweep --dry-run`` runs every code
path on the CPU, untimed (a test does, so that the script does not rot between GPU runs).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
import triton
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
#: full-split configurations swept: (chunk bytes, warps, streaming cache hints)
SWEEP = [
    (4096, 8, False),
    (12288, 16, False),
    (36864, 16, False),
    (36864, 16, True),
    (36864, 32, False),
    (18432, 32, False),
    (12288, 32, False),
    (9216, 32, False),
]
MASKED_SWEEP = [(36864, 16), (36864, 32), (12288, 8), (4096, 4)]
GROUP_SWEEP = [4, 32, 64, 128]
#: masked split, persistent grid: (programs per part, chunk, warps)
PROGRAM_SWEEP = [
    (264, 36864, 16),
    (528, 36864, 16),
]
MARK_SWEEP = [256, 512, 2048]
CLAIM_SWEEP = [64, 256, 1024]
N_INDICES = 64 * 1024
DEVICE = "cuda"


def import_kernels() -> ModuleType:
    """Import ``imlint.kernels`` installed, or from this source checkout by path."""
    try:
        return importlib.import_module("imlint.kernels")
    except Exception:  # not installed, or the linter package does not import on this machine
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


K = import_kernels()
PS = sys.modules["imlint.kernels.page_split"]
LAYOUT = sys.modules["imlint.kernels.layout"]


def median_ms(fn: Callable[[], object], rep: int = 200) -> float:
    """Median time of ``fn`` in milliseconds (do_bench: events, L2 flushed before each run)."""
    return float(do_bench(fn, warmup=50, rep=rep, return_mode="median"))


def graph_of(fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """Warm ``fn`` up on a side stream and capture it into a CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def sync() -> None:
    """Wait for the GPU (nothing to wait for in a dry run)."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _dry_run() -> None:
    """Every code path on CPU tensors in the Triton interpreter, tiny, each timed call made
    once and reported as nan: checks the script, not the speed (``tests/`` runs it)."""

    def once(fn: Callable[[], object], rep: int = 200) -> float:
        fn()
        return float("nan")

    def replayable(fn: Callable[[], object]) -> Any:
        fn()
        return SimpleNamespace(replay=fn)

    globals().update(DEVICE="cpu", N_INDICES=2048, median_ms=once, graph_of=replayable)


def copy_ceiling_ms(n_bytes: int) -> float:
    """Median time of a plain torch device-to-device copy of ``n_bytes`` random bytes."""
    src = torch.randint(0, 256, (n_bytes,), dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    return median_ms(lambda: dst.copy_(src))


def touched_indices(
    n_pages: int, src_pbs: int, fraction: float, gen: torch.Generator
) -> torch.Tensor:
    """64k token indices (a tenth of them -1) inside a random ``fraction`` of the pages."""
    n_touched = max(1, round(n_pages * fraction))
    pages = torch.randperm(n_pages, generator=gen)[:n_touched]
    pick = pages[torch.randint(0, n_touched, (N_INDICES,), generator=gen)]
    idx = pick * src_pbs + torch.randint(0, src_pbs, (N_INDICES,), generator=gen)
    idx[torch.rand(N_INDICES, generator=gen) < 0.1] = -1
    return idx.to(device=DEVICE, dtype=torch.int32)


def bench_page_size(src_pbs: int, gib: float, sweep: bool, rows: list[str]) -> None:
    """Measure one source page size and append its summary row."""
    gen = torch.Generator().manual_seed(src_pbs)
    page_bytes = K.padded_page_bytes(src_pbs)
    n_pages = -(-int(gib * 2**30) // page_bytes)
    pool = torch.randint(0, 256, (n_pages, page_bytes), dtype=torch.uint8, device=DEVICE)
    kv = K.paged_view(pool, src_pbs)  # the 4-D (pages, src_pbs, 1, 584) strided view
    geometry = LAYOUT.page_geometry(kv, src_pbs)
    n_dst = geometry.n_dst_pages
    moved = n_dst * LAYOUT.DST_USED_BYTES  # bytes read == bytes written
    print(
        f"\n== src_pbs={src_pbs}: {n_pages} source pages x {page_bytes} B = "
        f"{pool.numel() / 2**30:.3f} GiB pool -> {n_dst} dst pages x {K.DST_PAGE_BYTES} B; "
        f"{moved / 2**30:.3f} GiB read + {moved / 2**30:.3f} GiB written"
    )
    registry: dict = {}
    t_copy, t_full, bw_ratio = bench_full(kv, src_pbs, geometry, moved, registry, sweep)
    t_masked, t_overhead, t_mark = bench_masked(kv, src_pbs, geometry, registry, gen, t_full, sweep)
    rows.append(
        f"{src_pbs:4d} {pool.numel() / 2**30:6.3f} {t_copy * 1e3:9.1f} {t_full * 1e3:9.1f} "
        f"{bw_ratio:7.1%} {t_masked * 1e3:8.1f} {t_overhead * 1e3:8.1f} "
        f"{t_masked / t_full:7.2%} {t_mark * 1e3:7.1f}"
    )


def bench_full(
    kv: torch.Tensor, src_pbs: int, geometry: Any, moved: int, registry: dict, sweep: bool
) -> tuple[float, float, float]:
    """The full split against a torch copy of the same bytes: (copy ms, split ms, split
    bandwidth / copy bandwidth)."""
    out = K.split_kv_pages_to_64(kv, src_pbs, registry=registry)
    sync()
    ok = torch.equal(out, K.split_kv_pages_to_64_reference(kv, src_pbs))
    print(f"full split equals the torch reference: {ok}")
    if not ok:
        raise SystemExit("wrong result")
    dst = registry[(K.DST_KEY, kv.device)]

    t_copy = copy_ceiling_ms(moved)
    t_full = median_ms(lambda: K.split_kv_pages_to_64(kv, src_pbs, registry=registry))
    t_kernel = median_ms(lambda: PS.launch_split(kv, geometry, dst, None))
    bw_copy = 2 * moved / t_copy / 1e6
    bw_full = 2 * moved / t_full / 1e6
    bw_kernel = 2 * moved / t_kernel / 1e6
    print(f"torch copy_ of {moved} B:        {t_copy * 1e3:9.1f} us  {bw_copy:7.0f} GB/s (ceiling)")
    print(
        f"full split (public call):        {t_full * 1e3:9.1f} us  {bw_full:7.0f} GB/s  "
        f"{bw_full / bw_copy:6.1%} of copy"
    )
    print(
        f"full split (kernel launch only): {t_kernel * 1e3:9.1f} us  {bw_kernel:7.0f} GB/s  "
        f"{bw_kernel / bw_copy:6.1%} of copy"
    )
    if sweep:
        for chunk, warps, stream in SWEEP:
            t = median_ms(
                lambda c=chunk, w=warps, st=stream: PS.launch_split(
                    kv, geometry, dst, None, chunk=c, num_warps=w, stream=st
                )
            )
            bw = 2 * moved / t / 1e6
            print(
                f"  sweep chunk={chunk:5d} warps={warps:2d} stream={stream:d}: {t * 1e3:9.1f} us  "
                f"{bw:7.0f} GB/s  {bw / bw_copy:6.1%} of copy"
            )
    return t_copy, t_full, bw_full / bw_copy


def bench_masked(
    kv: torch.Tensor,
    src_pbs: int,
    geometry: Any,
    registry: dict,
    gen: torch.Generator,
    t_full: float,
    sweep: bool,
) -> tuple[float, float, float]:
    """The masked split (1% of the pages touched, and none): (1% ms, none ms, mark ms)."""
    n_pages = kv.shape[0]
    dst = registry[(K.DST_KEY, kv.device)]
    # Masked: 1% of the source pages touched by 64k indices; and nothing touched.
    idx = touched_indices(n_pages, src_pbs, 0.01, gen)
    none = torch.full_like(idx, -1)
    marked = K.mark_pages_reference(idx, n_pages, src_pbs)
    dst.fill_(0xAB)  # poison: the masked split must write exactly the touched pages
    expected = K.split_kv_pages_to_64_reference(kv, src_pbs, idx, out=dst.clone())
    out = K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry)
    sync()
    ok = torch.equal(out, expected)
    print(f"masked split equals the torch reference: {ok} ({int(marked.sum())} pages touched)")
    if not ok:
        raise SystemExit("wrong result")
    graph_1pct = graph_of(
        lambda: K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry, validate_indices=False)
    )
    graph_none = graph_of(
        lambda: K.split_kv_pages_to_64(kv, src_pbs, none, registry=registry, validate_indices=False)
    )
    t_masked = median_ms(graph_1pct.replay)
    t_overhead = median_ms(graph_none.replay)
    t_eager = median_ms(
        lambda: K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry, validate_indices=False)
    )
    mask = registry[(K.MASK_KEY, kv.device)][:n_pages]
    t_split_masked = median_ms(lambda: PS.launch_split(kv, geometry, dst, mask))
    if sweep:
        variants = [(PS.MASK_GROUP, c, w, 0, False) for c, w in MASKED_SWEEP]
        variants += [(g, *PS.MASKED_CONFIG, 0, False) for g in GROUP_SWEEP if g != PS.MASK_GROUP]
        variants += [(PS.MASK_GROUP, c, w, n, False) for n, c, w in PROGRAM_SWEEP]
        variants += [(g, *PS.MASKED_CONFIG, 0, True) for g in [PS.MASK_GROUP, *GROUP_SWEEP]]
        for group, chunk, warps, programs, find in variants:
            t = median_ms(
                lambda g=group, c=chunk, w=warps, n=programs, f=find: PS.launch_split(
                    kv, geometry, dst, mask, chunk=c, num_warps=w, group=g, programs=n, find=f
                )
            )
            print(
                f"  sweep masked split kernel alone, group={group:3d} chunk={chunk:5d} "
                f"warps={warps:2d} programs={programs or 'all':>4} find={find:d}: "
                f"{t * 1e3:8.1f} us"
            )
        for block in MARK_SWEEP:
            g = graph_of(lambda b=block: K.mark_pages(idx, mask, src_pbs, block=b))
            print(
                f"  sweep mark kernel (graph), block={block:4d}: {median_ms(g.replay) * 1e3:8.1f} us"
            )
    graph_mark = graph_of(lambda: K.mark_pages(idx, mask, src_pbs))
    t_mark = median_ms(graph_mark.replay)
    if sweep:
        fixed_costs(idx, mask, src_pbs)
        claim_mode(kv, src_pbs, idx, none, expected, t_full)
    print(
        f"masked 1% (graph: zero+mark+split): {t_masked * 1e3:8.1f} us  "
        f"{t_masked / t_full:6.2%} of full"
    )
    print(
        f"  no page touched (graph, launch+scan overhead): {t_overhead * 1e3:8.1f} us; "
        f"1% minus overhead: {(t_masked - t_overhead) * 1e3:8.1f} us = "
        f"{(t_masked - t_overhead) / t_full:6.2%} of full"
    )
    print(f"  masked split kernel alone (eager launch):     {t_split_masked * 1e3:8.1f} us")
    print(f"  eager public call (Python + 3 launches):      {t_eager * 1e3:8.1f} us")
    print(
        f"mark kernel, {N_INDICES} indices (graph):         {t_mark * 1e3:8.1f} us  "
        f"{t_mark / t_full:6.2%} of full split"
    )
    return t_masked, t_overhead, t_mark


@triton.jit
def _nothing(x_ptr):
    """A kernel that does nothing: the floor of a measured graph replay."""
    pass


def fixed_costs(idx: torch.Tensor, mask: torch.Tensor, src_pbs: int) -> None:
    """Where the masked split's fixed cost goes: graph replays of a kernel that does
    nothing, of the mask's zero alone, and of zero + mark."""
    floor = graph_of(lambda: _nothing[(1,)](mask))
    zero = graph_of(mask.zero_)
    zero_mark = graph_of(lambda: (mask.zero_(), K.mark_pages(idx, mask, src_pbs)))
    for name, g in (("empty kernel", floor), ("mask zero", zero), ("zero + mark", zero_mark)):
        print(f"  fixed cost (graph) {name:>13}: {median_ms(g.replay) * 1e3:8.1f} us")


def claim_mode(
    kv: torch.Tensor,
    src_pbs: int,
    idx: torch.Tensor,
    none: torch.Tensor,
    expected: torch.Tensor,
    t_full: float,
) -> None:
    """The one-launch masked split (``MASK_MODE = "claim"``), graph replays of the public
    call (the mask's zero + claim-and-copy), 1% of the pages touched and none, per block."""
    saved = PS.MASK_MODE, PS.CLAIM_BLOCK
    registry: dict = {}
    # as a page table lists them (each page's tokens together), and in random order (the
    # indices of one page spread over every program: which program wins it is a race)
    ordered = idx.sort().values
    try:
        for block in CLAIM_SWEEP:
            PS.MASK_MODE, PS.CLAIM_BLOCK = "claim", block
            for name, ids in (("random", idx), ("ordered", ordered)):
                K.split_kv_pages_to_64(kv, src_pbs, ids, registry=registry)
                registry[(K.DST_KEY, kv.device)].fill_(0xAB)
                out = K.split_kv_pages_to_64(kv, src_pbs, ids, registry=registry)
                sync()
                if not torch.equal(out, expected):
                    raise SystemExit(f"claim mode, block={block}: wrong result")
                graph = graph_of(
                    lambda i=ids: K.split_kv_pages_to_64(kv, src_pbs, i, registry=registry)
                )
                t = median_ms(graph.replay)
                print(
                    f"  sweep claim mode (graph: zero + claim-and-copy), block={block:4d} "
                    f"{name:>7}: 1% {t * 1e3:8.1f} us = {t / t_full:6.2%} of full"
                )
            graph = graph_of(lambda: K.split_kv_pages_to_64(kv, src_pbs, none, registry=registry))
            t0 = median_ms(graph.replay)
            print(f"  sweep claim mode, block={block:4d}, no page touched: {t0 * 1e3:8.1f} us")
    finally:
        PS.MASK_MODE, PS.CLAIM_BLOCK = saved
    graph = graph_of(lambda: K.split_kv_pages_to_64(kv, src_pbs, ordered, registry=registry))
    print(f"  scan mode (the default), ordered indices: {median_ms(graph.replay) * 1e3:8.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0, help="source pool size in GiB")
    parser.add_argument("--sweep", action="store_true", help="also sweep launch configurations")
    parser.add_argument("--pbs", type=int, nargs="*", default=[128, 256, 512])
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run every code path on the CPU interpreter (TRITON_INTERPRET=1), tiny, untimed",
    )
    args = parser.parse_args()
    if args.dry_run:
        if not K.INTERPRETED:
            raise SystemExit("--dry-run needs TRITON_INTERPRET=1 set before the kernels load")
        _dry_run()
        args.gib = min(args.gib, 0.003)
        print("dry run: CPU interpreter, tiny pools, times are nan")
    elif not torch.cuda.is_available() or K.INTERPRETED:
        raise SystemExit("needs a CUDA GPU (and TRITON_INTERPRET unset)")
    else:
        props = torch.cuda.get_device_properties(0)
        print(
            f"device: {props.name}, {props.multi_processor_count} SMs; torch "
            f"{torch.__version__}, triton {triton.__version__}; split chunk="
            f"{PS.SPLIT_CHUNK_BYTES} warps={PS.SPLIT_NUM_WARPS}; masked (chunk, warps)="
            f"{PS.MASKED_CONFIG} group={PS.MASK_GROUP}; times are do_bench medians"
        )
    rows: list[str] = []
    for src_pbs in args.pbs:
        bench_page_size(src_pbs, args.gib, args.sweep, rows)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    print("\nsummary (us; full% = split bandwidth / torch copy bandwidth; masked% = masked / full)")
    print(" pbs    GiB   copy_us   full_us   full%  mask1%us  mask0%us masked% mark_us")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
