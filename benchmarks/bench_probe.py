"""Overhead of `imlint probe` on a CPU workload with many calls to instrumented functions.

    python benchmarks/bench_probe.py [--calls 20000] [--runs 5]

A small package with a lazily allocated buffer (an IM001 site) whose getter is called
thousands of times, each call doing a little torch work, is run plain and under the
probe (same interpreter, fresh processes), medians of --runs. Target: probed <= 1.3x.
A second package that is not probed shows the cost for modules outside the package.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PKG = """\
import torch

_CACHE = {}


def get(n):
    buf = _CACHE.get(n)
    if buf is None or buf.shape[0] < n:
        buf = torch.empty(n)
        _CACHE[n] = buf
    return buf


def step(x):
    b = get(x.shape[0])
    b.zero_()
    b.add_(x)
    return b.sum()
"""
MAIN = """\
import sys
import torch
from {pkg}.work import step

x = torch.ones(64)
total = 0.0
with torch.inference_mode(False):
    for _ in range({calls}):
        total += float(step(x))
print(total)
"""


def run(cmd: list[str], cwd: Path, runs: int) -> float:
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for pkg in ("hot", "cold"):
            (root / pkg).mkdir()
            (root / pkg / "__init__.py").write_text("")
            (root / pkg / "work.py").write_text(PKG)
            (root / pkg / "main.py").write_text(MAIN.format(pkg=pkg, calls=args.calls))
        py = sys.executable
        probe = [py, "-m", "imlint", "probe", "--out", str(root / "p.json"), "--package"]
        plain = run([py, "-m", "hot.main"], root, args.runs)
        probed = run([*probe, "hot", "--", py, "-m", "hot.main"], root, args.runs)
        outside = run([*probe, "elsewhere", "--", py, "-m", "cold.main"], root, args.runs)
    print(f"workload: {args.calls} calls to an instrumented function, medians of {args.runs} runs")
    print(f"  plain                     {plain:7.3f} s")
    print(f"  probed (package probed)   {probed:7.3f} s  {probed / plain:.2f}x  (target <= 1.3x)")
    print(f"  probed (other package)    {outside:7.3f} s  {outside / plain:.2f}x")
    print("  (each probed run includes `imlint probe` start-up and the report)")
    return 0 if probed / plain <= 1.3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
