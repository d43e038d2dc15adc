"""Per-file facts: what the project index says about one file, in the file's own call
texts (``FileFacts``), read by the LibCST model of that file (``imlint/model.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imlint.holders import Holders
    from imlint.lifetimes import Lifetimes
    from imlint.project import DefSummary, FileSummary, Target


@dataclass(frozen=True)
class FileFacts:
    """What the project index says about one file, in the file's own call texts.

    Keys are call texts as the model spells them: ``make_buf``, ``mod.Wrapper``, and
    ``Class|self.method`` for calls on ``self`` inside ``Class``.
    """

    #: call text -> (the chain that allocates, whether the result is an object, what a
    #: returned tensor holds when made: ``vocabulary.content_of``, or ``unknown``)
    allocators: dict[str, tuple[str, bool, str]] = field(default_factory=dict)
    #: call text -> (factory position, factory parameter, helper, where it stores)
    helpers: dict[str, tuple[int, str, str, str]] = field(default_factory=dict)
    #: function qualname -> why every caller guards it
    covered: dict[str, str] = field(default_factory=dict)
    #: whether the file makes any call that could be an allocation (see FileSummary)
    may_allocate: bool = True
    #: call text -> ((parameter position or name, write kind), ...): what project code
    #: writes of the tensors handed to it (``imlint/writes.py`` has the kinds)
    param_writes: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: callables that may write the tensors handed to them, from a kernel: local names
    #: this file imports from outside the project (``kinds.external_writer``), and names
    #: bound to a callable made at run time (``ProjectIndex.opaque``), in a function as
    #: ``<function>|<name>``; call texts of a library object's methods
    #: (``ProjectIndex.foreign``)
    external: frozenset[str] = frozenset()
    #: functions of this file reached only from constructors: construction, not first use
    construction: frozenset[str] = frozenset()
    #: functions of this file that set-up calls before the code that runs later (see
    #: ``lifetimes.warmed_by_construction``): their cache is filled at set-up
    warmed: frozenset[str] = frozenset()
    #: classes of this file whose instances live for one call (see ``lifetimes.py``)
    per_call_classes: frozenset[str] = frozenset()
    #: call text -> (write kind, which method writes which tensor) for a constructor
    #: whose object's tensors its own methods write (``plan()`` doing ``out=self.x``)
    object_writes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: function of this file -> ((key, write kind, which caller), ...) when callers
    #: write what it returns (a getter of a buffer); key: the entry of a returned dict
    #: they write (``get()["out"]``), "" for the whole result
    returned_writes: dict[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    #: ``<function>|<parameter>`` of this file's functions whose every caller hands a
    #: per-call object there (see ``Lifetimes.per_call_params``)
    per_call_params: frozenset[str] = frozenset()
    #: ``<function>|<parameter>`` of this file's functions that production code calls
    #: but no caller hands a long-lived object (see ``imlint/holders.py``)
    unheld_params: frozenset[str] = frozenset()
    #: ``<class name>|<attribute>`` of this file's classes that code other than
    #: construction replaces unconditionally (see ``Holders.replaced``)
    replaced_attrs: frozenset[str] = frozenset()
    #: functions of this file that run only inside inference mode, by their call paths
    #: (``ReachFinder.confined_functions``): their torch writes cannot raise
    confined: frozenset[str] = frozenset()
    #: call texts of project functions that return a container each call builds and
    #: keeps nowhere (``DefSummary.fresh``): what callers store in it is theirs
    fresh_results: frozenset[str] = frozenset()
    #: private module-level functions of this file that no code of the project refers
    #: to (``FactsFinder.unused``): they never run, so what they would keep is no site
    unused: frozenset[str] = frozenset()

    def needs_model(self) -> bool:
        """Whether the file can hold a site at all: else LibCST need not see it."""
        return self.may_allocate or bool(self.allocators or self.helpers)

    def to_data(self) -> tuple[object, ...]:
        return tuple(
            sorted(v) if isinstance(v, frozenset) else v
            for v in (getattr(self, f.name) for f in fields(self))
        )

    @classmethod
    def from_data(cls, data: tuple[object, ...]) -> FileFacts:
        values: list[object] = []
        for v in data:
            if isinstance(v, dict):
                v = {k: _tuples(x) for k, x in v.items()}
            elif isinstance(v, list):
                v = frozenset(v)
            values.append(v)
        return cls(*values)  # type: ignore[arg-type]

    def key(self) -> str:
        text = repr(tuple(sorted(v.items()) if isinstance(v, dict) else v for v in self.to_data()))
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _tuples(value: object) -> object:
    """JSON and marshal hand back lists where the facts hold tuples."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


