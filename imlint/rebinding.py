"""Rebinding: which attributes of ``self`` a call binds anew before a write runs.

A write to ``self.x`` that every path of its call reaches only after the same call bound
``self.x`` anew (``self._begin(ids)`` where ``_begin`` sets ``self.x`` on every path, or
``self.x = in_ids.clone()`` earlier in the method) writes what that call made, under that
call's mode: not a tensor an earlier call left behind. Such a write is not a later write
of an allocation made elsewhere in the class (a streaming generator that rebuilds its
token sequence at the start of each request, then masks it in place).

Read from code only: a binding counts when it replaces the storage with something no
earlier call kept (its value reads nothing of ``self``, or makes new storage:
``torch.cat((self.x, t))``; ``self.x = self._saved`` may bring an old tensor back); a branch
counts only when both arms bind; a loop body may not run; a handler starts from what
held before its ``try``; bindings inside a block with a mode of its own (a ``with``
that sets inference mode or a guard, as the collector reads it: ``mode_blocks``), in a
lambda or a nested function do not count, nor any before a write inside such a block. A call ``self.m()`` binds what ``m`` binds on
every path that returns (to a fixed point over the class's methods). A subclass that
overrides ``m`` is not seen (``self.m()`` is taken to run the method of this class).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from imlint.names import TORCH_ALLOCATORS, dotted_name
from imlint.semantic import ClassModel, FunctionModel
from imlint.vocabulary import TENSOR_NEW_METHODS
from imlint.walk import walk

Bound = frozenset[str]
#: What a block leaves: the attributes bound where it falls through (None: it never
#: does), and those bound at each ``return`` it holds.
Flow = tuple[Bound | None, list[Bound]]

_NONE: Bound = frozenset()
#: Rounds of the fixed point over a class's methods at most.
_ROUNDS = 8
#: Code that may run later, or not at all, when the expression around it runs.
_DEFERRED = (
    cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.FunctionDef,
    cst.ClassDef,
)  # fmt: skip


def _meet(a: Bound | None, b: Bound | None) -> Bound | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body


def _self_attr(node: cst.BaseExpression, self_name: str) -> str | None:
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == self_name
    ):
        return node.attr.value
    return None


def _reads_self(value: cst.BaseExpression, self_name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == self_name for n in walk(value))


def _new_storage(value: cst.BaseExpression) -> bool:
    """``torch.cat((self.x, t))``, ``self.x.clone()``: new storage made from the old."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted_name(value.func)
    if name is not None and name.startswith("torch.") and name[6:] in TORCH_ALLOCATORS:
        return True
    func = value.func
    return isinstance(func, cst.Attribute) and func.attr.value in TENSOR_NEW_METHODS


