"""`imlint fix` on whole real trees: what it changes stays valid and means the same.

    python benchmarks/bench_fix_trees.py [--trees sglang,vllm] [--extend-select IM005]

Copies each unpacked public wheel (``.cache/src/<tree>/``, see ``bench_accuracy.py
--download``) to a temporary folder, runs ``imlint fix --unsafe-fixes`` on the package
(every fix, safe and unsafe), and checks every changed file:

- it compiles;
- its AST, with each inserted ``with <torch>.inference_mode(False)[, <torch>.no_grad()]:``
  replaced by its body (and an inserted ``import torch`` dropped), equals the original's;
- ``ruff format --check`` still passes on files that passed before (when ruff is on PATH);
- a second ``imlint fix`` changes nothing.

Prints the counts side by side per tree; exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREES = {"sglang": ("sglang-0.5.23", "sglang"), "vllm": ("vllm-0.33.0", "vllm")}


def _is_guard(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name == "no_grad":
        return not call.args
    return (
        name == "inference_mode"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value is False
    )


def _is_mode(item: ast.withitem) -> bool:
    call = item.context_expr
    return (
        isinstance(call, ast.Call)
        and (
            call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        )
        == "inference_mode"
    )


class _Unwrap(ast.NodeTransformer):
    """Replace ``with`` blocks made only of an ``inference_mode(False)`` guard (and
    ``no_grad()`` beside it) by their bodies."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or not stmts or not isinstance(stmts[0], ast.stmt):
                continue
            out: list[ast.stmt] = []
            for s in stmts:
                if (
                    isinstance(s, ast.With)
                    and all(_is_guard(i) for i in s.items)
                    and any(_is_mode(i) for i in s.items)
                ):
                    out.extend(s.body)
                else:
                    out.append(s)
            setattr(node, field, out)
        return node


def _same_meaning(before: str, after: str) -> bool:
    # Both sides: a guard the code already had is unwrapped alike.
    a = _Unwrap().visit(ast.parse(after))
    b = _Unwrap().visit(ast.parse(before))
    body_a = [s for s in a.body if not _is_added_import(s, b)]
    return ast.dump(ast.Module(body_a, [])) == ast.dump(ast.Module(b.body, []))


def _is_added_import(stmt: ast.stmt, original: ast.Module) -> bool:
    if not (isinstance(stmt, ast.Import) and [a.name for a in stmt.names] == ["torch"]):
        return False
    return not any(
        isinstance(s, ast.Import) and [a.name for a in s.names] == ["torch"] for s in original.body
    )


def _ruff_clean(path: Path) -> bool | None:
    if shutil.which("ruff") is None:
        return None
    r = subprocess.run(
        ["ruff", "format", "--isolated", "--check", "-q", str(path)], capture_output=True
    )
    return r.returncode == 0


def run_tree(name: str, extend: str | None) -> dict[str, int]:
    folder, package = TREES[name]
    src = REPO / ".cache" / "src" / folder / package
    if not src.is_dir():
        sys.exit(f"{src} is missing: run benchmarks/bench_accuracy.py --download first")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / package
        shutil.copytree(src, work)
        (Path(tmp) / "pyproject.toml").write_text(f'[project]\nname = "{package}-copy"\n')
        originals = {p: p.read_bytes() for p in work.rglob("*.py")}
        cmd = [sys.executable, "-m", "imlint", "fix", package, "--no-cache", "-q", "--unsafe-fixes"]
        if extend:
            cmd += ["--extend-select", extend]
        subprocess.run(cmd, cwd=tmp, capture_output=True)
        changed = [p for p, data in originals.items() if p.read_bytes() != data]
        counts = {"changed": len(changed), "compile": 0, "same_ast": 0, "ruff_kept": 0,
                  "ruff_before": 0, "idempotent": 0}  # fmt: skip
        for p in changed:
            before, after = originals[p].decode("utf-8", "replace"), p.read_text("utf-8")
            try:
                compile(after, str(p), "exec", dont_inherit=True)
                counts["compile"] += 1
            except SyntaxError as exc:
                print(f"  does not compile: {p.relative_to(tmp)}: {exc}")
                continue
            if _same_meaning(before, after):
                counts["same_ast"] += 1
            else:
                print(f"  AST differs beyond the guard: {p.relative_to(tmp)}")
            orig_copy = Path(tmp) / "orig.py"
            orig_copy.write_bytes(originals[p])
            if _ruff_clean(orig_copy):
                counts["ruff_before"] += 1
                if _ruff_clean(p):
                    counts["ruff_kept"] += 1
                else:
                    print(f"  ruff format no longer clean: {p.relative_to(tmp)}")
        snapshot = {p: p.read_bytes() for p in changed}
        subprocess.run(cmd, cwd=tmp, capture_output=True)
        counts["idempotent"] = sum(p.read_bytes() == data for p, data in snapshot.items())
        return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default="sglang,vllm")
    ap.add_argument("--extend-select", default="IM005")
    args = ap.parse_args()
    ok = True
    print(
        f"{'tree':8} {'changed':>8} {'compile':>8} {'same AST':>9} {'ruff kept':>10} {'2nd fix no-op':>14}"
    )
    for name in args.trees.split(","):
        c = run_tree(name, args.extend_select or None)
        n = c["changed"]
        print(
            f"{name:8} {n:>8} {c['compile']:>8} {c['same_ast']:>9} "
            f"{c['ruff_kept']:>4}/{c['ruff_before']:<5} {c['idempotent']:>14}"
        )
        ok &= c["compile"] == n and c["same_ast"] == n and c["idempotent"] == n
        ok &= c["ruff_kept"] == c["ruff_before"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
