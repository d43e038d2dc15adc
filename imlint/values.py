"""Values inside one function: which allocation sites reach an expression (flow), which
storages an expression aliases (handles), which storages a condition looks at
(mentions), and how an object relates to the call (locality)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import libcst as cst

from imlint.allocations import call_key
from imlint.kinds import CONTAINER_CALLS, FRESH_CALLS, KEEPING_BUILTINS, derives_receiver
from imlint.names import (
    TORCH_FACTORIES,
    VIEW_ATTRIBUTES,
    VIEW_METHODS,
    ImportMap,
    expr_text,
    passes_copy,
    string_value,
)
from imlint.semantic import Frames, FunctionModel
from imlint.vocabulary import NON_TENSOR_METHODS, TENSOR_COMPUTE_METHODS
from imlint.walk import walk

#: The low number of a walk that has met no definition still on the way.
_NO_CUT = 1 << 30

T = TypeVar("T")


def is_container(value: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether an expression builds a dict or list (as opposed to a tensor)."""
    if isinstance(value, (cst.Dict, cst.List, cst.DictComp, cst.ListComp)):
        return True
    if isinstance(value, cst.BinaryOperation):  # [None] * n
        return isinstance(value.left, cst.List) or isinstance(value.right, cst.List)
    if isinstance(value, cst.Call):
        q = imports.qualify(value.func)
        return q is not None and q in CONTAINER_CALLS
    return False


def remakes(func: cst.Attribute) -> bool:
    """Whether a deriving method call always makes new storage: a computing method
    (``t.exp()``, ``p.repeat_interleave(k)``), or a conversion of arithmetic made in the
    same expression (``(h / c).to(d)``). A bare conversion (``x.to(d)``) returns its
    receiver when nothing changes."""
    if func.attr.value in TENSOR_COMPUTE_METHODS:
        return True
    return isinstance(func.value, (cst.BinaryOperation, cst.UnaryOperation))


def _torch_view(call: cst.Call, imports: ImportMap) -> bool:
    """``torch.<view>(x, ...)``: the function form of a view method, a view of ``x``."""
    q = imports.qualify(call.func)
    return q is not None and q.startswith("torch.") and q[6:] in VIEW_METHODS


#: Marks a container text in ``ModuleIndex.container_texts`` whose items are containers.
ITEMS = "[*]"


def holds_containers(value: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether a dict or list is built with dicts or lists as its items (``[[None] * n
    for _ in range(k)]``, ``{d: {} for d in devs}``): then ``x[i][j] = t`` fills an
    entry, it does not copy into a tensor."""
    if isinstance(value, (cst.ListComp, cst.SetComp)):
        return is_container(value.elt, imports)
    if isinstance(value, cst.DictComp):
        return is_container(value.value, imports)
    if isinstance(value, (cst.List, cst.Dict)) and value.elements:
        items = [
            el.value for el in value.elements if isinstance(el, (cst.Element, cst.DictElement))
        ]
        return len(items) == len(value.elements) and all(is_container(v, imports) for v in items)
    return False


def is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def is_fresh(value: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether an expression builds a new object that nothing else references."""
    if isinstance(
        value,
        (
            cst.Dict,
            cst.List,
            cst.Set,
            cst.Tuple,
            cst.ListComp,
            cst.SetComp,
            cst.DictComp,
            cst.GeneratorExp,
        ),
    ):
        return True
    if isinstance(value, cst.Call):
        q = imports.qualify(value.func)
        if q is not None:
            if q in FRESH_CALLS:
                return True
            last = q.rsplit(".", 1)[-1]
            if isinstance(value.func, cst.Name) and (last[:1].isupper() or last == "cls"):
                return True  # a constructor call: a new object
            head, _, rest = q.partition(".")
            if head == "torch" and rest in TORCH_FACTORIES:
                return True
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "copy",
            "clone",
            "__new__",  # ``cls.__new__(cls)``: an instance not yet initialised
        ):
            return True
    return False


