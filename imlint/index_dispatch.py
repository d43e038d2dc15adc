"""Reach's weaker tier: paths through calls the index cannot resolve exactly
(``self.model_runner.model.forward(...)``, ``backend.plan(...)`` on an object whose
class the source does not name). Such a call may run any project method of that name
its arguments fit; when there are at most ``bound`` such candidates, the call is
followed to each, and a site reached only that way *may be armed*, via the number of
candidates on the weakest call of its path. Exact paths (``index_reach.py``) are
always tried first and never mixed with these.

One breadth-first walk forward from every inference-mode region, over the exact call
graph (with calls through a base class's method reaching its overrides) and these
calls by name, finds the shortest such path to every function at once."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from imlint.kinds import ARMING_REGIONS, MODE_OFF_REGIONS, MODULE_SCOPE

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, Target

#: Builtins that make plain containers and values, never project objects.
_BUILTIN_MAKERS = frozenset(
    {"set", "dict", "list", "tuple", "frozenset", "str", "bytes", "bytearray", "int", "float",
     "object", "open", "iter", "range", "enumerate", "zip", "map", "filter", "sorted", "super"}
)  # fmt: skip
#: How many functions a walk back from a site visits at most.
_LIMIT = 20000
#: The most methods a call by name may reach for the walk to follow it (measured in
#: ``benchmarks/bench_reach.py``: of 80 reviewed paths, 18 of 21 with at most 2
#: candidates per call were real, 12 of 29 with 3 to 8; see the README's reach section).
DISPATCH_BOUND = 2


class DispatchFinder:
    """The dispatch part of :class:`imlint.project.ProjectIndex` (a mixin)."""

    modules: dict[str, FileSummary]
    summaries: list[FileSummary]
    callers: dict[Target, list[tuple[Target, str]]]
    #: (caller, call text) of calls by name the index cannot resolve -> their regions
    unresolved_modes: dict[tuple[Target, str], set[str]]
    dispatch_bound: int
    edge_notes: dict[tuple[Target, Target], str]
    handed_callers: dict[Target, list[tuple[Target, str]]]

    if TYPE_CHECKING:

        def reach_callers(self, target: Target) -> list[tuple[Target, str]]: ...

        def accepts(self, target: Target, d: DefSummary, text: str) -> bool: ...

        def def_mode(self, s: FileSummary, d: DefSummary) -> str: ...

        def is_external(self, s: FileSummary, text: str) -> bool: ...

    def _init_dispatch(self) -> None:
        self.dispatch_bound = DISPATCH_BOUND
        self.unresolved_modes = {}
        self._graph: dict[Target, list[tuple[Target, str, str, int]]] | None = None
        self._by_name_cache: dict[str, list[Target]] | None = None

    def _functions(self) -> list[tuple[FileSummary, DefSummary]]:
        return [
            (s, d)
            for s in self.summaries
            if not s.library
            for d in s.defs.values()
            if d.kind == "function"
        ]

    def dispatch_candidates(self, caller: Target, text: str, limit: int) -> list[Target]:
        """The project functions a call by name the index cannot resolve may run (once
        more than ``limit`` are found, the rest are not looked for)."""
        name = text.rsplit(".", 1)[-1].lstrip("?")
        s = self.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        if s is None or d is None or not name or self._outside_receiver(s, d, text):
            return []
        if "." not in text and (text in d.params or text in d.keywords):
            return []  # calling what was handed in: the callable edges cover that
        methods_only = "." in text  # ``x.m(...)``: a method (or a module's function)
        found: list[Target] = []
        for t in self._by_name().get(name, ()):
            if self._nested(t):
                continue  # a nested function is called only where it is in scope
            if (not methods_only or self._is_method(t)) and self.accepts(t, d, text):
                found.append(t)
                if len(found) > limit:
                    break  # too many to follow: how many more does not matter
        return found

    def _outside_receiver(self, s: FileSummary, d: DefSummary, text: str) -> bool:
        """Whether the receiver of ``x.m(...)`` is a local made by a builtin or another
        library (``names = set()``; ``names.update(...)``) or the ``**kwargs`` dict:
        never a project object."""
        head, dot, _ = text.partition(".")
        if not dot or text.count(".") > 1:
            return False
        if d.star & 2 and d.keywords and head == d.keywords[-1]:
            return True
        maker = d.types.get(head)
        if maker is None or maker == "self":
            return False
        return maker.split(".", 1)[0] in _BUILTIN_MAKERS or self.is_external(s, maker)

    def _nested(self, target: Target) -> bool:
        s = self.modules.get(target[0])
        outer = s.defs.get(target[1].rpartition(".")[0]) if s is not None else None
        return outer is not None and outer.kind == "function"

    def _is_method(self, target: Target) -> bool:
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        return d is not None and bool(d.cls)

    def _by_name(self) -> dict[str, list[Target]]:
        found = self._by_name_cache
        if found is None:
            found = {}
            for s, d in self._functions():
                found.setdefault(d.qual.rsplit(".", 1)[-1], []).append((s.module, d.qual))
            self._by_name_cache = found
        return found

    def _dispatch_graph(self) -> dict[Target, list[tuple[Target, str, str, int]]]:
        """Callee -> (caller, region, call by name or "", candidates): the exact calls
        (a call of a base class's method reaching its overrides too) and every call by
        name with at most ``dispatch_bound`` candidates."""
        if self._graph is not None:
            return self._graph
        graph: dict[Target, list[tuple[Target, str, str, int]]] = {}
        for s, d in self._functions():
            target = (s.module, d.qual)
            for caller, region in self.reach_callers(target):
                graph.setdefault(target, []).append((caller, region, "", 0))
        for (caller, text), regions in self.unresolved_modes.items():
            found = self.dispatch_candidates(caller, text, self.dispatch_bound)
            if len(found) > self.dispatch_bound:
                continue
            for target in found:
                for region in sorted(regions):
                    graph.setdefault(target, []).append((caller, region, text, len(found)))
        self._graph = graph
        return graph

    def dispatch_reach(self, target: Target) -> tuple[list[str], int, list[str]] | None:
        """The shortest path to ``target`` from an inference-mode region whose calls by
        name have the fewest candidates (the bound is raised 1, 2, 4, ... until a path
        appears), that number, and every region that reaches it at that bound."""
        bound = 1
        while True:
            found = self._walk_back(target, min(bound, self.dispatch_bound))
            if found is not None or bound >= self.dispatch_bound:
                return found
            bound *= 2

    def _walk_back(self, target: Target, bound: int) -> tuple[list[str], int, list[str]] | None:
        graph = self._dispatch_graph()
        #: caller -> (the callee it leads on to, call by name or "", candidates)
        parent: dict[Target, tuple[Target, str, int] | None] = {target: None}
        #: (region owner, region, callee, call by name or "", candidates)
        starts: list[tuple[Target, str, Target | None, str, int]] = []
        queue = deque([target])
        while queue and len(parent) < _LIMIT:
            node = queue.popleft()
            s = self.modules.get(node[0])
            d = s.defs.get(node[1]) if s is not None else None
            if s is not None and d is not None and self.def_mode(s, d) in ARMING_REGIONS:
                starts.append((node, self.def_mode(s, d), None, "", 0))
            for caller, region, text, n in graph.get(node, ()):
                if region in MODE_OFF_REGIONS or n > bound:
                    continue
                if region in ARMING_REGIONS:
                    starts.append((caller, region, node, text, n))
                elif caller not in parent:
                    parent[caller] = (node, text, n)
                    queue.append(caller)
        if not starts:
            return None
        owner, region, first, text, n = starts[0]
        note = self.edge_notes.get((owner, first)) if first is not None else None
        path = [f"{_name(owner)} [{_mark(region) + (f' {note}' if note else '')}]"]
        worst = 0
        step: tuple[Target, str, int] | None = (first, text, n) if first is not None else None
        while step is not None:
            callee, text, n = step
            label = _name(callee)
            if text:
                worst = max(worst, n)
                label += f" (by name: `{text}`, 1 of {n})"
            path.append(label)
            step = parent[callee]
        others = sorted({_name(o) for o, *_ in starts[1:] if o != owner})
        return path, worst, others


def _name(target: Target) -> str:
    return target[1] if target[1] != MODULE_SCOPE else f"{target[0]} (module)"


def _mark(region: str) -> str:
    return "inference_mode" if region == "inference" else "inference_mode on some paths"