class Rebinding:
    """The attributes each method of a class binds on every path that returns."""

    def __init__(self, cls: ClassModel, mode_blocks: set[int]) -> None:
        self.mode_blocks = mode_blocks  # ``Collector.mode_blocks``
        self.methods = {
            f.name: f for f in cls.functions if f.self_name is not None and f.parent is None
        }
        self.always: dict[str, Bound] = {}
        for _ in range(_ROUNDS):
            found = {name: self._always(f) for name, f in self.methods.items()}
            if found == self.always:
                break
            self.always = found

    def _always(self, f: FunctionModel) -> Bound:
        assert f.self_name is not None
        if f.decorator_mode is not None:
            return _NONE  # it binds under its own mode, not its caller's
        falls, exits = self._block(_statements(f.node.body), _NONE, f.self_name)
        ends = exits + ([falls] if falls is not None else [])
        return frozenset.intersection(*ends) if ends else _NONE

    # ---------------------------------------------------------------- before a write

    def bound_before(self, f: FunctionModel, node: cst.CSTNode) -> Bound:
        """What every path of ``f`` has bound when it reaches ``node`` (inside a block
        with a mode of its own, nothing bound before it counts)."""
        if f.self_name is None:
            return _NONE
        return self._find(_statements(f.node.body), _NONE, node, f.self_name)

    def _find(
        self,
        stmts: Sequence[cst.CSTNode],
        bound: Bound,
        node: cst.CSTNode,
        me: str,
    ) -> Bound:
        for stmt in stmts:
            if any(n is node for n in walk(stmt)):
                return self._inside(stmt, bound, node, me)
            falls, _ = self._statement(stmt, bound, me)
            if falls is None:
                return _NONE
            bound = falls
        return _NONE

    def _inside(self, stmt: cst.CSTNode, bound: Bound, node: cst.CSTNode, me: str) -> Bound:
        """What holds at ``node`` inside ``stmt``, ``bound`` holding before ``stmt``."""
        if id(stmt) in self.mode_blocks or isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return _NONE
        suites: list[tuple[Sequence[cst.CSTNode], Bound]] = []
        if isinstance(stmt, cst.If):
            b = bound | self._calls(stmt.test, me)
            suites = [(_statements(stmt.body), b)]
            if isinstance(stmt.orelse, cst.If):
                suites.append(([stmt.orelse], b))
            elif stmt.orelse is not None:
                suites.append((_statements(stmt.orelse.body), b))
        elif isinstance(stmt, (cst.For, cst.While)):
            header = stmt.iter if isinstance(stmt, cst.For) else stmt.test
            b = bound | self._calls(header, me)
            suites = [(_statements(stmt.body), b)]
            if stmt.orelse is not None:
                suites.append((_statements(stmt.orelse.body), b))
        elif isinstance(stmt, cst.With):
            b = bound | self._items(stmt, me)
            suites = [(_statements(stmt.body), b)]
        elif isinstance(stmt, cst.Match):
            b = bound | self._calls(stmt.subject, me)
            suites = [(_statements(case.body), b) for case in stmt.cases]
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            suites = [(_statements(stmt.body), bound)]
            suites += [(_statements(h.body), bound) for h in stmt.handlers]
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    suites.append((_statements(extra.body), bound))
        else:
            return bound  # inside a simple statement, or a header
        for inner, b in suites:
            if any(n is node for s in inner for n in walk(s)):
                return self._find(inner, b, node, me)
        return bound

    # ---------------------------------------------------------------- flow of a block

    def _block(self, stmts: Sequence[cst.CSTNode], bound: Bound, me: str) -> Flow:
        exits: list[Bound] = []
        for stmt in stmts:
            falls, more = self._statement(stmt, bound, me)
            exits += more
            if falls is None:
                return None, exits
            bound = falls
        return bound, exits

    def _statement(self, stmt: cst.CSTNode, bound: Bound, me: str) -> Flow:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self._block(stmt.body, bound, me)
        if isinstance(stmt, cst.Return):
            return None, [bound | self._calls(stmt.value, me)]
        if isinstance(stmt, (cst.Raise, cst.Continue, cst.Break)):
            return None, []
        if isinstance(stmt, cst.If):
            return self._if(stmt, bound, me)
        if isinstance(stmt, (cst.For, cst.While)):
            header = stmt.iter if isinstance(stmt, cst.For) else stmt.test
            b = bound | self._calls(header, me)
            _, exits = self._block(_statements(stmt.body), b, me)
            if stmt.orelse is not None:
                exits += self._block(_statements(stmt.orelse.body), b, me)[1]
            return b, exits  # the body may not run
        if isinstance(stmt, cst.With):
            b = bound | self._items(stmt, me)
            falls, exits = self._block(_statements(stmt.body), b, me)
            if id(stmt) in self.mode_blocks:
                return (None if falls is None else b), [b for _ in exits]
            return falls, exits
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            return self._try(stmt, bound, me)
        if isinstance(stmt, cst.Match):
            b = bound | self._calls(stmt.subject, me)
            exits = []
            for case in stmt.cases:  # no case may match: what held before still holds
                exits += self._block(_statements(case.body), b, me)[1]
            return b, exits
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.Expr, cst.AugAssign)):
            return bound | self._calls(stmt, me) | self._targets(stmt, me), []
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return bound, []
        # anything else (a ``del``, an ``assert``...): a ``return`` in it leaves with
        # nothing new bound
        return bound, [bound for n in walk(stmt) if isinstance(n, cst.Return)][:1]

    def _if(self, stmt: cst.If, bound: Bound, me: str) -> Flow:
        b = bound | self._calls(stmt.test, me)
        body, exits = self._block(_statements(stmt.body), b, me)
        if stmt.orelse is None:
            other: Bound | None = b
        elif isinstance(stmt.orelse, cst.If):
            other, more = self._if(stmt.orelse, b, me)
            exits += more
        else:
            other, more = self._block(_statements(stmt.orelse.body), b, me)
            exits += more
        return _meet(body, other), exits

    def _try(self, stmt: cst.Try | cst.TryStar, bound: Bound, me: str) -> Flow:
        falls, exits = self._block(_statements(stmt.body), bound, me)
        if falls is not None and stmt.orelse is not None:
            falls, more = self._block(_statements(stmt.orelse.body), falls, me)
            exits += more
        for h in stmt.handlers:
            handled, more = self._block(_statements(h.body), bound, me)
            exits += more
            falls = _meet(falls, handled) if handled is not None else falls
        if falls is not None and stmt.finalbody is not None:
            falls, more = self._block(_statements(stmt.finalbody.body), falls, me)
            exits += more
        return falls, exits

    # ---------------------------------------------------------------- one statement

    def _items(self, stmt: cst.With, me: str) -> Bound:
        out: set[str] = set()
        for item in stmt.items:
            out |= self._calls(item.item, me)
        return frozenset(out)

    def _calls(self, node: cst.CSTNode | None, me: str) -> Bound:
        """What the ``self.m(...)`` calls ``node`` always makes bind (not those in a
        lambda, a comprehension, or a branch of ``and``/``or``/``x if c else y``)."""
        if node is None:
            return _NONE
        skipped: set[int] = set()
        out: set[str] = set()
        for n in walk(node):
            if id(n) in skipped:
                continue
            if isinstance(n, _DEFERRED):
                skipped.update(id(c) for c in walk(n))
            elif isinstance(n, cst.BooleanOperation):
                skipped.update(id(c) for c in walk(n.right))
            elif isinstance(n, cst.IfExp):
                skipped.update(id(c) for c in (*walk(n.body), *walk(n.orelse)))
            elif isinstance(n, cst.Call):
                name = _self_attr(n.func, me)
                if name is not None:
                    out |= self.always.get(name, _NONE)
        return frozenset(out)

    def _targets(self, stmt: cst.CSTNode, me: str) -> Bound:
        """Attributes an assignment binds to new storage (see the module doc)."""
        value: cst.BaseExpression | None = None
        targets: list[cst.BaseExpression] = []
        if isinstance(stmt, cst.Assign):
            value = stmt.value
            for assigned in stmt.targets:
                inner = assigned.target
                if isinstance(inner, (cst.Tuple, cst.List)):
                    targets += [e.value for e in inner.elements]
                else:
                    targets.append(inner)
        elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
            value, targets = stmt.value, [stmt.target]
        if value is None:
            return _NONE
        out = set()
        for t in targets:
            attr = _self_attr(t, me)
            if attr is not None and (not _reads_self(value, me) or _new_storage(value)):
                out.add(attr)
        return frozenset(out)
