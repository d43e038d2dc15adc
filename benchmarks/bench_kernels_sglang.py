"""imlint's page split side by side with sglang's, on one GPU: same inputs, same
``do_bench``, identical output bytes checked first.

    python benchmarks/bench_kernels_sglang.py                       # sglang from .cache/src
    python benchmarks/bench_kernels_sglang.py --download 0.5.23     # fetch the wheel first
    python benchmarks/bench_kernels_sglang.py --sglang-file PATH    # a flash_mla_sm120.py

sglang's kernels are read from its public wheel (``--download`` puts the wheel under the
ignored ``.cache/wheels/``; without it the newest ``.cache/src/sglang-*`` tree from
``bench_accuracy.py --download`` is used). The page-split functions and the constants they
use are extracted from ``sglang/kernels/ops/attention/flash_mla_sm120.py`` into a temporary
module that is never committed, with sglang's scratch registry replaced by a local dict.

Printed: one table, a row per pool size, source page size, split (full, or masked with 1%
of the pages touched by 64k indices) and way of running (``graph``: CUDA graph replay;
``eager``: one call, Python and every launch, timed on the GPU by ``do_bench``; ``host``:
the host's time per call of back-to-back eager calls): imlint us, sglang us, sglang /
imlint, a torch copy of the same bytes us, and copy / imlint (the share of copy bandwidth;
for a masked split the copy is of the touched pages' bytes). Eager imlint calls use the defaults (``validate_indices`` off:
see ``kernels/NOTES.md``).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernels import (
    DEVICE,
    LAYOUT,
    K,
    graph_of,
    median_ms,
    touched_indices,
)

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"
KERNEL_FILE = "sglang/kernels/ops/attention/flash_mla_sm120.py"
FUNCTIONS = ("_page_split_kernel", "_page_mark_kernel", "_split_kv_pages_to_64")
CONSTANTS = (
    "_PBS_DST",
    "_NOPE_ROPE_STRIDE",
    "_SCALE_STRIDE",
    "_BYTES_PER_DST_PAGE",
    "_BYTES_PER_DST_PAGE_PADDED",
)
HEADER = """\
# Extracted at run time from sglang's public wheel by benchmarks/bench_kernels_sglang.py;
# never committed. sglang's scratch registry is replaced by a local dict.
import math
from typing import Optional

import torch
import triton
import triton.language as tl

_BUFFERS = {}
"""


def download(version: str) -> Path:
    """sglang's kernel file from its wheel on PyPI (cached under ``.cache/wheels``)."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wheels = sorted(folder.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder),
             f"sglang=={version}"],
            check=True,
        )  # fmt: skip
        wheels = sorted(folder.glob(f"sglang-{version}-*.whl"))
    out = folder / f"sglang-{version}-flash_mla_sm120.py"
    with zipfile.ZipFile(wheels[-1]) as wheel:
        out.write_bytes(wheel.read(KERNEL_FILE))
    return out


def find_source() -> Path:
    trees = sorted(
        CACHE.glob("src/sglang-*"),
        key=lambda p: [int(x) for x in p.name[7:].split(".") if x.isdigit()],
    )
    for tree in reversed(trees):
        if (tree / KERNEL_FILE).is_file():
            return tree / KERNEL_FILE
    raise SystemExit("no sglang tree under .cache/src: pass --download VERSION or --sglang-file")


def extract(source: Path) -> ModuleType:
    """The page-split functions of sglang's file as a module of their own."""
    text = source.read_text()
    tree = ast.parse(text)
    parts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            parts[node.name] = "\n".join(text.splitlines()[start - 1 : node.end_lineno])
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if names and names[0] in CONSTANTS:
                parts[names[0]] = ast.get_source_segment(text, node) or ""
    missing = [n for n in (*CONSTANTS, *FUNCTIONS) if n not in parts]
    if missing:
        raise SystemExit(f"{source}: not found: {', '.join(missing)}")
    body = [parts[n] for n in (*CONSTANTS, *FUNCTIONS)]
    code = HEADER + "\n\n".join(body) + "\n"
    registry = "from sglang.srt.runtime_context import get_resources"
    if registry not in code or "get_resources().buffers" not in code:
        raise SystemExit(f"{source}: the scratch registry is not where it was expected")
    code = code.replace(registry, "").replace("get_resources().buffers", "_BUFFERS")
    folder = Path(tempfile.mkdtemp(prefix="imlint-sglang-"))
    path = folder / "sglang_page_split.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("sglang_page_split", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sglang_page_split"] = module
    spec.loader.exec_module(module)
    return module


def same_bytes(sg: ModuleType, kv: torch.Tensor, src_pbs: int, idx: torch.Tensor | None) -> bool:
    """Both splits from poisoned destinations: equal views, masked pages left alone."""
    registry: dict = {}
    n_dst = kv.shape[0] * (src_pbs // 64)
    for buffers, key in (
        (registry, (K.DST_KEY, kv.device)),
        (sg._BUFFERS, f"flash_mla_sm120_split:{kv.device}"),
    ):
        buffers[key] = torch.full((n_dst, 37440), 0xAB, dtype=torch.uint8, device=kv.device)
    ours = K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry)
    theirs = sg._split_kv_pages_to_64(kv, src_pbs, idx)
    torch.cuda.synchronize()
    return bool(torch.equal(ours, theirs))


