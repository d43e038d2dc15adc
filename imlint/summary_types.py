"""What a function's summary records about the classes of the objects it names
(``DefSummary.annots``), for the index to resolve calls on them
(``index_types.TypeFinder``): annotated parameters (``runner: ModelRunner``), the
return annotation (``-> AttentionBackend``) or, without one, the class every
``return`` constructs (``return MQALayer(...)``), annotated attributes
(``self.attn: Attention`` in a method, ``backend: AttentionBackend`` in a class
body), and locals that alias another name (``mr = self.model_runner``).

Each entry is (key, text): the key is a parameter or local name, ``return``, or
``self.<attr>``, or ``()`` for a returned call; the text is a dotted class name as the file spells it, ``=<dotted>``
for an alias, or ``()<callee>`` for a returned call. Only annotations that name one
class are kept: ``Optional[X]``, ``X | None`` and ``"X"`` give ``X``; containers,
unions of classes and ``type[X]`` give nothing."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from imlint.summary_writes import dotted

if TYPE_CHECKING:
    from imlint.project import DefSummary, _Scope

#: The prefix of an alias entry (``mr = self.model_runner``).
ALIAS = "="
#: The prefix of a returned call (``return MQALayer(...)``).
RETURNED = "()"
_OPTIONAL = ("Optional", "typing.Optional")
_UNION = ("Union", "typing.Union")


def annotation(node: ast.expr | None) -> str | None:
    """The one class an annotation names, or None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _one_of([node.left, node.right])
    if isinstance(node, ast.Subscript):
        head = dotted(node.value)
        if head in _OPTIONAL:
            return annotation(node.slice)
        if head in _UNION and isinstance(node.slice, ast.Tuple):
            return _one_of(list(node.slice.elts))
        return None
    if isinstance(node, (ast.Name, ast.Attribute)):
        text = dotted(node)
        return text if text and text != "None" else None
    return None


def _one_of(options: list[ast.expr]) -> str | None:
    named = [o for o in options if not (isinstance(o, ast.Constant) and o.value is None)]
    named = [o for o in named if not (isinstance(o, ast.Name) and o.id == "None")]
    return annotation(named[0]) if len(named) == 1 else None


class TypeFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    scopes: list[_Scope]
    classes: list[str | None]
    defs: dict[str, DefSummary]

    def signature_types(self, scope: _Scope, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Annotated parameters and the return annotation of a function."""
        args = node.args
        everything = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        out = scope.summary.annots
        for arg in everything:
            if arg.arg == scope.self_name:
                continue
            text = annotation(arg.annotation)
            if text is not None:
                out.append((arg.arg, text))
        text = annotation(node.returns)
        if text is not None:
            out.append(("return", text))

    def annotated(self, target: ast.expr, hint: ast.expr) -> None:
        """``self.attn: Attention = ...`` in a method, ``backend: AttentionBackend`` in
        a class body (a dataclass field, a declared attribute)."""
        text = annotation(hint)
        if text is None:
            return
        scope = self.scopes[-1]
        cls = self.classes[-1]
        if cls is not None and isinstance(target, ast.Name):
            owner = self.defs.get(cls)
            if owner is not None:
                owner.annots.append((target.id, text))
            return
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == scope.self_name
        ):
            scope.summary.annots.append((f"self.{target.attr}", text))
        elif isinstance(target, ast.Name) and scope.summary.kind == "function":
            scope.summary.annots.append((target.id, text))

    def aliased(self, name: str, value: ast.expr) -> None:
        """``mr = self.model_runner``: the local names what the attribute holds."""
        scope = self.scopes[-1]
        if scope.summary.kind != "function":
            return
        if isinstance(value, (ast.Name, ast.Attribute)):
            text = dotted(value)
            if text and text != name:
                scope.summary.annots.append((name, ALIAS + text))

    def returned_type(self, scope: _Scope) -> None:
        """The callee every ``return`` calls, when there is one (``return MQALayer(...)``
        on each path), kept under the key ``()``: it names the class when the annotation
        names none of the project's (``-> nn.Module``)."""
        s = scope.summary
        if s.kind != "function":
            return
        callees = set()
        for value, *_ in scope.returns:
            callee = dotted(value.func) if isinstance(value, ast.Call) else None
            if callee is None:
                return
            callees.add(callee)
        if len(callees) == 1:
            s.annots.append((RETURNED, RETURNED + callees.pop()))
