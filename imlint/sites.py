"""Site resolution: whether a store fills persistent storage, whether an allocation
runs lazily (a cache miss, a resize, a cached function), and under which mode."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from imlint.kinds import CONTAINER_STORE_KINDS, ITEM_GETTERS, LAZY_FRAMES
from imlint.names import (
    expr_text,
)
from imlint.semantic import (
    AllocationSite,
    EarlyExit,
    Frame,
    FunctionModel,
    Mode,
    Store,
    bare,
    frames_mode,
    is_prefix,
)
from imlint.values import ITEMS, FunctionAnalysis, is_none
from imlint.walk import walk


def persistent(store: Store, fa: FunctionAnalysis) -> bool:
    """Whether a store fills storage that outlives the call. ``imlint/narrow.py`` keeps
    a superset of these rules (what a site needs, by name): a new kind of store here
    needs its counterpart there (``tests/test_narrow.py`` compares both paths)."""
    f = fa.f
    if store.kind == "return":
        # A cached function defined inside another one is a new function, with a new
        # cache, on each call of that one: kept beyond it only when it escapes the call.
        return escapes(f)
    if store.kind == "global":
        # ``nonlocal x; x = ...``: a local of the enclosing call, kept beyond it only
        # when this function escapes that call (returned, stored, handed on).
        return _root_name(store.root) not in f.nonlocals or escapes(f)
    kind = fa.root_kind(store.root)
    if kind == "local":
        return False
    if kind in ("self", "alias") and _on_a_replaced_object(store, fa):
        return False  # a per-step object a running method replaces (holders.py)
    if kind == "self" and f.cls is not None and f.cls.name in fa.index.per_call_classes:
        return False  # an object made per call: its attributes die with it (lifetimes.py)
    if kind == "param" and _per_call_param(f, _root_name(store.root), fa):
        return False
    if kind == "closure":
        # a parameter of an enclosing function (``scratch`` of ``decode(..., scratch)``
        # that its nested ``prepare`` fills): as that function's callers hand it
        owner = _binder(f, _root_name(store.root))
        if owner is not None and _per_call_param(owner, _root_name(store.root), fa):
            return False
    if store.kind in ("attribute", "setattr", "register_buffer"):
        return not f.is_constructor
    if store.kind in ("setdefault", "update"):
        return True
    if store.kind == "append":
        # A list the function does not make: on self, a global, handed in, or an entry
        # of one (``pool = _POOLS.setdefault(key, [])``).
        return kind in ("self", "global", "param", "closure") or (
            kind == "alias" and _entry_of_kept(store.root, fa)
        )
    if store.kind == "subscript":
        container = store.container or ""
        if f.is_constructor and container.startswith("self.__dict__"):
            return False
        # ``x[i] = t`` copies into a tensor unless ``x`` is known to be a dict or list.
        return (
            container in f.container_uses
            or container in fa.index.container_texts
            or container.endswith(".__dict__")
            or _item_of_container(store, fa)
        ) and not store.sliced
    return False


def _on_a_replaced_object(store: Store, fa: FunctionAnalysis) -> bool:
    """Whether the object a store fills is held by an attribute of ``self`` that a
    running method replaces (``Holders.replaced``), or by a parameter no caller hands a
    long-lived object: ``self.meta.buf = ...``, ``m = self.meta; m.buf = ...``,
    ``self.meta.cache[k] = ...``; not ``self.cache[k] = ...`` (the container itself is
    the attribute: a cache emptied now and then still lives across calls)."""
    f = fa.f
    depth = 1 if store.kind in CONTAINER_STORE_KINDS else 0
    root = store.root
    if isinstance(root, cst.Name) and root.value != f.self_name:
        values = f.defs.get(root.value, ())
        return bool(values) and all(_replaced_chain(v, depth, fa) for v in values)
    return _replaced_chain(root, depth, fa)


def _replaced_chain(expr: cst.BaseExpression | None, depth: int, fa: FunctionAnalysis) -> bool:
    """Whether ``expr`` is in an object a running method replaces: ``self.a...`` with
    ``a`` replaced and more than ``depth`` attributes (``depth`` 1 for the container a
    store fills: ``self.cache`` itself is not), or a chain from a parameter no caller
    hands a long-lived object. An item of a container on ``self`` is not judged: a
    get-or-create cache and a registry of requests both put items there."""
    f = fa.f
    attrs: list[str] = []  # innermost last; ``[]`` marks an item
    while True:
        if isinstance(expr, cst.Attribute):
            attrs.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            attrs.append("[]")
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ITEM_GETTERS
        ):
            attrs.append("[]")  # ``self.reqs.get(rid)``: an item
            expr = expr.func.value
        else:
            break
    if not isinstance(expr, cst.Name):
        return False
    if expr.value == f.self_name and f.cls is not None:
        first = attrs[-1] if attrs else "[]"
        if first == "[]" or len(attrs) <= depth:
            return False  # the container attribute itself: emptied now and then
        if len(attrs) >= 2 and attrs[-2] == "[]":
            # an item of a container on ``self``: a get-or-create cache's lives on, a
            # registry's (items put without a test of the container) until taken out
            return len(attrs) > depth + 1 and f"{f.cls.name}|{first}[]" in fa.index.replaced_attrs
        return f"{f.cls.name}|{first}" in fa.index.replaced_attrs
    if expr.value in f.params and not f.defs.get(expr.value):
        return f"{f.qualname}|{expr.value}" in fa.index.unheld_params
    return False


def _entry_of_kept(root: cst.BaseExpression | None, fa: FunctionAnalysis) -> bool:
    """A local bound only to an entry of storage on ``self`` or a global:
    ``d.setdefault(k, [])``, ``d.get(k)``, ``d[k]``."""
    if not isinstance(root, cst.Name):
        return False
    values = fa.f.defs.get(root.value, ())
    for v in values:
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute):
            if v.func.attr.value not in ("setdefault", "get"):
                return False
            owner: cst.BaseExpression = v.func.value
        elif isinstance(v, cst.Subscript):
            owner = v.value
        else:
            return False
        if fa.root_kind(owner) not in ("self", "global"):
            return False
    return bool(values)


def stored_before(store: Store, site: AllocationSite) -> bool:
    """Whether a store runs before an allocation and cannot run again after it (no loop
    holds both): ``self._retired.append(old); old = torch.empty(n)`` keeps the old
    tensor, not the new one."""
    if store.stmt is None or store.stmt in (site.stmt, site.suite) or store.order >= site.order:
        return False
    return not any(
        fr.kind in ("for", "while") and any(fr is sf for sf in store.frames) for fr in site.frames
    )


def _item_of_container(store: Store, fa: FunctionAnalysis) -> bool:
    """``_ws[dev][tag] = t`` where ``_ws`` holds containers (``values.holds_containers``)."""
    root = store.root
    if not isinstance(root, cst.Subscript):
        return False
    return expr_text(root.value, fa.f.self_name) + ITEMS in fa.index.container_texts


def _per_call_param(f: FunctionModel, name: str | None, fa: FunctionAnalysis) -> bool:
    """A parameter of ``f`` that every caller hands a per-call object (lifetimes.py), or
    that no caller hands a long-lived one and ``f`` does not rebind (holders.py)."""
    key = f"{f.qualname}|{name}"
    if key in fa.index.per_call_params:
        return True
    return key in fa.index.unheld_params and not f.defs.get(name or "")


def _binder(f: FunctionModel, name: str | None) -> FunctionModel | None:
    """The enclosing function whose parameter ``name`` is, if it is one."""
    g = f.parent
    while g is not None and name is not None:
        if name in g.params:
            return g
        if g.is_local(name):
            return None
        g = g.parent
    return None


def escapes(f: FunctionModel) -> bool:
    """Whether a nested function can outlive the call that defines it: its enclosing
    function uses its name other than to call it."""
    parent = f.parent
    if parent is None:
        return True
    called = {id(n.func) for n in walk(parent.node.body) if isinstance(n, cst.Call)}
    return any(
        isinstance(n, cst.Name)
        and n.value == f.name
        and id(n) not in called
        and n is not f.node.name
        for n in walk(parent.node.body)
    )


def _root_name(expr: cst.BaseExpression | None) -> str | None:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def reads_target(call: cst.Call, target: str, fa: FunctionAnalysis) -> bool:
    """Whether a call's arguments read ``target`` (the storage it is stored into)."""
    return any(target in fa.mentions(arg.value) for arg in call.args)


