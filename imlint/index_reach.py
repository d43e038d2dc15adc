"""Reach: whether an inference-mode region can call a function (a shortest call path
for the message), whether every call path passes through ``inference_mode(False)``
(then the site is not reported), and which functions run only inside inference mode
(their torch writes cannot raise), over the project index's call graph."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from imlint.kinds import (
    ARMING_REGIONS,
    MAYBE_REGION,
    MODE_OFF_REGIONS,
    MODULE_SCOPE,
    THREAD_REGION,
)

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, Target


@dataclass
class Reach:
    """Whether an inference-mode region can reach a function, and how."""

    armed: bool
    path: list[str]  # region owner first, the site's function last
    unresolved: int  # unresolved calls that might lead to the function, when no path
    #: ``exact``: every call on the path is resolved; ``dispatch``: some are calls by
    #: name (``index_dispatch.py``), at most ``candidates`` methods each; "": no path
    tier: str = ""
    candidates: int = 0
    #: other regions that reach the function in the same tier
    others: list[str] = field(default_factory=list)

    def text(self) -> str:
        if self.tier == "dispatch":
            how = f"through calls by name of at most {self.candidates} candidates"
            if not self.candidates:
                how = "through a call of a base class's method that an override answers"
            text = f"may be armed, {how}: " + " -> ".join(self.path)
            if self.others:
                shown = ", ".join(self.others[:3])
                more = f" and {len(self.others) - 3} more" if len(self.others) > 3 else ""
                text += f" (also from {shown}{more})"
            return text
        if self.armed:
            return " -> ".join(self.path)
        return f"no path found ({self.unresolved} unresolved calls)"


def _label(region: str) -> str:
    return "inference_mode on some paths" if region == MAYBE_REGION else "inference_mode"


class ReachFinder:
    """The reach part of :class:`imlint.project.ProjectIndex` (a mixin: the index owns
    the call graph below)."""

    files: dict[str, FileSummary]
    modules: dict[str, FileSummary]
    #: callee -> (caller, the mode of the region the call is in)
    callers: dict[Target, list[tuple[Target, str]]]
    handed_callers: dict[Target, list[tuple[Target, str]]]
    #: (caller, callee) -> how the edge's region came about (``index_regions.py``)
    edge_notes: dict[tuple[Target, Target], str]
    #: last name -> the call sites by that name the index cannot resolve
    unresolved_sites: dict[str, list[tuple[Target, str]]]

    summaries: list[FileSummary]

    if TYPE_CHECKING:

        def unresolved_count(self, qual: str) -> int: ...

        def callers_of(self, target: Target) -> list[tuple[Target, str]]: ...

        def overridden(self, target: Target) -> list[Target]: ...

        def may_run_override(self, caller: Target, base: Target, override: Target) -> bool: ...

        def def_mode(self, s: FileSummary, d: DefSummary) -> str: ...

        def dispatch_reach(self, target: Target) -> tuple[list[str], int, list[str]] | None: ...

    def _init_reach(self) -> None:
        self._reach_callers: dict[Target, list[tuple[Target, str]]] = {}

    def reach_callers(self, target: Target) -> list[tuple[Target, str]]:
        """The calls reach follows to ``target``: its callers, the functions that call
        it when it is handed to them (``index_regions.py``) or through a declared class
        (``index_types.py``), and, for a method, the virtual calls of the base class
        methods it overrides (Python runs the override there, when the receiver can be
        of its class: ``TypeFinder.may_run_override``)."""
        known = self._reach_callers.get(target)
        if known is not None:
            return known
        found = [*self.callers.get(target, ()), *self.handed_callers.get(target, ())]
        direct = {caller for caller, _ in found}
        seen = {target}
        pending = list(self.overridden(target))
        while pending:
            over = pending.pop()
            if over in seen:
                continue
            seen.add(over)
            for caller, region in (*self.callers.get(over, ()), *self.handed_callers.get(over, ())):
                if not self.may_run_override(caller, over, target):
                    continue
                found.append((caller, region))
                if caller not in direct:
                    self.edge_notes.setdefault((caller, target), f"calls `{over[1]}`")
            pending.extend(self.overridden(over))
        self._reach_callers[target] = found
        return found

    def target_of(self, path: str, function: str) -> Target | None:
        s = self.files.get(path)
        if s is None or function not in s.defs:
            return None
        return (s.module, function)

    def reach(self, target: Target, limit: int = 20000) -> Reach:
        """A shortest call path from an inference-mode region to ``target``."""
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if s is not None and d is not None and self.def_mode(s, d) in ARMING_REGIONS:
            return Reach(True, [f"{target[1]} [{_label(self.def_mode(s, d))}]"], 0, "exact")
        parent: dict[Target, Target | None] = {target: None}
        queue = deque([target])
        unresolved = 0
        found: Target | None = None
        found_region = ""
        while queue and found is None and len(parent) < limit:
            node = queue.popleft()
            unresolved += self.unresolved_count(node[1])
            for caller, region in self.reach_callers(node):
                if region in MODE_OFF_REGIONS or caller in parent:
                    continue
                parent[caller] = node
                if region in ARMING_REGIONS:
                    found, found_region = caller, region
                    break
                queue.append(caller)
        if found is None:
            by_name = self.dispatch_reach(target)
            if by_name is not None:
                steps, candidates, others = by_name
                return Reach(False, steps, unresolved, "dispatch", candidates, others)
            return Reach(False, [], unresolved)
        path: list[str] = []
        cursor: Target | None = found
        while cursor is not None:
            label = cursor[1] if cursor[1] != MODULE_SCOPE else f"{cursor[0]} (module)"
            after = parent[cursor]
            note = self.edge_notes.get((cursor, after)) if after is not None else None
            mark = _label(found_region) if cursor == found else ""
            if note:
                joint = ", " if note.startswith("calls ") else " "
                mark = f"{mark}{joint}{note}" if mark else note
            path.append(label + (f" [{mark}]" if mark else ""))
            cursor = after
        return Reach(True, path, 0, "exact")

    def covered(self, target: Target) -> str | None:
        """Why every call path to ``target`` passes through ``inference_mode(False)``,
        or None. Calls the index cannot resolve to the function's name count against."""
        name = target[1].rsplit(".", 1)[-1]
        if self.unresolved_sites.get(name):
            return None
        guards: list[str] = []
        seen: set[Target] = {target}
        stack = [target]
        while stack:
            node = stack.pop()
            callers = self.callers.get(node)
            if not callers:
                return None  # an entry point: nothing is known about its mode
            for caller, region in callers:
                if region in MODE_OFF_REGIONS:
                    path = self.modules[caller[0]].path
                    how = " (starts it as a thread)" if region == THREAD_REGION else ""
                    guards.append(f"`{caller[1]}` ({path}){how}")
                    continue
                if self.unresolved_count(caller[1]) or caller[1] == MODULE_SCOPE:
                    return None
                if caller not in seen:
                    seen.add(caller)
                    stack.append(caller)
        if not guards:
            return None
        if any(g.endswith("(starts it as a thread)") for g in guards):
            return (
                "every call path runs with inference mode off (`inference_mode(False)`, or "
                "a new thread, where it is off) in " + ", ".join(sorted(set(guards)))
            )
        return "every call path passes through `inference_mode(False)` in " + ", ".join(
            sorted(set(guards))
        )

    def confined_functions(self) -> set[Target]:
        """Functions every call path to which runs inside inference mode: decorated with
        it, or called only from ``inference_mode()`` regions (a ``with`` block, a
        decorated caller) and from functions so confined. An entry point (nothing in the
        project calls it: code outside may), a call the index cannot resolve by the
        function's name, module-level code, a thread or ``inference_mode(False)`` on
        the way leaves it open, and every function it calls outside a region too."""
        decorated: set[Target] = set()
        everything: list[Target] = []
        for s in self.summaries:
            for d in s.defs.values():
                if d.kind == "function":
                    target = (s.module, d.qual)
                    everything.append(target)
                    if self.def_mode(s, d) == "inference":
                        decorated.add(target)
        calls: dict[Target, list[Target]] = {}  # caller -> callees, outside a region
        for callee in everything:
            # ``callers_of``: an override runs where its base's method is called
            for caller, region in self.callers_of(callee):
                if region != "inference":
                    calls.setdefault(caller, []).append(callee)
        pending = [t for t in everything if t not in decorated and self._opens(t)]
        open_ = set(pending)
        while pending:
            for callee in calls.get(pending.pop(), ()):
                if callee not in open_ and callee not in decorated:
                    open_.add(callee)
                    pending.append(callee)
        return {t for t in everything if t not in open_}

    def _opens(self, target: Target) -> bool:
        """Whether a call path to ``target`` can start outside inference mode right at
        its callers (what :meth:`confined_functions` spreads to callees)."""
        callers = self.callers_of(target)
        if not callers or self.unresolved_sites.get(target[1].rsplit(".", 1)[-1]):
            return True
        return any(
            region in MODE_OFF_REGIONS or caller[1] == MODULE_SCOPE for caller, region in callers
        )
