"""Classes a function hands on as values (``DefSummary.class_refs``):
``executor_class = UniProcExecutor``, ``return MultiprocExecutor``,
``Engine(executor_class=RayExecutor)``. Whatever receives such a value may make an
instance where the index sees no constructor call (``executor_class(config)``), so
lifetimes do not judge the class per call from the constructor calls it does see
(``lifetimes.Lifetimes._per_call_classes``).

Only texts whose first name the module imports or defines are kept (a local alias of a
class is the summary's ``types``); which of them are classes the index decides."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from imlint.summary_writes import BUILTINS, dotted

if TYPE_CHECKING:
    from imlint.project import _Scope

#: Builtins handed a class to inspect it, not to make an instance of it.
_INSPECTING = frozenset({"isinstance", "issubclass", "getattr", "hasattr", "setattr", "type"})


def value_refs(expr: ast.expr, known: Callable[[str], bool]) -> list[str]:
    """The dotted names ``expr`` evaluates to as a value, itself or as an item of a
    literal container, a branch of a conditional or an operand of ``or``/``and``, whose
    first name ``known`` accepts."""
    out: list[str] = []
    todo: list[ast.expr] = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, (ast.Name, ast.Attribute)):
            text = dotted(e)
            if text is not None and known(text.split(".", 1)[0]):
                out.append(text)
        elif isinstance(e, ast.IfExp):
            todo += [e.body, e.orelse]
        elif isinstance(e, ast.BoolOp):
            todo += e.values
        elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            todo += e.elts
        elif isinstance(e, ast.Dict):
            todo += e.values
        elif isinstance(e, ast.Starred):
            todo.append(e.value)
    return out


def call_refs(node: ast.Call, known: Callable[[str], bool]) -> list[str]:
    """The class values a call hands its callee (not to ``isinstance`` and the like)."""
    if isinstance(node.func, ast.Name) and node.func.id in _INSPECTING:
        return []
    out: list[str] = []
    for arg in node.args:
        out += value_refs(arg, known)
    for kw in node.keywords:
        out += value_refs(kw.value, known)
    return out


class ClassRefFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    scopes: list[_Scope]

    def note_class_values(self, node: ast.expr) -> None:
        """Record the names ``node`` hands on as values that may be classes: a call's
        arguments, or an assigned or returned value. Locals of the function (its
        parameters, what it has assigned so far, ``self``) are left out."""
        scope = self.scopes[-1]

        def outer(head: str) -> bool:
            if head in BUILTINS or head == scope.self_name:
                return False
            return scope.summary.kind == "module" or (
                head not in scope.params and head not in scope.assigned
            )

        found = call_refs(node, outer) if isinstance(node, ast.Call) else value_refs(node, outer)
        scope.summary.class_refs += found
