"""Calls resolved through the classes the code declares or makes evident
(``DefSummary.annots``, ``summary_types.py``): ``attn_backend.forward(...)`` where
``attn_backend = get_attn_backend()`` and ``get_attn_backend() -> AttentionBackend``;
``mr.model_runner.attn_backend.init(...)`` through annotated parameters kept on
``self`` (``self.model_runner = model_runner`` with ``model_runner: ModelRunner``);
``self.self_attn(...)`` on a module the class builds, which runs its ``forward``.

A call resolved this way reaches the method the class (or its bases) defines; reach
also follows it to the overrides in subclasses (``ReachFinder.reach_callers``), as
Python's dispatch would. These edges are reach-only (``handed_callers``): set-up and
lifetimes keep the calls ``ProjectIndex.resolve`` names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.summary_types import ALIAS, RETURNED

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary

Target = tuple[str, str]

#: How many names, attributes and returns one lookup follows before it gives up.
_DEPTH = 8
#: What calling an object of a class runs, when the project defines it: ``__call__``,
#: or a ``torch.nn.Module``'s ``forward`` (its ``__call__`` is torch's).
_CALL_METHODS = ("__call__", "forward")
#: Methods a call runs as named, whatever subclasses define (``Base()`` runs
#: ``Base.__init__``).
_NOT_VIRTUAL = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__"})


class TypeFinder:
    """A mixin of :class:`imlint.project.ProjectIndex`."""

    modules: dict[str, FileSummary]

    if TYPE_CHECKING:

        def _resolve_in(
            self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
        ) -> Target | None: ...

        def resolve(self, s: FileSummary, d: DefSummary, text: str) -> Target | None: ...

        def _method(self, module: str, cls: str, name: str, depth: int = 0) -> Target | None: ...

        def _kind(self, target: Target) -> str: ...

    def _init_types(self) -> None:
        self._attr_classes: dict[tuple[Target, str], Target | None] = {}
        self._methods_of: dict[str, dict[str, list[DefSummary]]] = {}
        self._ancestors: dict[Target, frozenset[Target]] = {}
        #: (caller, method) -> how a call may run an override of the method: ``self``
        #: (``self.m()``: one of the caller's own line of classes), ``any`` (a receiver
        #: of a declared class: any subclass); other calls run the method they name
        self.virtual_calls: dict[tuple[Target, Target], str] = {}

    def note_dispatch(self, caller: Target, text: str, target: Target, typed: bool) -> None:
        """Record whether the call ``text`` may run an override of ``target``: never a
        constructor (``Base()`` runs ``Base.__init__``), ``super().m()`` or
        ``Base.m(self)``."""
        if target[1].rsplit(".", 1)[-1] in _NOT_VIRTUAL:
            return
        if text.startswith("self.") and text.count(".") == 1:
            self.virtual_calls[(caller, target)] = "self"
        elif typed and "." in text:
            self.virtual_calls.setdefault((caller, target), "any")

    def owner(self, method: Target) -> Target | None:
        """The class a method (or a closure inside one) is defined in."""
        s = self.modules.get(method[0])
        d = s.defs.get(method[1]) if s is not None else None
        if s is None or d is None:
            return None
        outer = next((scope for scope in _scopes(s, d) if scope.cls), None)
        return (s.module, outer.cls) if outer is not None else None

    def ancestors(self, cls: Target) -> frozenset[Target]:
        """The class and every project class it derives from."""
        known = self._ancestors.get(cls)
        if known is not None:
            return known
        self._ancestors[cls] = frozenset({cls})  # a cycle stops here
        found = {cls}
        s = self.modules.get(cls[0])
        cd = s.defs.get(cls[1]) if s is not None else None
        if s is not None and cd is not None:
            for base in cd.bases:
                b = self._resolve_in(s, None, base)
                if b is not None and self._kind(b) == "class":
                    found |= self.ancestors(b)
        self._ancestors[cls] = frozenset(found)
        return self._ancestors[cls]

    def may_run_override(self, caller: Target, base: Target, override: Target) -> bool:
        """Whether a call that resolves to method ``base`` in ``caller`` can run
        ``override`` (a subclass's method): only a virtual call (``virtual_calls``) can;
        one on ``self`` only when the override's class derives from the caller's (a
        sibling subclass's override never runs there)."""
        how = self.virtual_calls.get((caller, base))
        if how != "self":
            return how == "any"
        caller_cls, over_cls = self.owner(caller), self.owner(override)
        if caller_cls is None or over_cls is None:
            return True
        return caller_cls in self.ancestors(over_cls)

    def resolve_typed(self, s: FileSummary, d: DefSummary, text: str) -> Target | None:
        """The method a call reaches through the class of its receiver, or the
        ``forward``/``__call__`` of an object called itself; None when no class is known."""
        if text.startswith("?") or text == "self":  # ``cls(...)`` in a class method
            return None
        parts = text.split(".")
        if len(parts) >= 2:
            receiver = self.class_of(s, d, ".".join(parts[:-1]))
            if receiver is not None:
                found = self._method(receiver[0], receiver[1], parts[-1])
                if found is not None:
                    return found
        called = self.class_of(s, d, text)
        if called is None:
            return None
        for name in _CALL_METHODS:
            found = self._method(called[0], called[1], name)
            if found is not None:
                return found
        return None

    def class_of(self, s: FileSummary, d: DefSummary, text: str, depth: int = 0) -> Target | None:
        """The class of the object a dotted name stands for in ``d``: ``self``, a
        parameter, a local (made by a call, annotated or an alias), then each attribute."""
        parts = text.split(".")
        cls = self._head_class(s, d, parts[0], depth)
        for attr in parts[1:]:
            if cls is None:
                return None
            cls = self.attr_class(cls, attr, depth + 1)
        return cls

    def _head_class(self, s: FileSummary, d: DefSummary, name: str, depth: int) -> Target | None:
        if depth > _DEPTH:
            return None
        if name == "self":
            owner = next((scope for scope in _scopes(s, d) if scope.cls), None)
            return (s.module, owner.cls) if owner is not None else None
        for scope in _scopes(s, d):
            entries = {text for key, text in scope.annots if key == name}
            declared = {text for text in entries if not text.startswith(ALIAS)}
            if declared:  # an annotation says it, whatever the name is bound to
                only = declared.pop() if len(declared) == 1 else None
                return self._declared(s, scope, only, depth) if only is not None else None
            if entries:  # an alias, unless the name is bound to something else too
                if len(entries) > 1 or name in scope.types:
                    return None
                return self.class_of(s, scope, entries.pop()[len(ALIAS) :], depth + 1)
            if name in scope.types:
                return self._made(s, scope, scope.types[name], depth)
            if name in scope.params or name in scope.keywords:
                return None  # a parameter without an annotation
        return None

    def _declared(self, s: FileSummary, d: DefSummary, entry: str, depth: int) -> Target | None:
        if entry.startswith(RETURNED):
            return self._made(s, d, entry[len(RETURNED) :], depth)
        found = self._resolve_in(s, None, entry, depth + 1)
        return found if found is not None and self._kind(found) == "class" else None

    def _made(self, s: FileSummary, d: DefSummary, callee: str, depth: int) -> Target | None:
        """The class of what a call returns: a class's instance, or what a function's
        return annotation (or the one class it returns) names."""
        if depth > _DEPTH:
            return None
        if callee == "self":  # ``cls(...)`` in a class method
            return (s.module, d.cls) if d.cls else None
        found = self.resolve(s, d, callee) if d.kind == "function" else None
        if found is None:
            found = self._resolve_in(s, None, callee, depth + 1)
        if found is None:
            return None
        kind = self._kind(found)
        if kind == "class":
            return found
        if kind != "function":
            return None
        fs = self.modules.get(found[0])
        fd = fs.defs.get(found[1]) if fs is not None else None
        if fs is None or fd is None:
            return None
        for key in ("return", RETURNED):  # the annotation, else the class returned
            entry = _single(fd.annots, key)
            c = self._declared(fs, fd, entry, depth + 1) if entry is not None else None
            if c is not None:
                return c
        return None

    def attr_class(self, cls: Target, attr: str, depth: int = 0) -> Target | None:
        """The class of ``obj.attr`` for an object of class ``cls``: what the class body
        declares, or what its methods store there (a constructor call, an annotated
        parameter, an annotation), when that is one class; else its bases'."""
        key = (cls, attr)
        if key in self._attr_classes:
            return self._attr_classes[key]
        self._attr_classes[key] = None  # a cycle through the bases gives up
        found = self._attr_class(cls, attr, depth) if depth <= _DEPTH else None
        if found is not None or depth == 0:
            self._attr_classes[key] = found
        else:  # it may have given up only for depth: a shallower lookup tries again
            del self._attr_classes[key]
        return found

    def _attr_class(self, cls: Target, attr: str, depth: int) -> Target | None:
        s = self.modules.get(cls[0])
        cd = s.defs.get(cls[1]) if s is not None else None
        if s is None or cd is None:
            return None
        found: set[Target] = set()
        entry = _single(cd.annots, attr)
        if entry is not None:
            c = self._declared(s, cd, entry, depth)
            if c is not None:
                return c
        slot = f"self.{attr}"
        for d in self._class_methods(s).get(cls[1], ()):
            c = None
            if slot in d.types:
                c = self._made(s, d, d.types[slot], depth + 1)
            entry = _single(d.annots, slot)
            if c is None and entry is not None:
                c = self._declared(s, d, entry, depth + 1)
            for param, kept in d.pattrs:
                declared = _single(d.annots, param) if kept == attr else None
                if c is None and declared is not None and not declared.startswith(ALIAS):
                    c = self._declared(s, d, declared, depth + 1)
            if c is not None:
                found.add(c)
        if len(found) == 1:
            return found.pop()
        if found:
            return None  # several classes: no one of them is the attribute's
        for base in cd.bases:
            b = self._resolve_in(s, None, base, depth + 1)
            if b is not None and self._kind(b) == "class":
                c = self.attr_class(b, attr, depth + 1)
                if c is not None:
                    return c
        return None

    def _class_methods(self, s: FileSummary) -> dict[str, list[DefSummary]]:
        known = self._methods_of.get(s.path)
        if known is None:
            known = self._methods_of[s.path] = {}
            for d in s.defs.values():
                if d.kind == "function" and d.cls:
                    known.setdefault(d.cls, []).append(d)
        return known


def _single(annots: list[tuple[str, str]], name: str) -> str | None:
    """The one class text recorded for ``name``, or None (none, or several)."""
    found = {text for key, text in annots if key == name}
    return found.pop() if len(found) == 1 else None


def _scopes(s: FileSummary, d: DefSummary) -> list[DefSummary]:
    """``d`` and the functions it is nested in, innermost first (a closure sees their
    names)."""
    out = [d]
    qual = d.qual.rpartition(".")[0]
    while qual:
        outer = s.defs.get(qual)
        if outer is None or outer.kind != "function":
            break
        out.append(outer)
        qual = qual.rpartition(".")[0]
    return out
