"""Queues: containers an object fills with one new item per call and takes items out
of (a generator's job list, a scheduler's request dict), read from code.

A container attribute ``self.<attr>`` is a *queue* when the class (or a class of its
family) adds an item to it on every call of some method (``self.jobs.append(job)``,
``self.jobs[key] = job``, not under a test: a get-or-create fills a cache, not a
queue) and some method takes items out of it (``.remove``, ``.pop``, ``.popleft``,
``.popitem``, ``.discard``, ``del self.jobs[key]``, or a filtering comprehension
stored back). What a queue holds stays there while it is being served, then leaves:
an object whose only keeping is as an item of a queue lives per request, however long
the queue itself lives (``lifetimes.py`` reads :meth:`Queues.queued_only`).

A parameter *queues* what it is handed when the function keeps it as an item of a
queue of its own object, or hands it on to a parameter that does (``enqueue(job)``).
A call the index cannot resolve queues an argument when every method of that name in
the project does. A class whose constructor hands the object itself to a queuing
parameter (``self.generator.enqueue(self)``) announces each instance as a request:
its instances are per call wherever they are made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target

#: Calls followed from a parameter to the parameter it is handed on to.
_DEPTH = 3


class Queues:
    """The queues of a project and what is kept only in them."""

    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self.attrs = self._queues()
        self._named: dict[str, list[Target]] = {}
        for s in index.summaries:
            for d in s.defs.values():
                if d.kind == "function" and d.cls:
                    self._named.setdefault(d.qual.rsplit(".", 1)[-1], []).append((s.module, d.qual))

    def _queues(self) -> set[tuple[Target, str]]:
        index = self.index
        adds: dict[Target, set[str]] = {}
        drops: dict[Target, set[str]] = {}
        for s in index.summaries:
            for d in s.defs.values():
                if d.kind != "function" or not d.cls:
                    continue
                cls = (s.module, d.cls)
                for mark in d.sets:
                    if mark.endswith("[]") and not mark.startswith("?"):
                        adds.setdefault(cls, set()).add(mark[:-2])
                if d.drops:
                    drops.setdefault(cls, set()).update(d.drops)
        out: set[tuple[Target, str]] = set()
        for dropper, attrs in drops.items():
            # A base class's methods run on its subclasses' objects, and the other way
            # round through overrides: either side may add, either may drop.
            family = index.subclasses(dropper) | {dropper}
            for cls, added in adds.items():
                common = added & attrs
                if common and (cls in family or dropper in index.subclasses(cls)):
                    out |= {(cls, attr) for attr in common}
        return out

    def is_queue(self, cls: Target, attr: str) -> bool:
        return (cls, attr) in self.attrs

    def queued_only(self, s: FileSummary, d: DefSummary, text: str) -> bool:
        """Whether what the call ``text`` in ``d`` makes is kept only as an item of
        queues: put in one of the object's own (``self.jobs.append(Job())``) or handed
        to a parameter that queues it, and neither returned nor kept anywhere else."""
        hows = [how for made, how in d.results if made == text]
        if not hows:
            return False
        for how in hows:
            if how.startswith("kept:self[]:"):
                if not self.is_queue((s.module, d.cls), how[12:]):
                    return False
            elif how.startswith("handed:"):
                _, callee, key = how.split(":", 2)
                if not self.queued_by(s, d, callee, key):
                    return False
            else:
                return False
        return True

    def queued_by(self, s: FileSummary, d: DefSummary, callee: str, key: str) -> bool:
        """Whether the call ``callee`` in ``d`` queues its argument ``key``."""
        target = self.index.resolve(s, d, callee)
        if target is not None:
            return self._queues_param(target, key, 0)
        name = callee.rsplit(".", 1)[-1]
        if "." not in callee or self.index.is_external(s, callee):
            return False
        candidates = self._named.get(name, [])
        return bool(candidates) and all(self._queues_param(t, key, 0) for t in candidates)

    def _queues_param(self, target: Target, key: str, depth: int) -> bool:
        index = self.index
        name = index.param_name(target, key)
        s = index.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if name is None or s is None or d is None or not d.cls:
            return False
        cls = (s.module, d.cls)
        if any(p == name and self.is_queue(cls, attr) for p, attr in d.pitems):
            return True
        if depth >= _DEPTH:
            return False
        for callee, ckey, param in d.passes:
            if param != name:
                continue
            inner = index.resolve(s, d, callee)
            if inner is not None and self._queues_param(inner, ckey, depth + 1):
                return True
        return False

    def self_queuing(self) -> set[Target]:
        """Classes whose constructor hands the object itself to a queuing parameter."""
        index = self.index
        out: set[Target] = set()
        for cls in index.classes():
            init = index.method_of(cls, "__init__")
            s = index.modules.get(init[0]) if init is not None else None
            d = s.defs.get(init[1]) if s is not None and init is not None else None
            if s is None or d is None:
                continue
            if any(
                holder == "self" and self.queued_by(s, d, text, key)
                for text, key, holder in d.hands
            ):
                out.add(cls)
        return out
