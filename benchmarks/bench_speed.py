"""Speed, memory and scaling of `imlint check` on a real serving codebase, next to its peers.

    python benchmarks/bench_speed.py [--runs 3] [--torchfix] [--fixit] [--version 0.5.23]

Downloads the public sglang wheel at run time (into the ignored .cache/ folder) and times,
in one run, on its sources: ruff's default rules (`ruff check --isolated --no-cache`),
imlint cold (no cache), warm (cache present, tree unchanged), after touching one file,
the pre-commit shape (10 files, interpreter start included), peak RSS, scaling over 1/4,
1/2 and all of the tree and over `-j 1`/`-j 2`, and optionally TorchFix (once) and Fixit
with one trivial rule. It also compares the fast path with the plain path
(`--no-fast --no-cache -j 1`) and fails if their findings differ. Medians of --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from wheels import CACHE, wheel_sources  # noqa: E402

RSS_WRAPPER = (
    "import resource, subprocess, sys; "
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)"
)


PARSE_ALL = """
import ast, multiprocessing, os, pathlib, sys
def parse(path):
    ast.parse(pathlib.Path(path).read_bytes())
if __name__ == "__main__":
    files = sorted(str(p) for p in pathlib.Path(sys.argv[1]).rglob("*.py"))
    with multiprocessing.Pool(os.cpu_count()) as pool:
        pool.map(parse, files, chunksize=16)
