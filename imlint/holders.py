"""Holders handed in: which parameters are known to hold a long-lived object.

A function that stores a tensor on an object it is handed (``meta.buf = ...``,
``cache[k] = ...``) fills persistent storage only when that object outlives the call.
Batches, requests and per-step metadata are handed around far more often than
long-lived objects, so a parameter holds a long-lived object only on evidence, read
from what callers hand it (``DefSummary.hands``):

- ``self`` of a class whose instances are not made per call (``lifetimes.py``);
- a module-level object;
- an attribute of ``self`` (``self.meta``) that only construction (the constructors of
  the class, functions that run only while it is built), an entry point or a
  get-or-create (a conditional store) assigns. An attribute a running method assigns
  unconditionally (``self.forward_metadata = Meta(...)`` each step) holds whatever that
  method made last, not one object for the process;
- an item of a container on ``self`` (``self.pools.get(dtype)``) unless code other
  than construction puts items there without testing the container first (a registry
  of per-request objects, ``self.reqs[req_id] = Req(...)``, under no test or a test of
  something else), or an item of any other container;
- a parameter of the caller that holds a long-lived object itself, or any parameter
  of a caller that nothing calls (an entry point: it may be handed anything).

Callers are the resolved ones and the calls by the same name that the index cannot
resolve (a method of an object whose class is chosen at run time). Test code is not
evidence. A parameter of a function that production code calls, where no caller hands
such an object (each hands an item of a container, a call's result, a per-step object),
is *unheld*: what the function stores on it is not persistent storage. A function
nothing calls is an entry point: whoever calls it from outside may hand anything, so
its parameters are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from imlint.kinds import CONSTRUCTORS
from imlint.lifetimes import is_test_module

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target

#: what a caller hands a parameter: True (a long-lived holder) or the caller's own
#: parameter it hands on
Source: TypeAlias = "bool | tuple[Target, str]"


class Holders:
    """Which parameters of called functions no caller hands a long-lived object
    (module doc), judged on demand: a parameter and the callers' parameters it depends
    on are solved together, once."""

    def __init__(self, index: ProjectIndex) -> None:
        self._h = _Holders(index)
        self._long: dict[tuple[Target, str], bool] = {}

    def replaced(self, cls: Target) -> set[str]:
        """Attributes of a class's instances that code other than construction replaces
        unconditionally (``self.forward_metadata = Meta(...)`` each step): what they
        hold lives until the next replacement, not for the object's life. ``<attr>[]``
        for a container that such code puts items into without testing it first (a
        registry of requests, ``self.reqs[rid] = Req(...)``): each item lives until
        it is taken out, not for the object's life."""
        return {attr for c in self._h.family(cls) for attr in self._h.unstable.get(c, ())}

    def unheld(self, target: Target, params: tuple[str, ...]) -> list[str]:
        """The parameters of ``target`` that are unheld (none when nothing calls it)."""
        if is_test_module(target[0]) or not self._h.called(target):
            return []
        return [p for p in params if not self._is_long((target, p))]

    def _is_long(self, start: tuple[Target, str]) -> bool:
        known = self._long.get(start)
        if known is not None:
            return known
        # The callers' parameters this one depends on, transitively, not yet solved.
        long: set[tuple[Target, str]] = set()
        feeds: dict[tuple[Target, str], list[tuple[Target, str]]] = {}
        closure = {start}
        pending = [start]
        while pending:
            node = pending.pop()
            for source in self._h.sources(*node):
                if not isinstance(source, tuple):
                    long.add(node)  # True: a long-lived holder
                elif source in self._long:
                    if self._long[source]:
                        long.add(node)
                else:
                    feeds.setdefault(source, []).append(node)
                    if source not in closure:
                        closure.add(source)
                        pending.append(source)
        pending = list(long)
        while pending:
            for nxt in feeds.get(pending.pop(), ()):
                if nxt not in long:
                    long.add(nxt)
                    pending.append(nxt)
        for node in closure:
            self._long[node] = node in long
        return start in long


