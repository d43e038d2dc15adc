"""Bindings and stores, as the collecting walk finds them: what each statement binds to
a local name (assignments, loop items, ``with ... as``), and which stores it makes into
storage that may outlive the call (attributes, entries, ``append``/``insert``,
``setdefault``, ``update``, ``register_buffer``, ``setattr``, globals)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from imlint.kinds import AUTOGRAD_SLOTS, CONTAINER_METHODS
from imlint.names import (
    ImportMap,
    dotted_name,
    expr_text,
    string_value,
    unpacked,
    views_of_items,
)
from imlint.positions import EMPTY_MODULE, Positions
from imlint.semantic import ClassModel, Frame, FunctionModel, Store
from imlint.values import ITEMS, holds_containers, is_container, is_fresh, is_none

#: ``isinstance(x, list)``: the builtin containers a branch can narrow a name to.
_BUILTIN_CONTAINERS = frozenset({"list", "tuple", "dict", "set"})


class Bindings:
    """A mixin of :class:`imlint.collect.Collector`, which owns the state below."""

    imports: ImportMap
    positions: Positions
    container_texts: set[str]
    instances: dict[str, str]
    _frames: list[Frame]
    _stmt: list[cst.SimpleStatementLine | cst.SimpleStatementSuite]
    _class: list[ClassModel | None]
    _order: int

    if TYPE_CHECKING:

        @property
        def func(self) -> FunctionModel | None: ...

        def _next(self) -> int: ...

        def _snapshot(self) -> tuple[Frame, ...]: ...

        def _locate(self, node: cst.CSTNode) -> None: ...

        def _write(
            self,
            handle: cst.BaseExpression,
            text: str,
            at: cst.CSTNode | None = None,
            kind: str = ...,
        ) -> None: ...

    def _list_store(
        self, receiver: cst.BaseExpression, rtext: str, value: cst.BaseExpression
    ) -> None:
        f = self.func
        assert f is not None
        if not isinstance(receiver, cst.Call):
            self._store("append", f"{rtext}[]", rtext, receiver, value)
            return
        func = receiver.func
        args = receiver.args
        if isinstance(func, cst.Attribute) and func.attr.value == "setdefault" and args:
            owner = func.value
            otext = expr_text(owner, f.self_name)
            key = expr_text(args[0].value, f.self_name)
            self._store("append", f"{otext}[{key}][]", otext, owner, value)

    def _known_container(self, text: str) -> bool:
        """Whether the enclosing ``if`` branches test ``isinstance(<text>, list)`` (or
        another builtin container type): then ``<text>`` holds no tensor there."""
        f = self.func
        for frame in self._frames:
            test = frame.test
            if frame.kind != "if_body" or not isinstance(test, cst.Call):
                continue
            if not (isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
                continue
            if len(test.args) != 2:
                continue
            kinds = test.args[1].value
            names = kinds.elements if isinstance(kinds, cst.Tuple) else [kinds]
            if expr_text(test.args[0].value, f.self_name if f else None) == text and all(
                isinstance(n, cst.Name) and n.value in _BUILTIN_CONTAINERS
                for n in (e.value if isinstance(e, cst.Element) else e for e in names)
            ):
                return True
        return False

    def _bind_items(
        self, target: cst.BaseExpression, items: cst.BaseExpression, other: bool = True
    ) -> None:
        """A loop variable holds an item of the storage it iterates: ``for buf in
        self._bufs`` reads ``self._bufs[...]``, as do ``zip(self._bufs, outs)`` and
        ``enumerate``. Only storage spelled out (an attribute, an entry): a local list
        stays opaque, so a test on its items says nothing about kept storage."""
        f = self.func
        if f is None:
            return
        stored = isinstance(items, (cst.Attribute, cst.Subscript))
        if isinstance(target, cst.Name) and target.value not in f.globals and stored:
            item = cst.Subscript(items, [cst.SubscriptElement(cst.Index(cst.Name("_")))])
            f.defs.setdefault(target.value, []).append(item)
            return
        name = dotted_name(items.func) if isinstance(items, cst.Call) else None
        if isinstance(target, (cst.Tuple, cst.List)) and name in ("zip", "enumerate"):
            assert isinstance(items, cst.Call)
            args = [a.value for a in items.args if a.keyword is None and a.star == ""]
            elements = [el.value for el in target.elements]
            if name == "enumerate" and len(elements) == 2 and args:
                if other:
                    self._bind_target(elements[0])  # the index
                elements, args = elements[1:], args[:1]
            if len(args) == len(elements):
                for el, arg in zip(elements, args, strict=True):
                    self._bind_items(el, arg, other)
                return
        if other:
            self._bind_target(target)  # a comprehension's own names stay as they were

    def _bind_target(self, target: cst.BaseExpression) -> None:
        f = self.func
        if f is None:
            return
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind_target(el.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def _item(self, value: cst.BaseExpression, i: int) -> cst.Subscript:
        """``value[i]``: what a tuple target's ``i``-th name is bound to, marked as an
        item of the result (``FunctionModel.unpacked``), not an index into a tensor."""
        item = cst.Subscript(value, [cst.SubscriptElement(cst.Index(cst.Integer(str(i))))])
        assert self.func is not None
        self.func.unpacked[id(item)] = i
        return item

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        f = self.func
        if f is None:
            # Module and class level: remember which names hold dicts and lists.
            if (
                isinstance(target, cst.Name)
                and value is not None
                and is_container(value, self.imports)
            ):
                names = [target.value]
                if self._class[-1] is not None:
                    names.append("self." + target.value)
                self.container_texts.update(names)
                if holds_containers(value, self.imports):  # its items are containers too
                    self.container_texts.update(n + ITEMS for n in names)
            elif (
                isinstance(target, cst.Name)
                and self._class[-1] is None
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
            ):
                self.instances[target.value] = value.func.value
            return
        if isinstance(target, cst.Name):
            name = target.value
            if value is not None:
                f.defs.setdefault(name, []).append(value)
                f.def_at[id(value)] = (self._next(), self._snapshot())
            else:
                f.other_bound.add(name)
            if name in f.globals:
                self._store("global", name, None, target, value)
                if value is not None and is_none(value):
                    f.drops.append((name, self._next()))
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Iterable[cst.BaseElement | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements
            ):
                values = value.elements
            elif isinstance(value, cst.Call) and not any(
                isinstance(el, cst.StarredElement) for el in target.elements
            ):
                # ``cos, sin = self.freqs(pos)``: each name holds an item of what the call
                # returns (``freqs(pos)[0]``), so a kept name flows back to the call
                values = [cst.Element(self._item(value, i)) for i in range(len(target.elements))]
            elif (items := views_of_items(value) if value else None) is not None and not any(
                isinstance(el, cst.StarredElement) for el in target.elements
            ):
                # ``a, b = (buf[:n] for buf in self.bufs(dev))``: a view of each item
                values = [cst.Element(self._item(items, i)) for i in range(len(target.elements))]
            elif isinstance(value, (cst.Attribute, cst.Subscript)) and not any(
                isinstance(el, cst.StarredElement) for el in target.elements
            ):
                # ``q, k = self.conv[i]``: each name holds an item of what is kept there
                # (a parameter or local unpacked keeps its own, weaker, lifetime facts)
                values = [cst.Element(self._item(value, i)) for i in range(len(target.elements))]
            else:
                values = [None] * len(target.elements)
            for el, v in zip(target.elements, values, strict=False):
                self._assign(el.value, v.value if v is not None else None)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, None)
        elif isinstance(target, cst.Attribute):
            self._assign_attribute(target, value)
        elif isinstance(target, cst.Subscript):
            text = expr_text(target, f.self_name)
            container = expr_text(target.value, f.self_name)
            self._store("subscript", text, container, target.value, value)
            if value is not None and is_container(value, self.imports):
                # ``self.recv[name] = {i: t}``: the entries of ``self.recv`` are containers
                self.container_texts.add(container + ITEMS)
            if not _string_keyed(target) and not self._known_container(container):
                # ``ws["ci"] = ...`` fills a dict, not a tensor; so does ``x[i] = ...``
                # under ``if isinstance(x, list):``
                self._write(target.value, f"{container}[...] = ...")
            if value is not None and is_none(value):
                f.drops.append((text, self._next()))

    def _assign_attribute(self, target: cst.Attribute, value: cst.BaseExpression | None) -> None:
        """``obj.attr = value``: a store into storage that may outlive the call."""
        f = self.func
        assert f is not None
        if target.attr.value in AUTOGRAD_SLOTS:
            return  # ``p.grad = ...``: this step's gradient, not kept storage
        text = expr_text(target, f.self_name)
        self._store("attribute", text, None, target.value, value)
        if value is not None and is_none(value):
            f.drops.append((text, self._next()))
        elif value is not None and is_fresh(value, self.imports):
            f.fresh_texts.setdefault(text, self._order)
        if value is not None and is_container(value, self.imports):
            self.container_texts.add(text)
            if holds_containers(value, self.imports):
                self.container_texts.add(text + ITEMS)

    def _store(
        self,
        kind: str,
        target: str,
        container: str | None,
        root: cst.BaseExpression | None,
        value: cst.BaseExpression | None,
    ) -> None:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        if stmt is not None:
            self._locate(stmt)  # where the value is kept, for the finding's ``kept_line``
        f.stores.append(
            Store(kind, target, container, root, value, self._snapshot(), self._next(), stmt)
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._assign(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assign(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        f = self.func
        if f is None:
            return
        target = node.target
        # ``t[i] += x`` writes the tensor ``t``; ``d["n"] += x`` writes the entry under
        # that key (a tensor cannot be indexed by a string), not the mapping's others.
        handle: cst.BaseExpression = target
        if isinstance(target, cst.Subscript) and not _string_keyed(target):
            handle = target.value
        op = EMPTY_MODULE.code_for_node(node.operator).strip()
        self._write(handle, f"{expr_text(target, f.self_name)} {op} ...")
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign(node.target, node.value)

    def visit_Del(self, node: cst.Del) -> None:
        f = self.func
        if f is None:
            return
        for expr in unpacked(node.target):
            f.drops.append((expr_text(expr, f.self_name), self._next()))

    # ---- exits: what may leave the rest of the call unrun (``sites.replaced``)

    def leave_Return(self, original_node: cst.Return) -> None:
        self._exit()

    def leave_Raise(self, original_node: cst.Raise) -> None:
        self._exit()

    def leave_Break(self, original_node: cst.Break) -> None:
        self._exit()

    def leave_Continue(self, original_node: cst.Continue) -> None:
        self._exit()

    def _exit(self) -> None:
        f = self.func
        if f is not None:
            f.exits.append(self._next())

    def _method_store(self, node: cst.Call, f: FunctionModel) -> None:
        """Stores a call makes: ``d.setdefault(k, v)``, ``lst.append(v)``, ``d.update(...)``,
        ``m.register_buffer(name, t)``, ``setattr(obj, name, v)``; drops (``d.pop(k)``)."""
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method in CONTAINER_METHODS:
                f.container_uses.add(expr_text(receiver, f.self_name))
            args = [a for a in node.args if a.star == ""]
            rtext = expr_text(receiver, f.self_name)
            if method in ("append", "insert") and len(args) == (1 if method == "append" else 2):
                # A list kept beyond the call holds what is appended (``self._pool``), or
                # a list kept in an entry (``self._pool.setdefault(k, []).append(t)``).
                self._list_store(receiver, rtext, args[-1].value)
            elif method == "setdefault" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("setdefault", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "__setitem__" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("subscript", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "update":
                for a in args:
                    if a.keyword is not None:
                        self._store(
                            "update", f"{rtext}['{a.keyword.value}']", rtext, receiver, a.value
                        )
                    elif isinstance(a.value, cst.Dict):
                        for el in a.value.elements:
                            if isinstance(el, cst.DictElement):
                                key = expr_text(el.key, f.self_name)
                                self._store("update", f"{rtext}[{key}]", rtext, receiver, el.value)
            elif method == "register_buffer" and len(args) >= 2:
                name = string_value(args[0].value)
                target = f"{rtext}.{name}" if name else f"{rtext}.<buffer>"
                self._store("register_buffer", target, None, receiver, args[1].value)
            elif method == "pop" and args:
                f.drops.append((f"{rtext}[{expr_text(args[0].value, f.self_name)}]", self._next()))
            elif method == "clear" and not args:
                f.drops.append((f"{rtext}[]", self._next()))
        elif isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) >= 3:
            obj = node.args[0].value
            name = string_value(node.args[1].value)
            otext = expr_text(obj, f.self_name)
            target = f"{otext}.{name}" if name else f"{otext}.<{expr_text(node.args[1].value)}>"
            self._store("setattr", target, None, obj, node.args[2].value)


def _string_keyed(target: cst.Subscript) -> bool:
    """``x["key"]``: a tensor cannot be indexed by a string, so ``x`` is a mapping."""
    return len(target.slice) == 1 and isinstance(
        getattr(target.slice[0].slice, "value", None),
        (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString),
    )
