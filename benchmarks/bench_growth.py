"""How the time of one file's check grows with its sites (a generated giant: kernel
tables, model zoos).

    python benchmarks/bench_growth.py [--sizes 1000,2000,4000,8000] [--shape all]

Writes one module per size into a temporary folder and runs `imlint check --no-cache
-j 1` on it in a subprocess, best of ``--repeat`` runs. Shapes (each site is a lazy
allocation kept in storage that outlives the call, written in place elsewhere):

- ``methods``: one class with N get-or-create methods on ``self`` attributes, each
  buffer written by another method of the class;
- ``globals``: N module-level functions filling entries of module dicts, written by
  callers of the getters;
- ``all``: both, half the sites each.

Prints sites, seconds, findings and the ratio to the previous size side by side: a
check linear in its sites doubles its time per doubling of sites. Exits 1 when a ratio
between sizes from 1,000 up is above ``--max-ratio`` (default 2.5) per doubling, or when
a run does not report every site.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def methods(n: int) -> list[str]:
    out = ["class Pool:", "    def __init__(self):", "        self.n = 0", ""]
    for i in range(n):
        out += [
            f"    def get_{i}(self, n):",
            f"        if self._b{i} is None or self._b{i}.numel() < n:",
            f"            self._b{i} = torch.empty(n)",
            f"        return self._b{i}",
            "",
            f"    def reset_{i}(self):",
            f"        self._b{i}.zero_()",
            "",
        ]
    return out


def globals_(n: int) -> list[str]:
    out = []
    for i in range(n):
        out += [
            f"_C{i} = {{}}",
            "",
            "",
            f"def get_{i}(key, n):",
            f"    if key not in _C{i}:",
            f"        _C{i}[key] = torch.zeros(n)",
            f"    return _C{i}[key]",
            "",
            "",
            f"def use_{i}(x):",
            f"    get_{i}(x.device, x.numel()).copy_(x)",
            "",
            "",
        ]
    return out


def module(shape: str, n: int) -> str:
    lines = ["import torch", "", ""]
    if shape in ("methods", "all"):
        lines += methods(n if shape == "methods" else n // 2)
    if shape in ("globals", "all"):
        lines += globals_(n if shape == "globals" else n - n // 2)
    return "\n".join(lines) + "\n"


def run(path: Path, repeat: int) -> tuple[float, int]:
    best = math.inf
    found = 0
    for _ in range(repeat):
        start = time.perf_counter()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "imlint",
                "check",
                "--no-cache",
                "-j",
                "1",
                "--exit-zero",
                "--output-format",
                "json",
                "--timeout",
                "0",
                str(path),
            ],
            capture_output=True,
            text=True,
        )
        best = min(best, time.perf_counter() - start)
        if r.returncode != 0:
            raise SystemExit(f"imlint exited {r.returncode}: {r.stderr.strip()[-500:]}")
        found = len(json.loads(r.stdout))
    return best, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000", help="sites per file")
    ap.add_argument("--shape", default="all", choices=("methods", "globals", "all"))
    ap.add_argument("--repeat", type=int, default=1, help="runs per size (best is kept)")
    ap.add_argument("--max-ratio", type=float, default=2.5, help="per doubling, from 1,000 up")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    failed = False
    print(f"{'sites':>7} {'seconds':>9} {'findings':>9} {'ratio':>7} {'per doubling':>13}")
    previous: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"gen_{n}.py"
            path.write_text(module(args.shape, n), encoding="utf-8")
            seconds, found = run(path, args.repeat)
            ratio = per_doubling = ""
            if previous is not None:
                r = seconds / previous[1]
                d = r ** (1 / math.log2(n / previous[0]))
                ratio, per_doubling = f"{r:.2f}", f"{d:.2f}"
                if previous[0] >= 1000 and d > args.max_ratio:
                    failed = True
            print(f"{n:>7} {seconds:>9.2f} {found:>9} {ratio:>7} {per_doubling:>13}")
            if found != n:
                print(f"  expected {n} findings, got {found}")
                failed = True
            previous = (n, seconds)
    print("FAIL" if failed else f"PASS (at most {args.max_ratio}x per doubling from 1,000 up)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
