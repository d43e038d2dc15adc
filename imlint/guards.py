"""Guard helpers: functions of a module that hand their caller ``inference_mode(False)``.

Projects wrap the guard in a helper of their own, so that a ``with`` block turns inference
mode off only when it is on, or together with ``no_grad``::

    @contextlib.contextmanager
    def no_inference():
        with torch.inference_mode(False):
            yield

    def no_inference_tensors():
        if not torch.is_inference_mode_enabled():
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode(False))
        return stack

``with no_inference():`` then guards what it allocates as ``with
torch.inference_mode(False):`` does. A helper is read from its own code, for both
models (the project summary's ``ast`` and the module model): a generator context manager
that yields inside ``with inference_mode(False)``, or a function that returns the guard
(``return torch.inference_mode(False)``) or a context it entered the guard on
(``stack.enter_context(torch.inference_mode(False))``, then ``return stack``). A branch
that returns something else (``nullcontext()`` when inference mode is off) is allowed:
nothing then runs under inference mode to guard against. Helpers of the same module are
read; one imported from another module is not (``extra-guards`` names those).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from imlint.summary_writes import dotted as _dotted
from imlint.vocabulary import INFERENCE_MODE_NAMES

_CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager", "contextmanager"})


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``func``'s body, nested functions and classes left out."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)
    return out


def _is_guard(node: ast.AST, qualify: Callable[[str], str]) -> bool:
    """Whether ``node`` is ``inference_mode(False)`` (or ``mode=False``)."""
    if not isinstance(node, ast.Call):
        return False
    text = _dotted(node.func)
    if text is None or qualify(text) not in INFERENCE_MODE_NAMES:
        return False
    arg: ast.expr | None = node.args[0] if node.args else None
    for kw in node.keywords:
        if kw.arg == "mode":
            arg = kw.value
    return isinstance(arg, ast.Constant) and arg.value in (False, 0)


def _yields_guarded(nodes: list[ast.AST], qualify: Callable[[str], str]) -> bool:
    """A ``with inference_mode(False):`` whose block yields."""
    for node in nodes:
        if isinstance(node, ast.With) and any(
            _is_guard(item.context_expr, qualify) for item in node.items
        ):
            if any(isinstance(n, ast.Yield) for b in node.body for n in ast.walk(b)):
                return True
    return False


def _returns_guard(nodes: list[ast.AST], qualify: Callable[[str], str]) -> bool:
    """``return inference_mode(False)``, or ``x.enter_context(inference_mode(False))``
    and then ``return x``."""
    entered: set[str] = set()
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "enter_context"
            and any(_is_guard(a, qualify) for a in node.args)
        ):
            holder = _dotted(node.func.value)
            if holder is not None:
                entered.add(holder)
    for node in nodes:
        if isinstance(node, ast.Return) and node.value is not None:
            if _is_guard(node.value, qualify) or _dotted(node.value) in entered:
                return True
    return False


def _qualifier(tree: ast.Module) -> Callable[[str], str]:
    """A dotted text as the module-level imports of ``tree`` name it."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualify(text: str) -> str:
        head, dot, rest = text.partition(".")
        target = names.get(head)
        return text if target is None else f"{target}{dot}{rest}"

    return qualify


def local_guards(tree: ast.Module) -> frozenset[str]:
    """Names of the module-level functions of ``tree`` that are guard helpers."""
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in tree.body):
        return frozenset()
    qualify = _qualifier(tree)
    found: set[str] = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = _own_nodes(node)
        decorated = any(
            qualify(_dotted(dec) or "") in _CONTEXT_MANAGERS for dec in node.decorator_list
        )
        if (decorated and _yields_guarded(nodes, qualify)) or (
            not decorated and _returns_guard(nodes, qualify)
        ):
            found.add(node.name)
    return frozenset(found)