def host_ms(fn: object, calls: int = 200) -> float:
    """Median over 5 rounds of the host's time per call of ``calls`` back-to-back calls
    (the GPU queue is not waited for between them; the GPU is idle at each round's start)."""
    assert callable(fn)
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e3)
        torch.cuda.synchronize()
    return sorted(rounds)[2]


def rows_for(sg: ModuleType, gib: float, src_pbs: int) -> list[str]:
    gen = torch.Generator().manual_seed(src_pbs)
    page_bytes = LAYOUT.padded_page_bytes(src_pbs)
    n_pages = int(gib * 2**30) // page_bytes
    pool = torch.randint(0, 256, (n_pages * page_bytes,), dtype=torch.uint8, device=DEVICE)
    kv = pool.view(n_pages, page_bytes)
    idx = touched_indices(n_pages, src_pbs, 0.01, gen)
    for label, i in (("full", None), ("masked", idx)):
        if not same_bytes(sg, kv, src_pbs, i):
            raise SystemExit(f"different bytes: {label} split, {gib} GiB, pbs {src_pbs}")
    registry: dict = {}
    n_touched = int(K.mark_pages_reference(idx, n_pages, src_pbs).sum())
    out: list[str] = []
    for split, i, n_copy in (("full", None, n_pages), ("masked 1%", idx, n_touched)):
        copy_src = pool[: n_copy * src_pbs * 584]
        copy_dst = torch.empty_like(copy_src)
        t_copy = median_ms(lambda s=copy_src, d=copy_dst: d.copy_(s))
        ours = lambda i=i: K.split_kv_pages_to_64(kv, src_pbs, i, registry=registry)  # noqa: E731
        theirs = lambda i=i: sg._split_kv_pages_to_64(kv, src_pbs, i)  # noqa: E731
        for way in ("graph", "eager", "host"):
            if way == "graph":
                t_a, t_b = median_ms(graph_of(ours).replay), median_ms(graph_of(theirs).replay)
            elif way == "eager":
                t_a, t_b = median_ms(ours), median_ms(theirs)
            else:  # back-to-back eager calls, the host's time per call
                t_a, t_b = host_ms(ours), host_ms(theirs)
            copy = f"{t_copy * 1e3:9.1f} {t_copy / t_a:7.1%}" if way != "host" else f"{'':9} {'':7}"
            out.append(
                f"{gib * 1024:7.0f} {src_pbs:4d} {split:<10} {way:<6} {t_a * 1e3:10.1f} "
                f"{t_b * 1e3:10.1f} {t_b / t_a:7.2f}x {copy}"
            )
    torch.cuda.empty_cache()
    return out


def profile_host(sg: ModuleType, src_pbs: int = 256, calls: int = 2000) -> None:
    """Where the host's time of back-to-back eager calls goes (cProfile, top functions by
    own time), imlint's and sglang's, on a 64 MiB pool with and without indices."""
    import cProfile
    import pstats

    page_bytes = LAYOUT.padded_page_bytes(src_pbs)
    n_pages = 64 * 2**20 // page_bytes
    kv = torch.randint(0, 256, (n_pages, page_bytes), dtype=torch.uint8, device=DEVICE)
    idx = touched_indices(n_pages, src_pbs, 0.01, torch.Generator().manual_seed(1))
    registry: dict = {}
    for name, fn in (
        ("imlint full", lambda: K.split_kv_pages_to_64(kv, src_pbs, registry=registry)),
        ("sglang full", lambda: sg._split_kv_pages_to_64(kv, src_pbs)),
        ("imlint masked", lambda: K.split_kv_pages_to_64(kv, src_pbs, idx, registry=registry)),
        ("sglang masked", lambda: sg._split_kv_pages_to_64(kv, src_pbs, idx)),
    ):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        print(f"\n== {name}: {host_ms(fn) * 1e3:.1f} us per call (host, unprofiled)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--download", metavar="VERSION", help="fetch sglang's wheel first")
    parser.add_argument("--sglang-file", type=Path, help="a flash_mla_sm120.py to compare with")
    parser.add_argument("--pbs", type=int, nargs="*", default=[128, 256, 512])
    parser.add_argument("--mib", type=float, nargs="*", default=[64, 2048])
    parser.add_argument("--profile", action="store_true", help="profile the host's time only")
    args = parser.parse_args()
    if not torch.cuda.is_available() or K.INTERPRETED:
        raise SystemExit("needs a CUDA GPU (and TRITON_INTERPRET unset)")
    source = args.sglang_file or (download(args.download) if args.download else find_source())
    sg = extract(source)
    if args.profile:
        profile_host(sg)
        return
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}; torch {torch.__version__}; sglang kernels from {source}")
    print(
        f"{'MiB':>7} {'pbs':>4} {'split':<10} {'run':<6} {'imlint us':>10} {'sglang us':>10} "
        f"{'sg/im':>8} {'copy us':>9} {'%copy':>7}"
    )
    for mib in args.mib:
        for src_pbs in args.pbs:
            for row in rows_for(sg, mib / 1024, src_pbs):
                print(row, flush=True)
    print("identical output bytes: checked for every row (full and masked, poisoned destinations)")


if __name__ == "__main__":
    main()
