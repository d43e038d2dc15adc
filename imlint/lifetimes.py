"""Lifetimes, project-wide: which functions run only while an object is built, and
which objects live for one call.

All of it is read from code, never from names. Test code (``is_test_module``) is left
out as evidence: it does not run in the served process.

- **Construction.** A function whose every caller is a constructor of an object that is
  not made per call, or, transitively, another such function, runs while the program
  sets up: what it stores is built eagerly, not on first use (IM004's territory, not a
  lazy site). A class method that makes an instance of its class and returns it is a
  constructor too (``ProjectIndex.alternate_constructor``), and so is a call on an
  object a function makes and returns (a factory: ``ws = Workspace(n); ws.allocate();
  return ws``, ``ProjectIndex.builds``). Calls by the function's name that the index
  cannot resolve count as callers when their arguments fit. A function without
  parameters that a class's constructor calls is set up by the time the class's other
  methods call it. A call made only while a parameter of the
  caller is true (``if in_capture: self._init_graph_meta(bs)``) is followed only along
  the callers that may turn it on: not those passing a false constant or leaving a false
  default; one handing on a flag of its own (``in_capture=in_capture``) is followed
  along its callers in turn (``summary_flags.py``).
- **Per-call objects.** Every place that makes an instance of a class (a call of the
  class, ``cls(...)`` in its class methods, a subclass's) is judged by what happens to
  the result there. The instance is *long-lived* when the result is kept in storage
  that outlives the call (a global, ``self`` of a long-lived object, a parameter that
  is not handed a per-call object, a local object that is itself long-lived), handed
  to something that keeps it and outlives the call (a constructor that keeps the
  argument, a dataclass, a callee the index cannot resolve), made at module level, in
  the construction of a long-lived object, in a cached function, or in an entry point
  (nothing calls it: it may run once for the whole process). A result that is returned
  is judged at every caller, including calls by the same name that the index cannot
  resolve. Otherwise the instance is made per call. A class with at least one place
  that makes it, all per call, has per-call instances: what its methods store on
  ``self`` dies with the call that made it (a memo on a per-step batch). A class the
  project never instantiates is not judged (its instances may come from anywhere),
  unless its constructor hands the object to a queue (``imlint/queues.py``). An
  instance kept only as an item of queues (a job a generator serves, then takes out)
  is per call wherever it is made, an entry point or a constructor included.
- **Per-call parameters.** A parameter that every resolved caller hands a per-call
  object (an instance of a per-call class made there, or a per-call parameter of the
  caller) holds a per-call object: what the function stores on it dies with the call.

Per-call objects and parameters depend on each other (an object kept on a per-call
batch is per call too), so both are computed together, to the least fixed point of
*long-lived*: objects that only keep each other stay per call.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, TypeAlias

from imlint.kinds import CONSTRUCTORS, THREAD_REGION
from imlint.queues import Queues

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target


#: Stands for the thread a call starts (``Thread(target=self._loop).start()``): what
#: runs there runs beside the program for as long as the thread lives, not at set-up.
STARTED: Target = ("<thread>", "<thread>")


def fits(td: DefSummary, shape: tuple[int, tuple[str, ...]]) -> bool:
    """Whether a call passing ``shape`` (positional count, keywords) may bind to the
    function ``td``: no more positional arguments than it takes, no keyword it lacks
    (unless it takes ``*args`` or ``**kwargs``)."""
    n, kws = shape
    if n > len(td.params) and not td.star & 1:
        return False
    names = {*td.params, *td.keywords}
    return bool(td.star & 2) or all(k == "**" or k in names for k in kws)


def callers_as_set_up_sees(index: ProjectIndex, target: Target) -> list[Target]:
    """``target``'s callers, a thread a caller starts with it as ``STARTED``."""
    return [c if r != THREAD_REGION else STARTED for c, r in index.callers_of(target)]


def _is_constructor(qual: str) -> bool:
    return "." in qual and qual.rsplit(".", 1)[-1] in CONSTRUCTORS