def dropped(store: Store, f: FunctionModel) -> bool:
    """Per-call scratch: the same call resets or drops the storage after storing."""
    container_all = f"{store.container}[]" if store.container else None
    for text, order in f.drops:
        if order > store.order and (text == store.target or text == container_all):
            return True
    return False


def replaced(store: Store, fa: FunctionAnalysis) -> bool:
    """The same call stores something else there before it can end: a later store to
    the same target that runs whenever this one did (in a block around it, with no
    ``return``, ``raise``, ``break`` or ``continue`` between; an entry with a computed
    key only in the same block), and does not read the target (``self.x =
    self.x.to(d)`` may keep the same tensor)."""
    if store.kind not in ("attribute", "subscript", "global"):
        return False
    f = fa.f
    frames = bare(store.frames)
    for later in f.stores:
        if later.order <= store.order or later.target != store.target or later.value is None:
            continue
        if later.kind != store.kind or is_none(later.value):
            continue  # a reset to None is a drop (``dropped``)
        around = bare(later.frames)
        if not is_prefix(around, frames) or (store.container is not None and around != frames):
            continue
        if any(store.order < e < later.order for e in f.exits):
            continue
        if store.target in fa.mentions(later.value):
            continue  # ``cls.t = cls.t.view(n)``, ``y = self.t; self.t = y.to(d)``
        return True
    return False