"""


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS of the largest process (KiB), exit code."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RSS_WRAPPER, *cmd], cwd=cwd, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    rss, rc = proc.stdout.split()
    return wall, int(rss), int(rc)


def median_of(runs: int, cmd: list[str], cwd: Path, before=None) -> tuple[float, int]:
    walls, peak = [], 0
    for _ in range(runs):
        if before is not None:
            before()
        wall, rss, rc = timed(cmd, cwd)
        if rc not in (0, 1):
            raise SystemExit(f"{cmd} exited {rc}")
        walls.append(wall)
        peak = max(peak, rss)
    return statistics.median(walls), peak


def imlint_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "imlint", "check", *args]


def findings_of(args: list[str], cwd: Path) -> list[dict]:
    proc = subprocess.run(
        imlint_cmd(*args, "--output-format", "json"), cwd=cwd, capture_output=True, text=True
    )
    return json.loads(proc.stdout)


def project_pass_steps(root: Path) -> dict[str, float]:
    """Wall seconds of each step of one cold run (the project pass and the checks), by
    the installed imlint (the source tree alone lacks ``imlint.rules``)."""
    from imlint.config import find_config, load_settings
    from imlint.discovery import discover
    from imlint.runner import RunStats, run_files

    cwd = os.getcwd()
    os.chdir(root)
    try:
        settings = load_settings(find_config(root / "sglang"))
        files = discover(["sglang"], settings).files
        stats = RunStats()
        outcomes = run_files(
            files, settings, "check", jobs=2, fast=True, use_cache=False, debug=False, stats=stats
        )
        failed = [o for o in outcomes if o.error is not None and "syntax" not in o.error.lower()]
        if failed:
            raise SystemExit(f"in-process run failed on {len(failed)} files: {failed[0].error}")
    finally:
        os.chdir(cwd)
    print(
        f"project index: {stats.indexed} files, {stats.allocating} allocating callables, "
        f"{stats.unresolved_calls} unresolved calls"
    )
    return stats.timings


def venv_tool(name: str, package: str) -> Path | None:
    """A tool installed in its own virtualenv under .cache/venvs (its deps may clash)."""
    venv = CACHE / "venvs" / name
    exe = venv / "bin" / name
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", package], capture_output=True, text=True
        )
        if pip.returncode != 0:
            print(f"  could not install {package}: {pip.stderr.strip().splitlines()[-1:]}")
            return None
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--torchfix", action="store_true", help="also time TorchFix once (slow)")
    ap.add_argument("--fixit", action="store_true", help="also time Fixit with one trivial rule")
    args = ap.parse_args()

    source = wheel_sources("sglang", args.version)
    work = tempfile.TemporaryDirectory(prefix="imlint-bench-")
    root = Path(work.name)
    shutil.copytree(source / "sglang", root / "sglang")  # the benchmark touches files
    files = sorted(str(p.relative_to(root)) for p in (root / "sglang").rglob("*.py"))
    lines = sum((root / f).read_bytes().count(b"\n") for f in files)
    print(
        f"tree: sglang {args.version}, {len(files)} files, {lines} lines; machine: {os.cpu_count()} CPUs"
    )
    cache_dir = root / ".imlint_cache"
    rows: list[tuple[str, float, int]] = []

    def clear_cache() -> None:
        shutil.rmtree(cache_dir, ignore_errors=True)

    ruff = shutil.which("ruff")
    if ruff is None:
        raise SystemExit("ruff is not installed (pip install ruff)")
    ruff_cold, ruff_rss = median_of(
        args.runs, [ruff, "check", "--isolated", "--no-cache", "sglang"], root
    )
    rows.append(("ruff check --isolated --no-cache (cold)", ruff_cold, ruff_rss))

    # The floor under any Python linter that reads every file: Python's own parser over
    # the tree, in as many processes as imlint uses by default.
    floor, floor_rss = median_of(args.runs, [sys.executable, "-c", PARSE_ALL, "sglang"], root)
    rows.append(
        (f"floor: Python's ast.parse of every file, {os.cpu_count()} processes", floor, floor_rss)
    )

    cold, cold_rss = median_of(args.runs, imlint_cmd("sglang", "--no-cache"), root)
    rows.append(("imlint check, cold (no cache)", cold, cold_rss))
    clear_cache()
    timed(imlint_cmd("sglang"), root)  # fill the cache
    warm, warm_rss = median_of(args.runs, imlint_cmd("sglang"), root)
    rows.append(("imlint check, warm (cache, tree unchanged)", warm, warm_rss))

    touched_files = iter(files[:: max(1, len(files) // (args.runs + 1))])

    def touch_one() -> None:
        p = root / next(touched_files)
        p.write_bytes(p.read_bytes() + b"\n")

    touched, touched_rss = median_of(args.runs, imlint_cmd("sglang"), root, before=touch_one)
    rows.append(("imlint check, warm after touching one file", touched, touched_rss))

    ten = [f for f in files if b"torch.empty" in (root / f).read_bytes()][:10]
    pre_commit, pc_rss = median_of(max(5, args.runs), imlint_cmd("--no-cache", *ten), root)
    rows.append(("pre-commit shape: 10 files, no cache, interpreter start", pre_commit, pc_rss))

    scaling = []
    for label, subset in (
        ("1/4", files[: len(files) // 4]),
        ("1/2", files[: len(files) // 2]),
        ("all", files),
    ):
        wall, rss, _ = timed(imlint_cmd("--no-cache", *subset), root)
        n_lines = sum((root / f).read_bytes().count(b"\n") for f in subset)
        scaling.append((label, len(subset), n_lines, wall, rss))
    jobs = []
    for j in ("1", "2"):
        wall, rss, _ = timed(imlint_cmd("sglang", "--no-cache", "-j", j), root)
        jobs.append((j, wall, rss))
    steps = project_pass_steps(root)

    # Correctness guard: the fast path gives exactly the plain path's findings.
    start = time.perf_counter()
    plain = findings_of(["sglang", "--no-fast", "--no-cache", "-j", "1"], root)
    plain_wall = time.perf_counter() - start
    fast = findings_of(["sglang", "--no-cache"], root)
    rows.append(("imlint check, plain path (--no-fast --no-cache -j 1)", plain_wall, 0))

    peers = []
    if args.torchfix:
        exe = venv_tool("torchfix", "torchfix")
        if exe is not None:
            wall, rss, _ = timed([str(exe), "sglang"], root)
            peers.append(("TorchFix (default rules), once", wall, rss))
    if args.fixit:
        exe = venv_tool("fixit", "fixit")
        if exe is not None:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = Path(tmp) / "pyproject.toml"
                cfg.write_text(
                    '[tool.fixit]\ndisable = []\nenable = ["fixit.rules:NoRedundantFString"]\n'
                )
                wall, rss, _ = timed([str(exe), "--config-file", str(cfg), "lint", "sglang"], root)
                peers.append(("Fixit, one trivial rule (NoRedundantFString)", wall, rss))

    print()
    print(f"{'what':58} {'wall s':>8} {'x ruff':>7} {'peak MiB':>9}")
    for label, wall, rss in rows + peers:
        print(f"{label:58} {wall:8.2f} {wall / ruff_cold:7.2f} {rss / 1024:9.0f}")
    print()
    print("scaling (cold, no cache, default -j):")
    for label, n, n_lines, wall, rss in scaling:
        print(
            f"  {label:>3} of the tree: {n:5d} files {n_lines:8d} lines {wall:7.2f} s  peak {rss / 1024:.0f} MiB"
        )
    for j, wall, rss in jobs:
        print(f"  -j {j}: {wall:7.2f} s  peak {rss / 1024:.0f} MiB")
    total = sum(steps.values())
    print(
        "cold run by step (in-process, no cache, -j 2): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items())
        + f"; project pass (summaries + index + reach) {steps['summaries'] + steps['index'] + steps['reach']:.2f} s"
        + f" = {100 * (steps['summaries'] + steps['index'] + steps['reach']) / total:.0f}% of {total:.2f} s"
    )
    for label, wall, _ in peers:
        print(
            f"  {cold / wall if wall else 0:.3f} x {label} (imlint cold / peer): imlint is {wall / cold:.1f}x faster"
        )
    print()

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print(
        f"targets: cold <= 1.5x ruff: {verdict(cold <= 1.5 * ruff_cold)}; "
        f"warm <= 0.3x ruff: {verdict(warm <= 0.3 * ruff_cold)}; "
        f"10 files <= 0.6 s: {verdict(pre_commit <= 0.6)}; "
        f"peak <= 400 MiB: {verdict(max(cold_rss, warm_rss) <= 400 * 1024)}"
        + "".join(
            f"; >= 20x faster than {label.split(' ')[0]}: {verdict(wall >= 20 * cold)}"
            for label, wall, _ in peers
        )
    )
    print(
        f"cold is {cold / floor:.1f}x the parse floor; the floor alone is {floor / ruff_cold:.1f}x ruff"
    )
    same = plain == fast
    by_code: dict[str, int] = {}
    for f in fast:
        by_code[f["code"]] = by_code.get(f["code"], 0) + 1
    print(
        f"fast path == plain path on the tree: {same} ({len(fast)} findings: {dict(sorted(by_code.items()))})"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