def _builtin_dict(e: cst.Call, f: FunctionModel) -> bool:
    """A call of the builtin ``dict`` with keyword arguments, the keys of its entries
    (``dict(arr=t)`` is keyed as ``{"arr": t}``)."""
    return (
        isinstance(e.func, cst.Name)
        and e.func.value == "dict"
        and not f.is_local("dict")
        and any(a.keyword is not None for a in e.args)
    )


def _constant_key(e: cst.Subscript) -> str | None:
    """``d["name"]``: the constant string key of a one-element subscript (a tensor cannot
    be indexed by a string, so this reads a mapping's entry)."""
    if len(e.slice) != 1 or not isinstance(e.slice[0].slice, cst.Index):
        return None
    return string_value(e.slice[0].slice.value)


def entry(tokens: set[str], key: str) -> set[str]:
    """The tokens of entry ``key`` of what ``tokens`` name: a dict literal's own entry
    under that key (others dropped), else the entry of the storage (``<token>|<key>``)."""
    out: set[str] = set()
    for t in tokens:
        if t.startswith("@"):
            tag, _, rest = t.partition(">")
            if tag == "@" + key:
                out.add(rest)
        else:
            out.add(f"{t}|{key}")
    return out


def untagged(tokens: frozenset[str] | set[str]) -> set[str]:
    """Tokens with dict-literal entry tags dropped: every storage a value reaches."""
    out: set[str] = set()
    for t in tokens:
        while t.startswith("@"):
            t = t.partition(">")[2]
        out.add(t)
    return out


def _hands_on(value: cst.BaseExpression, name: str) -> bool:
    """``convert(x, ...)``: a call handed the name it is assigned back to."""
    return isinstance(value, cst.Call) and any(
        isinstance(a.value, cst.Name) and a.value.value == name for a in value.args
    )


class _PerDefinition(Generic[T]):
    """What a walk finds through each definition of a local (``x = ...``), computed
    once per definition: what a definition reaches does not depend on who asks, so a
    long function that rebinds its locals many times (``x = f(x)`` on both arms of
    many branches) costs one walk per definition instead of one per path.

    Definitions that reach each other (a loop's ``x = x + y``; ``FunctionModel.
    reaching`` also lets a definition in one branch reach those in later ones) find
    the same: a cycle is cut where it closes, and when the walk is back at the first
    definition of the cycle (Tarjan's algorithm: the lowest open definition that
    anything below reached), what it found is kept for every definition of the cycle."""

    def __init__(self) -> None:
        self.done: dict[int, frozenset[T]] = {}
        self._walk = _Walk[T]()

    def get(
        self, v: cst.BaseExpression, walk: Callable[[cst.BaseExpression], set[T]]
    ) -> frozenset[T]:
        key = id(v)
        known = self.done.get(key)
        if known is not None:
            return known
        w = self._walk
        number = w.numbers.get(key)
        if number is not None:  # on the way here, or waiting for its cycle's end
            w.low = min(w.low, number)
            return w.partial.get(key, frozenset())
        number = w.numbers[key] = w.count
        w.count += 1
        w.stack.append(key)
        outer, w.low = w.low, number
        result = frozenset(walk(v))
        if w.low == number:  # the first definition of its cycle (or of none)
            while True:
                member = w.stack.pop()
                self.done[member] = result
                del w.numbers[member]
                w.partial.pop(member, None)
                if member == key:
                    break
            w.low = outer
        else:
            w.partial[key] = result
            w.low = min(outer, w.low)
        return result

    def fresh(self) -> _Walk[T]:
        """Start a walk of its own (a call that re-enters the analysis from another
        function's); ``restore`` hands back the one it interrupted."""
        saved, self._walk = self._walk, _Walk[T]()
        return saved

    def restore(self, saved: _Walk[T]) -> None:
        self._walk = saved


