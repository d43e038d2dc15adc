"""Allocation sites, as the collecting walk finds them: torch's factories and computing
functions, ``new_*`` and ``clone()``, configured allocators, the project's allocating
callables (``FileFacts.allocators``: IM003), and factories handed to get-or-create
helpers (``FileFacts.helpers``), and arithmetic on tensors made before."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from imlint.index_facts import FileFacts
from imlint.names import (
    TENSOR_NEW_METHODS,
    TORCH_ALLOCATORS,
    TORCH_FACTORIES,
    ImportMap,
    dotted_name,
    name_matches,
)
from imlint.options import AnalysisOptions
from imlint.positions import Positions
from imlint.semantic import AllocationSite, Frames, FunctionModel
from imlint.vocabulary import (
    ARITHMETIC,
    ARITHMETIC_OPERATORS,
    INDEXING,
    SIZED_FACTORIES,
    TENSOR_DERIVING_METHODS,
    content_of,
)
from imlint.walk import walk

#: Statements whose value can be kept: arithmetic elsewhere (a test, an argument) is not.
_KEEPING_STATEMENTS = (cst.Assign, cst.AnnAssign, cst.Return)

#: Operands that are no tensor: arithmetic on them builds a container or a string.
_NOT_TENSORS = (
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SimpleString,
    cst.FormattedString,
    cst.ConcatenatedString,
)


class SiteFinder:
    """The collector's allocation sites (a mixin of :class:`imlint.collect.Collector`,
    which owns the state below)."""

    imports: ImportMap
    facts: FileFacts
    options: AnalysisOptions
    positions: Positions
    allocations: list[AllocationSite]
    _stmt: list[cst.SimpleStatementLine | cst.SimpleStatementSuite]

    if TYPE_CHECKING:

        @property
        def func(self) -> FunctionModel | None: ...

        def _locate(self, node: cst.CSTNode) -> None: ...

        def _snapshot(self) -> Frames: ...

        def _next(self) -> int: ...

    def _add_site(
        self,
        node: cst.Call | cst.BinaryOperation | cst.Subscript,
        allocator: str,
        chain: str | None,
        object_result: bool,
        report_node: cst.CSTNode | None = None,
        helper: bool = False,
        made_content: str = "unknown",
    ) -> AllocationSite:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        self._locate(node)
        if report_node is not None:
            self._locate(report_node)
        if stmt is not None:
            self._locate(stmt)
        site = AllocationSite(
            call=node,
            allocator=allocator,
            function=f,
            frames=self._snapshot(),
            stmt=stmt if isinstance(stmt, cst.SimpleStatementLine) else None,
            suite=stmt if isinstance(stmt, cst.SimpleStatementSuite) else None,
            order=self._next(),
            positions=self.positions,
            chain=chain,
            object_result=object_result,
            report_node=report_node,
            helper=helper,
            made_content=made_content,
        )
        # A cached ``torch.empty(0)`` sentinel holds nothing left to fill.
        site.filled = isinstance(node, cst.Call) and zero_elements(node)
        f.allocations.append(site)
        self.allocations.append(site)
        return site

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """Arithmetic in a statement that can keep its result: a site of its own,
        which flow counts only when an operand holds a tensor made before."""
        if self.func is None or type(node.operator).__name__ not in ARITHMETIC_OPERATORS:
            return
        if not self._stmt or not isinstance(self._stmt[-1].body[0], _KEEPING_STATEMENTS):
            return
        if isinstance(node.left, _NOT_TENSORS) or isinstance(node.right, _NOT_TENSORS):
            return  # ``[None] * n``, ``"a" + s``
        self._add_site(node, ARITHMETIC, None, False)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """Indexing by something other than numbers and slices (``cos[idx]``, ``x[x >
        0]``) in a statement that can keep its result: a site of its own, which flow
        counts only when an index holds a tensor made before (a gather)."""
        if self.func is None or not self._stmt:
            return
        stmt = self._stmt[-1].body[0]
        if not isinstance(stmt, _KEEPING_STATEMENTS):
            return
        if isinstance(stmt, cst.Assign) and any(t.target is node for t in stmt.targets):
            return  # ``self._c[k] = v``: where a value is stored, not a value
        if any(
            isinstance(el.slice, cst.Index) and _may_hold_tensor(el.slice.value)
            for el in node.slice
        ):
            self._add_site(node, INDEXING, None, False)

    def _returned_by_cache(self, node: cst.Call) -> bool:
        """A cached function's ``return torch.empty(0)``: a sentinel every caller shares
        for good, nothing replaces it as a placeholder is replaced."""
        f = self.func
        if f is None or not f.cached or not self._stmt:
            return False
        stmt = self._stmt[-1].body[0]
        return isinstance(stmt, cst.Return) and stmt.value is node

    def call_key(self, func: cst.BaseExpression) -> str | None:
        """A call's callee as the project index spells it (see ``FileFacts``)."""
        return call_key(func, self.func)

    def _allocator(self, node: cst.Call) -> tuple[str, str | None, bool, str] | None:
        """(allocator, chain, returns an object, what the returned tensor holds) for a
        call that allocates, else None.

        The chain is None for torch's own factories; IM003 reads the others: configured
        allocators and the project's allocating callables (what their tensor holds comes
        from the project index, ``unknown`` for a configured allocator).
        """
        if zero_elements(node) and not self._returned_by_cache(node):
            return None  # ``torch.empty(0)``: a placeholder, not a buffer
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_NEW_METHODS:
            return f".{func.attr.value}", None, False, ""
        q = self.imports.qualify(func)
        if isinstance(func, cst.Name):
            bound = self._bound_factory(func.value)
            if bound is not None:
                return bound, None, False, ""
        method = deriving_method(func, self.imports)
        if method is not None and not (q or "").startswith("torch."):
            return f".{method}", None, False, ""  # ``x.to(d)``, ``t.detach().float()``
        if q is None:
            return None
        head, _, rest = q.partition(".")
        if head == "torch" and rest in TORCH_ALLOCATORS:
            return q, None, False, ""
        if self.options.extra_allocators and name_matches(q, self.options.extra_allocators):
            last = q.rsplit(".", 1)[-1]
            chain = f"`{q}` is a configured allocator (extra-allocators)"
            return q, chain, last[:1].isupper(), "unknown"
        if self.facts.allocators:
            key = self.call_key(func)
            known = self.facts.allocators.get(key) if key is not None else None
            if known is not None:
                return q, *known
        return None

    def _bound_factory(self, name: str) -> str | None:
        """``factory = torch.zeros if z else torch.empty`` or ``zeros = lambda *s:
        torch.zeros(*s, device=d)``, then ``factory(n)``: a local name bound only to
        torch's allocators (or lambdas that call one) is one (the blank one, if any: what
        the tensor may hold when made)."""
        f = self.func
        if f is None or name in f.params or name in f.globals or name in f.other_bound:
            return None
        found: list[str] = []
        for value in f.defs.get(name, ()):
            options = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
            if isinstance(value, cst.Lambda) and isinstance(value.body, cst.Call):
                options = (value.body.func,)  # ``zeros = lambda *s: torch.zeros(*s, ...)``
            for option in options:
                q = self.imports.qualify(option)
                head, _, rest = (q or "").partition(".")
                if head != "torch" or rest not in TORCH_FACTORIES:
                    return None
                found.append(f"torch.{rest}")
        if not found:
            return None
        return min(found, key=lambda q: content_of(q) != "blank")

    def _helper_site(self, node: cst.Call, f: FunctionModel) -> None:
        """A factory handed to a get-or-create helper that keeps what it returns."""
        key = self.call_key(node.func)
        helper = self.facts.helpers.get(key) if key is not None else None
        if helper is None:
            return
        position, param, name, stored = helper
        positional = [a for a in node.args if a.keyword is None and a.star == ""]
        arg: cst.BaseExpression | None = None
        for a in node.args:
            if a.keyword is not None and a.keyword.value == param:
                arg = a.value
        if arg is None and 0 <= position < len(positional):
            arg = positional[position].value
        if arg is None:
            return
        inner, via = self._factory_allocation(arg)
        if via is None:
            return
        chain = (
            f"`{name}` keeps what its factory `{param}` returns in `{stored}`; the factory {via}"
        )
        content = "unknown"
        if isinstance(inner, cst.Call):
            found = self._allocator(inner)
            if found is not None:  # what the factory's tensor holds when made
                content = content_of(found[0]) if found[1] is None else found[3]
        self._add_site(
            node, name, chain, False, report_node=inner, helper=True, made_content=content
        )

    def _factory_allocation(self, arg: cst.BaseExpression) -> tuple[cst.CSTNode | None, str | None]:
        """Where a factory argument allocates, and how (None: it does not)."""
        if isinstance(arg, cst.Lambda):
            for n in walk(arg.body):
                if isinstance(n, cst.Call):
                    found = self._allocator(n)
                    if found is not None:
                        return n, f"allocates via {found[1] or found[0]}"
            return None, None
        if isinstance(arg, cst.Call):
            q = self.imports.qualify(arg.func) or ""
            if q.rsplit(".", 1)[-1] == "partial" and arg.args:
                target = arg.args[0].value
                tq = self.imports.qualify(target) or ""
                head, _, rest = tq.partition(".")
                if head == "torch" and rest in TORCH_ALLOCATORS:
                    return arg, f"is `partial({tq}, ...)`"
                key = self.call_key(target)
                known = self.facts.allocators.get(key) if key is not None else None
                if known is not None:
                    return arg, f"is `partial({key}, ...)`: {known[0]}"
            return None, None
        key = self.call_key(arg)
        known = self.facts.allocators.get(key) if key is not None else None
        if known is not None:
            return None, f"`{key}`: {known[0]}"
        return None, None


