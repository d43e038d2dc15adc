"""Writes: which in-place writes reach a site's storage after its allocation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from imlint.lifetimes import is_test_module
from imlint.names import expr_text, string_value
from imlint.rebinding import Rebinding
from imlint.semantic import (
    HANDED_WRITE,
    INFERENCE_WRITE,
    TORCH_WRITE,
    WRITE_STRENGTH,
    AllocationSite,
    FunctionModel,
    InplaceWrite,
    Store,
    strongest_write,
)
from imlint.sites import is_prefix, literal_key
from imlint.values import ITEMS, FunctionAnalysis, ModuleIndex, untagged

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target


def _allocation_time(site: AllocationSite, write: InplaceWrite) -> bool:
    """Whether a write only runs right after the allocation, under the same mode."""
    if write.function is not site.function:
        return False
    if site.lazy == "cached function":
        return True
    if site.lazy_frame is not None and any(fr is site.lazy_frame for fr in write.frames):
        return True
    if site.lazy_exit is not None and (
        write.order > site.lazy_exit.order and is_prefix(site.lazy_exit.frames, write.frames)
    ):
        return True
    return _follows_in_the_same_call(site, write)


def _follows_in_the_same_call(site: AllocationSite, write: InplaceWrite) -> bool:
    """The write comes after the allocation inside every block that holds the allocation
    (``self._b = torch.zeros(n)`` then ``for i in ids: self._b[i] = v``), so each run of
    the write follows a run of the allocation in the same call, under the same mode,
    unless a ``with`` between them changes it or the write waits in a lambda. Not for an
    allocation behind a call (a get-or-create helper, a project function that may cache)
    or kept by ``setdefault``: those may hand back what an earlier call made."""
    if site.helper or site.chain is not None or site.lazy == "setdefault":
        return False
    if write.order <= site.order or not is_prefix(site.frames, write.frames):
        return False
    return all(
        fr.mode is None and fr.kind not in ("lambda", "comp")
        for fr in write.frames[len(site.frames) :]
    )


class WriteIndex:
    """A module's in-place writes by the tokens their handles name (``values.tokens``),
    read once, so that each site looks up the writes that can reach its storage
    instead of reading every write of the module again (which grew as sites times
    writes on generated files)."""

    def __init__(
        self,
        functions: list[FunctionModel],
        analyses: dict[int, FunctionAnalysis],
        mode_blocks: set[int],
    ):
        self._rebinding: dict[int, Rebinding] = {}  # id(class) -> its methods' bindings
        self._mode_blocks = mode_blocks  # ``Collector.mode_blocks``
        self.tokens: dict[int, set[str]] = {}  # id(write) -> tokens
        self._by_token: dict[str, list[tuple[int, FunctionModel, InplaceWrite]]] = {}
        self._by_prefix: dict[str, list[tuple[int, FunctionModel, InplaceWrite]]] = {}
        order = 0
        for g in functions:
            ga = analyses[id(g)]
            for w in g.writes:
                tokens = self.tokens[id(w)] = ga.tokens(w.handle, at=(w.order, w.frames))
                entry = (order, g, w)
                order += 1
                for t in tokens:
                    self._by_token.setdefault(t, []).append(entry)
                    for prefix in _dotted_prefixes(t):
                        self._by_prefix.setdefault(prefix, []).append(entry)

    def naming(
        self, tokens: set[str], inside: list[str]
    ) -> list[tuple[FunctionModel, InplaceWrite]]:
        """Writes whose handle names one of ``tokens``, or something under one of the
        prefixes ``inside``, in source order of their functions."""
        found: dict[int, tuple[int, FunctionModel, InplaceWrite]] = {}
        for t in tokens:
            for entry in self._by_token.get(t, ()):
                found[id(entry[2])] = entry
        for prefix in inside:
            for entry in self._by_prefix.get(prefix, ()):
                found[id(entry[2])] = entry
        return [(g, w) for _o, g, w in sorted(found.values(), key=lambda e: e[0])]

    def rebound(self, site: AllocationSite, g: FunctionModel, w: InplaceWrite) -> bool:
        """Whether every path of ``g`` binds the site's attribute of ``self`` anew, in
        the same call and under the same mode, before it reaches ``w``: the write then
        reaches what that call made, not what the site made in an earlier one."""
        f, store = site.function, site.store
        cls = f.cls
        if store is None or cls is None or g.cls is not cls or f.self_name is None:
            return False
        parts = (store.container or store.target).split(".")
        if len(parts) != 2 or parts[0] not in (f.self_name, "self"):
            return False
        if any(fr.kind in ("lambda", "comp") for fr in w.frames):
            return False
        rebinding = self._rebinding.get(id(cls))
        if rebinding is None:
            rebinding = self._rebinding[id(cls)] = Rebinding(cls, self._mode_blocks)
        return parts[1] in rebinding.bound_before(g, w.node)


def _dotted_prefixes(token: str) -> list[str]:
    """``self._a.b`` -> ``self.``, ``self._a.``: what an object's attributes start with;
    ``self._a[k]`` -> ``self.``, ``self._a[``: what the entries of a container start with."""
    return [token[: i + 1] for i, ch in enumerate(token) if ch in ".["]


def find_writes(
    site: AllocationSite,
    analyses: dict[int, FunctionAnalysis],
    windex: WriteIndex,
    index: ModuleIndex,
    callbacks: dict[str, InplaceWrite],
) -> None:
    store = site.store
    assert store is not None
    f = site.function
    own = analyses[id(f)]
    sid = index.site_ids[id(site.call)]
    # The site's storage, and, for an entry of a mapping, that entry as code reads it
    # (``bufs["a"]`` is not ``bufs["b"]``: a different buffer).
    entry_key = _entry_key(site, own, sid)
    storage = {store.token}
    if entry_key is not None:
        storage.add(f"{store.token}|{entry_key}")
    stored_key = _stored_key(store)
    if stored_key is not None:
        storage.add(stored_key)
    wanted = storage | {f"alloc:{sid}"}
    # An object that holds tensors (IM003): writes reach them through its attributes.
    inside = [store.token + "."] if site.object_result else []

    def hits(w: InplaceWrite) -> bool:
        tokens = windex.tokens[id(w)]
        if not (tokens & wanted or any(t.startswith(p) for p in inside for t in tokens)):
            return False
        return not _fills_an_entry(w, index)

    for w in f.writes:
        if hits(w):
            if not _allocation_time(site, w):
                if not windex.rebound(site, f, w):
                    site.writes.append(w)
            elif (w.order > site.order or w.handle is site.call) and w.kind != HANDED_WRITE:
                # ``buf = torch.empty(n); buf.copy_(x)``, ``torch.empty(n).copy_(x)``; a
                # tensor handed to unreadable code (``pool.append(buf)``) may stay blank
                site.filled = True
    tokens = wanted if site.object_result else storage
    _writes_elsewhere(site, own, windex, index, tokens, inside, entry_key)
    if site.object_writes is not None:
        kind, how = site.object_writes
        site.writes.append(
            InplaceWrite(
                site.call, how, site.frames, site.order, site.call, f, site.positions, kind
            )
        )
    returned = index.returned(f)
    if wanted & untagged(returned):
        _callers_writes(site, index, entry_key or _returned_item(returned, wanted))
        handed = callbacks.get(f.name) if f.parent is None and f.cls is None else None
        if handed is not None:
            site.writes.append(handed)  # handed to outside code, with its result
    # Visiting order is source order: the first write is the one a message cites.
    site.writes.sort(key=lambda w: w.order)


def _writes_elsewhere(
    site: AllocationSite,
    own: FunctionAnalysis,
    windex: WriteIndex,
    index: ModuleIndex,
    tokens: set[str],
    inside: list[str],
    entry_key: str | None,
) -> None:
    """Writes by the module's other functions that can see the site's storage
    (``tokens``, or something under a prefix of ``inside``); ``entry_key``: the key of
    the literal's entry the site fills, if any."""
    f, store = site.function, site.store
    assert store is not None
    kind = own.root_kind(store.root) if store.root is not None else "global"
    module_wide = kind == "global" or store.kind == "return"

    def sees(g: FunctionModel) -> bool:
        if kind == "self" and f.cls is not None:
            return g.cls is f.cls
        if module_wide:
            return True  # module storage: any function of the module may write it
        # Storage handed in (a parameter, a registry): other functions reach it only
        # through this function's return value (``st = get_ws(reg); st.zero_()``).
        return f.name in g.calls

    # An entry under a key computed at run time (``self._bufs[n] = t``): another
    # function writing an entry of the same container under any key
    # (``self._bufs[k].copy_()``, ``buf = self._bufs.get(k)``) may reach it (in the
    # function itself, keys under other names are other entries: ``buffers[mkey]``
    # beside ``buffers[key]``). Only for storage every function names alike: ``self``
    # of the class, a global (a parameter's name in another function is that
    # function's own object); not for an entry of a literal (``{"a": t}``).
    entries = _entries_prefix(store) if entry_key is None else None
    if entries is not None and kind in ("self", "global"):
        inside = [*inside, entries]
    for g, w in windex.naming(tokens, inside):
        if g is not f and sees(g) and not _fills_an_entry(w, index):
            if not windex.rebound(site, g, w):
                site.writes.append(w)


def _callers_writes(site: AllocationSite, index: ModuleIndex, entry_key: str | None) -> None:
    """Writes by callers of the site's function into what it returns (the project
    index's ``returned_writes``): the whole result, or the entry or item they write."""
    f = site.function
    for key, kind, who in index.returned_writes.get(f.qualname, ()):
        # Callers that write one entry or item of the result write that buffer only.
        if key and entry_key is not None and key != entry_key:
            continue
        if any(w.kind == kind for w in site.writes):
            continue  # a write this module shows, with its line, says it already
        text = f"{who} writes {_entry_text(key)}what {f.qualname}() returns"
        site.writes.append(
            InplaceWrite(
                site.call, text, site.frames, site.order, site.call, f, site.positions, kind
            )
        )


def _returned_item(returned: frozenset[str], wanted: set[str]) -> str | None:
    """``#i`` when the site's storage is item ``i`` of the tuple its function returns
    (``return self._send, self._recv``), and no other item."""
    found = set()
    for t in returned:
        tag, _, rest = t.partition(">")
        if tag.startswith("@#") and rest in wanted:
            found.add(tag[1:])
    return found.pop() if len(found) == 1 else None


def _entry_text(key: str) -> str:
    """How a message names the part of a result a caller writes: ``[1] of`` for an
    item (``#1``), ``["out"] of`` for an entry, nothing for the whole result."""
    if not key:
        return ""
    return f"[{key[1:]}] of " if key.startswith("#") else f'["{key}"] of '


def _entry_key(site: AllocationSite, own: FunctionAnalysis, sid: int) -> str | None:
    """The constant key of the dict literal entry the allocation fills, when the stored
    value is such a dict (``bufs = {"a": torch.empty(n)}; self._bufs[k] = bufs``), or
    ``#i`` for the item of a tuple or list literal (``_cache[k] = (a, b)``)."""
    store = site.store
    assert store is not None
    pending = [store.value] if store.value is not None else []
    seen: set[str] = set()
    f = site.function
    while pending:
        v = pending.pop()
        if isinstance(v, cst.Name) and v.value not in seen and f.is_local(v.value):
            seen.add(v.value)
            pending.extend(f.defs.get(v.value, ()))
        elif isinstance(v, cst.Dict):
            for el in v.elements:
                if isinstance(el, cst.DictElement) and sid in own.flow(el.value):
                    return string_value(el.key)
        elif isinstance(v, (cst.Tuple, cst.List)):
            if any(isinstance(el, cst.StarredElement) for el in v.elements):
                return None
            for i, item in enumerate(v.elements):
                if sid in own.flow(item.value):
                    return f"#{i}"  # ``return (a, b)``: callers unpack it by position
    return None


def _fills_an_entry(w: InplaceWrite, index: ModuleIndex) -> bool:
    """``self.recv[name][i] = t`` where the module stores containers as the entries of
    ``self.recv`` (``self.recv[name] = {i: t}``): it fills a dict, it writes no tensor."""
    handle = w.handle
    if not w.text.endswith("[...] = ...") or not isinstance(handle, cst.Subscript):
        return False
    return expr_text(handle.value, w.function.self_name) + ITEMS in index.container_texts


def _entries_prefix(store: Store) -> str | None:
    """``store:self._bufs[``: how the tokens of the container's entries start, for an
    entry stored under a key computed at run time; None for anything else (an entry
    under a constant key is its own buffer)."""
    if store.container is None or not store.target.startswith(store.container + "["):
        return None
    return None if literal_key(store) else f"store:{store.container}["


def _stored_key(store: Store) -> str | None:
    """``self._bufs["a"] = t``: the entry as a keyed read names it (``self._bufs|a``)."""
    if store.container is None or not literal_key(store):
        return None
    key = store.target[len(store.container) + 1 : -1]
    if key[:1] not in ("'", '"'):
        return None
    return f"store:{store.container}|{key[1:-1]}"


# ------------------------------------------------------------------ across the project


def param_writes(index: ProjectIndex) -> dict[Target, dict[str, str]]:
    """Per project callable: parameter name -> how the callable writes the tensor handed
    there, to a fixed point through the calls that hand parameters on. A parameter handed
    to a Triton launch or to a callable from outside the project is handed to code that
    may write it (``handed``); handed to the project's own code, it is written as that
    code writes it."""
    out: dict[Target, dict[str, str]] = {}
    passes: list[tuple[Target, str, Target | None, str | None]] = []
    for s in index.summaries:
        for d in s.defs.values():
            me = (s.module, d.qual)
            declared = d.mutates  # a custom op writes only what it declares it mutates
            for param, kind in d.pwrites:
                if declared is None or param in declared:
                    _join(out.setdefault(me, {}), param, confine(index, me, kind))
            for text, key, param in d.passes:
                if declared is not None and param not in declared:
                    continue
                target, outside = _callee(index, s, d, text)
                if target is None and not outside:
                    continue  # project code the index cannot see into: taken to read
                name = None
                if target is not None:
                    name = "*" if key == "*" else index.param_name(target, key)
                    if index.kind_of(target) == "class":
                        target = index.constructor(target)  # bound as ``param_name`` binds it
                        if target is None:
                            continue
                passes.append((me, param, target, name))
    passes += _kept_attribute_passes(index)
    changed = True
    while changed:
        changed = False
        for me, param, target, name in passes:
            written: str | None = HANDED_WRITE
            if target is not None:
                written = _written(out.get(target, {}), name)
            if written is not None and _join(out.setdefault(me, {}), param, written):
                changed = True
    return {k: v for k, v in out.items() if v}


def _kept_attribute_passes(index: ProjectIndex) -> list[tuple[Target, str, Target, str]]:
    """A constructor parameter stored as it is on ``self.<attr>`` (``self.buf = buf``,
    a dataclass field) is written as the instance's methods write ``self.<attr>``:
    (constructor, parameter, method, ``self.<attr>``) for ``param_writes``."""
    out: list[tuple[Target, str, Target, str]] = []
    for cls in index.classes():
        ctor = index.constructor(cls)
        if ctor is None or (ctor != cls and ctor[1].rsplit(".", 1)[0] != cls[1]):
            continue  # an inherited ``__init__``: judged with the class that defines it
        d = index.modules[ctor[0]].defs[ctor[1]]
        kept = [(f, f) for f in d.params] if ctor == cls else d.pattrs
        if not kept:
            continue
        for module, m in index.instance_methods(cls):
            # only what the method writes or hands on (``pwrites``, ``passes``)
            named = {p for p, _k in m.pwrites} | {owner for _t, _k, owner in m.passes}
            out += [
                (ctor, param, (module, m.qual), f"self.{attr}")
                for param, attr in kept
                if f"self.{attr}" in named
            ]
    return out


def confine(index: ProjectIndex, writer: Target, kind: str) -> str:
    """A torch write by a function that runs only inside inference mode cannot raise
    (``ProjectIndex.confined``): it counts as ``INFERENCE_WRITE``."""
    return INFERENCE_WRITE if kind == TORCH_WRITE and writer in index.confined else kind


def _join(writes: dict[str, str], param: str, kind: str) -> bool:
    """Record the stronger of two write kinds; whether anything changed."""
    if WRITE_STRENGTH[kind] > WRITE_STRENGTH.get(writes.get(param, ""), 0):
        writes[param] = kind
        return True
    return False


def result_writes(index: ProjectIndex) -> dict[Target, dict[str, tuple[str, str]]]:
    """Per project callable: how its callers write what it returns (``buf = get(n);
    buf.zero_()``, or hand it to code that writes it), strongest first, with where; by
    the entry of a returned mapping they write (``get()["out"]``), "" for all of it."""
    out: dict[Target, dict[str, tuple[str, str]]] = {}

    def record(target: Target, key: str, kind: str | None, where: str) -> None:
        if kind is None:
            return
        by_key = out.setdefault(target, {})
        known = by_key.get(key)
        if known is None or WRITE_STRENGTH[kind] > WRITE_STRENGTH[known[0]]:
            by_key[key] = (kind, where)

    only = _only_methods(index)
    for s in index.summaries:
        for d in s.defs.values():
            where = f"{d.qual} ({s.path})"
            me = (s.module, d.qual)
            for text, how, key in d.rwrites:
                target = index.resolve(s, d, text)
                head = text.split(".", 1)[0]
                if target is None and "." in text and _opaque(s, head) and "(" not in text:
                    # ``backend.acquire(n)`` on an object of a type the index cannot
                    # tell: the one method of the project so named, if its arguments fit
                    target = only.get(text.rsplit(".", 1)[-1])
                    if target is not None and not index.accepts(target, d, text):
                        target = None
                if target is None:
                    continue
                if how.startswith("kept:"):
                    kept = _kept_write(index, s, d, how[5:])
                    if kept is not None:
                        record(target, key, *kept)  # param_writes confined it already
                    continue
                kind = _rwrite_kind(index, s, d, how)
                record(target, key, kind and confine(index, me, kind), where)
            # A getter handed on as a callable (``merge(out, self._get_bufs)``): what
            # the callee does with the results of calling that parameter.
            for text, arg, owner in d.passes:
                if not owner.startswith("self."):
                    continue  # a parameter passed on: not a method this index can name
                callee = index.resolve(s, d, text)
                handed = index.resolve(s, d, owner) if callee is not None else None
                if callee is None or handed is None or index.kind_of(handed) == "class":
                    continue
                name = index.param_name(callee, arg)
                cs = index.modules.get(callee[0])
                cd = cs.defs.get(callee[1]) if cs is not None else None
                if cs is None or cd is None or name is None or name not in cd.params:
                    continue
                for ctext, how, key in cd.rwrites:
                    if ctext == name:
                        record(handed, key, _rwrite_kind(index, cs, cd, how), where)
    return out


def _opaque(s: FileSummary, head: str) -> bool:
    """A name the module does not bind at its top (a local, a parameter): not a module
    it imports, nor ``self``/``cls``, whose methods the index resolves by their class."""
    return head not in s.imports and head not in s.defs and head not in ("self", "cls")


def _only_methods(index: ProjectIndex) -> dict[str, Target]:
    """Method names that exactly one class of the project (tests left out) defines,
    with that method."""
    seen: dict[str, Target | None] = {}
    for s in index.summaries:
        if is_test_module(s.module):
            continue
        for d in s.defs.values():
            if d.kind == "function" and d.cls and not d.qual.rsplit(".", 1)[-1].startswith("__"):
                name = d.qual.rsplit(".", 1)[-1]
                seen[name] = None if name in seen else (s.module, d.qual)
    return {name: t for name, t in seen.items() if t is not None}


def _rwrite_kind(index: ProjectIndex, s: FileSummary, d: DefSummary, how: str) -> str | None:
    """The write kind of a ``rwrites`` record: a handed result (how the callee writes
    it), a result kept on ``self`` (how the class's methods write that attribute)."""
    if how.startswith("handed:"):
        _, callee, arg = how.split(":", 2)
        return _handed_kind(index, s, d, callee, arg)
    if how.startswith("kept:"):
        found = _kept_write(index, s, d, how[5:])
        return found[0] if found is not None else None
    return how


def _kept_write(
    index: ProjectIndex, s: FileSummary, d: DefSummary, attr: str
) -> tuple[str, str] | None:
    """How the methods of ``d``'s class write ``self.<attr>``, where ``d`` keeps a call's
    result (``self._ws = get_workspace(dev)``): the strongest write, and which method."""
    best: tuple[str, str] | None = None
    for m in s.defs.values():
        if m.cls != d.cls or m.kind != "function":
            continue
        kind = index.param_writes.get((s.module, m.qual), {}).get(attr)
        if kind is not None and (best is None or WRITE_STRENGTH[kind] > WRITE_STRENGTH[best[0]]):
            best = (kind, f"{m.qual} ({s.path}, through {attr})")
    return best


def _handed_kind(
    index: ProjectIndex, s: FileSummary, d: DefSummary, callee: str, key: str
) -> str | None:
    """How a callee writes an argument handed to it (see :func:`param_writes`)."""
    target, outside = _callee(index, s, d, callee)
    if target is None:
        return HANDED_WRITE if outside else None
    name = "*" if key == "*" else index.param_name(target, key)
    return _written(index.param_writes.get(target, {}), name)


def _written(writes: dict[str, str], name: str | None) -> str | None:
    """How parameter ``name`` is written; ``*`` (``f(*args)``, ``f(**kwargs)``: what is
    handed may land on any parameter): the strongest write of any."""
    if name == "*":
        return strongest_write(writes.values())
    return writes.get(name) if name is not None else None


def _callee(
    index: ProjectIndex, s: FileSummary, d: DefSummary, text: str
) -> tuple[Target | None, bool]:
    """The project callable a call text names, and whether it is code from outside that
    may write what it is handed from a kernel: a Triton launch (``[]`` prefix), an
    import from outside the project, a callable made at run time."""
    launch = text.startswith("[]")
    text = text.removeprefix("[]")
    target = index.resolve(s, d, text)
    if target is not None:
        return target, False
    outside = index.external_writes(s, text) or index.opaque(s, d, text)
    return None, launch or outside or index.foreign(s, text)
