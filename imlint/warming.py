"""Caches that set-up fills first: functions a constructor calls as well as code that
runs later.

``__init__`` reserving a grow-only workspace, or calling a ``@cache`` getter with the
shapes the steps will ask for, makes the cache's first entry while the program sets up,
outside inference mode; the later calls find it. Such a function is *warmed* when every
caller that is not set-up runs only on objects whose construction called it first:

- a method of a class whose constructor (or a function reached only from constructors,
  ``lifetimes.construction_only``) calls the function, directly or through functions
  of construction, or a module-level function whose own callers are all such
  (followed a few calls up);
- whose calls of it read none of the caller's inputs (``DefSummary.fixed``:
  ``absorb_rows(self.device, max(self.pitches), self.heads)``): they ask for what
  the object set up. A call sized from the step's input (``self._grow(x.size(0))``)
  may ask for more than set-up reserved: the grown buffer is made on first use.
  Unless the function keeps what it makes in one attribute it fills only while empty
  (``if self._bufs is None: self._bufs = (...)``): no later call makes it again, so
  set-up may reach it through any function a few calls up (a capture at start-up
  that goes through the same metadata code as the steps).

A function that only warmed functions, construction and constructors call is warmed
too (the cached getter behind a warmed wrapper). Another class that asks for the cache
on its own first call is not covered: it may run before any warming object is built.
Whether set-up asked with the same values is not compared. All of it is read from code; test code is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.lifetimes import Construction, callers_as_set_up_sees, is_test_module

if TYPE_CHECKING:
    from imlint.project import ProjectIndex, Target

#: Calls followed up from a module-level function to the methods that run it.
_UP = 4
#: The most functions a walk up from a function that fills one slot looks at.
_REACH = 64


class _Warming:
    def __init__(self, index: ProjectIndex, construction: set[Target], per_call: set[Target]):
        self.index = index
        self.construction = construction
        self.con = Construction(index, per_call)
        self._callers: dict[Target, list[Target]] = {}
        self._split: dict[Target, tuple[list[Target], set[Target], int]] = {}
        #: id of a list of calls by one name -> its split (the lists live in the index)
        self._named: dict[int, tuple[list[Target], set[Target], int]] = {}
        #: target -> the callers whose call builds an object of its class
        self._builders: dict[Target, set[Target]] = {}
        for caller, callee in index.building:
            self._builders.setdefault(callee, set()).add(caller)

    def callers(self, target: Target) -> list[Target]:
        """Production callers, resolved or by the function's name."""
        known = self._callers.get(target)
        if known is None:
            found = callers_as_set_up_sees(self.index, target)
            found += [c for c, _text in self.index.named_callers(target)]
            known = self._callers[target] = [c for c in found if not is_test_module(c[0])]
        return known

    def split(self, target: Target) -> tuple[list[Target], set[Target], int]:
        """``target``'s production callers split as construction sees them. The calls by
        its name that the index cannot resolve are the same for every function of that
        name: they are split once (unless one of them also builds ``target``)."""
        known = self._split.get(target)
        if known is not None:
            return known
        named = self.index.named_callers(target)
        builders = self._builders.get(target, set())
        if not named or any(c in builders for c, _text in named):
            known = self.con.split(self.callers(target), target)
        else:
            resolved = [
                c for c in callers_as_set_up_sees(self.index, target) if not is_test_module(c[0])
            ]
            rest, built, n = self.con.split(resolved, target)
            by_name = self._named.get(id(named))
            if by_name is None:
                callers = [c for c, _text in named if not is_test_module(c[0])]
                by_name = self._named[id(named)] = self.con.split(callers)
            if rest or built or n:
                known = (rest + by_name[0], built | by_name[1], n + by_name[2])
            else:
                known = by_name  # shared: nobody changes a split
        self._split[target] = known
        return known

    def warming_classes(self, target: Target, depth: int = _UP) -> set[Target]:
        """Classes whose construction calls ``target`` (directly, or through functions
        of construction)."""
        rest, built, _n = self.split(target)
        classes = set(built)
        for c in rest:
            if c not in self.construction:
                continue
            cls = self.con.class_of(c)
            if cls is not None:
                classes.add(cls)
            elif depth:
                classes |= self.warming_classes(c, depth - 1)
        return classes

    def reaching_classes(self, target: Target) -> set[Target]:
        """Classes whose construction reaches ``target`` through any functions, up to
        ``_UP`` calls up (at most ``_REACH`` functions looked at)."""
        classes: set[Target] = set()
        seen = {target}
        level = [target]
        for _ in range(_UP + 1):
            nxt: list[Target] = []
            for node in level:
                classes |= self.warming_classes(node, 0)
                for c in self.split(node)[0]:
                    if c not in seen and c not in self.construction and len(seen) < _REACH:
                        seen.add(c)
                        nxt.append(c)
            level = nxt
        return classes

    def asks_same(self, caller: Target, target: Target) -> bool:
        """Whether every call of ``target``'s name in ``caller`` reads none of the
        caller's inputs (``DefSummary.fixed``): it asks for what set-up asked for."""
        s = self.index.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        if d is None:
            return False
        name = target[1].rsplit(".", 1)[-1]
        fixed = set(d.fixed)
        return all(text in fixed for text, _region in d.calls if text.rsplit(".", 1)[-1] == name)

    def single_slot(self, target: Target) -> bool:
        """Whether what ``target`` allocates it keeps in one attribute of ``self`` that
        it fills only while empty (``if self._bufs is None: self._bufs = ...``): once
        filled, no call makes it again, whatever the call asks for."""
        s = self.index.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if d is None or not d.allocs:
            return False
        return all(
            how == "keeps" and what.startswith("self.") and what[5:] in d.slots
            for how, what, _ref in d.allocs
        )

    def runs_on(self, caller: Target, classes: set[Target], depth: int = _UP) -> bool:
        """Whether ``caller`` runs only on objects of ``classes`` (or at set-up)."""
        if caller in self.construction:
            return True
        cls = self.con.class_of(caller)
        if cls is not None:
            return cls in classes
        if not depth:
            return False
        rest, _built, constructors = self.split(caller)
        if not rest and not constructors:
            return False  # an entry point: it may run first
        return all(self.runs_on(c, classes, depth - 1) for c in rest)

    def solve(self) -> set[Target]:
        pending: dict[Target, list[Target]] = {}
        warmed: set[Target] = set()
        for s in self.index.summaries:
            for d in s.defs.values():
                target = (s.module, d.qual)
                if d.kind != "function" or target in self.construction:
                    continue
                rest, _built, _n = self.split(target)
                if not rest:
                    continue  # constructors only: construction decides
                single = self.single_slot(target)
                classes = self.reaching_classes(target) if single else self.warming_classes(target)
                if classes and all(
                    c in self.construction
                    or ((single or self.asks_same(c, target)) and self.runs_on(c, classes))
                    for c in rest
                ):
                    warmed.add(target)
                else:
                    pending[target] = rest
        changed = True
        while changed:
            changed = False
            for target, rest in pending.items():
                if target not in warmed and all(
                    c in warmed or c in self.construction for c in rest
                ):
                    warmed.add(target)
                    changed = True
        return warmed


def warmed_by_construction(
    index: ProjectIndex, construction: set[Target], per_call: set[Target]
) -> set[Target]:
    """Functions whose first call set-up makes (see the module doc)."""
    return _Warming(index, construction, per_call).solve()