def construction_only(index: ProjectIndex, per_call: set[Target] | None = None) -> set[Target]:
    """Functions that run only while a long-lived object is built: every caller (test
    code left out) is a constructor (of a class not in ``per_call``: building an object
    made per step is not set-up) or such a function, or, for a function without
    parameters (it returns the same thing to every caller), a method of a class whose
    constructor calls it too (it ran when the instance was built: a get-or-create
    helper that the constructor fills eagerly). Calls by the function's name that the
    index cannot resolve are callers too."""
    return Construction(index, per_call or set()).solve()


#: target -> (callers that are not constructors of long-lived objects, classes of the
#: constructors that call it when it has no parameters, else None)
_Waiting: TypeAlias = "dict[Target, tuple[list[Target], set[Target] | None]]"


class Construction:
    """The call graph as construction sees it (see ``construction_only``)."""

    def __init__(self, index: ProjectIndex, per_call: set[Target]) -> None:
        self.index = index
        self.per_call = per_call
        self.classes: dict[Target, Target | None] = {}
        #: a caller as far as it calls only while a parameter is true -> (the caller,
        #: the parameter): ``(module, "B.init_meta?in_capture")``
        self.flagged: dict[Target, tuple[Target, str]] = {}
        self._callees: dict[int, dict[str, tuple[list[tuple[str, str]], ...]]] = {}

    def class_of(self, c: Target) -> Target | None:
        if c not in self.classes:
            self.classes[c] = _class_of(self.index, self.flagged.get(c, (c, ""))[0])
        return self.classes[c]

    def _summary(self, t: Target) -> DefSummary | None:
        s = self.index.modules.get(t[0])
        return s.defs.get(t[1]) if s is not None else None

    def through_flags(
        self, callers: list[Target], name: str, target: Target | None = None
    ) -> list[Target]:
        """Callers that call a function by ``name`` only while one of their parameters
        is true (``if in_capture: self._init_graph_meta(bs)``) stand for themselves as
        called with that parameter on (``flag_callers``). A constructor, or a factory
        building the object whose method ``target`` is, stays itself: it is set-up
        whichever way the flag goes."""
        out: list[Target] = []
        for c in callers:
            d = self._summary(c)
            flag = None
            if d is not None and d.flagged:
                flag = next((p for t, p in d.flagged if t.rsplit(".", 1)[-1] == name), None)
            builds = target is not None and self.index.building.get((c, target)) is not None
            if (
                flag is None
                or builds
                or _is_constructor(c[1])
                or self.index.alternate_constructor(c)
            ):
                out.append(c)
                continue
            out.append(self._as_flagged(c, flag))
        return out

    def _as_flagged(self, c: Target, flag: str) -> Target:
        """The node that stands for ``c`` called with ``flag`` on."""
        v = (c[0], f"{c[1]}?{flag}")
        self.flagged.setdefault(v, (c, flag))
        return v

    def flag_callers(self, v: Target) -> list[Target] | None:
        """The callers of a flagged caller (``through_flags``) that may call it with the
        flag on: not those that pass a false constant, nor those that leave it at a
        false default. None when nothing (but tests) calls it."""
        c, flag = self.flagged[v]
        d = self._summary(c)
        name = c[1].rsplit(".", 1)[-1]
        position = str(d.params.index(flag)) if d is not None and flag in d.params else None
        falsy = d is not None and flag in d.falsy
        callers = callers_as_set_up_sees(self.index, c)
        callers += [k for k, _text in self.index.named_callers(c)]
        callers = [k for k in callers if not is_test_module(k[0])]
        if not callers:
            return None
        out: list[Target] = []
        for k in callers:
            on = self._turns_on(k, name, flag, position, falsy)
            if isinstance(on, str):  # hands on its own flag: as called with that one on
                out.append(self._as_flagged(k, on))
            elif on:
                out.append(k)
        return out

    def _turns_on(
        self, caller: Target, name: str, flag: str, position: str | None, falsy: bool
    ) -> bool | str:
        """Whether a caller may call ``name`` with ``flag`` on: a parameter of its own
        when it hands that on (``in_capture=in_capture``) and nothing else."""
        d = self._summary(caller)
        if d is None or caller == STARTED:
            return True
        passes, flag_args = self._by_callee(d).get(name, ((), ()))
        handed = {p for key, p in passes if key in (flag, position)}
        if len(handed) == 1 and not _is_constructor(caller[1]):
            own = handed.pop()
            if not any(k in (flag, position) and m != "?" for k, m in flag_args):
                return own
        marks = set()
        passed = False
        for key, mark in flag_args:
            if key in (flag, position, "**"):
                marks.add(mark)
            elif key == "#" and position is not None:
                passed = passed or int(mark) < 0 or int(mark) > int(position)
        if marks:
            return marks != {"0"}
        return passed or not falsy

    def _fitting(self, target: Target, d: DefSummary) -> list[Target]:
        """The callers whose calls by ``target``'s name the index cannot resolve and
        whose arguments fit it (``ProjectIndex.accepts``), judged once per call shape."""
        fit: dict[tuple[int, tuple[str, ...]], bool] = {}
        out: list[Target] = []
        for c, text in self.index.named_callers(target):
            cd = self._summary(c)
            shape = self.index.call_shape(cd, text) if cd is not None else None
            if shape is not None and not fit.setdefault(shape, fits(d, shape)):
                continue
            out.append(c)
        return out

    def _by_callee(self, d: DefSummary) -> dict[str, tuple[list[tuple[str, str]], ...]]:
        """A function's ``passes`` and ``flag_args`` by the last name of the callee
        (``(key, parameter)`` and ``(key, mark)``), read once."""
        known = self._callees.get(id(d))
        if known is None:
            known = {}
            for text, key, p in d.passes:
                known.setdefault(text.rsplit(".", 1)[-1], ([], []))[0].append((key, p))
            for text, key, mark in d.flag_args:
                known.setdefault(text.rsplit(".", 1)[-1], ([], []))[1].append((key, mark))
            self._callees[id(d)] = known
        return known

    def split(
        self, callers: list[Target], target: Target | None = None
    ) -> tuple[list[Target], set[Target], int]:
        """(callers that are not constructors of long-lived objects, classes of the
        constructors among them, how many constructors), test code left out. A call on
        an object its caller makes and returns builds that object (``ProjectIndex.builds``):
        a constructor's call."""
        rest: list[Target] = []
        built: set[Target] = set()
        constructors = 0
        for c in callers:
            if is_test_module(c[0]):
                continue
            cls = self.class_of(c)
            made = self.index.building.get((c, target)) if target is not None else None
            if made is not None:
                cls = made
            if (
                made is not None or _is_constructor(c[1]) or self.index.alternate_constructor(c)
            ) and cls not in self.per_call:
                constructors += 1
                if cls is not None:
                    built.add(cls)
            else:
                rest.append(c)
        return rest, built, constructors

    def waiting(self) -> tuple[_Waiting, set[Target]]:
        """Every function something calls, with its callers split, and those that some
        constructor of a long-lived object calls."""
        index = self.index
        by_name: dict[tuple[object, ...], tuple[list[Target], set[Target], int]] = {}
        waiting: _Waiting = {}
        constructed: set[Target] = set()
        for s in index.summaries:
            for d in s.defs.values():
                if d.kind != "function" or _is_constructor(d.qual):
                    continue
                target = (s.module, d.qual)
                if d.setup:  # ``setup-functions``: the framework calls it while it sets up
                    waiting[target] = ([], None)
                    constructed.add(target)
                    continue
                if d.alloc_flags:  # allocates only while a parameter is true
                    waiting[target] = ([self._as_flagged(target, d.alloc_flags[0])], None)
                    continue
                name = d.qual.rsplit(".", 1)[-1]
                # calls by name are shared by every function so named and so called,
                # less those whose receiver cannot be of its class
                key = (name, bool(d.cls), d.params, d.keywords, d.star, index.ruled_out(target))
                if key not in by_name:
                    by_name[key] = self.split(self.through_flags(self._fitting(target, d), name))
                callers = callers_as_set_up_sees(index, target)
                callers = self.through_flags(callers, name, target)
                rest, built, constructors = self.split(callers, target)
                name_rest, name_built, name_constructors = by_name[key]
                constructors += name_constructors
                if name_rest:
                    rest = rest + name_rest if rest else name_rest
                if not rest and not constructors:
                    continue  # nothing (but tests) calls it
                takes = d.params or d.keywords  # a parameterless one returns the same
                waiting[target] = (rest, None if takes else built | name_built)
                if constructors:
                    constructed.add(target)
        done: set[Target] = set()
        while len(done) < len(self.flagged):  # the flagged callers found on the way
            for v in [v for v in self.flagged if v not in done]:
                done.add(v)
                c = self.flagged[v][0]
                on = self.flag_callers(v)
                if on is None:
                    continue  # nothing calls it: an entry point, any flag may be on
                on = self.through_flags(on, c[1].rsplit(".", 1)[-1], c)
                rest, _built, constructors = self.split(on, c)
                waiting[v] = (rest, None)
                if constructors or not on:  # no caller turns it on: it never runs so
                    constructed.add(v)
        return waiting, constructed

    def _family(self, target: Target, eager: set[Target]) -> set[Target]:
        """For a method without parameters that its own class's constructor calls
        (``self.capture()`` in ``__init__``): that class and its subclasses, else
        nothing. Every instance of the class ran it while it was built, so a call from
        anywhere else (``runner.capture()`` by name, on an instance made elsewhere) runs
        it again on a built object: only callers inside the family still decide."""
        own = self.class_of(target)
        if own is None or own not in eager:
            return set()
        return {own} | self.index.subclasses(own)

    def solve(self) -> set[Target]:
        """The greatest fixed point (functions that call each other, a backend's method
        that delegates to its sub-backends' method of the same name, stay construction
        when every way into them is), grounded in a constructor (functions that only
        call each other are reached from somewhere the index does not see)."""
        waiting, constructed = self.waiting()
        class_of = self.class_of
        called_by: dict[Target, list[Target]] = {}  # caller -> targets it is a "rest" caller of
        for target, (rest, _built) in waiting.items():
            for c in rest:
                called_by.setdefault(c, []).append(target)
        found = set(waiting)
        queue = list(waiting)
        while queue:
            target = queue.pop()
            if target not in found:
                continue
            rest, eager = waiting[target]
            built_here: set[Target] = set()
            if eager is not None:
                built_here = self._family(target, eager)  # its own constructor calls it
                eager = eager | {cls for c in rest if c in found and (cls := class_of(c))}
            if not all(
                c in found
                or (eager and class_of(c) in eager)
                or (built_here and class_of(c) not in built_here)
                for c in rest
            ):
                found.discard(target)
                queue.extend(called_by.get(target, ()))
        grounded = found & constructed
        queue = list(grounded)
        while queue:
            for target in called_by.get(queue.pop(), ()):
                if target in found and target not in grounded:
                    grounded.add(target)
                    queue.append(target)
        return grounded - self.flagged.keys()