def related(store: Store, f: FunctionModel) -> set[str]:
    """Texts that, mentioned in a condition, make the allocation a cache miss."""
    rel = {store.target}
    if store.container is not None and not literal_key(store):
        rel.add(store.container)
    if store.kind == "register_buffer" and store.root is not None:
        rel.add(expr_text(store.root, f.self_name) + "._buffers")
    return rel


def literal_key(store: Store) -> bool:
    """``d["mask"] = ...``: an entry with a constant key is its own buffer; a test of
    another key of the same container says nothing about it."""
    if store.container is None or not store.target.startswith(store.container + "["):
        return False
    key = store.target[len(store.container) + 1 : -1]
    return key[:1] in ("'", '"') or key.isdigit()


def site_mode(site: AllocationSite) -> Mode:
    return frames_mode(site.frames, site.function)


def resolve_laziness(
    site: AllocationSite, fa: FunctionAnalysis, related: set[str], keys: dict[str, list[Store]]
) -> None:
    """Decide whether the allocation runs only on a cache miss or a resize.

    A condition is a cache test when it mentions the storage (or an alias of it), or
    when it mentions storage that the same branch fills: a key it updates (``if
    self._key != key: self._key = key; self._buf = ...``) or a sibling cache
    (``if d not in _K: _K[d] = k; _V[d] = v``).
    """
    store = site.store
    assert store is not None
    if fa.index.filled_at_setup(fa.f.qualname):
        return  # constructors call it first: built eagerly (lifetimes.py)
    cls = fa.f.cls
    if fa.f.is_constructor and cls is not None and cls.name not in fa.index.per_call_classes:
        return  # a global filled while a long-lived object is built: built eagerly
    if store.kind == "return":
        site.lazy = "cached function"
        return
    if store.kind == "setdefault":
        site.lazy = "setdefault"
        return
    for frame in reversed(site.frames):
        if frame.kind == "lambda":
            break
        if frame.kind in LAZY_FRAMES and frame.test is not None:
            if _both_branches_allocate(frame, store, keys, fa):
                continue  # replaced whichever way the test goes: not a miss
            if _tests_a_local_made_here(frame.test, site, fa):
                continue  # ``w = None`` then, in a loop, ``if w is None: w = ...``
            if _updates_what_is_there(frame, store, fa):
                continue  # ``if self.k is not None: self.k = torch.cat([self.k, x])``
            mentioned = fa.mentions(frame.test)
            filled_here = any(
                any(fr is frame for fr in store.frames)
                for k in mentioned & keys.keys()
                for store in keys[k]
            )
            if mentioned & related or filled_here or _tests_what_is_kept(frame, store, mentioned):
                site.lazy = "cache miss"
                site.lazy_frame = frame
                site.lazy_test = expr_text(frame.test)
                return
        if frame.kind == "handler":
            try_node = _enclosing_try(site, frame)
            if try_node is not None and fa.mentions(try_node.body) & related:
                site.lazy = "cache miss"
                site.lazy_frame = frame
                return
    for exit_ in fa.f.early_exits:
        if exit_.order < site.order and is_prefix(exit_.frames, site.frames):
            if _exits_when_unset(exit_.test, store, fa):
                continue  # what follows runs only once the storage is set
            mentioned = fa.mentions(exit_.test)
            # ``if cap >= n: return`` then ``self._a = ...; self._b = ...``: storage the
            # test reads and the function fills after it makes the rest a miss too.
            refilled = any(s.order > exit_.order for k in mentioned & keys.keys() for s in keys[k])
            if mentioned & related or refilled:
                site.lazy = "cache miss"
                site.lazy_exit = exit_
                site.lazy_test = expr_text(exit_.test)
                return
        if exit_.order < site.order and _returns_from_a_scan(exit_, site, related, fa):
            site.lazy = "cache miss"
            site.lazy_exit = exit_
            site.lazy_test = expr_text(exit_.test)
            return