NO_FACTS = FileFacts()


class FactsFinder:
    """The per-file facts part of :class:`imlint.project.ProjectIndex` (a mixin: the
    index owns the call graph, lifetimes and holders these read)."""

    files: dict[str, FileSummary]
    modules: dict[str, FileSummary]
    construction: set[Target]
    warmed: set[Target]
    confined: set[Target]
    lifetimes: Lifetimes
    holders: Holders
    per_call_params: set[tuple[Target, str]]
    param_writes: dict[Target, dict[str, str]]
    result_writes: dict[Target, dict[str, tuple[str, str]]]
    _grouped: dict[int, dict[str, set[str]]]
    _private_refs: frozenset[str] | None
    _templates: frozenset[str] | None
    _alloc: dict[Target, tuple[str, bool, str]]
    _helpers: dict[Target, tuple[int, str, str]]

    if TYPE_CHECKING:

        def resolve(self, s: FileSummary, d: DefSummary, text: str) -> Target | None: ...

        def opaque(self, s: FileSummary, d: DefSummary | None, text: str) -> bool: ...

        def foreign(self, s: FileSummary, text: str) -> bool: ...

        def _outside(self, qualified: str) -> bool: ...

        def covered(self, target: Target) -> str | None: ...

        def _kind(self, target: Target) -> str: ...

        def made_class(self, target: Target) -> Target | None: ...

        def constructor(self, cls: Target) -> Target | None: ...

        def _method(self, module: str, cls: str, name: str, depth: int = 0) -> Target | None: ...

        def _resolve_in(
            self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
        ) -> Target | None: ...

    def facts(self, path: str) -> FileFacts:
        s = self.files.get(path)
        if s is None or s.error is not None:
            return NO_FACTS
        allocators: dict[str, tuple[str, bool, str]] = {}
        helpers: dict[str, tuple[int, str, str, str]] = {}
        writes: dict[str, tuple[tuple[str, str], ...]] = {}
        object_writes: dict[str, tuple[str, str]] = {}
        opaque: set[str] = set()
        fresh: set[str] = set()
        for d in s.defs.values():
            for text, _region in d.calls:
                target = self.resolve(s, d, text)
                if target is None:
                    if self.opaque(s, d, text):
                        head = text.split(".", 1)[0]
                        if "()." in text:
                            opaque.add(text)  # ``load_module(cfg).run``
                        else:
                            local = head in d.types or head in d.params or head in d.keywords
                            opaque.add(f"{d.qual}|{head}" if local else head)
                    elif self.foreign(s, text):
                        opaque.add(text)  # ``buf.query_mask(mask)``: a library's method
                    continue
                key = _fact_key(d, text, s)
                if key is None:
                    continue
                callee = self.modules[target[0]].defs.get(target[1])
                if callee is not None and callee.fresh:
                    fresh.add(key)
                written = self._written(target)
                if written is not None:
                    writes[key] = written
                # ``cls.for_shape(n)``, ``make_workspace(n)``: the object it makes
                made = self.made_class(target) or target
                if target in self._alloc and self._kind(made) == "class":
                    by_methods = self._object_writes(made)
                    if by_methods is not None:
                        object_writes[key] = by_methods
                if target in self._alloc and target != (s.module, d.qual):
                    allocators[key] = self._alloc[target]
                helper = self._helpers.get(target)
                if helper is not None:
                    position, param, stored = helper
                    helpers[key] = (position, param, target[1], stored)
        if helpers:
            # A function of this file handed by name as a factory (``get(k, make)``).
            for d in s.defs.values():
                found = self._alloc.get((s.module, d.qual))
                if found is not None and d.kind == "function" and not d.cls:
                    allocators.setdefault(d.qual.rsplit(".", 1)[-1], found)
        allocating = _allocating(s, allocators.keys() | helpers.keys())
        covered: dict[str, str] = {}
        for qual in (d.qual for d in s.defs.values() if d.qual in allocating):
            why = self.covered((s.module, qual))
            if why is not None:
                covered[qual] = why
        returned_writes = {
            d.qual: tuple(
                (key, *how) for key, how in sorted(self.result_writes[(s.module, d.qual)].items())
            )
            for d in s.defs.values()
            if (s.module, d.qual) in self.result_writes
        }
        return FileFacts(
            allocators,
            helpers,
            covered,
            s.may_allocate,
            writes,
            frozenset(local for local, qualified in s.imports.items() if self._outside(qualified))
            | opaque,
            object_writes=object_writes,
            returned_writes=returned_writes,
            fresh_results=frozenset(fresh),
            **self._lifetime_facts(s, allocating),
        )

    def _lifetime_facts(self, s: FileSummary, allocating: set[str]) -> dict[str, frozenset[str]]:
        """What lifetimes and holders say of one file's functions and classes (the
        ``FileFacts`` fields of those names); ``allocating``: the functions that may
        hold a site (only their parameters are judged)."""
        module = s.module
        holding = _with_enclosing(s, allocating)
        return {
            "construction": frozenset(self._by_module(self.construction).get(module, ())),
            "warmed": frozenset(self._by_module(self.warmed).get(module, ())),
            "confined": frozenset(self._by_module(self.confined).get(module, ())),
            "per_call_classes": frozenset(self._by_module(self.lifetimes.per_call).get(module, ())),
            "per_call_params": frozenset(
                f"{target[1]}|{param}"
                for target, param in self.per_call_params
                if target[0] == module
            ),
            "unheld_params": frozenset(
                f"{d.qual}|{param}"
                for d in s.defs.values()
                if d.kind == "function" and d.params and d.qual in holding
                for param in self.holders.unheld((module, d.qual), d.params)
            ),
            "unused": self.unused(s),
            "replaced_attrs": frozenset(
                f"{d.qual.rsplit('.', 1)[-1]}|{attr}"
                for d in s.defs.values()
                if d.kind == "class"
                for attr in self.holders.replaced((module, d.qual))
            ),
        }

    def unused(self, s: FileSummary) -> frozenset[str]:
        """The private module-level functions of ``s`` (``_helper``, not ``__f__``) that
        no file of the project refers to by name, import or string: dead code, which
        no caller, callback table or ``__all__`` reaches. A public function nothing
        calls stays an entry point (code from outside may call it). An index of one file
        (a text checked alone, an editor's buffer) cannot see the modules that import
        it: nothing is taken as dead there. Every function of a code generator's
        template (``templates``) is dead."""
        if len(self.files) < 2:
            return frozenset()
        if s.module in self.templates():
            return frozenset(d.qual for d in s.defs.values() if d.kind == "function")
        refs = self._private_refs
        if refs is None:
            refs = self._private_refs = frozenset().union(
                *(f.private_refs for f in self.files.values())
            )
        return frozenset(
            d.qual
            for d in s.defs.values()
            if d.kind == "function"
            and not d.cls
            and "." not in d.qual
            and d.qual[:1] == "_"
            and not d.qual.endswith("__")
            and d.qual not in refs
        )

    def templates(self) -> frozenset[str]:
        """Modules a code generator reads to write others (another file's header says
        it was generated from them: transformers' ``modular_*.py``) that no module but
        such a template imports: their code never runs, the generated copy does, so
        what they would report is the generated file's finding twice."""
        if self._templates is not None:
            return self._templates
        candidates: set[str] = set()
        for g in {f.generated_from for f in self.files.values() if f.generated_from}:
            parts = g.split(".")
            # the longest tail of the path that names a module (a folder and a file at
            # least: ``src/pkg/modular_x.py`` is ``pkg.modular_x`` checked from ``src``)
            for n in range(len(parts) - 1):
                found = self.modules.get(".".join(parts[n:]))
                if found is not None:
                    candidates.add(found.module)
                    break
        importers: dict[str, set[str]] = {m: set() for m in candidates}
        for f in self.files.values():
            for qualified in f.imports.values():
                parts = qualified.split(".")
                for n in range(1, len(parts) + 1):
                    found = self.modules.get(".".join(parts[:n]))
                    if found is not None and found.module in importers:
                        importers[found.module].add(f.module)
        while True:
            kept = {m for m in candidates if importers[m] <= candidates}
            if kept == candidates:
                break
            candidates = kept
        self._templates = frozenset(candidates)
        return self._templates

    def _by_module(self, targets: set[Target]) -> dict[str, set[str]]:
        """``targets`` grouped by module (computed once per set)."""
        key = id(targets)
        found = self._grouped.get(key)
        if found is None:
            found = self._grouped[key] = {}
            for module, qual in targets:
                found.setdefault(module, set()).add(qual)
        return found

    def instance_methods(self, cls: Target) -> list[tuple[str, DefSummary]]:
        """The methods an instance of ``cls`` has: the class's own and its bases'
        (up to 16 classes), as (module, summary)."""
        family = [cls]
        i = 0
        while i < len(family) and i < 16:
            s = self.modules.get(family[i][0])
            d = s.defs.get(family[i][1]) if s is not None else None
            for base in d.bases if s is not None and d is not None else ():
                b = self._resolve_in(s, None, base)  # type: ignore[arg-type]
                if b is not None and b not in family and self._kind(b) == "class":
                    family.append(b)
            i += 1
        return [
            (s.module, d)
            for m, q in family
            if (s := self.modules.get(m)) is not None
            for d in s.defs.values()
            if d.cls == q and d.kind == "function"
        ]

    def _object_writes(self, cls: Target) -> tuple[str, str] | None:
        """How the methods of a class (and its bases) write the tensors its instances
        keep on ``self``: (kind, which method writes which attribute), strongest first."""
        methods = self.instance_methods(cls)
        kept = {what for _m, d in methods for how, what, _ref in d.allocs if how == "keeps"}
        best: tuple[str, str] | None = None
        for module, d in methods:
            for attr, kind in self.param_writes.get((module, d.qual), {}).items():
                if attr in kept and (best is None or (kind == "torch" and best[0] != "torch")):
                    best = (kind, f"{attr} in {d.qual}()")
        return best

    def _written(self, target: Target) -> tuple[tuple[str, str], ...] | None:
        """What a callable writes of its arguments, by position and by name; None when
        it writes none of them (a Triton kernel says so: an empty tuple, since a launch
        of an unknown kernel may write anything)."""
        if self._kind(target) == "class":
            init = self.constructor(target)
            if init is None:
                return None
            target = init
        by_name = self.param_writes.get(target)
        if not by_name:
            s = self.modules.get(target[0])
            d = s.defs.get(target[1]) if s is not None else None
            return () if d is not None and d.kernel else None
        s = self.modules[target[0]]
        params = s.defs[target[1]].params
        out = [(str(i), by_name[p]) for i, p in enumerate(params) if p in by_name]
        return tuple(sorted(out + list(by_name.items())))


def _allocating(s: FileSummary, site_keys: Iterable[str]) -> set[str]:
    """The functions of a file that may hold a site: a direct allocation, or a call the
    index knows allocates (``site_keys``)."""
    keys = set(site_keys)
    return {
        d.qual
        for d in s.defs.values()
        if d.kind == "function"
        and (d.alloc_calls or any(_fact_key(d, t, s) in keys for t, *_ in d.calls))
    }


def _with_enclosing(s: FileSummary, functions: set[str]) -> set[str]:
    """``functions`` and the functions they are nested in (whose parameters a nested
    function may fill: ``decode(..., scratch)`` and its ``prepare``)."""
    out = set(functions)
    for qual in functions:
        parts = qual.split(".")
        for i in range(1, len(parts)):
            outer = s.defs.get(".".join(parts[:i]))
            if outer is not None and outer.kind == "function":
                out.add(outer.qual)
    return out


def _fact_key(d: DefSummary, text: str, s: FileSummary) -> str | None:
    if text.startswith(("?", "super()")):
        return None
    if text.startswith("self."):
        return f"{d.cls.rsplit('.', 1)[-1]}|{text}" if d.cls else None
    return text
