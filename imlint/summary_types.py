"""What a function's summary records about the classes of the objects it names
(``DefSummary.annots``), for the index to resolve calls on them
(``index_types.TypeFinder``): annotated parameters (``runner: ModelRunner``), the
return annotation (``-> AttentionBackend``) and the one callee every ``return`` calls
(``return MQALayer(...)``, for when the annotation names no class of the project),
annotated attributes
(``self.attn: Attention`` in a method, ``backend: AttentionBackend`` in a class
body), and locals that alias another name (``mr = self.model_runner``).

Each entry is (key, text): the key is a parameter or local name, ``return``,
``self.<attr>``, or ``()`` for a returned call; the text is a dotted class name as the
file spells it, ``=<dotted>`` for an alias, or ``()<callee>`` for a returned call.
Only annotations that name one class are kept: ``Optional[X]``, ``X | None`` and ``"X"`` give ``X``; containers,
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
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # not an expression (Python 3.10 raises ValueError on a NUL)
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
    #: an annotated assignment is being recorded (``visit_AnnAssign``)
    _declaring: bool = False

    if TYPE_CHECKING:

        def call_text(self, func: ast.expr, scope: _Scope | None = None) -> str: ...

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

    def annotated(self, target: ast.expr, hint: ast.expr) -> bool:
        """``self.attn: Attention = ...`` in a method, ``backend: AttentionBackend`` in
        a class body (a dataclass field, a declared attribute); whether it names one
        class (then an alias the assignment also makes is not recorded)."""
        text = annotation(hint)
        if text is None:
            return False
        self._declaring = True
        scope = self.scopes[-1]
        cls = self.classes[-1]
        if cls is not None and isinstance(target, ast.Name):
            owner = self.defs.get(cls)
            if owner is not None:
                owner.annots.append((target.id, text))
            return True
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == scope.self_name
        ):
            scope.summary.annots.append((f"self.{target.attr}", text))
        elif isinstance(target, ast.Name) and scope.summary.kind == "function":
            scope.summary.annots.append((target.id, text))
        return True

    def aliased(self, name: str, value: ast.expr) -> None:
        """``mr = self.model_runner``: the local names what the attribute holds."""
        scope = self.scopes[-1]
        if scope.summary.kind != "function" or self._declaring:
            return  # ``mr: ModelRunner = self.model_runner``: the annotation says it
        if isinstance(value, (ast.Name, ast.Attribute)) and dotted(value):
            text = self.call_text(value, scope)
            if text != name:
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
            if not isinstance(value, ast.Call) or dotted(value.func) is None:
                return
            callees.add(self.call_text(value.func, scope))  # ``cls(...)`` is ``self``
        if len(callees) == 1:
            s.annots.append((RETURNED, RETURNED + callees.pop()))
