"""What a function's summary records about the regions it opens for others
(``imlint/project.py``): the mode a context manager enters around its ``yield`` (a
``@contextmanager`` generator), the mode objects a function returns (``return
torch.inference_mode()``), or that a class's ``__enter__`` enters; which ``with``
blocks use a context manager the file cannot tell the mode of (``cm:<text>`` regions,
resolved over the project by ``index_regions.RegionFinder``); and the callables a call
hands over (``run(model, self._warmup)``, a ``lambda``, ``functools.partial``), which
the callee may call inside its own region."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from imlint.kinds import CM_REGION_PREFIX
from imlint.summary_writes import dotted

if TYPE_CHECKING:
    from imlint.project import _Scope

#: Methods whose body entering a mode makes ``with obj:`` a region of that mode.
_ENTER_METHODS = ("__enter__", "__aenter__")
#: Calls that enter a context manager by hand (``ctx.__enter__()``,
#: ``stack.enter_context(ctx)``).
_ENTERING_CALLS = ("__enter__", "__aenter__", "enter_context", "enter_async_context")
#: Context managers of libraries whose mode is known already (``mode_of``) or that
#: set none (``torch.no_grad()``, ``torch.cuda.stream(s)``, ``nullcontext()``): not
#: worth a region for the index to resolve.
_OUTSIDE = ("torch.", "contextlib.", "open", "threading.", "warnings.", "unittest.")


def join_regions(outer: str, inner: str) -> str:
    """The region of a ``with`` block nested in ``outer`` whose own items give
    ``inner``: a known mode (``inference``, ``guarded``) wins over what is around it;
    a context manager of unknown mode keeps a known mode around it and joins other
    unknown ones (``cm:a|b``: the block is in whatever mode any of them enters)."""
    if not inner.startswith(CM_REGION_PREFIX):
        return inner or outer
    if outer.startswith(CM_REGION_PREFIX):
        return f"{outer}|{inner[len(CM_REGION_PREFIX) :]}"
    return outer or inner


class RegionFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    region: str
    scopes: list[_Scope]

    if TYPE_CHECKING:

        def mode_of(self, expr: ast.expr) -> str: ...

        def visit(self, node: ast.AST) -> None: ...

        def call_text(self, func: ast.expr, scope: _Scope | None = None) -> str: ...

        def qualify(self, text: str) -> str: ...

    def with_region(self, items: list[ast.withitem]) -> str:
        """The region a ``with`` statement's items open: ``inference`` or ``guarded``
        when one of them is a known mode (the last one wins), else ``cm:<text>`` for
        the calls among them the index may resolve to a project context manager."""
        mode = ""
        unknown: list[str] = []
        for item in items:
            expr = item.context_expr
            m = self.mode_of(expr)
            if m:
                mode = m
            elif isinstance(expr, ast.Call):
                text = dotted(expr.func)
                if text is not None and not self.qualify(text).startswith(_OUTSIDE):
                    unknown.append(self.call_text(expr.func))
        if mode:
            return mode
        return CM_REGION_PREFIX + "|".join(unknown) if unknown else ""

    def decorator_region(self, dec: ast.expr) -> str:
        """A decorator's mode: a known one, or ``cm:<text>`` for a call of something a
        project context manager may be (``@maybe_inference_mode()``: objects made by
        ``@contextmanager`` functions decorate too)."""
        mode = self.mode_of(dec)
        if mode or not isinstance(dec, ast.Call):
            return mode
        text = dotted(dec.func)
        return CM_REGION_PREFIX + text if text is not None else ""

    def visit_Yield(self, node: ast.Yield) -> None:
        self.scopes[-1].enters.append(self.region)
        if node.value is not None:
            self.visit(node.value)

    def visit_YieldFrom(self, node: ast.YieldFrom) -> None:
        self.scopes[-1].enters.append(self.region)
        self.visit(node.value)

    def entered_by_hand(self, node: ast.Call, scope: _Scope) -> None:
        """In ``__enter__``: ``self._mode = torch.inference_mode(); self._mode.__enter__()``
        or ``stack.enter_context(torch.inference_mode())`` enters that mode."""
        if not scope.summary.qual.endswith(_ENTER_METHODS):
            return
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _ENTERING_CALLS:
            scope.enters_by_hand = True
        mode = self.mode_of(node)
        if mode:
            scope.entered_modes.append(mode)

    def handed_callables(self, node: ast.Call, callee: str, scope: _Scope) -> None:
        """``DefSummary.callables``: what a call hands over that may be called back: a
        function or method by name, the first argument of ``functools.partial``, the
        calls a ``lambda`` makes."""
        pairs = [(str(i), a) for i, a in enumerate(node.args) if not isinstance(a, ast.Starred)]
        pairs += [(kw.arg, kw.value) for kw in node.keywords if kw.arg is not None]
        for key, arg in pairs:
            for text in self._callable_texts(arg, scope):
                scope.callables.add((callee, key, text))

    def _callable_texts(self, arg: ast.expr, scope: _Scope) -> list[str]:
        if isinstance(arg, ast.Lambda):
            return [
                self.call_text(n.func, scope)
                for n in ast.walk(arg.body)
                if isinstance(n, ast.Call) and dotted(n.func) is not None
            ]
        if isinstance(arg, ast.Call) and arg.args and not isinstance(arg.args[0], ast.Starred):
            text = dotted(arg.func)
            if text is not None and self.qualify(text) == "functools.partial":
                return self._callable_texts(arg.args[0], scope)
            return []
        if isinstance(arg, (ast.Name, ast.Attribute)) and dotted(arg) is not None:
            return [self.call_text(arg, scope)]
        return []

    def finish_regions(self, scope: _Scope) -> list[str]:
        """``DefSummary.enters``: the mode entered at each ``yield``, each mode object
        returned (when one is), or what ``__enter__`` enters by hand."""
        if scope.enters:
            return sorted(set(scope.enters))
        if scope.enters_by_hand and scope.entered_modes:
            return sorted(set(scope.entered_modes))
        returned = [self.mode_of(v) if isinstance(v, ast.Call) else "" for v, *_ in scope.returns]
        if any(returned):
            return sorted(set(returned))
        return []
