"""The engine stays easy to read: no import cycles between imlint's modules (imports
only for type checking do not count: they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _module(path: Path) -> str:
    package = "imlint.rules" if path.parent.name == "rules" else "imlint"
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Modules imported where code runs: anywhere but under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("imlint"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("imlint")}
    return out


def _graph() -> dict[str, set[str]]:
    files = [*(REPO / "imlint").glob("*.py"), *(REPO / "rules").glob("*.py")]
    graph = {_module(p): _runtime_imports(ast.parse(p.read_text(encoding="utf-8"))) for p in files}
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: The sizes the design asks for: no class over about 400 lines, no function over
#: about 80 (a click command's signature, one line per option, counts in its length).
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 90


def _sizes(kind: type) -> list[tuple[str, int]]:
    out = []
    for path in sorted((REPO / "imlint").glob("*.py")) + sorted((REPO / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, kind):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                out.append((f"{path.name}:{node.name}", lines))  # type: ignore[attr-defined]
    return out


def test_no_class_or_function_outgrows_the_design():
    classes = _sizes(ast.ClassDef)
    functions = _sizes(ast.FunctionDef) + _sizes(ast.AsyncFunctionDef)
    assert len(classes) > 50 and len(functions) > 500  # the walk found the engine
    assert [c for c in classes if c[1] > MAX_CLASS_LINES] == []
    assert [f for f in functions if f[1] > MAX_FUNCTION_LINES] == []
