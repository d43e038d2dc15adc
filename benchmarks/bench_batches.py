"""Pre-commit's batching on a real tree: does every batch report what the whole check does?

    python benchmarks/bench_batches.py [--tree sglang-0.5.23] [--batches 2,16] [--seed 0]

pre-commit hands a hook the staged files shuffled and split into one batch per CPU
(``require_serial: false``), one run per batch. This copies an unpacked public wheel
(``.cache/src/<tree>/``, see ``bench_accuracy.py --download``) to a temporary project,
runs ``imlint check`` on the whole package, then on seeded random batches of its files
(as pre-commit would, one after the other, sharing the cache), and prints per batch
count the findings of the whole check, the union of the batches, and how many were lost
or added (by path, line, column, code, severity and message), with wall times. Exits 1
if any batch differs from the whole check's findings for its files.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def check(args: list[str], cwd: Path) -> tuple[set[tuple], float]:
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "imlint", "check", *args, "--output-format", "json", "--exit-zero"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"imlint failed ({r.returncode}): {r.stderr[-2000:]}")
    items = json.loads(r.stdout)
    keys = {(i["path"], i["line"], i["col"], i["code"], i["severity"], i["message"]) for i in items}
    return keys, elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default="sglang-0.5.23")
    ap.add_argument("--batches", default="2,16")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src = REPO / ".cache" / "src" / args.tree
    package = args.tree.rsplit("-", 1)[0]
    if not (src / package).is_dir():
        sys.exit(f"{src / package} is missing: run benchmarks/bench_accuracy.py --download first")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(src / package, root / package)
        (root / "pyproject.toml").write_text(f'[project]\nname = "{package}-copy"\n')
        full, t_full = check([package], root)
        files = sorted(str(p.relative_to(root)) for p in (root / package).rglob("*.py"))
        by_code = Counter(k[3] for k in full)
        print(f"{args.tree}: {len(files)} files; whole check: {len(full)} findings "
              f"({', '.join(f'{c} {n}' for c, n in sorted(by_code.items()))}), {t_full:.1f} s cold")  # fmt: skip
        print(f"{'batches':>8} {'union':>6} {'lost':>5} {'added':>6} {'IM003 lost':>10} "
              f"{'batch runs (s)':>15}")  # fmt: skip
        for n in (int(x) for x in args.batches.split(",")):
            shuffled = files[:]
            random.Random(args.seed).shuffle(shuffled)
            union: set[tuple] = set()
            wrong = 0
            start = time.perf_counter()
            for i in range(n):
                batch = shuffled[i::n]
                got, _ = check(batch, root)
                expected = {k for k in full if k[0] in set(batch)}
                wrong += got != expected
                union |= got
            elapsed = time.perf_counter() - start
            lost, added = full - union, union - full
            lost3 = sum(1 for k in lost if k[3] == "IM003")
            print(f"{n:>8} {len(union):>6} {len(lost):>5} {len(added):>6} {lost3:>10} "
                  f"{elapsed:>15.1f}")  # fmt: skip
            failed |= bool(wrong or lost or added)
        # One batch on a cold cache: the whole project is summarised for it.
        shutil.rmtree(root / ".imlint_cache", ignore_errors=True)
        _, t_cold = check(files[:: max(1, len(files) // 20)], root)
        print(f"one batch of {len(files[:: max(1, len(files) // 20)])} files, cold cache: "
              f"{t_cold:.1f} s (whole check cold: {t_full:.1f} s)")  # fmt: skip
    print("FAIL" if failed else "ok: every batch reports the whole check's findings for its files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