@dataclass
class _Walk(Generic[T]):
    """The state of one walk of ``_PerDefinition`` (Tarjan's): the number each
    definition on the way or waiting got (in the order the walk met them), the
    definitions waiting for their cycle's end and what each found, and the lowest
    number the open definition's walk met."""

    numbers: dict[int, int] = field(default_factory=dict)
    count: int = 0  # the next number to give
    stack: list[int] = field(default_factory=list)
    partial: dict[int, frozenset[T]] = field(default_factory=dict)
    low: int = _NO_CUT


def _index_operands(e: cst.Subscript) -> list[cst.BaseExpression]:
    """The indices of a subscript, a comparison's operands for a comparison
    (``x[x > 0]``): what may hold a tensor that makes indexing a gather."""
    out: list[cst.BaseExpression] = []
    for el in e.slice:
        if isinstance(el.slice, cst.Index):
            i = el.slice.value
            if isinstance(i, cst.Comparison):
                out += [i.left, *(c.comparator for c in i.comparisons)]
            else:
                out.append(i)
    return out


class FunctionAnalysis:
    """Resolves value flow, aliases and mentions inside one function."""

    def __init__(self, f: FunctionModel, model: ModuleIndex) -> None:
        self.f = f
        self.index = model
        self._fills: dict[str, list[cst.BaseExpression]] | None = None
        # what ``flow`` and ``tokens`` find through each definition of a local
        self._flows: _PerDefinition[int] = _PerDefinition()
        self._handles: _PerDefinition[str] = _PerDefinition()

    # -- locality

    def _fresh(self, value: cst.BaseExpression) -> bool:
        """A new object: built here, or a container a project function builds for
        each call and keeps nowhere (``ModuleIndex.fresh_results``)."""
        if is_fresh(value, self.index.imports) or self._new_instance(value):
            return True
        return (
            isinstance(value, cst.Call) and call_key(value.func, self.f) in self.index.fresh_results
        )

    def _new_instance(self, value: cst.BaseExpression) -> bool:
        """In ``__new__``, a call handed ``cls`` first (``super().__new__(cls)``,
        ``torch.Tensor._make_subclass(cls, t)``): the instance being made."""
        node = self.f.node
        if self.f.name != "__new__" or not node.params.params or not isinstance(value, cst.Call):
            return False
        first = node.params.params[0].name.value
        return bool(value.args) and (
            isinstance(value.args[0].value, cst.Name) and value.args[0].value.value == first
        )

    def root_kind(self, expr: cst.BaseExpression | None) -> str:
        """How the object an expression names relates to this call.

        ``local`` means created by this call; anything else may outlive it.
        """
        f = self.f
        if expr is None:
            return "other"
        base = expr
        while True:
            text = expr_text(base, f.self_name)
            if text in f.fresh_texts:
                return "local"
            if isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
                continue
            break
        if isinstance(base, cst.Name):
            name = base.value
            if name in f.globals:
                return "global"
            if f.self_name is not None and name == f.self_name:
                return "self"
            if name in f.star_params:
                return "local"
            if name in f.params:
                return "param"
            values = f.defs.get(name)
            if values:
                # ``x = Batch(...)`` then ``x = convert(x, ...)``: still this call's object.
                if any(self._fresh(v) for v in values) and all(
                    self._fresh(v) or _hands_on(v, name) for v in values
                ):
                    return "local"
                return "alias"
            if name in f.other_bound:
                return "alias"
            return "global" if f.parent is None else "closure"
        return "call"

    # -- value flow: which allocation sites reach an expression

    def _filled(self, name: str) -> list[cst.BaseExpression]:
        """What the function puts into a local container it made (``ws = []`` then
        ``ws.append(t)``, ``ws[k] = t``): kept wherever the container is kept
        (``self._ws = tuple(ws)``)."""
        if self._fills is None:
            self._fills = {}
            for s in self.f.stores:
                if s.value is not None and isinstance(s.root, cst.Name) and not s.sliced:
                    self._fills.setdefault(s.root.value, []).append(s.value)
        if name not in self._fills or self.root_kind(cst.Name(name)) != "local":
            return []
        return self._fills[name]

    def flow(
        self,
        expr: cst.BaseExpression,
        at: tuple[int, Frames] | None = None,
        names: bool = True,
    ) -> set[int]:
        """The allocation sites whose storage ``expr`` may hold. ``at`` (order and
        frames of the code that reads ``expr``) keeps a local's definitions to those
        that reach it; ``names=False`` looks only inside the expression itself."""
        saved = self._flows.fresh()
        try:
            return self._flow(expr, at, names)
        finally:
            self._flows.restore(saved)

    def _flow(
        self, expr: cst.BaseExpression, at: tuple[int, Frames] | None, names: bool = True
    ) -> set[int]:
        sites = self.index.site_ids
        out: set[int] = set()
        stack: list[cst.BaseExpression] = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, cst.Call):
                sid = sites.get(id(e))
                func = e.func
                if sid in self.index.derived and isinstance(func, cst.Attribute):
                    # ``torch.zeros(n).to(d)``: the innermost fresh tensor is the site;
                    # ``t.exp()`` and ``(h / c).to(d)`` always make new storage here, so
                    # a tensor made by an earlier statement is not what is kept.
                    inner = names and not remakes(func)
                    out |= self._flow(func.value, at, inner) or {sid}
                    continue
                if sid is not None:
                    out.add(sid)
                    continue  # new storage, not what its receiver holds
                if e.args and _torch_view(e, self.index.imports):
                    # ``torch.view_as_real(table(n))``: a view of what its argument made
                    stack.append(e.args[0].value)
                    continue
                if isinstance(func, cst.Attribute) and func.attr.value not in NON_TENSOR_METHODS:
                    stack.append(func.value)
                elif isinstance(func, cst.Name) and func.value in KEEPING_BUILTINS:
                    if not self.f.is_local(func.value):  # ``tuple(t.clone() for t in ts)``
                        stack.extend(a.value for a in e.args)
                elif isinstance(func, cst.Name) and func.value in self.index.records:
                    if not self.f.is_local(func.value):  # ``Slot(tensor=t)`` keeps ``t``
                        stack.extend(a.value for a in e.args)
            elif isinstance(e, cst.Subscript):
                if id(e) in self.f.unpacked and isinstance(e.value, cst.Call):
                    # ``a, b = f(x)``: what the call makes, not what its receiver holds
                    sid = sites.get(id(e.value))
                    if sid is not None:
                        out.add(sid)
                    continue
                sid = sites.get(id(e))
                if sid is not None and names and self._gathers(e, at):
                    out.add(sid)  # ``cos[idx]``: new storage, not a view of ``cos``
                    continue
                stack.append(e.value)
            elif isinstance(e, cst.Attribute):
                if e.attr.value in VIEW_ATTRIBUTES:
                    stack.append(e.value)
            elif isinstance(e, cst.Name):
                if not names or e.value in self.f.globals:
                    continue
                for v in (*self.f.reaching(e.value, at), *self._filled(e.value)):
                    # each definition once (``x = x.view(-1)`` reads the one before)
                    out |= self._flows.get(v, self._flow_of_definition)
            elif isinstance(e, (cst.Tuple, cst.List, cst.Set, cst.Dict)):
                stack.extend(el.value for el in e.elements)
            elif isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
                stack.append(e.elt)
            elif isinstance(e, cst.DictComp):
                stack.append(e.value)
            elif isinstance(e, cst.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, cst.BooleanOperation):
                stack.extend((e.left, e.right))
            elif isinstance(e, (cst.NamedExpr, cst.StarredElement)):
                stack.append(e.value)
            elif isinstance(e, cst.BinaryOperation):
                out |= self._arithmetic(e, at, names)
            elif isinstance(e, cst.UnaryOperation):
                stack.append(e.expression)
        return out

    def _gathers(self, e: cst.Subscript, at: tuple[int, Frames] | None) -> bool:
        """Whether an index holds a tensor made before (``cos[idx]``), or compares one
        (``x[x > 0]``): indexing then copies into new storage."""
        return any(self._flow(p, at) for p in _index_operands(e))

    def _flow_of_definition(self, v: cst.BaseExpression) -> set[int]:
        return self._flow(v, self.f.def_at.get(id(v)))

    def _arithmetic(
        self,
        e: cst.BinaryOperation,
        at: tuple[int, Frames] | None,
        names: bool,
    ) -> set[int]:
        """What arithmetic holds: an allocation inside it (``1.0 / torch.tensor(x)``,
        same statement, same mode), else new storage made here when an operand holds a
        tensor made before (``(c[:-1] + c[1:]) / 2``), else nothing."""
        inner = self._flow(e.left, at, False) | self._flow(e.right, at, False)
        if inner or not names:
            return inner
        made = self._flow(e.left, at) | self._flow(e.right, at)
        sid = self.index.site_ids.get(id(e))  # None: arithmetic nothing can keep
        return {sid} if made and sid is not None else made

    # -- handles: which storages an expression aliases

    def tokens(self, expr: cst.BaseExpression, at: tuple[int, Frames] | None = None) -> set[str]:
        """The storages an expression may alias: ``store:<text>`` for storage named by
        its text, ``alloc:<site>`` for an allocation's own result. A dict literal's
        entries are tagged with their key (``@<key>>``); an entry read with a constant key
        from anything else is that storage's entry (``<token>|<key>``). ``at`` (order and
        frames of the code that reads ``expr``) keeps a local's definitions to those
        that reach it (``FunctionModel.reaching``)."""
        saved = self._handles.fresh()
        try:
            return self._tokens(expr, at)
        finally:
            self._handles.restore(saved)

    def _tokens_of_definition(self, v: cst.BaseExpression) -> set[str]:
        return self._tokens(v, self.f.def_at.get(id(v)))

    def _tokens(self, expr: cst.BaseExpression, at: tuple[int, Frames] | None) -> set[str]:
        f = self.f
        out: set[str] = set()
        stack: list[cst.BaseExpression] = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, cst.Name):
                name = e.value
                if f.is_local(name):
                    for v in f.reaching(name, at):
                        # each definition once (``x = x.view(-1)`` reads the one before)
                        out |= self._handles.get(v, self._tokens_of_definition)
                else:
                    out |= self._free_name(name)
            elif isinstance(e, cst.Attribute):
                out.add("store:" + expr_text(e, f.self_name))
                if e.attr.value in VIEW_ATTRIBUTES:
                    stack.append(e.value)
            elif isinstance(e, cst.Subscript):
                position = f.unpacked.get(id(e))
                if position is not None:  # ``a, b = get(n)``: ``a`` is item 0 of the result
                    items = e.value
                    if isinstance(items, cst.Call):
                        out |= entry(self._call_tokens(items), f"#{position}")
                    else:  # ``a, b = (x[:n] for x in self._bufs)``: of kept storage
                        out |= entry(self._tokens(items, at), f"#{position}")
                    continue
                out.add("store:" + expr_text(e, f.self_name))
                key = _constant_key(e)
                if key is None:
                    stack.append(e.value)
                else:
                    out |= entry(self._tokens(e.value, at), key)
            elif isinstance(e, cst.Dict):
                for el in e.elements:
                    key = string_value(el.key) if isinstance(el, cst.DictElement) else None
                    inner = self._tokens(el.value, at)
                    out |= {f"@{key}>{t}" for t in inner} if key is not None else inner
            elif isinstance(e, cst.Call) and _builtin_dict(e, self.f):  # ``dict(arr=t)``
                for a in e.args:
                    inner = self._tokens(a.value, at)
                    out |= {f"@{a.keyword.value}>{t}" for t in inner} if a.keyword else inner
            elif isinstance(e, cst.Tuple):  # ``return a, b``: items tagged by position
                for i, item in enumerate(e.elements):
                    inner = self._tokens(item.value, at)
                    starred = isinstance(item, cst.StarredElement)
                    out |= inner if starred else {f"@#{i}>{t}" for t in inner}
            elif isinstance(e, cst.Call):
                out |= self._call_tokens(e)
                func = e.func
                if e.args and _torch_view(e, self.index.imports):
                    stack.append(e.args[0].value)  # ``torch.as_strided(buf, ...)``
                elif isinstance(func, cst.Attribute):
                    method = func.attr.value
                    args = [a for a in e.args if a.star == ""]
                    if method == "setdefault" and len(args) > 1:
                        stack.append(args[1].value)
                    elif derives_receiver(method, passes_copy(e)) or method.endswith("_"):
                        stack.append(func.value)
            elif isinstance(e, cst.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, cst.BooleanOperation):
                stack.extend((e.left, e.right))
            elif isinstance(e, cst.NamedExpr):
                stack.append(e.value)
        return out

    def _free_name(self, name: str) -> set[str]:
        """A name this function does not bind: an enclosing function's local (a closure
        sees the enclosing call's value), else module storage."""
        parent = self.f.parent
        if name in self.f.nonlocals:
            return {"store:" + name}  # ``nonlocal buf``: the storage this function fills
        while parent is not None:
            if parent.is_local(name):
                return self.index.analyses[id(parent)].tokens(cst.Name(name))
            parent = parent.parent
        return {"store:" + name}

    def _call_tokens(self, e: cst.Call) -> set[str]:
        """What a call's result aliases: an allocation site, a getter's storage (a method
        of this class, a module function, a method of a module-level class or instance),
        a container entry (``d.get(k)``), an attribute read through ``getattr``."""
        f = self.f
        index = self.index
        sid = index.site_ids.get(id(e))
        out = {f"alloc:{sid}"} if sid is not None else set()
        func = e.func
        args = [a for a in e.args if a.star == ""]
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            rtext = expr_text(func.value, f.self_name)
            # ``self.m()`` calls the class's own ``m`` when it has one, whatever its name
            # (a getter called ``view`` or ``get`` is not the tensor's or the dict's).
            callee = None
            if f.self_name is not None and rtext == "self":
                callee = index.methods.get((id(f.cls), method))
            elif isinstance(func.value, cst.Name) and not f.is_local(func.value.value):
                callee = index.members.get((func.value.value, method))
            if callee is not None:
                out |= index.returned(callee)
            elif method in ("get", "setdefault", "__getitem__") and args:
                out.add(f"store:{rtext}[{expr_text(args[0].value, f.self_name)}]")
        elif isinstance(func, cst.Name):
            if func.value == "getattr" and len(args) >= 2:
                attr = string_value(args[1].value)
                if attr:
                    out.add(f"store:{expr_text(args[0].value, f.self_name)}.{attr}")
            elif func.value in index.functions and not f.is_local(func.value):
                out |= index.returned(index.functions[func.value])
            else:
                nested = index.nested.get((id(f), func.value))
                if nested is not None:  # ``def buffer(name): ...`` in this function
                    out |= index.returned(nested)
        return out

    # -- mentions: which storages a condition looks at

    def mentions(self, expr: cst.CSTNode) -> set[str]:
        """The storages and names a condition looks at, through the definitions of the
        locals it names (``ok = self._buf is not None``, then ``if ok:``): what ``expr``
        mentions itself and what every local it reaches through definitions does."""
        f = self.f
        out, pending = self._mentions_here(expr)
        reached: set[str] = set()
        while pending:
            name = pending.pop()
            if name in reached:
                continue
            reached.add(name)
            cached = f._mentions.get(name)
            if cached is None:
                acc: set[str] = set()
                locals_: set[str] = set()
                for v in f.defs.get(name, ()):
                    here, names = self._mentions_here(v)
                    acc |= here
                    locals_.update(names)
                cached = f._mentions[name] = (frozenset(acc), frozenset(locals_))
            out |= cached[0]
            pending.extend(cached[1] - reached)
        return out

    def _mentions_here(self, expr: cst.CSTNode) -> tuple[set[str], list[str]]:
        """What ``expr`` itself mentions, and the locals it names (whose definitions
        ``mentions`` follows)."""
        f = self.f
        out: set[str] = set()
        names: list[str] = []
        for n in walk(expr):
            if isinstance(n, cst.Name):
                name = n.value
                out.add("self" if name == f.self_name else name)
                if f.is_local(name):
                    names.append(name)
            elif isinstance(n, (cst.Attribute, cst.Subscript)):
                out.add(expr_text(n, f.self_name))
            elif isinstance(n, cst.Comparison):
                left = n.left
                for c in n.comparisons:  # ``k in d``: the entry ``d[k]``
                    if isinstance(c.operator, (cst.In, cst.NotIn)):
                        key = expr_text(left, f.self_name)
                        out.add(f"{expr_text(c.comparator, f.self_name)}[{key}]")
                    left = c.comparator
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
                if n.func.value in ("hasattr", "getattr") and len(n.args) >= 2:
                    attr = string_value(n.args[1].value)
                    if attr:
                        out.add(f"{expr_text(n.args[0].value, f.self_name)}.{attr}")
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
                if n.func.attr.value in ("get", "__contains__") and n.args:
                    rtext = expr_text(n.func.value, f.self_name)
                    out.add(f"{rtext}[{expr_text(n.args[0].value, f.self_name)}]")
        return out, names


