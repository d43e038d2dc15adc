"""Host time of ``split_kv_pages_to_64``'s own Python, on this machine's CPU, no GPU needed.

The kernels are replaced by stand-ins of Triton's ``JITFunction`` whose compiled kernel's
launcher does nothing, so every launch after a kernel's first goes through
``kernels/launch.py``'s direct path and costs no driver time: what is timed is the wrapper
(validation, scratch providers, launch keys), the part of an eager call imlint controls. On a
GPU host the driver's launch (about 7 us per launch, kernels/NOTES.md v3) comes on top.

The script also checks what it relies on: each kernel goes through the JIT once per
specialization and every later launch is direct; it exits non-zero otherwise.

Usage: ``TRITON_INTERPRET=1 python3 benchmarks/bench_kernels_host.py [--calls N] [--profile]``
(CPU tensors need the interpreter to import the kernels).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import sys
import timeit
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

if os.environ.get("TRITON_INTERPRET") != "1":
    raise SystemExit("set TRITON_INTERPRET=1: the kernels are imported for CPU tensors")

import torch
from bench_kernels import PS, K

L = sys.modules["imlint.kernels.launch"]
#: specializations each kernel is launched with below
SPECIALIZATIONS = {"_page_split_kernel": 2, "_mark_pages_kernel": 1, "claim_split_kernel": 1}


class _Compiled:
    """A compiled kernel whose launcher counts its calls and launches nothing."""

    function = "function"
    packed_metadata = "metadata"

    def __init__(self) -> None:
        self.runs = 0

    def run(self, *args: object) -> None:
        self.runs += 1


class StandIn:
    """Takes a kernel's place: ``kernel[grid](...)`` (the JIT path) is counted."""

    def __init__(self, real: Any) -> None:
        self.arg_names = real.arg_names
        self.used_global_vals: dict[object, object] = {}
        self.pre_run_hooks: list[object] = []
        self.compiled = _Compiled()
        self.jit_calls = 0

    def __getitem__(self, grid: object) -> Callable[..., _Compiled]:
        def call(*args: object, **kwargs: object) -> _Compiled:
            self.jit_calls += 1
            return self.compiled

        return call


def install_stand_ins() -> dict[str, StandIn]:
    L.JITFunction = StandIn  # launch() takes direct launches only for JIT functions
    L._driver = SimpleNamespace(active=SimpleNamespace(get_current_stream=lambda index: 0))
    stand_ins = {}
    for name in SPECIALIZATIONS:
        stand_ins[name] = StandIn(getattr(PS, name))
        setattr(PS, name, stand_ins[name])
    return stand_ins


def per_call_us(fn: Callable[[], object], calls: int, repeat: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=calls, repeat=repeat)) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings; the best is printed")
    parser.add_argument("--pbs", type=int, default=256, help="tokens per source page")
    parser.add_argument("--profile", action="store_true", help="also profile the full call")
    args = parser.parse_args()

    stand_ins = install_stand_ins()
    kv = K.paged_view(torch.zeros(64, K.padded_page_bytes(args.pbs), dtype=torch.uint8), args.pbs)
    idx = torch.arange(0, 64 * args.pbs, 97, dtype=torch.int32)
    registry: dict[object, torch.Tensor] = {}
    cases = [
        ("full", "scan", None),
        ("masked", "scan", idx),
        ("masked", "claim", idx),
    ]
    print(f"wrapper's own host time per call, CPU tensors, {args.pbs}-token pages, every launch "
          f"after the first direct to a launcher that does nothing (best of {args.repeat})")  # fmt: skip
    for split, mode, indices in cases:
        PS.MASK_MODE = mode
        fn = functools.partial(K.split_kv_pages_to_64, kv, args.pbs, indices, registry=registry)
        label = split if indices is None else f"{split} ({mode} mode)"
        print(f"  {label:22s} {per_call_us(fn, args.calls, args.repeat):7.2f} us")
    PS.MASK_MODE = "scan"

    # one JIT call per specialization (the split kernel: with and without a mask), then
    # direct launches only
    for name, s in stand_ins.items():
        if s.jit_calls != SPECIALIZATIONS[name] or s.compiled.runs == 0:
            raise SystemExit(
                f"{name}: {s.jit_calls} JIT calls, {s.compiled.runs} direct launches "
                f"(expected {SPECIALIZATIONS[name]} JIT calls, then direct launches)"
            )
    print("launches: " + ", ".join(
        f"{n} {s.jit_calls} JIT + {s.compiled.runs} direct" for n, s in stand_ins.items()
    ))  # fmt: skip

    if args.profile:
        fn = functools.partial(K.split_kv_pages_to_64, kv, args.pbs, registry=registry)
        profile = cProfile.Profile()
        profile.runcall(lambda: [fn() for _ in range(args.calls)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(16)


if __name__ == "__main__":
    main()
