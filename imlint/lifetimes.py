"""Lifetimes, project-wide: which functions run only during construction, and which
classes have instances that live for one call.

Both are read from code, never from names:

- **Construction.** A function whose every resolved caller is a constructor
  (``__init__``, ``__post_init__``, ``__new__``) or, transitively, another such
  function, and that no call the index cannot resolve could reach by name, runs while
  an object is built: what it stores is built eagerly, not on first use (IM004's
  territory, not a lazy site).
- **Per-call objects.** Every place that makes an instance of a class (a call of the
  class, ``cls(...)`` in its class methods, a subclass's) is judged by what happens to
  the result there. The instance is *long-lived* when the result is kept in storage
  that outlives the call (an attribute, a global, a container entry), when it is made
  at module level, in a constructor or construction, in a cached function, or in a
  function nothing in the project calls (an entry point: it may run once for the
  whole process); a result that is returned is judged at the callers of the function
  that returns it. Otherwise the instance is made per call: used, held in a local,
  passed on. A class with at least one place that makes it, all per call, has per-call
  instances: what its methods store on ``self`` dies with the call that made it (a
  memo on a per-step batch). A class the project never instantiates is not judged
  (its instances may come from anywhere).
- **Per-call parameters.** A parameter that every resolved caller hands a per-call
  object (an instance of a per-call class made there, or a per-call parameter of the
  caller) holds a per-call object: what the function stores on it dies with the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.kinds import CONSTRUCTORS

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target


def _is_constructor(qual: str) -> bool:
    return "." in qual and qual.rsplit(".", 1)[-1] in CONSTRUCTORS


def construction_only(index: ProjectIndex) -> set[Target]:
    """Functions reached only from constructors, to a fixed point."""
    found: set[Target] = set()
    callers_of = {
        (s.module, d.qual): index.callers_of((s.module, d.qual))
        for s in index.summaries
        for d in s.defs.values()
        if d.kind == "function"
    }
    changed = True
    while changed:
        changed = False
        for target, callers in callers_of.items():
            if target in found or not callers or _is_constructor(target[1]):
                continue
            if index.unresolved.get(target[1].rsplit(".", 1)[-1], 0):
                continue
            if all(_is_constructor(c[1]) or c in found for c, _region in callers):
                found.add(target)
                changed = True
    return found


class Lifetimes:
    """Per-call classes of a project (see the module doc)."""

    def __init__(self, index: ProjectIndex, construction: set[Target]) -> None:
        self.index = index
        self.construction = construction
        self._returned: dict[Target, bool] = {}
        self.per_call: set[Target] = self._per_call_classes()

    def _long_context(self, s: FileSummary, d: DefSummary) -> bool:
        """Whether what ``d`` makes lives as long as the process may: module level,
        construction, a cached function, an entry point."""
        me = (s.module, d.qual)
        if d.kind == "module" or d.cached or _is_constructor(d.qual) or me in self.construction:
            return True
        name = d.qual.rsplit(".", 1)[-1]
        return not self.index.callers_of(me) and not self.index.unresolved.get(name, 0)

    def _made_long(self, s: FileSummary, d: DefSummary, text: str) -> bool:
        """Whether the result of the call ``text`` in ``d`` may outlive the call."""
        if self._long_context(s, d):
            return True
        for made, how in d.results:
            if made != text:
                continue
            if how == "kept":
                return True
            if how == "returned" and self._returns_long((s.module, d.qual)):
                return True
            if how.startswith("handed:") and self._owned(s, d, how):
                return True
        return False

    def _owned(self, s: FileSummary, d: DefSummary, how: str) -> bool:
        """Whether an argument is kept by a constructor it is handed to (ownership), or
        handed to code outside the project (anything may happen to it)."""
        _, callee, key = how.split(":", 2)
        index = self.index
        target = index.resolve(s, d, callee)
        if target is None:
            return False
        if index.kind_of(target) == "class":
            target = index.method_of(target, "__init__")
            if target is None:
                return False
        if not _is_constructor(target[1]):
            return False
        name = index.param_name(target, key)
        ts = index.modules.get(target[0])
        td = ts.defs.get(target[1]) if ts is not None else None
        return td is not None and name is not None and name in td.pkept

    def _returns_long(self, target: Target) -> bool:
        """Whether a function's result is kept by any caller (transitively)."""
        known = self._returned.get(target)
        if known is not None:
            return known
        self._returned[target] = False  # recursion guard
        index = self.index
        callers = index.callers_of(target)
        name = target[1].rsplit(".", 1)[-1]
        # Unresolved calls by name: the callers that keep the result may be among them;
        # no caller at all: an entry point, or called from outside.
        result = not callers or bool(index.unresolved.get(name, 0))
        for caller, _region in callers:
            cs = index.modules.get(caller[0])
            cd = cs.defs.get(caller[1]) if cs is not None else None
            if cd is None:
                continue
            for text, _r in cd.calls:
                if index.resolve(cs, cd, text) == target and self._made_long(cs, cd, text):  # type: ignore[arg-type]
                    result = True
                    break
            if result:
                break
        self._returned[target] = result
        return result

    def per_call_params(self) -> set[tuple[Target, str]]:
        """Parameters that are handed a per-call object by every caller: an instance of
        a per-call class made for the call (``run(Batch(...))``), or a parameter of the
        caller that is itself per-call, at every resolved call site. What a function
        stores on such a parameter (``batch.cache = ...``) dies with the call. A caller
        that hands anything else, or that the index does not see, keeps it unjudged.
        Judged on demand: for functions that allocate, and the callers they lead to."""
        index = self.index
        #: (callee, parameter) -> origins: ("param", caller, its parameter) or ("made", class)
        origins: dict[tuple[Target, str], list[tuple[str, Target | None, str]]] = {}
        complete: set[tuple[Target, str]] = set()  # every caller hands something seen
        pending = [
            (s.module, d.qual)
            for s in index.summaries
            for d in s.defs.values()
            if d.kind == "function" and d.params and (d.alloc_calls or d.allocs)
        ]
        visited: set[Target] = set()
        while pending:
            target = pending.pop()
            if target in visited:
                continue
            visited.add(target)
            callers = {c for c, _region in index.callers_of(target)}
            seen_from: dict[str, set[Target]] = {}
            for caller in callers:
                for param, origin in self._handed_to(caller, target):
                    origins.setdefault((target, param), []).append(origin)
                    seen_from.setdefault(param, set()).add(caller)
                    if origin[0] == "param" and origin[1] is not None:
                        pending.append(origin[1])
            complete |= {(target, p) for p, seen in seen_from.items() if seen >= callers}
        out: set[tuple[Target, str]] = set()
        changed = True
        while changed:
            changed = False
            for bound, handed in origins.items():
                if bound in out or bound not in complete:
                    continue
                if all(
                    (kind == "made" and who is not None)
                    or (kind == "param" and who is not None and (who, param) in out)
                    for kind, who, param in handed
                ):
                    out.add(bound)
                    changed = True
        return out

    def _handed_to(
        self, caller: Target, target: Target
    ) -> list[tuple[str, tuple[str, Target | None, str]]]:
        """(parameter of ``target``, origin) for what ``caller`` hands it: one of its own
        parameters, or the result of a call (an instance of a per-call class, else
        unjudged)."""
        index = self.index
        s = index.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        if s is None or d is None:
            return []
        out: list[tuple[str, tuple[str, Target | None, str]]] = []
        for text, key, param in d.passes:
            if index.resolve(s, d, text) == target:
                name = index.param_name(target, key)
                if name is not None:
                    out.append((name, ("param", caller, param)))
        for made, how in d.results:
            if not how.startswith("handed:"):
                continue
            _, callee, key = how.split(":", 2)
            if index.resolve(s, d, callee) != target:
                continue
            name = index.param_name(target, key)
            if name is None:
                continue
            cls = self._instantiated(s, d, made)
            out.append((name, ("made", cls if cls in self.per_call else None, "")))
        return out

    def _per_call_classes(self) -> set[Target]:
        index = self.index
        made: dict[Target, bool] = {}  # class -> some instance is long-lived
        for s in index.summaries:
            for d in s.defs.values():
                for text, _region in d.calls:
                    cls = self._instantiated(s, d, text)
                    if cls is None:
                        continue
                    made[cls] = made.get(cls, False) or self._made_long(s, d, text)
        # A class's methods run on its subclasses' instances too.
        long_classes = {c for c, long in made.items() if long}
        per_call: set[Target] = set()
        for cls in index.classes():
            family = index.subclasses(cls) | {cls}
            if family & long_classes or not family & made.keys():
                continue
            per_call.add(cls)
        return per_call

    def _instantiated(self, s: FileSummary, d: DefSummary, text: str) -> Target | None:
        """The class a call makes an instance of, if it makes one."""
        if text == "self" and d.cls:
            return (s.module, d.cls)  # ``cls(...)`` in a class method
        target = self.index.resolve(s, d, text)
        if target is not None and self.index.kind_of(target) == "class":
            return target
        return None
