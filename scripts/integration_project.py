"""The project pass on real serving code: IM003 and armed findings in a public wheel.

    python scripts/integration_project.py [--package sglang] [--version 0.5.23] [--top 20]

Downloads the wheel at run time (into the ignored .cache/ folder), checks its whole tree
cold (``--no-cache``) and prints: findings by code, how many are IM003, how many are armed
(an inference-mode region reaches them) and the call paths found, the findings not
reported because every caller guards them, and the first ``--top`` findings in imlint's
order (armed first) with their reach, for review by hand. Every finding goes to
``.cache/<package>-<version>-project.json``. Not part of CI (it downloads wheels).
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


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--package", default="sglang")
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument(
        "--region",
        action="append",
        default=[],
        metavar="NAME",
        help="a project-specific inference-mode region (config inference-mode-regions), "
        "e.g. sglang.srt.utils.DynamicGradMode",
    )
    args = ap.parse_args()

    root = wheel_sources(args.package, args.version)
    config: list[str] = []
    if args.region:
        cfg = CACHE / f"{args.package}-regions.toml"
        cfg.write_text(f"[tool.imlint]\ninference-mode-regions = {json.dumps(args.region)}\n")
        config = ["--config", str(cfg)]
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "imlint",
            "check",
            args.package,
            "--no-cache",
            "--output-format",
            "json",
            *config,
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"imlint failed ({proc.returncode}): {proc.stderr[-2000:]}")
    findings = json.loads(proc.stdout)
    explained = subprocess.run(
        [sys.executable, "-m", "imlint", "check", args.package, "--explain-reach", "-q", *config],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    guarded = [line for line in explained if " not reported: " in line]
    index_line = next((line for line in explained if line.startswith("Project index:")), "")

    suffix = "-regions" if args.region else ""
    out = CACHE / f"{args.package}-{args.version}-project{suffix}.json"
    out.write_text(json.dumps(findings, indent=1))
    codes = collections.Counter(f["code"] for f in findings)
    armed = [f for f in findings if f["armed"]]
    print(f"{args.package} {args.version}: {len(findings)} findings in {wall:.1f} s (cold)")
    print(f"  by code: {dict(sorted(codes.items()))}")
    print(f"  IM003: {codes.get('IM003', 0)}; armed: {len(armed)}")
    print(f"  not reported, every caller guards them: {len(guarded)}")
    print(f"  {index_line}")
    print(f"  written to {out}")
    print()
    for i, f in enumerate(findings[: args.top], 1):
        tag = "armed" if f["armed"] else "     "
        print(f"{i:2d}. {tag} {f['path']}:{f['line']}:{f['col']} {f['code']} in {f['function']}")
        print(f"      {f['message']}")
        print(f"      reach: {f['reach']}")
    if guarded:
        print()
        for line in guarded:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