def _class_of(index: ProjectIndex, function: Target) -> Target | None:
    s = index.modules.get(function[0])
    d = s.defs.get(function[1]) if s is not None else None
    return (function[0], d.cls) if d is not None and d.cls else None


@functools.cache
def is_test_module(module: str) -> bool:
    """Test code (pytest's layout: a ``test``/``tests`` package, ``test_*.py``,
    ``*_test.py``, ``conftest.py``): it does not run in the served process, so what it
    does with an object says nothing about the object's lifetime there."""
    parts = module.split(".")
    last = parts[-1]
    return (
        any(p in ("test", "tests") for p in parts)
        or last.startswith("test_")
        or last.endswith("_test")
        or last == "conftest"
    )


#: Rounds of the lifetime fixed point at most (each only turns per-call classes long;
#: sglang and vllm settle in eight).
_ROUNDS = 32

#: A function reached only by calls the index cannot resolve takes what they hand its
#: parameters when there are at most this many (``run(state)`` of a few strategy
#: classes); a name called from more places (``forward``) says too little.
_NAMED_SITES = 32

#: Constructors handing an argument on to constructors, followed this deep.
_KEEP_DEPTH = 3


#: (callee, parameter) -> what callers hand it; and the parameters every caller was seen
#: handing something (``Lifetimes._param_origins``)
Origins: TypeAlias = """tuple[
    dict[tuple[Target, str], list[tuple[str, Target | None, str]]], set[tuple[Target, str]]
]"""


