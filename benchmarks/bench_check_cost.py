"""Whole-check cost side by side: wall time and peak memory of ``imlint check <pkg>
--no-cache`` on one tree, for this checkout, an earlier revision (``--base REV``), and
this checkout reading an installed package from another environment (``--python PY``).
Runs alternate, so drift on a busy machine hits each alike; ratios are to this checkout.

    python benchmarks/bench_check_cost.py --tree sglang-0.5.17 --base 5d19d12 --rounds 2
    python benchmarks/bench_check_cost.py --tree sglang-0.5.23 --python /venv/bin/python

Trees are the unpacked wheels under ``.cache/src/`` (``bench_accuracy.py --download``).
``--base`` checks the revision out into ``.cache/bench-base-<rev>`` (ignored). With
``--python``, the package summaries go to a fresh cache folder first (the first run
pays for summarising) and are reused by later rounds (cached runs)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".cache" / "src"

#: Runs the check in a child and prints its wall time and peak memory (one JSON line).
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "peak_mb": peak / 1024, "rc": done.returncode}))
"""


def package_of(tree: Path) -> str:
    """The tree's top-level package (``sglang`` in ``sglang-0.5.23``)."""
    found = sorted(p.parent.name for p in tree.glob("*/__init__.py"))
    if not found:
        raise SystemExit(f"{tree}: no package folder")
    head = tree.name.split("-")[0]
    return head if head in found else found[0]


def measure(tree: Path, code: Path, extra: list[str], env: dict[str, str]) -> dict:
    package = package_of(tree)
    command = [sys.executable, "-m", "imlint", "check", package, "--no-cache", "-q",
               "--exit-zero", "--output-format", "json", *extra]  # fmt: skip
    env = {**os.environ, **env, "PYTHONPATH": str(code)}
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def base_checkout(rev: str) -> Path:
    folder = REPO / ".cache" / f"bench-base-{rev}"
    if not folder.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-f", str(folder), rev],
                       check=True, capture_output=True)  # fmt: skip
    for sub in ("rules", "kernels"):  # installed under the imlint namespace
        link = folder / "imlint" / sub
        if not link.exists():
            link.symlink_to(Path("..") / sub)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True)
    ap.add_argument("--base", help="also time this git revision")
    ap.add_argument("--python", help="also time reading installed packages of this interpreter")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    tree = SRC / args.tree
    if not tree.is_dir():
        ap.error(f"{tree} is not unpacked (bench_accuracy.py --download)")
    cache = Path(tempfile.mkdtemp(prefix="imlint-bench-"))
    variants: list[tuple[str, Path, list[str]]] = [("this checkout", REPO, [])]
    if args.base:
        variants.append((f"base {args.base}", base_checkout(args.base), []))
    if args.python:
        variants.append(("with --python", REPO, ["--python", args.python]))
    rows: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    try:
        for _ in range(args.rounds):
            for name, code, extra in variants:
                rows[name].append(measure(tree, code, extra, {"XDG_CACHE_HOME": str(cache)}))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    mean = {n: sum(r["wall"] for r in rs) / len(rs) for n, rs in rows.items()}
    ours = mean["this checkout"]
    print("variant | wall s per round | mean | ratio | peak MB")
    for name, runs in rows.items():
        walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
        peak = max(r["peak_mb"] for r in runs)
        print(f"{name} | {walls} | {mean[name]:.1f} | {mean[name] / ours:.2f} | {peak:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