def _updates_what_is_there(frame: Frame, store: Store, fa: FunctionAnalysis) -> bool:
    """A branch taken when storage is already there (``if X is not None:``, the ``else``
    of ``if X is None:``, ``if isinstance(X, torch.Tensor):``, the ``else`` of ``if
    X.shape[-1] == 0:``) remaking the target from what it holds (``T = torch.cat([T,
    x])``, ``T = T.index_select(0, beam)``, ``T = T.to(device)``): an update on every
    call that finds it, not the first fill. A test that asks more than presence (``X is
    None or X.numel() < n``, a device or size mismatch) is a miss or a resize."""
    if store.value is None or frame.test is None:
        return False
    body = frame.kind in ("if_body", "ifexp_body")
    if not body and frame.kind not in ("if_else", "ifexp_else"):
        return False
    test = frame.test
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    present = _presence(test) if isinstance(test, cst.BaseExpression) else None
    if present is None or (present != negated) != body:
        return False
    return store.target in fa.mentions(store.value)


def _presence(test: cst.BaseExpression) -> bool | None:
    """Whether a true ``test`` says storage is there (``X is not None``, ``isinstance(X,
    T)``) or absent (``X is None``, ``X.numel() == 0``, ``len(X) == 0``); None for any
    other test."""
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name):
        return True if test.func.value == "isinstance" and len(test.args) == 2 else None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op = test.comparisons[0].operator
    right = test.comparisons[0].comparator
    if isinstance(op, (cst.Is, cst.IsNot)) and is_none(right):
        return isinstance(op, cst.IsNot)
    if isinstance(op, cst.Equal) and isinstance(right, cst.Integer) and right.value == "0":
        return False if _measures_size(test.left) else None
    return None


def _measures_size(e: cst.BaseExpression) -> bool:
    """``len(X)``, ``X.numel()``, ``X.shape[i]``, ``X.size(i)``."""
    if isinstance(e, cst.Subscript):
        e = e.value
        return isinstance(e, cst.Attribute) and e.attr.value == "shape"
    if not isinstance(e, cst.Call):
        return False
    func = e.func
    if isinstance(func, cst.Name):
        return func.value == "len"
    return isinstance(func, cst.Attribute) and func.attr.value in ("numel", "size")


