"""Which project callables allocate a tensor that outlives their call (IM003's chains),
to a fixed point over the project index: a constructor that keeps one, a function that
returns one (and what that tensor holds when made), a class whose base allocates, and
get-or-create helpers that keep what their factory returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.kinds import CONSTRUCTORS, MODE_OFF_REGIONS
from imlint.vocabulary import content_of

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, Target


#: Levels of functions handing a factory on to a get-or-create helper, followed.
_HELPER_DEPTH = 3


class AllocatorFinder:
    """The allocator part of :class:`imlint.project.ProjectIndex` (a mixin: the index
    owns the state below and the resolution methods): which callables allocate, and
    which make and build an object for their caller (alternate constructors,
    factories)."""

    summaries: list[FileSummary]
    modules: dict[str, FileSummary]
    #: callable -> (chain, whether the result is an object, what a returned tensor holds)
    _alloc: dict[Target, tuple[str, bool, str]]
    #: get-or-create helper -> (factory position, factory parameter, where it stores)
    _helpers: dict[Target, tuple[int, str, str]]

    if TYPE_CHECKING:

        def _kind(self, target: Target) -> str: ...

        def _resolve_in(
            self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
        ) -> Target | None: ...

        def resolve(self, s: FileSummary, d: DefSummary, text: str) -> Target | None: ...

    def alternate_constructor(self, target: Target) -> bool:
        """A class method that makes an instance of its class (``obj = cls(...)``) and
        returns it: an alternate constructor (``Workspace.for_shape(n)``), whose calls
        on what it makes build that object."""
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        return d is not None and bool(d.cls) and ("self", "returned") in d.results

    def builds(self, caller: Target, text: str) -> Target | None:
        """The class whose object the call ``text`` in ``caller`` builds: a method called
        on a local object that the caller makes with a constructor call and returns (a
        factory: ``ws = Workspace(n); ws.allocate(); return ws``), so the call runs while
        that object is built, before anything else can see it."""
        s = self.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        head, dot, rest = text.partition(".")
        if s is None or d is None or not dot or "." in rest or head not in d.once:
            return None  # ``vk = cache.get(k); if vk is None: vk = V(n)``: not only made
        maker = d.types[head]
        if maker == "self":
            return (s.module, d.cls) if d.cls and self.alternate_constructor(caller) else None
        cls = self._resolve_in(s, None, maker)
        if cls is None or self._kind(cls) != "class":
            return None
        returned = any(
            how == "returned" and self.resolve(s, d, made) == cls for made, how in d.results
        )
        return cls if returned else None

    def made_class(self, target: Target) -> Target | None:
        """The class whose instance ``target`` makes and returns, when it is an alternate
        constructor or a factory that builds what it makes (``builds``)."""
        if self.alternate_constructor(target):
            return (target[0], target[1].rsplit(".", 1)[0])
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if s is None or d is None:
            return None
        for text, _region in d.calls:
            made = self.builds(target, text)
            if made is not None:
                return made
        return None

    def _find_allocators(self) -> None:
        """Callables whose call allocates a tensor that outlives it, to a fixed point."""
        pending: list[tuple[FileSummary, DefSummary]] = []
        for s in self.summaries:
            for d in s.defs.values():
                constructor = bool(d.cls) and d.qual.rsplit(".", 1)[-1] in CONSTRUCTORS
                constructor = constructor or (bool(d.cls) and ("self", "returned") in d.results)
                # a factory: ``ws = Workspace(n); ws.allocate(); return ws``
                constructor = constructor or (
                    bool(d.once) and any(how == "returned" for _m, how in d.results)
                )
                if d.kind == "function" and (d.allocs or constructor) and not d.cached:
                    pending.append((s, d))
        changed = True
        while changed:
            changed = False
            for s, d in pending:
                target = (s.module, d.qual)
                if target in self._alloc:
                    continue
                built = self._alternate_chain(s, d)
                if built is not None:
                    self._alloc[target] = (built, True, "unknown")
                    changed = True
                    continue
                chain = self._alloc_chain(s, d)
                if chain is None:
                    continue
                method = d.qual.rsplit(".", 1)[-1]
                if d.cls and method in CONSTRUCTORS:
                    cls_target = (s.module, d.cls)
                    if cls_target not in self._alloc:
                        self._alloc[cls_target] = (chain, True, "unknown")
                    self._alloc[target] = (chain, True, "unknown")
                    changed = True
                elif any(how == "returns" for how, *_ in d.allocs):
                    returns = self._alloc_step(s, d, only="returns")
                    if returns is not None:
                        self._alloc[target] = (*returns, self._returned_content(s, d))
                        changed = True
            # Classes whose base class allocates (an inherited or super() constructor).
            for s in self.summaries:
                for d in s.defs.values():
                    target = (s.module, d.qual)
                    if d.kind != "class" or target in self._alloc:
                        continue
                    for base in d.bases:
                        b = self._resolve_in(s, None, base)
                        if b is not None and b in self._alloc and self._kind(b) == "class":
                            chain = f"{d.qual} extends {b[1]}: {self._alloc[b][0]}"
                            self._alloc[target] = (chain, True, "unknown")
                            changed = True
                            break

    def _alternate_chain(self, s: FileSummary, d: DefSummary) -> str | None:
        """How an alternate constructor (``ProjectIndex.alternate_constructor``) or a
        factory (``ProjectIndex.builds``) allocates: the class's constructor does, or a
        method it calls on what it makes keeps a tensor there (``ws = cls(n);
        ws.allocate()``)."""
        me = (s.module, d.qual)
        alternate = self.alternate_constructor(me)
        if not alternate and not d.once:
            return None  # neither: nothing it calls builds an object it makes
        cls = (s.module, d.cls)
        if alternate and cls in self._alloc:
            return f"{d.qual} makes {d.cls}: {self._alloc[cls][0]}"
        for text, _region in d.calls:
            target = self.resolve(s, d, text)
            if target is None:
                continue
            if alternate:
                if target[0] != s.module or not target[1].startswith(d.cls + "."):
                    continue
            elif self.builds(me, text) is None:
                continue
            ms = self.modules.get(target[0])
            md = ms.defs.get(target[1]) if ms is not None else None
            if md is not None and any(how == "keeps" for how, *_ in md.allocs):
                what = next(w for how, w, _r in md.allocs if how == "keeps")
                made = d.cls if alternate else md.qual.rsplit(".", 1)[0]
                return f"{d.qual} makes {made} and {md.qual} allocates {what}"
        return None

    def _returned_content(self, s: FileSummary, d: DefSummary) -> str:
        """What a tensor ``d`` returns holds when made (``vocabulary.content_of``), when
        every allocation it may return agrees; else ``unknown``."""
        kinds: set[str] = set()
        for how, _what, ref in d.allocs:
            if how != "returns":
                continue
            if ref.startswith("!"):
                name = ref[1:]
                kind = content_of(name) if name.startswith((".", "torch.")) else "unknown"
                # The helper may fill blank storage before it returns it (``cos[:, a:b] =
                # x``): the summary does not follow writes to locals, so it is unknown.
                kinds.add("unknown" if kind == "blank" else kind)
                continue
            target = self.resolve(s, d, ref)
            found = self._alloc.get(target) if target is not None else None
            if found is not None:  # another allocating callable's result, or an object
                kinds.add("unknown" if found[1] else found[2])
        return kinds.pop() if len(kinds) == 1 else "unknown"

    def _alloc_chain(self, s: FileSummary, d: DefSummary, only: str | None = None) -> str | None:
        """The shortest chain by which calling ``d`` allocates, or None."""
        found = self._alloc_step(s, d, only)
        return found[0] if found is not None else None

    def _alloc_step(
        self, s: FileSummary, d: DefSummary, only: str | None = None
    ) -> tuple[str, bool] | None:
        """(chain, whether the result is an object holding tensors) for ``d``."""
        method = d.qual.rsplit(".", 1)[-1]
        constructor = bool(d.cls) and method in CONSTRUCTORS
        best: tuple[str, bool] | None = None
        for how, what, ref in d.allocs:
            if only is not None and how != only:
                continue
            if how == "keeps" and not constructor:
                continue
            if ref.startswith("!"):
                step = (
                    f"{d.qual} allocates {what}" if how == "keeps" else f"{d.qual} returns a tensor"
                )
                found = (f"{step} via {ref[1:]}", how == "keeps")
            else:
                target = self.resolve(s, d, ref)
                if target is None or target not in self._alloc:
                    continue
                inner, is_object, _content = self._alloc[target]
                kind = self._kind(target)
                call = f"{target[1]}(...)" if kind == "class" else f"{target[1]}()"
                if how == "keeps":
                    found = (f"{d.qual} allocates {what} from {call} -> {inner}", True)
                else:
                    # What the callee returns, it returns: a tensor, or an object.
                    found = (f"{d.qual} returns {call} -> {inner}", is_object or kind == "class")
            if best is None or len(found[0]) < len(best[0]):
                best = found
        if constructor and best is None and only is None:
            # A constructor that calls a method of its own class that keeps a tensor.
            for text, region in d.calls:
                if region in MODE_OFF_REGIONS or not text.startswith("self."):
                    continue
                target = self.resolve(s, d, text)
                if target is None:
                    continue
                ts = self.modules[target[0]]
                td = ts.defs[target[1]]
                for how, what, ref in td.allocs:
                    if how == "keeps" and ref.startswith("!"):
                        return f"{d.qual} allocates {what} in {td.qual} via {ref[1:]}", True
        return best

    def _find_helpers(self) -> None:
        """Functions that keep what a factory they are handed returns, and, to a few
        levels, functions that hand a parameter on to such a factory parameter
        (``def get_buffer(name, factory): return _CTX.get_buffer(name, factory)``)."""
        for s in self.summaries:
            for d in s.defs.values():
                for param, position, stored in d.factories:
                    self._helpers[(s.module, d.qual)] = (position, param, stored)
                    break
        for _ in range(_HELPER_DEPTH):
            found = self._forwarding_helpers()
            if not found:
                break
            self._helpers.update(found)

    def _forwarding_helpers(self) -> dict[Target, tuple[int, str, str]]:
        found: dict[Target, tuple[int, str, str]] = {}
        for s in self.summaries:
            for d in s.defs.values():
                me = (s.module, d.qual)
                if me in self._helpers or d.kind != "function":
                    continue
                for callee, key, owner in d.passes:
                    if owner not in d.params:
                        continue
                    target = self.resolve(s, d, callee)
                    inner = self._helpers.get(target) if target is not None else None
                    if inner is None or key not in (str(inner[0]), inner[1]):
                        continue
                    found[me] = (d.params.index(owner), owner, inner[2])
                    break
        return found

    def allocating_count(self) -> int:
        return len(self._alloc)