class _Holders:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self.stable: dict[Target, set[str]] = {}
        self.unstable: dict[Target, set[str]] = {}
        self._called: dict[Target, bool] = {}
        self._by_target: dict[Target, dict[str, list[Source]]] = {}
        self._by_name: dict[str, dict[str, list[Source]]] = {}
        self._attributes()
        self._hands()

    def _attributes(self) -> None:
        """For each class, what of ``self`` construction or a get-or-create assigns
        (``DefSummary.sets``), and what other code replaces."""
        index = self.index
        for s in index.summaries:
            for d in s.defs.values():
                if not d.sets or not d.cls:
                    continue
                cls = (s.module, d.cls)
                me = (s.module, d.qual)
                built = (
                    d.qual.rsplit(".", 1)[-1] in CONSTRUCTORS
                    or me in index.construction
                    or not self.called(me)  # an entry point: may run once (lifetimes.py)
                )
                for what in d.sets:
                    replaced = not built and not what.startswith("?")
                    into = self.unstable if replaced else self.stable
                    into.setdefault(cls, set()).add(what.lstrip("?"))

    def family(self, cls: Target) -> set[Target]:
        """A class, its subclasses and the classes it derives from (their methods
        assign the same attributes)."""
        return self.index.subclasses(cls) | self.ancestors(cls)

    def ancestors(self, cls: Target) -> set[Target]:
        """A class and the classes it derives from, that the index resolves."""
        index = self.index
        family = {cls}
        pending = [cls]
        while pending:
            c = pending.pop()
            s = index.modules.get(c[0])
            cd = s.defs.get(c[1]) if s is not None else None
            if s is None or cd is None:
                continue
            for base in cd.bases:
                b = index.resolve_base(s, base)
                if b is not None and b not in family:
                    family.add(b)
                    pending.append(b)
        return family

    def _stable(self, cls: Target, attr: str) -> bool:
        """Whether ``self.<attr>`` holds one object for the object's life: assigned by
        construction or a get-or-create only; for an item (``pools[]``), no code but
        construction puts items there unconditionally (a registry of per-request
        objects does, a get-or-create cache does not)."""
        family = self.family(cls)
        if any(attr in self.unstable.get(c, ()) for c in family):
            return False
        return attr.endswith("[]") or any(attr in self.stable.get(c, ()) for c in family)

    def _long(self, s: FileSummary, d: DefSummary, holder: str) -> bool | None:
        """Whether what ``holder`` names in ``d`` is long-lived: True, False, or None
        for a parameter of ``d`` (judged with the others)."""
        if holder in ("global", "item"):
            return True
        if holder.startswith("param:"):
            return None
        if not d.cls:
            return False
        cls = (s.module, d.cls)
        if cls in self.index.lifetimes.per_call:
            return False
        if holder == "self":
            return True
        return self._stable(cls, holder[5:])

    def _hands(self) -> None:
        """What every production call hands, by the function it runs (or, when the
        index cannot resolve it, by the name it calls) and by position or keyword: True
        for a long-lived holder, or the caller's parameter it hands on."""
        index = self.index
        for s in index.summaries:
            if is_test_module(s.module):
                continue
            for d in s.defs.values():
                me = (s.module, d.qual)
                for text, key, holder in d.hands:
                    verdict = self._long(s, d, holder)
                    if verdict is False:
                        continue
                    source: Source = True
                    if verdict is None and self.called(me):
                        source = (me, holder[6:])  # else an entry point: may hold anything
                    target = self._callee(s, d, text)
                    if target is not None:
                        by = self._by_target.setdefault(target, {})
                    elif text.startswith("?") or index.is_external(s, text):
                        continue
                    else:
                        by = self._by_name.setdefault(text.rsplit(".", 1)[-1], {})
                    by.setdefault(key, []).append(source)

    def sources(self, target: Target, param: str) -> list[Source]:
        """What callers hand ``param`` of ``target`` that may be long-lived: True (a
        long-lived holder) or a parameter of the caller it hands on."""
        s = self.index.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if d is None or param not in d.params:
            return []
        keys = (str(d.params.index(param)), param)
        out: list[Source] = []
        bys = [self._by_name.get(target[1].rsplit(".", 1)[-1], {})]
        # An override runs wherever the base's method is called (``callers_of``).
        methods = [target]
        while methods:
            method = methods.pop()
            bys.append(self._by_target.get(method, {}))
            methods.extend(self.index.overridden(method))
        for by in bys:
            for key in keys:
                out.extend(by.get(key, ()))
        return out

    def called(self, target: Target) -> bool:
        """Whether production code calls ``target``: not an entry point (lifetimes.py)."""
        known = self._called.get(target)
        if known is None:
            known = self._called[target] = not self.index.lifetimes.entry_point(target)
        return known

    def _callee(self, s: FileSummary, d: DefSummary, text: str) -> Target | None:
        """The function a resolved call runs (a class runs its constructor)."""
        index = self.index
        target = index.resolve(s, d, text)
        if target is not None and index.kind_of(target) == "class":
            return index.method_of(target, "__init__")
        return target
