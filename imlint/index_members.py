"""Which classes a receiver may be, from what the caller asks of it and where it was
made. A call on a receiver made by a builtin or another library (``acc =
cute.make_tensor(...)``; ``acc.load()``) reaches no project method. A call by a name
the index cannot resolve (``head.init_state(h)``) may run a project method of that
name only if an object of its class (or of a subclass) answers to every other method
the same function calls on ``head`` (``head.step_logits_dtype(...)``). A method the
project defines somewhere that the class and its subclasses neither define, inherit,
nor store on ``self`` rules the class out. Classes whose members the source does not
fully show (a base from another library, ``__getattr__``, ``setattr(self, ...)``:
``summary_members.OPEN``) are never ruled out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.lifetimes import fits
from imlint.summary_members import OPEN

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary

Target = tuple[str, str]

#: Bases from outside the project that give instances no methods a call could ask for.
_PLAIN_BASES = frozenset(
    {"object", "abc.ABC", "typing.Generic", "typing.Protocol", "typing_extensions.Protocol"}
)


class MemberFinder:
    """A mixin of :class:`imlint.project.ProjectIndex`."""

    modules: dict[str, FileSummary]
    unresolved_sites: dict[str, list[tuple[Target, str]]]

    if TYPE_CHECKING:

        def _resolve_in(
            self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
        ) -> Target | None: ...

        def _kind(self, target: Target) -> str: ...

        def subclasses(self, cls: Target) -> set[Target]: ...

        def qualify_in(self, s: FileSummary, text: str) -> str: ...

        def unresolved_callers(self, target: Target) -> list[tuple[Target, str]]: ...

        def _outside_receiver(self, s: FileSummary, d: DefSummary, text: str) -> bool: ...

        def _functions(self) -> list[tuple[FileSummary, DefSummary]]: ...

    def _init_members(self) -> None:
        self._shapes: dict[int, dict[str, tuple[int, tuple[str, ...]]]] = {}
        self._up: dict[Target, frozenset[str] | None] = {}
        self._down: dict[Target, frozenset[str] | None] = {}
        self._asked: dict[tuple[int, str], frozenset[str]] = {}
        self._method_names: frozenset[str] | None = None
        self._named_kept: dict[
            tuple[int, frozenset[tuple[Target, str]]], list[tuple[Target, str]]
        ] = {}
        self._ruled_out: dict[Target, frozenset[tuple[Target, str]]] = {}
        self._judged_lists: dict[int, list[tuple[Target, str, DefSummary, bool]]] = {}

    def accepts(self, target: Target, d: DefSummary, text: str) -> bool:
        """Whether the calls by ``text`` in ``d`` may reach ``target`` by their
        arguments (no more positional arguments than it takes, no keyword it lacks,
        unless it takes ``*args`` or ``**kwargs``) and by its receiver
        (``receiver_fits``)."""
        s = self.modules.get(target[0])
        td = s.defs.get(target[1]) if s is not None else None
        if td is None:
            return False
        shape = self.call_shape(d, text)
        if shape is not None and not fits(td, shape):
            return False
        return self.receiver_fits(target, d, text)

    def call_shape(self, d: DefSummary, text: str) -> tuple[int, tuple[str, ...]] | None:
        """How the calls by ``text`` in ``d`` pass arguments (``DefSummary.shapes``):
        (positional count, keywords), None when not recorded."""
        shapes = self._shapes.get(id(d))
        if shapes is None:
            shapes = self._shapes[id(d)] = {call: (n, kws) for call, n, kws in d.shapes}
        return shapes.get(text)

    def named_callers(self, target: Target) -> list[tuple[Target, str]]:
        """``unresolved_callers(target)`` less the calls whose receiver cannot be an
        object of ``target``'s class (``receiver_fits``): the same list object when
        none is ruled out."""
        named = self.unresolved_callers(target)
        out = self.ruled_out(target)
        if not out:
            return named
        # One list per name and ruled-out set, shared by every method it fits (a
        # list per method grows as names x methods: 11 M entries on sglang); callers
        # key their splits by the list's id.
        key = (id(named), out)
        kept = self._named_kept.get(key)
        if kept is None:
            kept = self._named_kept[key] = [k for k in named if k not in out]
        return kept

    def ruled_out(self, target: Target) -> frozenset[tuple[Target, str]]:
        """The calls by ``target``'s name whose receiver cannot be of its class."""
        found = self._ruled_out.get(target)
        if found is None:
            found = self._ruled_out[target] = frozenset(
                (c, text)
                for c, text, d, outside in self._judged(self.unresolved_callers(target))
                if outside or not self.receiver_fits(target, d, text)
            )
        return found

    def _judged(
        self, named: list[tuple[Target, str]]
    ) -> list[tuple[Target, str, DefSummary, bool]]:
        """Of calls by one name the index cannot resolve, those ``receiver_fits`` may
        rule out: on a receiver made outside the project, or asked for other methods
        too (the lists are the index's own, shared by every function of the name)."""
        if not named:
            return []  # ``unresolved_callers``' default: a new list, no id to key on
        found = self._judged_lists.get(id(named))
        if found is None:
            found = self._judged_lists[id(named)] = []
            for c, text in named:
                s = self.modules.get(c[0])
                d = s.defs.get(c[1]) if s is not None else None
                head, _, name = text.lstrip("?").rpartition(".")
                if s is None or d is None or not head:
                    continue
                outside = self._outside_receiver(s, d, text)
                if outside or self._asked_of(d, head) - {name}:
                    found.append((c, text, d, outside))
        return found

    def receiver_fits(self, target: Target, d: DefSummary, text: str) -> bool:
        """Whether the receiver of the call by ``text`` in ``d`` may be an object of
        the class of method ``target``, by the other methods ``d`` calls on it."""
        s = self.modules.get(target[0])
        td = s.defs.get(target[1]) if s is not None else None
        head, _, name = text.lstrip("?").rpartition(".")
        if td is None or not td.cls or not head or head in ("self", "cls"):
            return True
        if "(" in head or "[" in head:
            return True
        asked = self._asked_of(d, head) - {name}
        if not asked:
            return True
        members = self._members_down((target[0], td.cls))
        if members is None:
            return True
        methods = self._project_methods()
        return all(m in members or m not in methods for m in asked)

    def _asked_of(self, d: DefSummary, head: str) -> frozenset[str]:
        key = (id(d), head)
        found = self._asked.get(key)
        if found is None:
            names = set()
            for call, _region in d.calls:
                receiver, _, name = call.lstrip("?").rpartition(".")
                if receiver == head:
                    names.add(name)
            found = self._asked[key] = frozenset(names)
        return found

    def _project_methods(self) -> frozenset[str]:
        if self._method_names is None:
            self._method_names = frozenset(
                d.qual.rsplit(".", 1)[-1] for _s, d in self._functions() if d.cls
            )
        return self._method_names

    def _members_down(self, cls: Target) -> frozenset[str] | None:
        """What an object of ``cls`` or of any subclass may answer to; None when open."""
        if cls in self._down:
            return self._down[cls]
        found: set[str] | None = set()
        for c in (cls, *sorted(self.subclasses(cls))):
            up = self._members_up(c)
            if up is None or found is None:
                found = None
                break
            found |= up
        result = self._down[cls] = frozenset(found) if found is not None else None
        return result

    def _members_up(self, cls: Target, depth: int = 0) -> frozenset[str] | None:
        """What an object of ``cls`` answers to, its bases' members included."""
        if cls in self._up:
            return self._up[cls]
        self._up[cls] = None  # a cycle of bases: open
        s = self.modules.get(cls[0])
        d = s.defs.get(cls[1]) if s is not None else None
        result: frozenset[str] | None = None
        if s is not None and d is not None and OPEN not in d.members and depth < 16:
            names = set(d.members)
            for base in d.bases:
                b = self._resolve_in(s, None, base)
                if b is not None and self._kind(b) == "class":
                    inherited = self._members_up(b, depth + 1)
                elif self.qualify_in(s, base) in _PLAIN_BASES:
                    inherited = frozenset()
                else:
                    inherited = None
                if inherited is None:
                    break
                names |= inherited
            else:
                result = frozenset(names)
        self._up[cls] = result
        return result
