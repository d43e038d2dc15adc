"""What a function's summary records about conditions and flags (``imlint/project.py``):
how deep the walk is in conditional code and what it tests (a store there is a
get-or-create only when it tests what it fills), the calls a function makes only while
one of its parameters is true (``if in_capture: self._init_graph_meta(bs)``) and the
constant flags it hands its callees (``backend.init_meta(fb, in_capture=True)``), so
that set-up can follow a call only along the callers that turn the flag on
(``lifetimes.Construction``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imlint.project import _Scope


def flag_of(test: ast.expr, params: set[str]) -> str | None:
    """The parameter whose truth a condition requires: ``if in_capture:`` or ``if
    in_capture and bs > 0:``."""
    if isinstance(test, ast.Name) and test.id in params:
        return test.id
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            if isinstance(value, ast.Name) and value.id in params:
                return value.id
    return None


def truth(node: ast.expr) -> bool | None:
    """The truth of a constant (``True``, ``False``, ``None``, ``0``), None otherwise."""
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (bool, int)):
        return bool(node.value)
    return None


def falsy_defaults(args: ast.arguments) -> list[str]:
    """The parameters whose default is a false constant (``in_capture: bool = False``)."""
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    kw = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    pairs += [(a, d) for a, d in kw if d is not None]
    return [a.arg for a, d in pairs if truth(d) is False]


#: Statements that end a block's run: ``if <test>: return`` guards what follows.
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


class FlagFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    #: the parameters whose truth the code being walked requires, innermost last
    flags: list[str]
    scopes: list[_Scope]
    cond: int
    tests: list[ast.AST | None]
    blocks: tuple[tuple[int, str], ...]
    temporaries: set[int]

    if TYPE_CHECKING:

        def visit(self, node: ast.AST) -> None: ...

        def generic_visit(self, node: ast.AST) -> None: ...

        def qualify(self, text: str) -> str: ...

    def _conditional(self, node: ast.AST) -> None:
        self.cond += 1
        test = getattr(node, "test", node)  # a ``BoolOp`` is its own condition
        self.tests.append(None if isinstance(node, ast.ExceptHandler) else test)
        if isinstance(node, ast.If):
            self.visit(node.test)
            self._body(node, "body", node.body)
            self.tests[-1] = _negated(node.test)  # ``else:`` runs when the test failed
            self._body(node, "orelse", node.orelse)
        else:
            self.generic_visit(node)
        self.tests.pop()
        self.cond -= 1
        if isinstance(node, ast.If) and node.body and isinstance(node.body[-1], _EXITS):
            self.scopes[-1].exits.append(node.test)  # what follows runs when it failed

    def visit_If(self, node: ast.If) -> None:
        """A condition whose body runs only while a parameter is true (``if in_capture:``)
        guards the calls there; its ``else`` does not."""
        flag = flag_of(node.test, self.scopes[-1].params)
        if flag is None:
            self._conditional(node)
            return
        self.cond += 1
        self.tests.append(node.test)
        self.visit(node.test)
        self.flags.append(flag)
        self._body(node, "body", node.body)
        self.flags.pop()
        self.tests[-1] = _negated(node.test)
        self._body(node, "orelse", node.orelse)
        self.tests.pop()
        self.cond -= 1
        if node.body and isinstance(node.body[-1], _EXITS):
            self.scopes[-1].exits.append(node.test)

    def _body(self, node: ast.AST, name: str, body: list[ast.stmt]) -> None:
        if not body:
            return
        self.blocks = (*self.blocks, (id(node), name))
        for stmt in body:
            self.visit(stmt)
        self.blocks = self.blocks[:-1]

    visit_IfExp = _conditional
    visit_BoolOp = _conditional
    visit_ExceptHandler = _conditional
    visit_While = _conditional

    def _flag_call(self, node: ast.Call, callee: str, scope: _Scope) -> None:
        """Record which flags guard a call by ``callee`` (every call by the text) and
        what it hands on that may set one: constant positional arguments, how many
        positional arguments it passes (``#``), and every keyword (``?`` when not a
        constant; ``**`` for a splatted mapping)."""
        active = frozenset(self.flags) if scope.summary.kind == "function" else frozenset()
        known = scope.guards.get(callee)
        scope.guards[callee] = active if known is None else known & active
        count = 0
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                count = -1  # any number of them
                break
            count += 1
            value = truth(arg)
            if value is not None:
                scope.flag_args.add((callee, str(i), _mark(value)))
        scope.flag_args.add((callee, "#", str(count)))
        for kw in node.keywords:
            if kw.arg is None:
                scope.flag_args.add((callee, "**", "?"))
            else:
                value = truth(kw.value)
                scope.flag_args.add((callee, kw.arg, "?" if value is None else _mark(value)))

    def _guard_allocation(self, node: ast.Call, scope: _Scope) -> None:
        """A call that may make a tensor (an allocator, a tensor method that computes):
        the flags it waits on narrow those every allocation waits on
        (``DefSummary.alloc_flags``), unless what it makes is only read where it is
        made (``buf.copy_(torch.cumsum(x, 0))``)."""
        if id(node) in self.temporaries:
            return
        active = frozenset(self.flags) if scope.summary.kind == "function" else frozenset()
        known = scope.alloc_guard
        scope.alloc_guard = active if known is None else known & active

    def _temporaries(self, node: ast.Call, text: str) -> None:
        """The arguments of a torch function or of an in-place tensor method (``x.copy_(
        ...)``, ``torch.cumsum(...)``): read there, never kept."""
        func = node.func
        in_place = isinstance(func, ast.Attribute) and func.attr.endswith("_")
        if in_place or self.qualify(text).startswith("torch."):
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                self.temporaries.add(id(arg))

    def _alloc_flags(self, scope: _Scope) -> list[str]:
        """The parameters whose truth every allocation the body makes, and every call
        whose result it keeps or returns as one, waits on (``if in_capture and
        self._meta is None: self._meta = torch.zeros(n)``): set-up follows such a
        function only along the callers that turn the flag on."""
        guard = scope.alloc_guard
        for _how, _what, ref in scope.summary.allocs:
            if not ref.startswith("!"):
                flags = scope.guards.get(ref, frozenset())
                guard = flags if guard is None else guard & flags
        return sorted(guard or ())


def _negated(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.Not(), operand=test)


def _mark(value: bool) -> str:
    return "1" if value else "0"