def _tests_a_local_made_here(test: cst.CSTNode, site: AllocationSite, fa: FunctionAnalysis) -> bool:
    """``if w is None:`` (``is not None``, ``not w``) on a local that holds nothing but
    ``None`` and what this allocation makes (``w_scale = None``, then in a loop ``if
    w_scale is None: w_scale = torch.empty(...)``, ``w_scale = w_scale.reshape(...)``):
    it tests this call's own progress, each call starts from ``None``; not a cache."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, (cst.Is, cst.IsNot)) and is_none(target.comparator):
            test = test.left
    f = fa.f
    if not isinstance(test, cst.Name) or not f.is_local(test.value) or test.value in f.params:
        return False
    if test.value in f.other_bound:
        return False  # a loop's or a ``with``'s name: bound to what it iterates
    sid = fa.index.site_ids[id(site.call)]
    values = f.defs.get(test.value, [])
    return any(is_none(v) for v in values) and all(is_none(v) or sid in fa.flow(v) for v in values)


_BRANCHES = {"if_body": "if_else", "if_else": "if_body"}


def _both_branches_allocate(
    frame: Frame, store: Store, keys: dict[str, list[Store]], fa: FunctionAnalysis
) -> bool:
    """``if a: self.ids = torch.cat([self.ids, x.repeat(k, 1)]) else: self.ids =
    torch.cat([self.ids, x])``: the other branch of the same ``if`` stores a new tensor
    in the same storage too, so the test only picks how, not whether."""
    other = _BRANCHES.get(frame.kind)
    if other is None:
        return False
    return any(
        s is not store
        and s.target == store.target
        and any(fr.node is frame.node and fr.kind == other for fr in s.frames)
        and s.value is not None
        and bool(fa.flow(s.value))
        for s in keys.get(store.target, ())
    )


def _exits_when_unset(test: cst.BaseExpression, store: Store, fa: FunctionAnalysis) -> bool:
    """``if self.ids is None: ...; return`` (or ``if not self.ids``): the code after it
    runs only when the storage already holds something, so what it stores there
    replaces or extends that, not a first fill."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        subject: cst.BaseExpression = test.expression
    elif (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and is_none(test.comparisons[0].comparator)
    ):
        subject = test.left
    else:
        return False
    return expr_text(subject, fa.f.self_name) == store.target


def _returns_from_a_scan(
    exit_: EarlyExit, site: AllocationSite, related: set[str], fa: FunctionAnalysis
) -> bool:
    """``for buf in reversed(self._pool): if buf.numel() >= n: return buf`` then an
    allocation after the loop: the loop scans the kept storage and returns what fits, so
    what follows runs only when nothing did."""
    frames = exit_.frames
    shared = 0
    while (
        shared < len(frames) and shared < len(site.frames) and frames[shared] is site.frames[shared]
    ):
        shared += 1
    if shared == len(frames):
        return False  # a plain early exit (handled by the caller)
    loop = frames[shared]
    if loop.kind != "for" or not isinstance(loop.node, cst.For):
        return False
    return bool(fa.mentions(loop.node.iter) & related)


def _tests_what_is_kept(frame: Frame, store: Store, mentioned: set[str]) -> bool:
    """``if table is None: table = make(); self._tables.append(table)``: the branch runs
    when a name has no value, binds it, and keeps it (the caller looked it up there)."""
    value = store.value
    if not isinstance(value, cst.Name) or value.value not in mentioned:
        return False
    if frame.kind != "if_body" or frame.test is None or not _tests_missing(frame.test, value.value):
        return False  # ``if sigmas is not None: sigmas = torch.tensor(sigmas)``: given
    if not any(fr is frame for fr in store.frames):
        return False
    for node in walk(frame.node):
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == value.value for t in node.targets
        ):
            return True
    return False


