"""Reach: whether an inference-mode region can call a function (a shortest call path
for the message), whether every call path passes through ``inference_mode(False)``
(then the site is not reported), and which functions run only inside inference mode
(their torch writes cannot raise), over the project index's call graph."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from imlint.kinds import MODE_OFF_REGIONS, MODULE_SCOPE, THREAD_REGION

if TYPE_CHECKING:
    from imlint.project import FileSummary, Target


@dataclass
class Reach:
    """Whether an inference-mode region can reach a function, and how."""

    armed: bool
    path: list[str]  # region owner first, the site's function last
    unresolved: int  # unresolved calls that might lead to the function, when no path

    def text(self) -> str:
        if self.armed:
            return " -> ".join(self.path)
        return f"no path found ({self.unresolved} unresolved calls)"


class ReachFinder:
    """The reach part of :class:`imlint.project.ProjectIndex` (a mixin: the index owns
    the call graph below)."""

    files: dict[str, FileSummary]
    modules: dict[str, FileSummary]
    #: callee -> (caller, the mode of the region the call is in)
    callers: dict[Target, list[tuple[Target, str]]]
    #: last name -> the call sites by that name the index cannot resolve
    unresolved_sites: dict[str, list[tuple[Target, str]]]

    summaries: list[FileSummary]

    if TYPE_CHECKING:

        def unresolved_count(self, qual: str) -> int: ...

        def callers_of(self, target: Target) -> list[tuple[Target, str]]: ...

    def target_of(self, path: str, function: str) -> Target | None:
        s = self.files.get(path)
        if s is None or function not in s.defs:
            return None
        return (s.module, function)

    def reach(self, target: Target, limit: int = 20000) -> Reach:
        """A shortest call path from an inference-mode region to ``target``."""
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if d is not None and d.mode == "inference":
            return Reach(True, [f"{target[1]} [inference_mode]"], 0)
        parent: dict[Target, Target | None] = {target: None}
        queue = deque([target])
        unresolved = 0
        found: Target | None = None
        while queue and found is None and len(parent) < limit:
            node = queue.popleft()
            unresolved += self.unresolved_count(node[1])
            for caller, region in self.callers.get(node, ()):
                if region in MODE_OFF_REGIONS or caller in parent:
                    continue
                parent[caller] = node
                if region == "inference":
                    found = caller
                    break
                queue.append(caller)
        if found is None:
            return Reach(False, [], unresolved)
        path: list[str] = []
        cursor: Target | None = found
        while cursor is not None:
            label = cursor[1] if cursor[1] != MODULE_SCOPE else f"{cursor[0]} (module)"
            path.append(label + (" [inference_mode]" if cursor == found else ""))
            cursor = parent[cursor]
        return Reach(True, path, 0)

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
                    if d.mode == "inference":
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
