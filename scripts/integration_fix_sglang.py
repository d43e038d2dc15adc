"""Integration check of `imlint fix` on real serving code (public sglang wheels, downloaded).

    python scripts/integration_fix_sglang.py [--tree] [--version 0.5.23]

1. sglang 0.5.18 ``flash_mla_sm120.py``: ``imlint fix --diff`` changes only the split-buffer
   allocation, and the fixed ``with`` statement is the same (AST) as 0.5.20's guarded one;
   the mask site is untouched.
2. With ``--tree``: fix a copy of the whole tree (also given as ``--version``), then check
   that every changed file compiles, a second ``fix`` changes nothing, and ``check`` reports
   no fixable finding. Prints files and sites fixed and the wall time.
"""

from __future__ import annotations

import argparse
import ast
import json
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheels import wheel_sources

FLASH_MLA = "sglang/kernels/ops/attention/flash_mla_sm120.py"


def imlint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imlint", *args], cwd=cwd, capture_output=True, text=True
    )


def guarded_with(tree: ast.AST, target: str) -> str:
    """The dump of the ``with torch.inference_mode(False):`` that assigns ``target``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and "inference_mode" in ast.unparse(node.items[0]):
            first = node.body[0]
            if isinstance(first, ast.Assign) and ast.unparse(first.targets[0]) == target:
                return ast.dump(node)
    raise SystemExit(f"no guarded assignment to {target}")


def check_flash_mla() -> list[str]:
    failures = []
    old = wheel_sources("sglang", "0.5.18")
    new = wheel_sources("sglang", "0.5.20")
    proc = imlint("fix", "--diff", FLASH_MLA, cwd=old)
    diff = proc.stdout
    changed = [line for line in diff.splitlines() if re.match(r"^[-+](?![-+])", line)]
    print(diff)
    if any("mbuf" in line for line in changed):
        failures.append("the mask site was changed")
    if not any("with torch.inference_mode(False):" in line for line in changed):
        failures.append("no guard inserted")
    # Apply the diff to a temporary copy and compare the guarded statement with 0.5.20's.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "flash_mla_sm120.py"
        shutil.copy(old / FLASH_MLA, copy)
        imlint("fix", str(copy), cwd=Path(tmp))
        fixed = guarded_with(ast.parse(copy.read_text()), "buf")
    reference = guarded_with(ast.parse((new / FLASH_MLA).read_text()), "buf")
    if fixed != reference:
        failures.append("the fixed statement differs from 0.5.20's")
    print(
        ("ok   " if not failures else "FAIL ") + "0.5.18 flash_mla fix == 0.5.20 guarded statement"
    )
    return failures


def check_tree(package: str, version: str, review: int = 0) -> list[str]:
    failures = []
    src = wheel_sources(package, version)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / package
        shutil.copytree(src / package, work)
        before = {p: p.read_bytes() for p in work.rglob("*.py")}
        start = time.perf_counter()
        first = imlint("fix", package, "--unsafe-fixes", cwd=Path(tmp))
        elapsed = time.perf_counter() - start
        print(first.stdout.strip().splitlines()[-1] if first.stdout.strip() else first.stderr)
        changed = [p for p, data in before.items() if p.read_bytes() != data]
        sites = re.search(r"Fixed (\d+) finding", first.stdout)
        print(
            f"fix on {package} {version}: {len(before)} files, {len(changed)} changed, "
            f"{sites.group(1) if sites else '?'} sites fixed, {elapsed:.1f} s wall"
        )
        bad = []
        for p in changed:
            try:
                py_compile.compile(str(p), doraise=True, cfile=str(Path(tmp) / "x.pyc"))
            except py_compile.PyCompileError as exc:
                bad.append(f"{p}: {exc.msg}")
        if bad:
            failures.append(f"{len(bad)} changed files do not compile: {bad[:3]}")
        print(("ok   " if not bad else "FAIL ") + f"all {len(changed)} changed files compile")
        if review:
            print_review(before, changed, review)
        snapshot = {p: p.read_bytes() for p in changed}
        imlint("fix", package, "--unsafe-fixes", cwd=Path(tmp))
        again = [p for p, data in snapshot.items() if p.read_bytes() != data]
        untouched = [
            p for p, data in before.items() if p not in snapshot and p.read_bytes() != data
        ]
        ok = not again and not untouched
        print(("ok   " if ok else "FAIL ") + "a second fix changes nothing")
        if not ok:
            failures.append("second fix changed files")
        check = imlint("check", package, "--output-format", "json", cwd=Path(tmp))
        remaining = json.loads(check.stdout or "[]")
        fixable = [f for f in remaining if f["fixable"]]
        print(
            ("ok   " if not fixable else "FAIL ")
            + f"check after fix: {len(remaining)} findings, {len(fixable)} fixable"
        )
        reasons: dict[str, int] = {}
        for f in remaining:
            reasons[f["unfixable_reason"]] = reasons.get(f["unfixable_reason"], 0) + 1
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            print(f"     {n:4d} left: {reason}")
        if fixable:
            failures.append("fixable findings remain after fix")
    return failures


def print_review(before: dict[Path, bytes], changed: list[Path], n: int) -> None:
    """Unified diffs of ``n`` randomly chosen fixed sites (hunks), for a by-hand review."""
    import difflib
    import random

    hunks: list[str] = []
    for p in changed:
        diff = list(
            difflib.unified_diff(
                before[p].decode("utf-8", "replace").splitlines(keepends=True),
                p.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True),
                fromfile=str(p.relative_to(p.parents[len(p.parents) - 4])),
                tofile="fixed",
                n=3,
            )
        )
        header, current = diff[:2], []
        for line in diff[2:]:
            if line.startswith("@@") and current:
                hunks.append("".join(header + current))
                current = []
            current.append(line)
        if current:
            hunks.append("".join(header + current))
    for hunk in random.Random(2026).sample(hunks, min(n, len(hunks))):
        print(hunk)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tree", action="store_true", help="also fix a copy of the whole tree")
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--package", default="sglang", help="the wheel to fix with --tree")
    ap.add_argument("--review", type=int, default=0, help="print N random fixed sites' diffs")
    args = ap.parse_args()
    failures = check_flash_mla()
    if args.tree:
        failures += check_tree(args.package, args.version, args.review)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
