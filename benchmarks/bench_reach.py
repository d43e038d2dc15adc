"""Reach by tier on whole trees: how many findings an exact path arms, and how many the
dispatch tier (calls by name, ``imlint/index_dispatch.py``) may arm at each bound on
the candidates of a call, with the share of real paths among those reviewed by hand.

    python benchmarks/bench_reach.py --trees sglang-0.5.23,vllm-0.33.0 --bounds 1,2,4,8,16,32
    python benchmarks/bench_reach.py --trees sglang-0.5.23 --sample 20 --seed 20261205 --out F
    python benchmarks/bench_reach.py --seed-case

Trees are the unpacked wheels under ``.cache/src/`` (``bench_accuracy.py --download``
fetches them). ``--sample`` writes that many dispatch paths per tree (at the largest
bound, seeded) for review, ``--exact`` every exact path; reviewed labels live in ``benchmarks/accuracy/reach/``
(``dispatch-*.jsonl``: the sampled row with ``verdict`` (real, not_real, unsure),
``first_wrong_hop`` and a one-line ``reason``); their share of real paths is printed
per bound. ``exact-*.jsonl`` holds the exact paths reviewed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".cache" / "src"
LABELS = REPO / "benchmarks" / "accuracy" / "reach"


def findings_of(tree: Path, package: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "imlint", "check", package, "--output-format", "json", "-q",
         "--exit-zero", "--no-cache"],
        cwd=tree, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return json.loads(out)


def index_of(tree: Path, package: str):  # type: ignore[no-untyped-def]
    from imlint.options import AnalysisOptions
    from imlint.project import ProjectIndex, summarize

    files = sorted((tree / package).rglob("*.py"))
    summaries = [
        summarize(str(p.relative_to(tree)), p.read_text(errors="replace"), AnalysisOptions())
        for p in files
    ]
    return ProjectIndex(summaries)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default="sglang-0.5.23,vllm-0.33.0")
    ap.add_argument("--bounds", default="1,2,4,8,16,32")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--out", default="")
    ap.add_argument("--exact", action="store_true", help="also write every exact path to --out")
    ap.add_argument(
        "--seed-case",
        action="store_true",
        help="print the seed's paths on sglang 0.5.16-0.5.18 instead (see seed_case)",
    )
    args = ap.parse_args()
    if args.seed_case:
        return seed_case()
    if (args.sample or args.exact) and not args.out:
        ap.error("--sample and --exact write to --out FILE")
    bounds = [int(b) for b in args.bounds.split(",")]
    labels = _labels()
    sample: list[dict] = []
    print(
        "tree | bound | findings | their functions | exact: findings (functions) | "
        "dispatch: findings (functions) | real dispatch paths among those reviewed"
    )
    for name in args.trees.split(","):
        tree = SRC / name
        package = name.rsplit("-", 1)[0].replace("-", "_")
        if not (tree / package).is_dir():
            package = next(p.name for p in tree.iterdir() if (p / "__init__.py").is_file())
        findings = findings_of(tree, package)
        cwd = os.getcwd()
        os.chdir(tree)
        try:
            index = index_of(tree, package)
            functions = sorted({(f["path"], f["function"]) for f in findings})
            for bound in bounds:
                index.dispatch_bound, index._graph = bound, None
                tiers: dict[str, list[dict]] = {"exact": [], "dispatch": []}
                for path, function in functions:
                    target = index.target_of(path, function)
                    reach = index.reach(target) if target is not None else None
                    if reach is not None and reach.tier:
                        row = {"tree": name, "path": path, "function": function,
                               "candidates": reach.candidates, "reach": reach.text()}  # fmt: skip
                        tiers[reach.tier].append(row)
                counted = {
                    t: {(r["path"], r["function"]) for r in rows} for t, rows in tiers.items()
                }
                n_findings = {
                    t: sum((f["path"], f["function"]) in keys for f in findings)
                    for t, keys in counted.items()
                }
                judged = [labels[_key(r)] for r in tiers["dispatch"] if _key(r) in labels]
                real = sum(v == "real" for v in judged)
                share = f"{real}/{len(judged)}" if judged else "-"
                print(
                    f"{name} | {bound} | {len(findings)} | {len(functions)} | "
                    f"{n_findings['exact']} ({len(tiers['exact'])}) | "
                    f"{n_findings['dispatch']} ({len(tiers['dispatch'])}) | {share}"
                )
            if args.sample:
                rows = tiers["dispatch"]
                random.Random(args.seed).shuffle(rows)
                sample += rows[: args.sample]
            if args.exact:
                sample += [{**r, "tier": "exact"} for r in tiers["exact"]]
        finally:
            os.chdir(cwd)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in sample))
    return 0


#: The seed case (``../shared/seed``): the flash_mla split buffer, the dummy run the
#: autotune region runs, and the model call between them.
_SPLIT = ("kernels.ops.attention.flash_mla_sm120", "_split_kv_pages_to_64")
_RUNNER = "srt.model_executor.runner.base_runner"


def seed_case() -> int:
    """For sglang 0.5.16, 0.5.17 and 0.5.18: the reach of ``BaseRunner._dummy_run``
    (armed through the autotune context manager where it enters inference mode), the
    longest exact chain of callers up from the split buffer, and how many project
    methods a call by name of ``mr.model.forward`` may reach."""
    cwd = os.getcwd()
    for name in ("sglang-0.5.16", "sglang-0.5.17", "sglang-0.5.18"):
        tree = SRC / name
        if not tree.is_dir():
            print(f"{name}: not unpacked (bench_accuracy.py --download)")
            continue
        os.chdir(tree)
        try:
            index = index_of(tree, "sglang")
        finally:
            os.chdir(cwd)
        runner = index.modules[f"sglang.{_RUNNER}"].module
        split = (index.modules[f"sglang.{_SPLIT[0]}"].module, _SPLIT[1])
        print(f"{name}: _dummy_run: {index.reach((runner, 'BaseRunner._dummy_run')).text()}")
        print(f"{name}: split buffer: {index.reach(split).text()}")
        print(f"{name}: exact callers up from it: {' <- '.join(_longest_chain(index, split))}")
        found = index.dispatch_candidates(
            (runner, "BaseRunner._dummy_run.run_once"), "mr.model.forward", 100000
        )
        print(f"{name}: candidates of mr.model.forward: {len(found)}")
    return 0


def _longest_chain(index, start):  # type: ignore[no-untyped-def]
    """The longest chain of reach callers (exact edges) that starts at ``start``."""
    parent = {start: None}
    order = [start]
    for node in order:
        for caller, _region in index.reach_callers(node):
            if caller not in parent:
                parent[caller] = node
                order.append(caller)
    chain, node = [], order[-1]
    while node is not None:
        chain.append(node[1])
        node = parent[node]
    return list(reversed(chain))


def _key(row: dict) -> tuple[str, str, str]:
    return (row["tree"], row["path"], row["function"])


def _labels() -> dict[tuple[str, str, str], str]:
    """Reviewed dispatch paths: (tree, path, function) -> verdict."""
    out: dict[tuple[str, str, str], str] = {}
    for f in sorted(LABELS.glob("dispatch-*.jsonl")) if LABELS.is_dir() else ():
        for line in f.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out[_key(row)] = row["verdict"]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
