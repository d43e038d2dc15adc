"""Regions the project opens for itself, over the index (``summary_regions.py`` records
the facts): which project context managers enter inference mode (a ``@contextmanager``
generator that yields inside ``inference_mode()`` or inside another such context
manager, a function that returns ``torch.inference_mode()``, a class whose
``__enter__`` enters it), what mode each ``with cm():`` block and ``@cm()`` decorator
therefore runs in, and the edges of callables handed into a region
(``run(model_runner, forward_fn)`` where ``run`` calls ``forward_fn()`` inside one):
the callable is called from there, in that region's mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.kinds import CM_REGION_PREFIX, MAYBE_REGION, MODE_OFF_REGIONS

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, Target

#: How strongly a region arms what it calls, for joining regions: a known mode off
#: (a guard) is kept apart by the callers, not ranked here.
_RANK = {"inference": 3, MAYBE_REGION: 2, "guarded": 1, "": 0}


def entered_mode(modes: list[str]) -> str:
    """The mode a context manager enters, from the mode at each of its ``yield``s (or
    the mode objects it returns): ``inference`` when every one is, ``maybe`` when
    some are, ``guarded`` when every one turns it off, else ""."""
    if not modes:
        return ""
    if all(m == "inference" for m in modes):
        return "inference"
    if any(m in ("inference", MAYBE_REGION) for m in modes):
        return MAYBE_REGION
    if all(m in MODE_OFF_REGIONS for m in modes):
        return "guarded"
    return ""


def _note(cm: str, param: str, by: str) -> str:
    """How a callable handed to a function comes to run in its region, for reach's
    path: ``via `cm`, calls `fn` in `run```."""
    parts = [f"via `{cm}`"] if cm else []
    parts.append(f"calls `{param}`" + (f" in `{by}`" if by else ""))
    return ", ".join(parts)


class RegionFinder:
    """The regions part of :class:`imlint.project.ProjectIndex` (a mixin)."""

    modules: dict[str, FileSummary]
    summaries: list[FileSummary]
    callers: dict[Target, list[tuple[Target, str]]]

    if TYPE_CHECKING:

        def resolve(self, s: FileSummary, d: DefSummary, text: str) -> Target | None: ...

        def resolve_scoped(self, s: FileSummary, d: DefSummary, text: str) -> Target | None: ...

        def _kind(self, target: Target) -> str: ...

        def _method(self, module: str, cls: str, name: str, depth: int = 0) -> Target | None: ...

        def param_name(self, target: Target, key: str) -> str | None: ...

    def _init_regions(self) -> None:
        self._cm_modes: dict[Target, str] = {}
        self._cm_busy: set[Target] = set()
        #: function -> (caller, region) of calls only reach follows, kept apart from
        #: ``callers`` (set-up and lifetimes read those): a callable called by the
        #: function it is handed to, a nested function called where it is in scope,
        #: ``self.m`` in a closure
        self.handed_callers: dict[Target, list[tuple[Target, str]]] = {}
        #: (caller, callee) -> how the edge's region came about, for reach's path:
        #: ``via <context manager>`` or ``calls <parameter>``
        self.edge_notes: dict[tuple[Target, Target], str] = {}

    def cm_mode(self, target: Target) -> str:
        """The mode ``with target(...):`` runs its body in: ``inference``, ``maybe``,
        ``guarded`` or ""."""
        if self._kind(target) == "class":
            enter = self._method(target[0], target[1], "__enter__")
            enter = enter or self._method(target[0], target[1], "__aenter__")
            if enter is None:
                return ""
            target = enter
        known = self._cm_modes.get(target)
        if known is not None:
            return known
        if target in self._cm_busy:
            return ""  # a cycle: nothing known yet
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if s is None or d is None or not d.enters:
            self._cm_modes[target] = ""
            return ""
        self._cm_busy.add(target)
        mode = entered_mode([self.region_mode(s, d, r) for r in d.enters])
        self._cm_busy.discard(target)
        self._cm_modes[target] = mode
        return mode

    def region_mode(self, s: FileSummary, d: DefSummary, region: str) -> str:
        """A recorded region with its ``cm:`` context managers resolved: the strongest
        mode any of them enters."""
        if not region.startswith(CM_REGION_PREFIX):
            return region
        best = ""
        for text in region[len(CM_REGION_PREFIX) :].split("|"):
            target = self.resolve(s, d, text)
            mode = self.cm_mode(target) if target is not None else ""
            if _RANK[mode] > _RANK[best]:
                best = mode
        return best

    def region_via(self, s: FileSummary, d: DefSummary, region: str) -> str:
        """The context manager a ``cm:`` region's mode comes from, for messages."""
        mode = self.region_mode(s, d, region)
        for text in region[len(CM_REGION_PREFIX) :].split("|"):
            target = self.resolve(s, d, text)
            if target is not None and self.cm_mode(target) == mode:
                return text
        return ""

    def def_mode(self, s: FileSummary, d: DefSummary) -> str:
        """The mode a function's decorators run its body in."""
        return self.region_mode(s, d, d.mode)

    def call_region(self, s: FileSummary, d: DefSummary, region: str) -> str:
        """The mode a call in ``d`` runs its callee in: its ``with`` blocks', else the
        function's own decorators'."""
        return self.region_mode(s, d, region) or self.def_mode(s, d)

    # ---- callables handed into regions

    def _called_params(self) -> dict[Target, dict[str, set[tuple[str, str, str]]]]:
        """Function -> parameter -> (region, the context manager the region comes from,
        the function that calls it) where the function calls that parameter: itself
        (``forward_fn()``: that last is "") or by handing it on to a function that
        does (named then, the first one)."""
        called: dict[Target, dict[str, set[tuple[str, str, str]]]] = {}
        for s in self.summaries:
            for d in s.defs.values():
                if d.kind != "function":
                    continue
                names = set(d.params) | set(d.keywords)
                for text, region in d.calls:
                    if text in names:
                        mode = self.call_region(s, d, region)
                        cm = self.region_via(s, d, region) if self.region_mode(s, d, region) else ""
                        params = called.setdefault((s.module, d.qual), {})
                        params.setdefault(text, set()).add((mode, cm, ""))
        changed = True
        rounds = 0
        while changed and rounds < 8:  # a chain of hand-overs a few deep
            changed, rounds = False, rounds + 1
            for s in self.summaries:
                for d in s.defs.values():
                    for text, key, param in d.passes:
                        if param not in d.params and param not in d.keywords:
                            continue
                        target = self.resolve(s, d, text.removeprefix("[]"))
                        if target is None or target not in called:
                            continue
                        name = self.param_name(target, key)
                        if name is None or name not in called[target]:
                            continue
                        short = target[1].rsplit(".", 1)[-1]
                        handed = {(m, cm, by or short) for m, cm, by in called[target][name]}
                        mine = called.setdefault((s.module, d.qual), {}).setdefault(param, set())
                        if not handed <= mine:
                            mine |= handed
                            changed = True
        return called

    def _callable_edges(self) -> None:
        """Edges from a function to the callables its callers hand it, in the regions
        it calls them in (``handed_callers``)."""
        called = self._called_params()
        if not called:
            return
        for s in self.summaries:
            for d in s.defs.values():
                for text, key, handed in d.callables:
                    f = self.resolve_scoped(s, d, text)
                    if f is not None and self._kind(f) == "class":
                        f = self._method(f[0], f[1], "__init__")
                    params = called.get(f) if f is not None else None
                    name = self.param_name(f, key) if f is not None and params else None
                    if f is None or params is None or name not in params:
                        continue
                    target = self.resolve_scoped(s, d, handed)
                    if target is None or self._kind(target) != "function":
                        continue
                    notes = []
                    for region, cm, by in sorted(params[name]):
                        self.handed_callers.setdefault(target, []).append((f, region))
                        notes.append(_note(cm, name, by))
                    note = notes[0]
                    self.edge_notes[(f, target)] = note
