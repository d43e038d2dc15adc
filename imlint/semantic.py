"""The semantic model's records: functions, classes, stores, writes and allocation
sites, as one walk of a module collects them (``imlint/collect.py``) and the resolution
passes complete them (``values.py``, ``sites.py``, ``writes.py``). Rules read these."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodeRange

from imlint.kinds import CONSTRUCTORS
from imlint.names import ImportMap
from imlint.options import AnalysisOptions
from imlint.positions import Positions
from imlint.vocabulary import TENSOR_DERIVING_METHODS, content_of

#: Write kinds (see :class:`InplaceWrite`).
TORCH_WRITE = "torch"
KERNEL_WRITE = "kernel"
HANDED_WRITE = "handed"
#: A torch in-place write that runs only inside ``inference_mode()`` (a ``with`` block or
#: a decorated function): allowed on an inference tensor, so latent like a kernel write.
INFERENCE_WRITE = "inference"
#: A torch in-place write to the whole of ``x.data`` (``x.data.copy_(y)``, ``.zero_()``):
#: ``.data`` is a view autograd does not track, and the inference-tensor check does not
#: see a write through it (a write to a slice of it, ``x.data[:n].fill_(0)``, is seen).
DATA_WRITE = "data"
#: Writes that leave an inference tensor's hazard latent: they cannot raise.
LATENT_WRITES = (KERNEL_WRITE, INFERENCE_WRITE, DATA_WRITE)
#: How strong each write kind is: a torch write wins over a kernel write (or a torch write
#: inside inference mode, or through ``.data``), which wins over a tensor handed to code
#: imlint cannot read.
WRITE_STRENGTH = {
    HANDED_WRITE: 1,
    INFERENCE_WRITE: 2,
    KERNEL_WRITE: 2,
    DATA_WRITE: 2,
    TORCH_WRITE: 3,
}


def write_kind(kind: str, mode: Mode | None) -> str:
    """The kind of a write that runs under ``mode``: a torch write inside inference mode
    cannot raise (``INFERENCE_WRITE``)."""
    return INFERENCE_WRITE if kind == TORCH_WRITE and mode is Mode.INFERENCE else kind


def strongest_write(kinds: Iterable[str]) -> str | None:
    """The strongest of some write kinds (``WRITE_STRENGTH``), None for none."""
    return max(kinds, key=WRITE_STRENGTH.__getitem__, default=None)


#: Tiers of a kept tensor, by the strongest writer that can reach it (the seed's table):
#: a torch in-place write crashes (IM001), a kernel write stays latent (IM002), a tensor
#: nothing writes only fails under autograd (IM005).
TORCH_TIER, KERNEL_TIER, READ_ONLY_TIER = "torch-write", "kernel-write", "read-only"


class Mode(enum.Enum):
    """The grad mode an allocation runs under, as far as the source shows."""

    UNKNOWN = "unknown"  # no explicit mode: whatever the caller had
    GUARDED = "guarded"  # inference_mode(False) or a configured guard
    INFERENCE = "inference"  # inference_mode() / inference_mode(True)


@dataclass(eq=False)
class Frame:
    """One enclosing block of a node, inside its function."""

    kind: str  # if_body if_else while case for with try handler lambda comp ifexp_* boolop
    node: cst.CSTNode
    test: cst.CSTNode | None = None  # the condition for conditional frames
    mode: Mode | None = None  # for ``with`` frames and is_inference() branches
    owner: tuple[int, str | None] = (0, None)  # what closes the frame


Frames = tuple[Frame, ...]


def bare(frames: Frames) -> Frames:
    """Frames without ``with`` blocks, whose bodies always run when they are reached."""
    return tuple(fr for fr in frames if fr.kind != "with")


def is_prefix(prefix: Frames, frames: Frames) -> bool:
    """Whether ``frames`` lie inside ``prefix``: code there runs only after entering every
    block of ``prefix``."""
    return len(prefix) <= len(frames) and all(a is b for a, b in zip(prefix, frames, strict=False))


@dataclass(eq=False)
class ClassModel:
    name: str
    node: cst.ClassDef
    functions: list[FunctionModel] = field(default_factory=list)


@dataclass(eq=False)
class Store:
    """A store of a value into storage that may outlive the call."""

    kind: str  # subscript attribute global setattr register_buffer setdefault update return
    target: str  # how messages name the storage: ``buffers[key]``, ``self._buf``
    container: str | None  # ``buffers`` for ``buffers[key]``
    root: cst.BaseExpression | None  # the object or container stored into
    value: cst.BaseExpression | None
    frames: Frames
    order: int
    stmt: cst.CSTNode | None

    @property
    def token(self) -> str:
        return "store:" + self.target

    @property
    def sliced(self) -> bool:
        """``x[a:b] = v``, ``x[..., i] = v``: a copy into a tensor, not an item kept."""
        last = self.target[self.target.rfind("[") :]
        return self.kind == "subscript" and (":" in last or "..." in self.target)


@dataclass(eq=False)
class InplaceWrite:
    """A write into a tensor after its creation.

    ``kind`` is ``torch`` for a torch-level in-place write (``x.zero_()``, ``x[i] = v``,
    ``x += v``, ``out=x`` to a torch op): outside inference mode it raises on an inference
    tensor. ``kernel`` is a write the dispatcher never sees, as code shows it (a Triton
    kernel of the project that stores through the pointer, ``out=x`` to a non-torch
    callable, a raw pointer handed out): the hazard stays latent. ``handed`` is a tensor
    handed to code imlint cannot read (an op from another library, a kernel compiled at
    run time): it may write it, from a kernel, or only read it; ``tier`` decides.
    """

    handle: cst.BaseExpression
    text: str
    frames: Frames
    order: int
    node: cst.CSTNode  # the node whose line is reported
    function: FunctionModel
    positions: Positions
    kind: str = TORCH_WRITE

    @property
    def line(self) -> int:
        return self.positions[self.node].start.line


@dataclass(eq=False)
class EarlyExit:
    """``if <test>: ... return`` : what follows runs only when the test failed."""

    test: cst.BaseExpression
    frames: Frames
    order: int


@dataclass(eq=False)
class AllocationSite:
    """A tensor allocation inside a function, with everything rules need to judge it.
    ``call`` is the call that makes the tensor, or the arithmetic (``(a + b) / 2``,
    allocator ``ARITHMETIC``) or indexing (``cos[idx]``, allocator ``INDEXING``) that
    makes a new one from tensors made before."""

    call: cst.Call | cst.BinaryOperation | cst.Subscript
    allocator: str
    function: FunctionModel
    frames: Frames
    stmt: cst.SimpleStatementLine | None  # the smallest enclosing statement line
    suite: cst.SimpleStatementSuite | None  # set when on a one-line compound statement
    order: int
    positions: Positions
    # Resolved by build_model:
    store: Store | None = None
    mode: Mode = Mode.UNKNOWN
    lazy: str | None = None  # why the allocation is lazy, if it is
    lazy_frame: Frame | None = None
    lazy_exit: EarlyExit | None = None
    lazy_test: str = ""  # the condition that makes it lazy, for explanations
    writes: list[InplaceWrite] = field(default_factory=list)  # source order
    #: IM003: how the call allocates (a chain through the project, or a configured
    #: allocator); None for a direct torch allocation.
    chain: str | None = None
    object_result: bool = False  # the call returns an object holding tensors
    report_node: cst.CSTNode | None = None  # where to report, when not at ``call``
    helper: bool = False  # ``call`` hands a factory to a get-or-create helper
    #: IM003: (write kind, how) when the object's own methods write its tensors
    object_writes: tuple[str, str] | None = None
    #: A write fills the tensor right after the allocation (not counted in ``writes``).
    filled: bool = False
    #: IM003: what the tensor the call returns holds when made (``content``).
    made_content: str = "unknown"

    @property
    def range(self) -> CodeRange:
        return self.positions[self.report_node or self.call]

    @property
    def line(self) -> int:
        return self.range.start.line

    @property
    def col(self) -> int:
        return self.range.start.column + 1

    @property
    def torch_writes(self) -> list[InplaceWrite]:
        return [w for w in self.writes if w.kind == TORCH_WRITE]

    @property
    def kernel_writes(self) -> list[InplaceWrite]:
        """Kernel writes, with tensors handed to unreadable code when the tier is a
        kernel write (see :attr:`tier`)."""
        latent = LATENT_WRITES
        kinds = (*latent, HANDED_WRITE) if self.tier == KERNEL_TIER else latent
        return [w for w in self.writes if w.kind in kinds]

    @property
    def derived(self) -> bool:
        """Made by a method from the tensor it is called on (``x.to(d)``, ``w.exp()``):
        when that tensor is itself a fresh allocation, that allocation is the site."""
        name = self.allocator[1:]
        return self.chain is None and self.allocator[:1] == "." and name in TENSOR_DERIVING_METHODS

    @property
    def receiver(self) -> cst.BaseExpression | None:
        """The tensor a derived site is made from (``x`` of ``x.to(d)``)."""
        if not isinstance(self.call, cst.Call):
            return None
        func = self.call.func
        return func.value if self.derived and isinstance(func, cst.Attribute) else None

    @property
    def content(self) -> str:
        """What the tensor holds when made (``vocabulary.content_of``): behind a call
        (IM003), what the project index says the callee returns; ``content`` once filled
        at creation."""
        if self.filled:
            return "content"
        return self.made_content if self.chain is not None else content_of(self.allocator)

    @property
    def tier(self) -> str:
        """Which writer can reach the kept tensor: a torch in-place write; a kernel write
        (shown by code, or a tensor handed to code imlint cannot read when it holds no
        content of its own: blank or zeroed storage is a workspace, an output or a
        counter); blank storage nothing visible writes (code out of sight fills it before
        anything reads it); else read-only, a tensor with content handed to such code
        being taken as its input. A torch write that runs only inside inference mode,
        or that writes the whole of ``x.data``, cannot raise: latent, like a kernel
        write."""
        kinds = {w.kind for w in self.writes}
        if TORCH_WRITE in kinds:
            return TORCH_TIER
        content = self.content
        if kinds & set(LATENT_WRITES):
            return KERNEL_TIER
        if HANDED_WRITE in kinds and content != "content":
            return KERNEL_TIER
        if not kinds and content == "blank":
            return KERNEL_TIER
        return READ_ONLY_TIER

    @property
    def persistent(self) -> bool:
        return self.store is not None

    @property
    def in_lambda(self) -> bool:
        return any(f.kind == "lambda" for f in self.frames)

    @property
    def in_comprehension(self) -> bool:
        return any(f.kind == "comp" for f in self.frames)


@dataclass(eq=False)
class FunctionModel:
    name: str
    qualname: str
    node: cst.FunctionDef
    parent: FunctionModel | None
    cls: ClassModel | None
    self_name: str | None
    params: frozenset[str]
    star_params: frozenset[str]  # ``*args``/``**kwargs``: a new tuple/dict on every call
    decorator_mode: Mode | None
    cached: bool
    globals: set[str] = field(default_factory=set)
    #: the ``nonlocal`` ones among ``globals``: locals of the enclosing call
    nonlocals: set[str] = field(default_factory=set)
    defs: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    #: id of a value in ``defs`` -> (order, frames) of the plain assignment that binds it
    #: (``reaching``); loop targets and unpacked items have none and always reach
    def_at: dict[int, tuple[int, Frames]] = field(default_factory=dict)
    other_bound: set[str] = field(default_factory=set)  # for/with/except/import targets
    fresh_texts: dict[str, int] = field(default_factory=dict)  # target text -> order of fresh store
    #: id of the ``value[i]`` a tuple target's name is bound to (``a, b = f(x)``) -> i:
    #: the item of what the call returns, not an index into a tensor
    unpacked: dict[int, int] = field(default_factory=dict)
    container_uses: set[str] = field(default_factory=set)  # texts used like dicts/lists
    stores: list[Store] = field(default_factory=list)
    writes: list[InplaceWrite] = field(default_factory=list)
    early_exits: list[EarlyExit] = field(default_factory=list)
    #: orders of the ``return``/``raise``/``break``/``continue`` statements
    exits: list[int] = field(default_factory=list)
    drops: list[tuple[str, int]] = field(default_factory=list)
    allocations: list[AllocationSite] = field(default_factory=list)
    returns: list[cst.BaseExpression] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)  # names called: ``f(...)``, ``self.f(...)``
    #: local -> (what its definitions mention, the locals they name): see ``mentions``
    _mentions: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)

    @property
    def is_constructor(self) -> bool:
        return self.cls is not None and self.name in CONSTRUCTORS and self.self_name is not None

    def reaching(self, name: str, at: tuple[int, Frames] | None) -> list[cst.BaseExpression]:
        """The definitions of local ``name`` that can reach code at ``at`` (its order and
        frames): the last plain assignment before it in a block that holds it, a ``with``
        body counting as the block around it (every path to it runs that assignment:
        ``z = self._buf.view(n)`` then ``z = shift(z)``) and
        whatever comes after that one (in branches, or later in a loop). All of them
        without ``at``."""
        defs = self.defs.get(name, [])
        if at is None or len(defs) < 2:
            return defs
        order, frames = at
        last = -1
        for v in defs:
            pos = self.def_at.get(id(v))
            if pos is not None and last < pos[0] < order and is_prefix(bare(pos[1]), bare(frames)):
                last = pos[0]
        if last < 0:
            return defs
        return [v for v in defs if (pos := self.def_at.get(id(v))) is None or pos[0] >= last]

    def is_local(self, name: str) -> bool:
        return name not in self.globals and (
            name in self.defs or name in self.params or name in self.other_bound
        )


def frames_mode(frames: Frames, function: FunctionModel | None) -> Mode:
    """The grad mode code in ``frames`` of ``function`` runs under, as the source shows:
    the innermost ``with`` (or ``is_inference()`` branch), else the decorators of the
    function and the functions around it; a lambda runs later, under its caller's mode."""
    for frame in reversed(frames):
        if frame.kind == "lambda":
            return Mode.UNKNOWN
        if frame.mode is not None:
            return frame.mode
    while function is not None:
        if function.decorator_mode is not None:
            return function.decorator_mode
        function = function.parent
    return Mode.UNKNOWN


@dataclass
class ModuleModel:
    imports: ImportMap
    functions: list[FunctionModel]
    classes: list[ClassModel]
    allocations: list[AllocationSite]
    options: AnalysisOptions
    #: Source ranges, computed on demand (the fixer reads statement and string ranges).
    positions: Positions
    #: id(statement) -> (id(enclosing block), index in it), for grouping adjacent statements.
    blocks: dict[int, tuple[int, int]]
    #: id(block) -> the block's statements
    bodies: dict[int, Sequence[cst.CSTNode]] = field(default_factory=dict)
    #: torch imported unconditionally at the module's top level (see ``fix.unsafe_reason``)
    torch_imported_at_top: bool = True
    #: the name a conditional module-level ``import torch`` binds (``try: import torch``
    #: ``except ImportError: torch = None``; the ``else`` of ``if TYPE_CHECKING:``)
    torch_bound_conditionally: str | None = None

    @property
    def sites(self) -> list[AllocationSite]:
        """Allocations stored into persistent storage, in source order."""
        return [a for a in self.allocations if a.store is not None]
