"""What a function's summary records about where a value comes from
(``imlint/project.py``): the allocations and calls an expression kept or returned is
made from, through locals, wrappers (``nn.Parameter``) and methods that return their
receiver (``module.to(d)``); and which object an argument is, where that tells how long
it lives (``holders``), with what a function replaces on ``self`` (``_sets``), for
``imlint/holders.py``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from imlint.kinds import FRESH_CALLS, ITEM_COPIES, ITEM_GETTERS, is_inplace_name
from imlint.summary_writes import dotted as _dotted
from imlint.vocabulary import NON_TENSOR_METHODS

if TYPE_CHECKING:
    from imlint.project import DefSummary, _Scope

#: Calls whose result holds their first argument (a tensor kept by a module).
_WRAPPERS = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.nn.Buffer",
        "torch.nn.parameter.Buffer",
    }
)

#: Methods that return the object they are called on (``torch.nn.Module``'s).
RETURNS_SELF_METHODS = frozenset(
    {"eval", "train", "to", "cuda", "cpu", "half", "float", "bfloat16", "requires_grad_",
     "share_memory"}
)  # fmt: skip


def item_attr(container: ast.expr, scope: _Scope) -> str | None:
    """``attr`` when ``container`` is ``self.<attr>`` in a method: an attribute of the
    object itself (what a store on ``self`` replaces, or the container whose items a
    store or a drop names)."""
    if (
        isinstance(container, ast.Attribute)
        and isinstance(container.value, ast.Name)
        and container.value.id == scope.self_name
        and scope.summary.cls
        and not scope.class_bound
    ):
        return container.attr
    return None


def _empty(test: ast.AST, attr: str, scope: _Scope, empty: bool) -> bool:
    """Whether ``test`` holds only while ``self.<attr>`` is empty (``empty``), or only
    while it is filled (``not empty``: the test of an early return)."""
    if isinstance(test, ast.BoolOp):
        joined = isinstance(test.op, ast.And) == empty  # ``a and b`` / ``a or b`` exits
        check = any if joined else all
        return check(_empty(v, attr, scope, empty) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _empty(test.operand, attr, scope, not empty)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None:
            if isinstance(test.ops[0], (ast.Is, ast.Eq)):
                return _empty(test.left, attr, scope, not empty)
            if isinstance(test.ops[0], (ast.IsNot, ast.NotEq)):
                return _empty(test.left, attr, scope, empty)
        return False
    # what remains is a truth test: it holds while the attribute is filled
    if empty:
        return False
    if isinstance(test, ast.Attribute):
        return test.attr == attr and item_attr(test, scope) == attr
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.args:
        name = test.args[1] if len(test.args) > 1 else None
        own = isinstance(test.args[0], ast.Name) and test.args[0].id == scope.self_name
        named = isinstance(name, ast.Constant) and name.value == attr
        return own and named and test.func.id in ("hasattr", "getattr")
    return False


def _mentions(test: ast.AST, attr: str, scope: _Scope, depth: int = 0) -> bool:
    """Whether a condition looks at ``self.<attr>``: directly, by ``hasattr`` or
    ``getattr`` with its name, or through a local bound to something that does."""
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and n.attr == attr and item_attr(n, scope):
            return True
        if isinstance(n, ast.Constant) and n.value == attr:
            return True  # ``hasattr(self, "_ws")``, ``self.__dict__.get("_ws")``
        if isinstance(n, ast.Name) and depth < 2 and n.id in scope.assigned:
            if any(_mentions(v, attr, scope, depth + 1) for v in scope.assigned[n.id]):
                return True
    return False


def _alternatives(func: ast.expr, scope: _Scope) -> list[ast.expr]:
    """The callables a local names when it is bound only to named ones (``kernel =
    decode if short else prefill``, then ``kernel(q, kv)``): the call runs one of them."""
    if not isinstance(func, ast.Name) or func.id in scope.params:
        return []
    values = scope.assigned.get(func.id)
    if not values or func.id in scope.rebound:
        return []
    out: list[ast.expr] = []
    for value in values:
        options = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
        for option in options:
            if not isinstance(option, (ast.Name, ast.Attribute)) or _dotted(option) is None:
                return []
            out.append(option)
    return out


class ValueOrigins:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    if TYPE_CHECKING:
        cond: int
        tests: list[ast.AST | None]
        imports: dict[str, str]
        defs: dict[str, DefSummary]
        scopes: list[_Scope]

        def qualify(self, text: str) -> str: ...

        def call_text(self, func: ast.expr, scope: _Scope | None = None) -> str: ...

        def is_allocator(self, node: ast.Call) -> str | None: ...

    def call_texts(self, func: ast.expr, scope: _Scope | None = None) -> list[str]:
        """The texts of the callables a call may run: the callee's own, or, for a local
        bound only to named callables, theirs (``_alternatives``)."""
        scope = scope or self.scopes[-1]
        alternatives = _alternatives(func, scope)
        return [self.call_text(a, scope) for a in alternatives] or [self.call_text(func, scope)]

    def _fresh_call(self, value: ast.expr) -> bool:
        """A call that builds a new object nothing else holds (``kinds.FRESH_CALLS``)."""
        if not isinstance(value, ast.Call):
            return False
        text = _dotted(value.func)
        return text is not None and self.qualify(text) in FRESH_CALLS

    def refs(self, expr: ast.expr, scope: _Scope, seen: frozenset[str] = frozenset()) -> set[str]:
        """What the value of ``expr`` may come from: ``!torch.empty`` (an allocation;
        ``!torch.empty.copy_`` when filled in place as it is made), ``#param`` (a call of
        a parameter) or a call text to resolve later."""
        out: set[str] = set()
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Call):
                direct = self.is_allocator(e)
                if direct is not None:
                    out.add("!" + direct)
                    continue
                func = e.func
                if isinstance(func, ast.Name) and func.id in scope.params:
                    out.add("#" + func.id)
                    continue
                text = _dotted(func)
                if text is not None and self.qualify(text) in _WRAPPERS and e.args:
                    stack.append(e.args[0])
                    continue
                if isinstance(func, ast.Name) or (text is not None and "." in text):
                    out.update(self.call_texts(func))
                if isinstance(func, ast.Attribute) and func.attr not in NON_TENSOR_METHODS:
                    filled = isinstance(func.value, ast.Call) and is_inplace_name(func.attr)
                    made = self.is_allocator(func.value) if filled else None  # type: ignore[arg-type]
                    if made is not None:
                        out.add(f"!{made}.{func.attr}")  # ``torch.empty(n).copy_(x)``: filled
                        continue
                    stack.append(func.value)  # ``torch.empty(n).view(-1)``
            elif isinstance(e, ast.Name):
                if e.id in seen or e.id in scope.globals:
                    continue
                # what it is bound to, and what is stored into it when it is a local
                # container (``bufs = {}`` then ``bufs["ids"] = torch.zeros(n)``)
                into = f"local:{e.id}"
                values = [*scope.assigned.get(e.id, ()), *(v for v, k in scope.kept if k == into)]
                for v in values:
                    out |= self.refs(v, scope, seen | {e.id})
            elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
                stack.extend(e.elts)
            elif isinstance(e, ast.Dict):
                stack.extend(v for v in e.values if v is not None)
            elif isinstance(e, ast.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, ast.BoolOp):
                stack.extend(e.values)
            elif isinstance(e, ast.BinOp):
                stack.extend((e.left, e.right))
            elif isinstance(e, (ast.UnaryOp,)):
                stack.append(e.operand)
            elif isinstance(e, (ast.Subscript, ast.Starred, ast.NamedExpr)):
                stack.append(e.value)
        return out

    def _made(self, expr: ast.expr, scope: _Scope, seen: frozenset[str] = frozenset()) -> set[str]:
        """Call texts whose result ``expr`` may be, or be part of (through local names):
        ``bundle.allocator`` and ``model.eval()`` carry what ``bundle`` and ``model`` hold
        (a field of the object; a method that returns the object itself)."""
        out: set[str] = set()
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Call):
                text = _dotted(e.func)
                if text is not None:
                    out.update(self.call_texts(e.func, scope))
                func = e.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in RETURNS_SELF_METHODS
                    and isinstance(func.value, ast.Name)
                ):
                    stack.append(func.value)
                if text in ITEM_COPIES and text not in scope.assigned:
                    stack.extend(e.args)  # ``tuple(items)`` holds what ``items`` holds
            elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
                stack.append(e.value)
            elif isinstance(e, ast.Name) and e.id not in seen and e.id not in scope.globals:
                for v in scope.assigned.get(e.id, ()):
                    out |= self._made(v, scope, seen | {e.id})
            elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
                stack.extend(e.elts)
            elif isinstance(e, ast.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, ast.BoolOp):
                stack.extend(e.values)
            elif isinstance(e, (ast.NamedExpr, ast.Starred)):
                stack.append(e.value)
        return out

    def holders(
        self, expr: ast.expr, scope: _Scope, seen: frozenset[str] = frozenset()
    ) -> set[str]:
        """Which object an argument is, where that tells how long it lives (see
        ``DefSummary.hands``): ``self``, ``self.<attr>`` (``self.meta``, ``self.meta.x``),
        ``self.<attr>[]`` (an item of a container on ``self``: ``self.pools[k]``,
        ``self.pools.get(k)``), ``global`` (``name:<id>`` until the module is read),
        ``param:<name>`` (or an attribute or item of it), ``item`` (an item of any other
        container, a name unpacked from a call's result), through local names. A call's result or a computed value names
        none: its lifetime is not known here."""
        item = False
        while True:
            if isinstance(expr, ast.Subscript):
                item, expr = True, expr.value
            elif (
                isinstance(expr, ast.Call)
                and isinstance(expr.func, ast.Attribute)
                and expr.func.attr in ITEM_GETTERS
            ):
                item, expr = True, expr.func.value
            elif isinstance(expr, ast.Attribute):
                inner = expr.value
                if isinstance(inner, ast.Name) and inner.id == scope.self_name:
                    if scope.class_bound:
                        return {"global"}
                    return {f"self.{expr.attr}{'[]' if item else ''}"}
                expr = inner
            else:
                break
        if not isinstance(expr, ast.Name):
            return {"item"} if item else set()
        name = expr.id
        if name == scope.self_name:
            return {"global"} if scope.class_bound else {"self"}
        if name in scope.params and name not in scope.assigned:
            return {f"param:{name}"}
        if name in seen:
            return set()
        values = scope.assigned.get(name)
        if values is None:
            if name in scope.unpacked:
                return {"item"}  # ``meta, layer = get_context(name)``: an item of a result
            return {f"name:{name}"}  # a global if the module binds it (``resolve_names``)
        out: set[str] = set()
        for v in values:
            out |= self.holders(
                ast.Subscript(v, ast.Constant(0)) if item else v, scope, seen | {name}
            )
        return out

    def _sets(
        self, target: ast.expr, scope: _Scope, item: bool = False, get_or_create: bool = False
    ) -> None:
        """What a store replaces on ``self`` (``DefSummary.sets``): the attribute
        (``self.meta = m``) or, for ``item`` or a subscript target, an item of a
        container attribute (``self.reqs[k] = r``, ``self.reqs.append(r)``); ``?``-marked
        when the store is conditional or a get-or-create (``setdefault``)."""
        if isinstance(target, ast.Subscript):
            item, target = True, target.value
        attr = item_attr(target, scope)
        if attr is not None:
            tested = get_or_create or self._tested(attr, scope)
            scope.sets.add(f"{'?' if tested else ''}{attr}{'[]' if item else ''}")
            if item or not self._while_empty(attr, scope):
                scope.refills.add(attr)
            else:
                scope.slots.add(attr)

    def _while_empty(self, attr: str, scope: _Scope) -> bool:
        """Whether a store on ``self.<attr>`` runs only while the attribute is empty:
        under ``if self.x is None:`` (``not self.x``, ``not hasattr(self, "x")``, one
        of several tests joined by ``and``) or after ``if self.x is not None: return``.
        A test that also lets a filled attribute through (``self.x is None or
        self.x.numel() < n``) refills it (``DefSummary.slots``)."""
        return any(t is not None and _empty(t, attr, scope, True) for t in self.tests) or any(
            _empty(t, attr, scope, False) for t in scope.exits
        )

    def _tested(self, attr: str, scope: _Scope) -> bool:
        """Whether a store on ``self.<attr>`` waits on a test of it: a condition around
        it or an earlier ``if ...: return`` that looks at the attribute (``if self._ws
        is None:``, ``if key not in self._ws:``, ``hasattr(self, "_ws")``), or an
        ``except`` around it. A store under a test of something else replaces what the
        attribute held each time it runs."""
        tests = [*self.tests, *scope.exits]
        return any(t is None or _mentions(t, attr, scope) for t in tests)

    def resolve_names(self) -> None:
        """Once the module is read: the holders named by a free name (``name:<id>``)
        are module-level objects (``global``) when the module binds the name."""
        top = self.scopes[0].assigned
        for d in self.defs.values():
            if any(h.startswith("name:") for _t, _k, h in d.hands):
                d.hands = sorted(
                    {
                        (text, key, "global" if h.startswith("name:") else h)
                        for text, key, h in d.hands
                        if not h.startswith("name:")
                        or (n := h[5:]) in self.imports
                        or n in self.defs
                        or n in top
                    }
                )


class _Inputs:
    """Whether expressions of one function read its inputs: a parameter (``self`` and
    ``cls`` left out: the object's own state), or a local bound from one, or a name
    bound any other way (a loop, ``with ... as``, an enclosing function's local). Module
    names (imports, definitions, module-level assignments, builtins, ``global``s) and
    locals assigned only from such expressions are not inputs."""

    def __init__(self, scope: _Scope, module_names: set[str]) -> None:
        self.scope = scope
        self.module_names = module_names
        self._known: dict[str, bool] = {}

    def name(self, name: str) -> bool:
        scope = self.scope
        if name == scope.self_name:
            return False
        known = self._known.get(name)
        if known is not None:
            return known
        if name in scope.params or name in scope.rebound or name in scope.unpacked:
            result = True
        elif name in scope.assigned:
            self._known[name] = True  # a name bound from itself (``n = n + 1``)
            result = any(self.reads(v) for v in scope.assigned[name])
        else:
            result = name not in self.module_names and name not in scope.globals
        self._known[name] = result
        return result

    def reads(self, expr: ast.expr) -> bool:
        stack: list[ast.AST] = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Name):
                if self.name(e.id):
                    return True
            elif isinstance(e, ast.Call):
                func = e.func
                if not isinstance(func, ast.Name):  # a method's receiver is read
                    stack.append(func)
                stack.extend(e.args)
                stack.extend(kw.value for kw in e.keywords)
            elif isinstance(
                e, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
            ):
                return True  # bound names of their own: not followed
            else:
                stack.extend(ast.iter_child_nodes(e))
        return False


def fixed_calls(scope: _Scope, module_names: set[str]) -> list[str]:
    """Texts of the calls that, everywhere in the function, read none of its inputs in
    their arguments (``absorb_rows(self.device, max(self.pitches), self.heads)``, a
    call without arguments): they ask the same of the callee on every call of the
    function (see ``imlint/warming.py``)."""
    inputs = _Inputs(scope, module_names)
    asking = {text for text, _key, arg in scope.arguments if inputs.reads(arg)}
    fixed = set()
    for text, _region in scope.calls:
        head, dot, _rest = text.partition(".")
        if text not in asking and not (dot and head.isidentifier() and inputs.name(head)):
            fixed.add(text)  # nor on an object that is an input (``x.size()``)
    return sorted(fixed)
