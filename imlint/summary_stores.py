"""What a function's summary records of its stores (``imlint/project.py``): which
values it keeps and where (``self``, a parameter, a global, a local object), what it
hands to calls, which stores may fill storage lazily, and the local names bound to a
constructor call (to resolve ``reg.get(...)``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from imlint.kinds import AUTOGRAD_SLOTS
from imlint.names import VIEW_METHODS
from imlint.summary_values import item_attr
from imlint.summary_writes import dotted as _dotted
from imlint.summary_writes import handle_root as _handle_root
from imlint.summary_writes import made_here as _made_here

if TYPE_CHECKING:
    from imlint.project import _Scope


#: Methods that keep what they are handed (on a container or registry).
KEEPING_METHODS = frozenset(
    {"append", "add", "extend", "insert", "setdefault", "update", "appendleft", "put",
     "put_nowait", "register", "register_module", "add_module", "register_buffer",
     "register_parameter"}
)  # fmt: skip
#: Keeping methods that add one item they are handed to a container.
ITEM_METHODS = frozenset({"append", "appendleft", "add", "insert", "put", "put_nowait"})
#: Methods that take items out of a container (``self.jobs.remove(job)``).
DROPPING_METHODS = frozenset({"remove", "pop", "popleft", "popitem", "discard"})


def _root_name(expr: ast.expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _string_key(target: ast.Subscript) -> bool:
    """``x["key"] = v`` fills a mapping (a tensor cannot be indexed by a string)."""
    return isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)


def _filters(value: ast.expr, target: ast.Attribute, scope: _Scope) -> bool:
    """``self.x = [j for j in self.x if ...]``: a comprehension over the attribute's
    own items that keeps some of them (a drop of the others)."""
    if not isinstance(value, (ast.ListComp, ast.SetComp, ast.DictComp)):
        return False
    attr = item_attr(target, scope)
    for gen in value.generators:
        source = gen.iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute):
            source = source.func.value  # ``self.x.items()``
        if gen.ifs and attr is not None and item_attr(source, scope) == attr:
            return True
    return False


class StoreFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``): the visits of
    assignments, returns and the values handed to calls."""

    if TYPE_CHECKING:
        scopes: list[_Scope]
        blocks: tuple[tuple[int, str], ...]
        classes: list[str | None]
        instances: dict[str, str]
        region: str
        cond: int
        may_allocate: bool
        vocabulary: frozenset[str]
        _declaring: bool

        def visit(self, node: ast.AST) -> None: ...

        def generic_visit(self, node: ast.AST) -> None: ...

        def qualify(self, text: str) -> str: ...

        def torch_write(self, scope: _Scope) -> str: ...

        def _results_in(self, expr: ast.expr, scope: _Scope) -> set[tuple[str, str]]: ...

        def _sets(
            self, target: ast.expr, scope: _Scope, item: bool = False, get_or_create: bool = False
        ) -> None: ...

        def annotated(self, target: ast.expr, hint: ast.expr) -> bool: ...

        def aliased(self, name: str, value: ast.expr) -> None: ...

    def _root(self, target: ast.expr) -> str | None:
        while isinstance(target, (ast.Attribute, ast.Subscript)):
            target = target.value
        return target.id if isinstance(target, ast.Name) else None

    @staticmethod
    def _kept_into(root: str | None, scope: _Scope) -> str:
        """What a value stored under ``root`` is kept on (see ``_Scope.kept``)."""
        if root is not None and root not in scope.globals:
            if root in scope.assigned:
                return f"local:{root}"
            if root == scope.self_name and scope.summary.cls:
                return "other" if scope.class_bound else "self"
            if root in scope.params:
                return f"param:{root}"
        return "other"

    def _handed(self, node: ast.Call, text: str, scope: _Scope) -> None:
        """Values handed to a call: kept when the call keeps what it is given
        (``lst.append(v)``, ``d.setdefault(k, v)``), else judged at the callee
        (``lifetimes.py``: a constructor that keeps its parameter owns the object)."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in DROPPING_METHODS:
            attr = item_attr(func.value, scope)
            if attr is not None:
                scope.drops.add(attr)
        scope.arguments.extend((text, str(i), a) for i, a in enumerate(node.args))
        scope.arguments.extend((text, kw.arg, kw.value) for kw in node.keywords if kw.arg)
        if isinstance(func, ast.Attribute) and func.attr in KEEPING_METHODS:
            if func.attr not in ("setdefault", "register_buffer", "register_parameter"):
                self._sets(func.value, scope, item=True)
            into = self._kept_into(_root_name(func.value), scope)
            attr = item_attr(func.value, scope) if func.attr in ITEM_METHODS else None
            if attr is not None:
                into = f"self[]:{attr}"  # an item of the object's own container
            scope.kept.extend((a, into) for a in node.args)
            scope.kept.extend((kw.value, into) for kw in node.keywords)
            return
        # Only what may be a new object: a call, or a name bound to one.
        assigned = scope.assigned
        for i, arg in enumerate(node.args):
            if _made_here(arg, assigned):
                scope.handed.append((arg, f"handed:{text}:{i}"))
        for kw in node.keywords:
            if kw.arg is not None and _made_here(kw.value, assigned):
                scope.handed.append((kw.value, f"handed:{text}:{kw.arg}"))

    def _store(self, target: ast.expr, value: ast.expr, how: str) -> None:
        scope = self.scopes[-1]
        root = self._root(target)
        if root is None:
            return
        if root not in scope.assigned or root in scope.globals:
            text = ast.unparse(target)
            if how in (".setdefault", ".__setitem__"):
                text += "[...]"
            if self.cond or how == ".setdefault":
                scope.stores.append((text, value, self.region))

    def _assign(self, target: ast.expr, value: ast.expr | None, line: int) -> None:
        scope = self.scopes[-1]
        if isinstance(target, ast.Name):
            if value is not None:
                if scope.summary.kind == "module" and self.classes[-1] is None:
                    if isinstance(value, ast.Call):
                        ctor = _dotted(value.func)
                        if ctor:
                            self.instances[target.id] = ctor
                elif isinstance(value, ast.Call):
                    ctor = _dotted(value.func)
                    if ctor:
                        if scope.class_bound and ctor == scope.self_name:
                            ctor = "self"  # ``obj = cls(...)`` in a class method
                        scope.summary.types[target.id] = ctor
                else:
                    self.aliased(target.id, value)  # ``mr = self.model_runner``
                scope.assigned.setdefault(target.id, []).append(value)
                scope.assigned_in[id(value)] = self.blocks
                if self._names_factory(value):
                    self.may_allocate = True  # ``factory = torch.empty``, then ``factory(n)``
            else:
                scope.rebound.add(target.id)  # a loop's or an unpacking's name
            if target.id in scope.globals and value is not None:
                scope.global_values.append((target.id, value))  # ``global _m; _m = M()``
                if self.cond:
                    scope.stores.append((target.id, value, self.region))
        elif isinstance(target, (ast.Tuple, ast.List)):
            values: list[ast.expr | None]
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                values = list(value.elts)
            else:
                values = [None] * len(target.elts)
                viewed = _views_of_items(value) if value is not None else None
                if viewed is not None:
                    value = viewed  # ``a, b = (x[:n] for x in get(dev))``: items, viewed
                if isinstance(value, ast.Call):
                    # ``a, b = get_buffers(n)``: each name holds part of the result, the
                    # item at its position when no starred name shifts them
                    starred = any(isinstance(el, ast.Starred) for el in target.elts)
                    for i, el in enumerate(target.elts):
                        if isinstance(el, ast.Name):
                            part: ast.expr = value
                            if not starred:
                                part = ast.Subscript(value, ast.Constant(i), ast.Load())
                            self.scopes[-1].unpacked.setdefault(el.id, []).append(part)
            for t, v in zip(target.elts, values, strict=False):
                self._assign(t, v, line)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, None, line)
        elif isinstance(target, (ast.Attribute, ast.Subscript)) and value is not None:
            self._assign_into(target, value, scope, line)

    def _assign_into(
        self, target: ast.Attribute | ast.Subscript, value: ast.expr, scope: _Scope, line: int
    ) -> None:
        """``obj.attr = value``, ``obj[k] = value``: what the store keeps, sets on
        ``self`` and writes."""
        if isinstance(target, ast.Attribute) and target.attr in AUTOGRAD_SLOTS:
            return  # ``p.grad = ...``: this step's gradient, not kept storage
        root = self._root(target)
        if isinstance(target, ast.Subscript) and not _string_key(target):
            if root in scope.params:
                scope.pwrites.add((root, self.torch_write(scope)))
            self._result_written(target.value, scope)  # ``z = get(n); z[i] = x``
        if root is not None:
            into = self._kept_into(root, scope)
            attr = item_attr(target.value, scope) if isinstance(target, ast.Subscript) else None
            scope.kept.append((value, into if attr is None else f"self[]:{attr}"))
            if isinstance(target, ast.Attribute) and _filters(value, target, scope):
                scope.drops.add(target.attr)  # ``self.jobs = [j for j in self.jobs if ...]``
        if (
            isinstance(target, ast.Attribute)
            and root is not None
            and root == scope.self_name
            and isinstance(target.value, ast.Name)
        ):
            scope.keeps.append((f"self.{target.attr}", value, self.region, line))
            if isinstance(value, ast.Name) and value.id in scope.params:
                scope.pattrs.add((value.id, target.attr))  # ``self.buf = buf``
            # ``self._ws = get_workspace(dev)``: what the class's methods do to
            # ``self._ws`` they do to what the call returns (``result_writes``)
            for made, key in self._results_in(value, scope):
                scope.rwrites.add((made, f"kept:self.{target.attr}", key))
            if isinstance(value, ast.Call):
                ctor = _dotted(value.func)
                if ctor:
                    scope.summary.types[f"self.{target.attr}"] = ctor
        self._sets(target, scope)
        self._store(target, value, "=")

    def _names_factory(self, value: ast.expr) -> bool:
        """``torch.zeros if z else torch.empty``: a torch factory named, not called."""
        options = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
        for option in options:
            text = _dotted(option) if isinstance(option, ast.Attribute) else None
            if text is not None:
                q = self.qualify(text)
                if q.startswith("torch.") and q.rsplit(".", 1)[-1] in self.vocabulary:
                    return True
        return False

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self._assign(t, node.value, node.lineno)
            self.visit(t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.annotated(node.target, node.annotation)
        try:
            self._assign(node.target, node.value, node.lineno)
        finally:
            self._declaring = False

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        scope = self.scopes[-1]
        root = _handle_root(node.target)
        if root in scope.params:
            scope.pwrites.add((root, self.torch_write(scope)))
        target = node.target
        if not (isinstance(target, ast.Subscript) and _string_key(target)):
            self._result_written(target, scope)  # ``z = get(n); z += x``
        self.generic_visit(node)

    def _result_written(self, handle: ast.expr, scope: _Scope) -> None:
        """A torch write into what ``handle`` names, recorded for the results of calls
        it names (``FileSummary.rwrites``): the callee's cache is written."""
        for made, key in self._results_in(handle, scope):
            scope.rwrites.add((made, self.torch_write(scope), key))

    def visit_Delete(self, node: ast.Delete) -> None:
        scope = self.scopes[-1]
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                attr = item_attr(target.value, scope)
                if attr is not None:
                    scope.drops.add(attr)  # ``del self.jobs[key]``
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._assign(node.target, node.value, node.lineno)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._assign(node.target, None, node.lineno)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.scopes[-1].returns.append((node.value, self.region, node.lineno))


def _views_of_items(node: ast.expr) -> ast.expr | None:
    """The ``ast`` twin of ``names.views_of_items``: the iterated expression of a
    comprehension that yields a view of each of its items, in order; else None."""
    if not isinstance(node, (ast.GeneratorExp, ast.ListComp)) or len(node.generators) != 1:
        return None
    comp = node.generators[0]
    if comp.ifs or comp.is_async or not isinstance(comp.target, ast.Name):
        return None
    e = node.elt
    while True:
        if isinstance(e, ast.Name):
            return comp.iter if e.id == comp.target.id else None
        if isinstance(e, ast.Subscript) and _basic_index(e.slice):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            if e.func.attr not in VIEW_METHODS:
                return None
            e = e.func.value
        else:
            return None


def _basic_index(s: ast.expr) -> bool:
    """Slices, integers, ``...`` and ``None``: indexing that views."""
    parts = s.elts if isinstance(s, ast.Tuple) else [s]
    return all(
        isinstance(p, ast.Slice)
        or (
            isinstance(p, ast.Constant)
            and (p.value is None or p.value is ... or type(p.value) is int)
        )
        for p in parts
    )