def deriving_method(func: cst.BaseExpression, imports: ImportMap) -> str | None:
    """The method's name for ``x.to(d)``, ``w.float()``, ``t.exp()``: a tensor method
    that makes a new tensor from its receiver (``vocabulary.TENSOR_DERIVING_METHODS``).
    A function of an imported module spelled the same way (``math.exp(x)``) is not one."""
    if not isinstance(func, cst.Attribute) or func.attr.value not in TENSOR_DERIVING_METHODS:
        return None
    receiver = func.value
    while isinstance(receiver, cst.Attribute):
        receiver = receiver.value
    if isinstance(receiver, cst.Name) and receiver.value in imports.names:
        return None
    return func.attr.value


def zero_elements(node: cst.Call) -> bool:
    """Whether a sized factory call has a literal 0 in its size: an empty placeholder."""
    func = node.func
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else ""
    )
    if name == "tensor" and node.args and node.args[0].keyword is None:
        first = node.args[0].value  # ``torch.tensor([])``: an empty placeholder
        return isinstance(first, (cst.List, cst.Tuple)) and not first.elements
    if (
        name not in SIZED_FACTORIES
        or name.endswith("_like")
        or not node.args
        or node.args[0].keyword is not None
    ):
        return False
    first = node.args[0].value
    dims = (
        [el.value for el in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
    )
    return any(isinstance(d, cst.Integer) and d.value == "0" for d in dims)


def call_key(func: cst.BaseExpression, f: FunctionModel | None) -> str | None:
    """A call's callee in ``f`` as the project index spells it (see ``FileFacts``):
    ``make_buf``, ``mod.Wrapper``, ``Class|self.method`` for a call on ``self``."""
    text = dotted_name(func)
    if (
        text is None
        and isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Call)
        and f is not None
    ):
        inner = dotted_name(func.value.func)  # ``load_module(cfg).run``
        if inner is not None and inner.split(".", 1)[0] != f.self_name:
            return f"{inner}().{func.attr.value}"
    if text is None or f is None:
        return None
    head, _, rest = text.partition(".")
    if f.self_name is not None and head == f.self_name:
        return f"{f.cls.name}|self.{rest}" if f.cls is not None and rest else None
    return text


#: Index expressions that never hold a tensor: numbers, strings, ``None``, ``...``.
_NOT_INDEX_TENSORS = (cst.Integer, cst.Float, cst.SimpleString, cst.Ellipsis, cst.Slice)


def _may_hold_tensor(index: cst.BaseExpression) -> bool:
    """Whether an index may be a tensor (a name, a call, a comparison), not a literal."""
    if isinstance(index, cst.UnaryOperation):
        index = index.expression
    if isinstance(index, cst.Name) and index.value in ("None", "True", "False"):
        return False
    return not isinstance(index, _NOT_INDEX_TENSORS)