def _tests_missing(test: cst.CSTNode, name: str) -> bool:
    """Whether a condition holds when ``name`` has no value: ``name is None``, ``not
    name`` (alone or in an ``or``)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _tests_missing(test.left, name) or _tests_missing(test.right, name)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return isinstance(test.expression, cst.Name) and test.expression.value == name
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        c = test.comparisons[0]
        return (
            isinstance(test.left, cst.Name)
            and test.left.value == name
            and isinstance(c.operator, cst.Is)
            and isinstance(c.comparator, cst.Name)
            and c.comparator.value == "None"
        )
    return False


def _enclosing_try(site: AllocationSite, handler: Frame) -> cst.Try | None:
    idx = site.frames.index(handler)
    for frame in reversed(site.frames[:idx]):
        if (
            frame.kind == "try"
            and isinstance(frame.node, cst.Try)
            and handler.node in frame.node.handlers
        ):
            return frame.node
    # the handler's Try has no "try" frame on the stack (we were not inside its body)
    node = handler.node
    for f in reversed(site.frames[:idx]):
        for child in f.node.children:
            if isinstance(child, cst.IndentedBlock):
                for stmt in child.body:
                    if isinstance(stmt, cst.Try) and node in stmt.handlers:
                        return stmt
    body: Sequence[cst.CSTNode] = site.function.node.body.body
    for top in body:
        if isinstance(top, cst.Try) and node in top.handlers:
            return top
    return None


def resolve_caller_laziness(
    site: AllocationSite, fills: set[str], analyses: dict[int, FunctionAnalysis]
) -> None:
    """A method that fills storage whenever it runs (``def _alloc(self, n): self.max_n =
    n; self.out = torch.empty(n)``) runs lazily when another method of its class calls
    it only on a miss of that storage: under a test that reads it (``if n > self.max_n:
    self._alloc(n)``), or after a return on it (``if self.max_n >= n: return``). Only
    storage on ``self`` counts (the object's own state, not what the method fills on its
    arguments). The constructor's call builds the first buffer eagerly; a grown one is
    made on first use of the larger size. ``fills``: the persistent storage the method
    fills, by text."""
    f = site.function
    cls = f.cls
    if cls is None or f.self_name is None or f.is_constructor or site.lazy is not None:
        return
    fills = {text for text in fills if text.startswith("self.")}  # the object's own state
    if not fills:
        return
    if f.qualname in analyses[id(f)].index.construction:
        return  # reached only from constructors: built eagerly (lifetimes.py)
    for g in cls.functions:
        if g is f or g.is_constructor or f.name not in g.calls or g.self_name is None:
            continue
        fa = analyses[id(g)]
        if fa.f.qualname in fa.index.construction:
            continue
        test = _miss_calling(g, f.name, fills, fa)
        if test is not None:
            site.lazy = "cache miss"
            site.lazy_test = f"{expr_text(test)} (in `{g.qualname}`)"
            return


def _miss_calling(
    g: FunctionModel, name: str, fills: set[str], fa: FunctionAnalysis
) -> cst.BaseExpression | None:
    """The test on ``fills`` under which (or after whose exit) ``g`` calls
    ``self.<name>(...)``, if any."""
    exited: cst.BaseExpression | None = None
    for stmt in g.node.body.body:
        if exited is not None and _calls_method(stmt, g.self_name, name):
            return exited
        for inner in walk(stmt):
            if (
                isinstance(inner, (cst.If, cst.While))
                and _calls_method(inner.body, g.self_name, name)
                and fa.mentions(inner.test) & fills
            ):
                return inner.test
            if (
                isinstance(inner, cst.Match)
                and any(_calls_method(case.body, g.self_name, name) for case in inner.cases)
                and fa.mentions(inner.subject) & fills
            ):
                return inner.subject
        if isinstance(stmt, cst.If) and _exits(stmt.body) and fa.mentions(stmt.test) & fills:
            exited = stmt.test
    return None


def _calls_method(node: cst.CSTNode, self_name: str | None, name: str) -> bool:
    return any(
        isinstance(n, cst.Call)
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value == name
        and isinstance(n.func.value, cst.Name)
        and n.func.value.value == self_name
        for n in walk(node)
    )


def _exits(block: cst.BaseSuite) -> bool:
    """Whether a block ends by returning: what follows runs on a miss. (A ``raise`` is
    a precondition: what follows runs whenever the call is valid.)"""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    last = block.body[-1]
    return isinstance(last, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Return) for s in last.body
    )