@dataclass
class ModuleIndex:
    imports: ImportMap
    site_ids: dict[int, int]  # id(call node) -> index in allocations
    functions: dict[str, FunctionModel]  # module-level functions by name
    methods: dict[tuple[int, str], FunctionModel]  # (id(class), name) -> method
    container_texts: set[str]  # names/attributes assigned a dict or list anywhere
    per_call_classes: frozenset[str] = frozenset()  # names of classes made per call
    construction: frozenset[str] = frozenset()  # functions reached only from constructors
    #: functions whose callers write what they return (``FileFacts.returned_writes``)
    returned_writes: dict[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    #: ``<function>|<parameter>``: parameters every caller hands a per-call object
    per_call_params: frozenset[str] = frozenset()
    #: ``<function>|<parameter>``: parameters of called functions that no caller hands
    #: a long-lived object (``imlint/holders.py``)
    unheld_params: frozenset[str] = frozenset()
    #: ``<class name>|<attribute>``: attributes replaced each time a running method
    #: makes a new object for them (``imlint/holders.py``)
    replaced_attrs: frozenset[str] = frozenset()
    #: ``(receiver, method)`` -> method, for ``Pool.make(...)`` and ``_POOL.get(...)``
    members: dict[tuple[str, str], FunctionModel] = field(default_factory=dict)
    #: functions set-up calls too: their first call fills the cache at set-up
    warmed: frozenset[str] = frozenset()
    #: sites made by a method from its receiver (``AllocationSite.derived``)
    derived: frozenset[int] = frozenset()
    #: call texts whose result is a container each call builds (``FileFacts``)
    fresh_results: frozenset[str] = frozenset()
    analyses: dict[int, FunctionAnalysis] = field(default_factory=dict)
    #: ``(id(function), name)`` -> a function defined in that function's body
    nested: dict[tuple[int, str], FunctionModel] = field(default_factory=dict)
    #: names of the module's classes whose instances keep their constructor's arguments
    records: frozenset[str] = frozenset()
    _returned: dict[int, frozenset[str]] = field(default_factory=dict)

    def filled_at_setup(self, qualname: str) -> bool:
        """Whether set-up makes the first call of the function: reached only from
        constructors, or called by them before the code that runs later."""
        return qualname in self.construction or qualname in self.warmed

    def returned(self, g: FunctionModel) -> frozenset[str]:
        """Storage that calling ``g`` hands back: a getter's result aliases its cache."""
        key = id(g)
        known = self._returned.get(key)
        if known is not None:
            return known
        self._returned[key] = frozenset()  # recursion guard
        out: set[str] = {f"store:{g.qualname}()"} if g.cached else set()
        ga = self.analyses[key]
        for value in g.returns:
            out |= ga.tokens(value)
        result = frozenset(out)
        self._returned[key] = result
        return result
