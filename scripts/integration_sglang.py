"""Integration check on real serving code: the public sglang wheels (downloaded at run time).

    python scripts/integration_sglang.py [--full] [--out .cache/sglang-0.5.23-findings.json]

Asserts the seed case:
- 0.5.18 ``sglang/kernels/ops/attention/flash_mla_sm120.py``: exactly one finding, IM002,
  at the split-buffer allocation of ``_split_kv_pages_to_64``; the guarded mask is clean;
- 0.5.20 and 0.5.23: that file is clean;
- 0.5.23 ``sglang/srt/layers/moe/moe_runner/flashinfer_cutedsl.py`` is clean.
With ``--full`` it then checks the whole 0.5.23 tree and prints the count by code, writing
every finding to a JSON file for review. Not part of CI (it downloads wheels).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheels import CACHE, wheel_sources

FLASH_MLA = "sglang/kernels/ops/attention/flash_mla_sm120.py"
CUTEDSL = "sglang/srt/layers/moe/moe_runner/flashinfer_cutedsl.py"


def imlint_json(*args: str, cwd: Path) -> list[dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-m", "imlint", "check", "--output-format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"imlint failed ({proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout)


def split_buffer_line(path: Path) -> int:
    """The line of ``torch.empty(`` that allocates ``buf`` in ``_split_kv_pages_to_64``."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "def _split_kv_pages_to_64" in line)
    for i in range(start, len(lines)):
        if lines[i].strip().startswith("buf = torch.empty("):
            return i + 1
    raise SystemExit("split-buffer allocation not found")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--full", action="store_true", help="also check the whole 0.5.23 tree")
    ap.add_argument("--out", default=str(CACHE / "sglang-0.5.23-findings.json"))
    args = ap.parse_args()
    failures: list[str] = []

    def expect(cond: bool, what: str) -> None:
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    roots = {v: wheel_sources("sglang", v) for v in ("0.5.18", "0.5.20", "0.5.23")}
    old = roots["0.5.18"]
    got = imlint_json(FLASH_MLA, cwd=old)
    want = [(split_buffer_line(old / FLASH_MLA), "IM002")]
    expect(
        [(f["line"], f["code"]) for f in got] == want,
        f"0.5.18 {FLASH_MLA}: {got and got[0]['message']}",
    )
    for v in ("0.5.20", "0.5.23"):
        got = imlint_json(FLASH_MLA, cwd=roots[v])
        expect(got == [], f"{v} {FLASH_MLA} is clean ({len(got)} findings)")
    got = imlint_json(CUTEDSL, cwd=roots["0.5.23"])
    expect(got == [], f"0.5.23 {CUTEDSL} is clean ({len(got)} findings)")

    if args.full:
        start = time.perf_counter()
        findings = imlint_json("sglang", cwd=roots["0.5.23"])
        elapsed = time.perf_counter() - start
        n_files = sum(1 for _ in (roots["0.5.23"] / "sglang").rglob("*.py"))
        counts = collections.Counter(f["code"] for f in findings)
        print(
            f"0.5.23 whole tree: {n_files} files, {len(findings)} findings {dict(sorted(counts.items()))}, {elapsed:.1f} s"
        )
        Path(args.out).write_text(json.dumps(findings, indent=1))
        print(f"findings written to {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