def _hands_by_text(d: DefSummary) -> list[tuple[str, tuple[str, str | None, str]]]:
    """(call text, (parameter key, the caller's parameter handed, or None and the call
    whose result is handed)) for what ``d`` hands the functions it calls."""
    out: list[tuple[str, tuple[str, str | None, str]]] = [
        (text, (key, param, "")) for text, key, param in d.passes
    ]
    for made, how in d.results:
        if how.startswith("handed:"):
            _, callee, key = how.split(":", 2)
            out.append((callee, (key, None, made)))
    return out


class Lifetimes:
    """Per-call classes and parameters of a project (see the module doc)."""

    def __init__(
        self, index: ProjectIndex, construction: set[Target], origins: Origins | None = None
    ) -> None:
        self.index = index
        self.construction = construction
        self._returned: dict[Target, bool] = {}
        self._judging: set[tuple[str, str, str]] = set()
        #: caller -> (what it calls, resolved) -> (parameter key, its parameter or None
        #: with the call's result)
        self._hands: dict[Target, dict[Target | None, list[tuple[str, str | None, str]]]] = {}
        # What callers hand each parameter does not change between rounds, nor between
        # two lifetimes of one index (``origins``: the other's).
        self.origins: Origins = origins if origins is not None else self._param_origins()
        self._origins, self._complete = self.origins
        #: (caller, its parameter) -> the parameters it is handed on to
        self._handed_on: dict[tuple[Target, str], list[tuple[Target, str]]] = {}
        for bound, handed in self._origins.items():
            for kind, who, param in handed:
                if kind == "param" and who is not None:
                    self._handed_on.setdefault((who, param), []).append(bound)
        self.queues = Queues(index)
        self._announced = self.queues.self_queuing()
        made = self._instantiations()
        self.per_call: set[Target] = set(made)
        self.params: set[tuple[Target, str]] = self.per_call_params()
        for _ in range(_ROUNDS):
            self._returned = {}
            before = (self.per_call, self.params)
            self.per_call = self._per_call_classes(made)
            self.params = self.per_call_params()
            if (self.per_call, self.params) == before:
                break

    def _production_callers(self, target: Target) -> list[Target]:
        return [c for c, _region in self.index.callers_of(target) if not is_test_module(c[0])]

    def _long_context(self, s: FileSummary, d: DefSummary) -> bool:
        """Whether what ``d`` makes lives as long as the process may: module level,
        construction of a long-lived object, a cached function. An entry point (a
        function nothing calls) is not one: what it makes and only uses is its call's
        (a public API may run many times); what it returns or keeps is judged as
        anywhere else."""
        me = (s.module, d.qual)
        if d.kind == "module" or d.cached or me in self.construction:
            return True
        if _is_constructor(d.qual):
            return not self._is_per_call_class((s.module, d.cls))
        return False

    def entry_point(self, target: Target) -> bool:
        """Nothing outside test code calls it (by any name the index sees) but itself:
        it may be called from outside, once for the whole process. A factory's
        ``engine_cls.trainer_init(...)`` inside its own ``trainer_init`` is a call by
        that name, not a caller that keeps the result."""
        return not any(c != target for c in self._production_callers(target)) and not any(
            c != target and not is_test_module(c[0])
            for c, _text in self.index.named_callers(target)
        )

    def _is_per_call_class(self, cls: Target) -> bool:
        return cls in self.per_call

    def _made_long(self, s: FileSummary, d: DefSummary, text: str) -> bool:
        """Whether the result of the call ``text`` in ``d`` may outlive the call."""
        if (text, "dropped") in d.results and self._instantiated(s, d, text) is None:
            # ``prof.step()`` as a statement: nothing holds what it returns (an object
            # built and dropped is judged by its class: its constructor may keep it)
            return False
        if self.queues.queued_only(s, d, text):
            return False  # an item of a queue: served, then taken out
        if self._long_context(s, d):
            return True
        site = (s.module, d.qual, text)
        if site in self._judging:
            return False  # ``x = wrap(x)``: already being judged further up
        self._judging.add(site)
        try:
            return self._result_long(s, d, text)
        finally:
            self._judging.discard(site)

    def _result_long(self, s: FileSummary, d: DefSummary, text: str) -> bool:
        for made, how in d.results:
            if made != text:
                continue
            if how.startswith("kept:") and self._kept_long(s, d, how[5:]):
                return True
            if how == "returned" and self._returns_long((s.module, d.qual)):
                return True
            if how.startswith("handed:") and self._owned(s, d, how):
                return True
        return False

    def _kept_long(self, s: FileSummary, d: DefSummary, into: str) -> bool:
        """Whether storage a value is kept in outlives the call: ``self`` of a class
        that is not per call, a parameter not handed a per-call object, an object made
        here by a call whose result outlives it, anything else (a global)."""
        if into.startswith("self[]:") and self.queues.is_queue((s.module, d.cls), into[7:]):
            return False
        if into == "self" or into.startswith("self[]:"):
            return not self._is_per_call_class((s.module, d.cls))
        if into.startswith("param:"):
            return ((s.module, d.qual), into[6:]) not in self.params
        if into.startswith("made:"):
            return self._made_long(s, d, into[5:])
        return True

    def _owned(self, s: FileSummary, d: DefSummary, how: str) -> bool:
        """Whether an argument is kept by what it is handed to, and that outlives the
        call: a constructor that keeps the parameter, a class without a constructor of
        its own (a dataclass keeps its fields), or a callee the index cannot resolve (a
        class chosen at run time, a wrapper from outside: it may keep what it is handed
        in what it returns). The argument then lives as long as that result. A method
        that keeps the parameter on its object (``self.enqueue(job)``, which appends
        ``job`` to ``self.pending``) keeps it as long as that object lives."""
        _, callee, key = how.split(":", 2)
        index = self.index
        target = index.resolve(s, d, callee)
        if target is not None:
            if index.kind_of(target) == "class":
                init = index.method_of(target, "__init__")
                if init is not None and not self._keeps(init, key):
                    return False
            elif not self._keeps(target, key):
                return False
            elif not _is_constructor(target[1]):
                return self._receiver_long(s, d, callee, target, key)
        return self._made_long(s, d, callee)

    def _receiver_long(
        self, s: FileSummary, d: DefSummary, callee: str, keeper: Target, key: str
    ) -> bool:
        """Whether the object a method keeps its argument on (``self.enqueue``,
        ``queue.put``) may outlive the call: ``self`` of a class that is not per call
        (unless other code sets the attribute anew: ``_released``), a local made here
        by a call whose result does, a parameter not handed a per-call object; a
        module's function, or anything else, keeps into what outlives the call."""
        head, dot, _ = callee.partition(".")
        if not dot:
            return True
        if head == "self" and d.cls:
            cls = (s.module, d.cls)
            return not self._is_per_call_class(cls) and not self._released(cls, keeper, key)
        if head in d.types:
            return self._made_long(s, d, d.types[head])
        if head in d.params:
            return ((s.module, d.qual), head) not in self.params
        return True

    def _released(self, cls: Target, keeper: Target, key: str) -> bool:
        """Whether every attribute the method ``keeper`` stores its argument ``key`` in
        as it is (``self.forecaster = forecaster``) is set anew, unconditionally, by
        other code of the class that is not construction (``self.forecaster = None``
        when a request starts): what it keeps lives until then, not for the object's
        life."""
        index = self.index
        name = index.param_name(keeper, key)
        ks = index.modules.get(keeper[0])
        kd = ks.defs.get(keeper[1]) if ks is not None else None
        attrs = {a for p, a in (kd.pattrs if kd is not None else ()) if p == name}
        methods = [
            (module, m)
            for module, m in index.instance_methods(cls)
            if (module, m.qual) != keeper
            and not _is_constructor(m.qual)
            and (module, m.qual) not in self.construction
        ]
        return bool(attrs) and all(any(a in m.sets for _, m in methods) for a in attrs)

    def _keeps(self, init: Target, key: str, depth: int = 0) -> bool:
        """Whether a constructor keeps the argument passed as ``key``: on the object it
        builds (``self.p = p``), or handed to another constructor whose result it keeps
        there (``self.impl = Impl(p)``, where ``Impl`` keeps ``p``; a class without a
        constructor of its own keeps its fields)."""
        index = self.index
        name = index.param_name(init, key)
        ts = index.modules.get(init[0])
        td = ts.defs.get(init[1]) if ts is not None else None
        if ts is None or td is None or name is None:
            return False
        if name in td.pkept:
            return True
        if depth >= _KEEP_DEPTH:
            return False
        on_self = {
            made for made, how in td.results if how == "kept:self" or how.startswith("kept:self[]:")
        }
        for callee, ckey, owner in td.passes:
            if owner != name or callee not in on_self:
                continue
            target = index.resolve(ts, td, callee)
            if target is None:
                continue
            if index.kind_of(target) == "class":
                inner = index.method_of(target, "__init__")
                if inner is None or self._keeps(inner, ckey, depth + 1):
                    return True
            elif _is_constructor(target[1]) and self._keeps(target, ckey, depth + 1):
                return True
        return False

    def _returns_long(self, target: Target) -> bool:
        """Whether a function's result is kept by any caller (transitively): a resolved
        caller, or a call by the same name the index cannot resolve (it may be this
        function). Callers in test code do not count; a function nothing calls at all
        is an entry point (its result may be kept by whoever calls it from outside)."""
        known = self._returned.get(target)
        if known is not None:
            return known
        self._returned[target] = False  # recursion guard
        index = self.index
        result = self.entry_point(target)
        sites: list[tuple[Target, str | None]] = [
            (c, None) for c in self._production_callers(target)
        ]
        sites += [
            (c, text)
            for c, text in index.named_callers(target)
            if not is_test_module(c[0]) and self._accepts(target, c, text)
        ]
        for caller, text in sites:
            if result:
                break
            cs = index.modules.get(caller[0])
            cd = cs.defs.get(caller[1]) if cs is not None else None
            if cs is None or cd is None:
                continue
            if text is not None:
                result = self._made_long(cs, cd, text)
                continue
            result = any(
                index.resolve(cs, cd, t) == target and self._made_long(cs, cd, t)
                for t, _r in cd.calls
            )
        self._returned[target] = result
        return result

    def _accepts(self, target: Target, caller: Target, text: str) -> bool:
        s = self.index.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        return d is not None and self.index.accepts(target, d, text)

    def per_call_params(self) -> set[tuple[Target, str]]:
        """Parameters that are handed a per-call object by every caller: an instance of
        a per-call class made for the call (``run(Batch(...))``), or a parameter of the
        caller that is itself per-call, at every resolved call site. What a function
        stores on such a parameter (``batch.cache = ...``) dies with the call. A caller
        that hands anything else, or that the index does not see, keeps it unjudged."""
        origins, complete = self._origins, self._complete
        # Not per call: a parameter some caller hands something else, and, through the
        # calls that hand it on, every parameter it reaches.
        unjudged = [
            bound
            for bound, handed in origins.items()
            if bound not in complete
            or any(
                (kind == "made" and who not in self.per_call)
                or (kind == "param" and (who is None or (who, param) not in origins))
                for kind, who, param in handed
            )
        ]
        seen = set(unjudged)
        while unjudged:
            for bound in self._handed_on.get(unjudged.pop(), ()):
                if bound not in seen:
                    seen.add(bound)
                    unjudged.append(bound)
        return set(origins) - seen

    def _param_origins(self) -> Origins:
        """What callers hand each parameter: ``(callee, parameter) -> [("param", caller,
        its parameter) or ("made", class or None, "")]``, and the parameters whose every
        caller was seen handing something. Judged on demand: for functions that
        allocate, and the callers they lead to."""
        index = self.index
        origins: dict[tuple[Target, str], list[tuple[str, Target | None, str]]] = {}
        complete: set[tuple[Target, str]] = set()
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
            sites = self._call_sites(target)
            seen_from: dict[str, set[tuple[Target, str | None]]] = {}
            for site in sites:
                for param, origin in self._handed_to(*site, target):
                    origins.setdefault((target, param), []).append(origin)
                    seen_from.setdefault(param, set()).add(site)
                    if origin[0] == "param" and origin[1] is not None:
                        pending.append(origin[1])
            complete |= {(target, p) for p, seen in seen_from.items() if seen >= sites}
        return origins, complete

    def _call_sites(self, target: Target) -> set[tuple[Target, str | None]]:
        """The calls that may reach ``target``, as (caller, call text): its resolved
        callers (text None); for a function reached by none, the calls by its name the
        index cannot resolve whose arguments it accepts (``for s in self.steps:
        s.run(state)`` reaches every ``run(self, state)``)."""
        index = self.index
        sites: set[tuple[Target, str | None]] = {
            (c, None) for c, _region in index.callers_of(target)
        }
        if sites:
            return sites
        named = index.named_callers(target)
        if len(named) > _NAMED_SITES:
            return sites  # a name too common to judge its calls by: unjudged
        return {(caller, text) for caller, text in named if self._accepts(target, caller, text)}

    def _handed_to(
        self, caller: Target, via: str | None, target: Target
    ) -> list[tuple[str, tuple[str, Target | None, str]]]:
        """(parameter of ``target``, origin) for what ``caller`` hands it (by the call
        ``via``, else by every call that resolves to it): one of its own parameters,
        or the result of a call (an instance of a per-call class, else unjudged)."""
        index = self.index
        s = index.modules.get(caller[0])
        d = s.defs.get(caller[1]) if s is not None else None
        if s is None or d is None:
            return []

        if via is not None:
            handed = [h for text, h in _hands_by_text(d) if text == via]
        else:
            by_target = self._hands.get(caller)
            if by_target is None:
                by_target = self._hands[caller] = {}
                for text, h in _hands_by_text(d):
                    by_target.setdefault(index.resolve(s, d, text), []).append(h)
            handed = by_target.get(target, [])
        out: list[tuple[str, tuple[str, Target | None, str]]] = []
        for key, param, made in handed:
            name = index.param_name(target, key)
            if name is None:
                continue
            if param is not None:
                out.append((name, ("param", caller, param)))
            else:
                out.append((name, ("made", self._instantiated(s, d, made), "")))
        return out

    def _instantiations(self) -> dict[Target, list[tuple[FileSummary, DefSummary, str]]]:
        """Where production code makes an instance of each class (test code left out)."""
        made: dict[Target, list[tuple[FileSummary, DefSummary, str]]] = {}
        for s in self.index.summaries:
            if is_test_module(s.module):
                continue
            for d in s.defs.values():
                for text, _region in d.calls:
                    cls = self._instantiated(s, d, text)
                    if cls is not None:
                        made.setdefault(cls, []).append((s, d, text))
        return made

    def _per_call_classes(
        self, made: dict[Target, list[tuple[FileSummary, DefSummary, str]]]
    ) -> set[Target]:
        index = self.index
        long_classes = {
            cls for cls, sites in made.items() if any(self._made_long(*site) for site in sites)
        }
        # A class's methods run on its subclasses' instances too.
        per_call: set[Target] = set()
        for cls in index.classes():
            family = index.subclasses(cls) | {cls}
            if family <= self._announced:
                per_call.add(cls)  # each instance hands itself to a queue
            elif family & made.keys() and not family & long_classes:
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
