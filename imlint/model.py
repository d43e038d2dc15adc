"""The shared analysis model.

One walk over a module's LibCST tree collects, for every function, the facts the
rules need: which names hold which values, which containers are local, which
statements sit under which guards and conditions, which stores outlive the call,
and which in-place writes touch which buffers. :func:`build_model` then resolves
those facts into :class:`AllocationSite` records; every rule reads the same
records instead of walking the tree again.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodePosition, CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

from imlint.names import (
    INFERENCE_MODE_NAMES,
    TENSOR_NEW_METHODS,
    TORCH_FACTORIES,
    VIEW_ATTRIBUTES,
    VIEW_METHODS,
    ImportMap,
    dotted_name,
    expr_text,
    literal_bool,
    name_matches,
    string_value,
)
from imlint.options import AnalysisOptions
from imlint.project import NO_FACTS, FileFacts
from imlint.vocabulary import CACHE_DECORATORS, NON_TENSOR_METHODS, SIZED_FACTORIES


class Mode(enum.Enum):
    """The grad mode an allocation runs under, as far as the source shows."""

    UNKNOWN = "unknown"  # no explicit mode: whatever the caller had
    GUARDED = "guarded"  # inference_mode(False) or a configured guard
    INFERENCE = "inference"  # inference_mode() / inference_mode(True)


#: Functions whose attribute stores on ``self`` are construction, not lazy caching.
CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__"})

#: Calls that build a fresh object: a name assigned one of these is a local container.
_FRESH_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "tuple",
        "frozenset",
        "defaultdict",
        "collections.defaultdict",
        "OrderedDict",
        "collections.OrderedDict",
        "SimpleNamespace",
        "types.SimpleNamespace",
        "object",
    }
)

#: Methods whose result is (derived from) the receiver tensor, for handle aliasing.
_DERIVED_METHODS = VIEW_METHODS | frozenset(
    {"to", "cuda", "cpu", "type", "float", "half", "bfloat16", "int", "long", "bool", "pin_memory"}
)

_LAZY_FRAMES = frozenset({"if_body", "if_else", "while", "ifexp_body", "ifexp_else", "boolop"})


@dataclass(eq=False)
class Frame:
    """One enclosing block of a node, inside its function."""

    kind: str  # if_body if_else while for with try handler lambda comp ifexp_* boolop
    node: cst.CSTNode
    test: cst.CSTNode | None = None  # the condition for conditional frames
    mode: Mode | None = None  # for ``with`` frames and is_inference() branches
    owner: tuple[int, str | None] = (0, None)  # what closes the frame


Frames = tuple[Frame, ...]


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


@dataclass(eq=False)
class InplaceWrite:
    """A torch-level in-place write: ``x.zero_()``, ``x[i] = v``, ``x += v``, ``out=x``."""

    handle: cst.BaseExpression
    text: str
    frames: Frames
    order: int
    node: cst.CSTNode  # the node whose line is reported
    function: FunctionModel
    positions: Positions

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
    """A tensor allocation inside a function, with everything rules need to judge it."""

    call: cst.Call
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
    writes: list[InplaceWrite] = field(default_factory=list)
    #: IM003: how the call allocates (a chain through the project, or a configured
    #: allocator); None for a direct torch allocation.
    chain: str | None = None
    object_result: bool = False  # the call returns an object holding tensors
    report_node: cst.CSTNode | None = None  # where to report, when not at ``call``
    helper: bool = False  # ``call`` hands a factory to a get-or-create helper

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
    defs: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    other_bound: set[str] = field(default_factory=set)  # for/with/except/import targets
    fresh_texts: dict[str, int] = field(default_factory=dict)  # target text -> order of fresh store
    container_uses: set[str] = field(default_factory=set)  # texts used like dicts/lists
    stores: list[Store] = field(default_factory=list)
    writes: list[InplaceWrite] = field(default_factory=list)
    early_exits: list[EarlyExit] = field(default_factory=list)
    drops: list[tuple[str, int]] = field(default_factory=list)
    allocations: list[AllocationSite] = field(default_factory=list)
    returns: list[cst.BaseExpression] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)  # names called: ``f(...)``, ``self.f(...)``
    _mentions: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def is_constructor(self) -> bool:
        return self.cls is not None and self.name in CONSTRUCTORS and self.self_name is not None

    def is_local(self, name: str) -> bool:
        return name not in self.globals and (
            name in self.defs or name in self.params or name in self.other_bound
        )


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

    @property
    def sites(self) -> list[AllocationSite]:
        """Allocations stored into persistent storage, in source order."""
        return [a for a in self.allocations if a.store is not None]


# --------------------------------------------------------------------------- positions


class Positions:
    """Source ranges of nodes, computed lazily, one module-level statement at a time.

    LibCST's ``PositionProvider`` generates code for the whole module and records a range
    for every node, which costs more than parsing. Rules need ranges for a handful of
    nodes, so this computes line offsets of module-level statements from plain code
    generation and tracks positions only inside the statements that are asked about. The
    ranges are the same as ``PositionProvider``'s.
    """

    def __init__(self, module: cst.Module, text: str | None = None) -> None:
        self.module = module
        #: The parsed text: Python's parser locates calls in it without code generation.
        self.text = text if text is not None and "\r" not in text.replace("\r\n", "") else None
        self.call_index: dict[int, int] = {}  # id(call) -> its number in visiting order
        self._calls: list[CodeRange] | None = None
        self._lines: list[str] = []  # the text's lines, as Python counts them
        self.top_ids: dict[int, int] = {id(stmt): i for i, stmt in enumerate(module.body)}
        self.tops: dict[int, int] = {}  # id(node) -> index of its module-level statement
        self._computed: dict[cst.CSTNode, CodeRange] = {}
        self._done: set[int] = set()
        self._starts: list[int] = []  # first line of each module-level statement, so far

    def _start_line(self, index: int) -> int:
        module = self.module
        if not self._starts:
            header = "".join(module.code_for_node(h) for h in module.header)
            self._starts.append(1 + len(NEWLINE_RE.findall(header)))
        while len(self._starts) <= index:
            i = len(self._starts) - 1
            code = module.code_for_node(module.body[i])
            self._starts.append(self._starts[i] + len(NEWLINE_RE.findall(code)))
        return self._starts[index]

    def _compute(self, index: int) -> None:
        module = self.module
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=self,  # type: ignore[arg-type]  # only ``_computed`` is used
        )
        state.line = self._start_line(index)
        module.body[index]._codegen(state)
        self._done.add(index)

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._computed.get(node)
        if found is not None:
            return found
        if id(node) in self.call_index:
            found = self._call_range(node)  # type: ignore[arg-type]
            if found is not None:
                self._computed[node] = found
                return found
        index = self.tops.get(id(node))
        if index is None or index < 0 or index in self._done:
            raise KeyError(node)
        self._compute(index)
        return self._computed[node]

    def _call_range(self, node: cst.Call) -> CodeRange | None:
        """A call's range from Python's parser: the n-th call LibCST visits is the n-th
        call in source order (outer before inner), and both exclude the call's own
        parentheses. Checked against the call's code; None: use code generation."""
        if self.text is None:
            return None
        if self._calls is None:
            self._lines = _LINE_ENDS.split(self.text)
            self._calls = _call_ranges(self._lines, len(self.call_index))
        k = self.call_index[id(node)]
        if k >= len(self._calls):
            return None
        rng = self._calls[k]
        bare = node.with_changes(lpar=(), rpar=()) if node.lpar else node
        # Whitespace aside (the indentation of continued lines is the block's).
        if _slice(self._lines, rng).split() != _EMPTY.code_for_node(bare).split():
            return None
        return rng

    def get(self, node: cst.CSTNode) -> CodeRange | None:
        try:
            return self[node]
        except KeyError:
            return None

    def range_within(self, node: cst.CSTNode, owner: cst.CSTNode) -> CodeRange | None:
        """The range of a node inside ``owner``, whose statement is located."""
        self[owner]
        return self._computed.get(node)


_LINE_ENDS = re.compile(r"\r\n|\n|\r")


def _call_ranges(lines: list[str], expected: int) -> list[CodeRange]:
    """Ranges of every call in a text (its ``lines``), in LibCST's visiting order (empty
    when Python's parser does not see ``expected`` calls)."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if len(calls) != expected:
        return []
    calls.sort(
        key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0))
    )
    encoded = [line.encode() for line in lines]

    def column(line: int, offset: int | None) -> int:
        return len(encoded[line - 1][: offset or 0].decode("utf-8", "replace"))

    return [
        CodeRange(
            CodePosition(n.lineno, column(n.lineno, n.col_offset)),
            CodePosition(
                n.end_lineno or n.lineno, column(n.end_lineno or n.lineno, n.end_col_offset)
            ),
        )
        for n in calls
    ]


def _slice(lines: list[str], rng: CodeRange) -> str:
    if rng.start.line == rng.end.line:
        return lines[rng.start.line - 1][rng.start.column : rng.end.column]
    parts = [lines[rng.start.line - 1][rng.start.column :]]
    parts += lines[rng.start.line : rng.end.line - 1]
    parts.append(lines[rng.end.line - 1][: rng.end.column])
    return "\n".join(parts)


# --------------------------------------------------------------------------- collection


class _Collector(cst.CSTVisitor):
    def __init__(
        self, options: AnalysisOptions, positions: Positions, facts: FileFacts = NO_FACTS
    ) -> None:
        super().__init__()
        self.facts = facts
        self.positions = positions
        self._top = -1  # index of the module-level statement being visited
        self.options = options
        self.imports = ImportMap()
        self.functions: list[FunctionModel] = []
        self.classes: list[ClassModel] = []
        self.allocations: list[AllocationSite] = []
        self._func: list[FunctionModel] = []
        self._class: list[ClassModel | None] = [None]
        self._frames: list[Frame] = []
        self._saved_frames: list[list[Frame]] = []
        self._stmt: list[cst.SimpleStatementLine | cst.SimpleStatementSuite] = []
        self._order = 0
        self.container_texts: set[str] = set()  # names/attributes assigned a dict or list
        self.blocks: dict[int, tuple[int, int]] = {}

    # ---- helpers

    def _next(self) -> int:
        self._order += 1
        return self._order

    def _snapshot(self) -> Frames:
        return tuple(self._frames)

    @property
    def func(self) -> FunctionModel | None:
        return self._func[-1] if self._func else None

    def on_visit(self, node: cst.CSTNode) -> bool:
        top = self.positions.top_ids.get(id(node))
        if top is not None:
            self._top = top
        return super().on_visit(node)

    def _locate(self, node: cst.CSTNode) -> None:
        """Remember which module-level statement holds ``node``, to find it later."""
        self.positions.tops[id(node)] = self._top

    def call_mode(self, node: cst.BaseExpression) -> Mode | None:
        """The grad mode a ``with`` item or decorator sets, if it sets one."""
        func = node.func if isinstance(node, cst.Call) else node
        q = self.imports.qualify(func)
        if q is None:
            return None
        if self.options.extra_guards and name_matches(q, self.options.extra_guards):
            return Mode.GUARDED
        if q not in INFERENCE_MODE_NAMES:
            return None
        if not isinstance(node, cst.Call):
            return None  # ``@torch.inference_mode`` without a call: enabled by default
        arg: cst.BaseExpression | None = None
        for a in node.args:
            if a.keyword is None and a.star == "":
                arg = a.value
                break
            if a.keyword is not None and a.keyword.value == "mode":
                arg = a.value
                break
        if arg is None:
            return Mode.INFERENCE
        value = literal_bool(arg)
        if value is None:
            return None
        return Mode.INFERENCE if value else Mode.GUARDED

    def _decorator_info(self, node: cst.FunctionDef) -> tuple[Mode | None, bool, bool]:
        mode: Mode | None = None
        cached = False
        static = False
        for dec in node.decorators:
            expr = dec.decorator
            m = self.call_mode(expr)
            if m is None and not isinstance(expr, cst.Call):
                q = self.imports.qualify(expr)
                if q is not None and q in INFERENCE_MODE_NAMES:
                    m = Mode.INFERENCE  # bare @torch.inference_mode
            if m is not None and mode is None:
                mode = m  # the outermost decorator applies last; any explicit mode counts
            target = expr.func if isinstance(expr, cst.Call) else expr
            q = self.imports.qualify(target) or ""
            last = q.rsplit(".", 1)[-1]
            if (
                q in CACHE_DECORATORS
                or "cache" in last.lower()
                or (
                    self.options.extra_cache_decorators
                    and name_matches(q, self.options.extra_cache_decorators)
                )
            ):
                cached = True
            if last == "staticmethod":
                static = True
        return mode, cached, static

    # ---- imports, classes, functions

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.add(node)
        self._bind_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add(node)
        self._bind_import(node)

    def _bind_import(self, node: cst.Import | cst.ImportFrom) -> None:
        f = self.func
        if f is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                f.other_bound.add(alias.asname.name.value)
            else:
                d = dotted_name(alias.name)
                if d:
                    f.other_bound.add(d.split(".", 1)[0])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        cls = ClassModel(node.name.value, node)
        self.classes.append(cls)
        self._class.append(cls)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class.pop()

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        parent = self.func
        cls = self._class[-1]
        # A method is a function defined directly in a class body.
        direct_method = cls is not None
        mode, cached, static = self._decorator_info(node)
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        all_params = params + [p.name.value for p in node.params.kwonly_params]
        star_params: list[str] = []
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                all_params.append(star.name.value)
                star_params.append(star.name.value)
        self_name = params[0] if direct_method and params and not static else None
        qual_parts = [parent.qualname] if parent is not None else []
        if direct_method and cls is not None:
            qual_parts.append(cls.name)
        qualname = ".".join([*qual_parts, node.name.value])
        fm = FunctionModel(
            name=node.name.value,
            qualname=qualname,
            node=node,
            parent=parent,
            cls=cls if direct_method else (parent.cls if parent else None),
            self_name=self_name if direct_method else (parent.self_name if parent else None),
            params=frozenset(all_params),
            star_params=frozenset(star_params),
            decorator_mode=mode,
            cached=cached,
        )
        if direct_method and cls is not None:
            cls.functions.append(fm)
        self.functions.append(fm)
        if parent is not None:
            parent.other_bound.add(node.name.value)
        self._func.append(fm)
        self._saved_frames.append(self._frames)
        self._frames = []
        self._class.append(None)  # a nested def is not a method of the enclosing class

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._func.pop()
        self._frames = self._saved_frames.pop()
        self._class.pop()

    def visit_Global(self, node: cst.Global) -> None:
        if self.func is not None:
            self.func.globals.update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        if self.func is not None:
            self.func.globals.update(n.name.value for n in node.names)

    # ---- frames

    def _push(
        self,
        kind: str,
        node: cst.CSTNode,
        test: cst.CSTNode | None = None,
        mode: Mode | None = None,
        attribute: str | None = "body",
    ) -> None:
        """Open a frame; it closes when the visitor leaves ``node`` (or its ``attribute``)."""
        self._frames.append(Frame(kind, node, test, mode, (id(node), attribute)))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if self._frames and self._frames[-1].owner == (id(original_node), attribute):
            self._frames.pop()
        super().on_leave_attribute(original_node, attribute)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._frames and self._frames[-1].owner == (id(original_node), None):
            self._frames.pop()
        super().on_leave(original_node)

    def visit_If(self, node: cst.If) -> None:
        f = self.func
        if f is None:
            return
        body = node.body
        small: Sequence[cst.BaseSmallStatement] = ()
        if isinstance(body, cst.SimpleStatementSuite):
            small = body.body
        elif body.body and isinstance(body.body[-1], cst.SimpleStatementLine):
            small = body.body[-1].body
        returns = any(isinstance(s, cst.Return) for s in small)
        if returns:
            f.early_exits.append(EarlyExit(node.test, self._snapshot(), self._next()))

    def visit_If_body(self, node: cst.If) -> None:
        mode = Mode.GUARDED if _calls_is_inference(node.test) else None
        self._push("if_body", node, node.test, mode)

    def visit_If_orelse(self, node: cst.If) -> None:
        self._push("if_else", node, node.test, attribute="orelse")

    def visit_While_body(self, node: cst.While) -> None:
        self._push("while", node, node.test)

    def visit_For_body(self, node: cst.For) -> None:
        self._push("for", node)
        self._bind_target(node.target)

    def visit_With_body(self, node: cst.With) -> None:
        mode: Mode | None = None
        for item in node.items:
            m = self.call_mode(item.item)
            if m is not None:
                mode = m  # later items are entered inside earlier ones
            if item.asname is not None:
                self._bind_target(item.asname.name)
        self._push("with", node, None, mode)

    def visit_Try_body(self, node: cst.Try) -> None:
        self._push("try", node)

    def visit_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        self._push("handler", node)
        if node.name is not None:
            self._bind_target(node.name.name)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push("lambda", node, attribute=None)

    def _comp(self, node: cst.CSTNode) -> None:
        self._push("comp", node, attribute=None)

    visit_ListComp = _comp
    visit_SetComp = _comp
    visit_DictComp = _comp
    visit_GeneratorExp = _comp

    def visit_IfExp_body(self, node: cst.IfExp) -> None:
        self._push("ifexp_body", node, node.test, attribute="body")

    def visit_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._push("ifexp_else", node, node.test, attribute="orelse")

    def visit_BooleanOperation_right(self, node: cst.BooleanOperation) -> None:
        self._push("boolop", node, node.left, attribute="right")

    def visit_Module(self, node: cst.Module) -> None:
        self._index_block(node, node.body)
        self.positions.tops.update(self.positions.top_ids)
        # Functions run after the whole module has executed: module-level imports are
        # visible in them wherever they stand, even below the function.
        for imp in _module_level_imports(node.body):
            self.imports.add(imp)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._index_block(node, node.body)

    def _index_block(self, block: cst.CSTNode, body: Sequence[cst.CSTNode]) -> None:
        for i, stmt in enumerate(body):
            self.blocks[id(stmt)] = (id(block), i)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._stmt.append(node)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._stmt.pop()

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._stmt.append(node)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        self._stmt.pop()

    # ---- statements

    def _bind_target(self, target: cst.BaseExpression) -> None:
        f = self.func
        if f is None:
            return
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind_target(el.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        f = self.func
        if f is None:
            # Module and class level: remember which names hold dicts and lists.
            if (
                isinstance(target, cst.Name)
                and value is not None
                and _is_container(value, self.imports)
            ):
                self.container_texts.add(target.value)
                if self._class[-1] is not None:
                    self.container_texts.add("self." + target.value)
            return
        if isinstance(target, cst.Name):
            name = target.value
            if value is not None:
                f.defs.setdefault(name, []).append(value)
            else:
                f.other_bound.add(name)
            if name in f.globals:
                self._store("global", name, None, target, value)
                if value is not None and _is_none(value):
                    f.drops.append((name, self._next()))
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Iterable[cst.BaseElement | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements
            ):
                values = value.elements
            else:
                values = [None] * len(target.elements)
            for el, v in zip(target.elements, values, strict=False):
                self._assign(el.value, v.value if v is not None else None)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, None)
        elif isinstance(target, cst.Attribute):
            text = expr_text(target, f.self_name)
            self._store("attribute", text, None, target.value, value)
            if value is not None and _is_none(value):
                f.drops.append((text, self._next()))
            elif value is not None and _is_fresh(value, self.imports):
                f.fresh_texts.setdefault(text, self._order)
            if value is not None and _is_container(value, self.imports):
                self.container_texts.add(text)
        elif isinstance(target, cst.Subscript):
            text = expr_text(target, f.self_name)
            container = expr_text(target.value, f.self_name)
            self._store("subscript", text, container, target.value, value)
            if not _string_keyed(target):  # ``ws["ci"] = ...`` fills a dict, not a tensor
                self._write(target.value, f"{container}[...] = ...")
            if value is not None and _is_none(value):
                f.drops.append((text, self._next()))

    def _store(
        self,
        kind: str,
        target: str,
        container: str | None,
        root: cst.BaseExpression | None,
        value: cst.BaseExpression | None,
    ) -> None:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        f.stores.append(
            Store(kind, target, container, root, value, self._snapshot(), self._next(), stmt)
        )

    def _write(self, handle: cst.BaseExpression, text: str, at: cst.CSTNode | None = None) -> None:
        f = self.func
        if f is None:
            return
        node = at if at is not None else handle
        self._locate(node)
        f.writes.append(
            InplaceWrite(handle, text, self._snapshot(), self._next(), node, f, self.positions)
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._assign(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assign(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        f = self.func
        if f is None:
            return
        target = node.target
        handle = target.value if isinstance(target, cst.Subscript) else target
        op = _EMPTY.code_for_node(node.operator).strip()
        self._write(handle, f"{expr_text(target, f.self_name)} {op} ...")
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign(node.target, node.value)

    def visit_Del(self, node: cst.Del) -> None:
        f = self.func
        if f is None:
            return
        targets = (
            node.target.elements
            if isinstance(node.target, (cst.Tuple, cst.List))
            else [node.target]
        )
        for t in targets:
            expr = t.value if isinstance(t, cst.BaseElement) else t
            f.drops.append((expr_text(expr, f.self_name), self._next()))

    def visit_Return(self, node: cst.Return) -> None:
        f = self.func
        if f is None or node.value is None:
            return
        if any(fr.kind == "lambda" for fr in self._frames):
            return
        f.returns.append(node.value)
        if f.cached:
            self._store("return", f"{f.qualname}()", None, None, node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        f = self.func
        if f is None:
            return
        left = node.left
        for target in node.comparisons:
            op = target.operator
            if isinstance(op, (cst.In, cst.NotIn)):
                f.container_uses.add(expr_text(target.comparator, f.self_name))
            elif isinstance(op, (cst.Is, cst.IsNot)) and isinstance(left, cst.Subscript):
                f.container_uses.add(expr_text(left.value, f.self_name))
            left = target.comparator

    def visit_Call(self, node: cst.Call) -> None:
        index = self.positions.call_index
        index[id(node)] = len(index)
        f = self.func
        if f is None:
            return
        found = self._allocator(node)
        if found is not None:
            allocator, chain, object_result = found
            self._add_site(node, allocator, chain, object_result)
        elif self.facts.helpers:
            self._helper_site(node, f)
        func = node.func
        if isinstance(func, cst.Name):
            f.calls.add(func.value)
        elif isinstance(func, cst.Attribute):
            f.calls.add(func.attr.value)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                outs = (
                    arg.value.elements
                    if isinstance(arg.value, (cst.Tuple, cst.List))
                    else [arg.value]
                )
                for o in outs:
                    v = o.value if isinstance(o, cst.BaseElement) else o
                    self._write(v, f"out={expr_text(v, f.self_name)}", at=node)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method in _CONTAINER_METHODS:
                f.container_uses.add(expr_text(receiver, f.self_name))
            if method.endswith("_") and not method.startswith("_") and len(method) > 1:
                self._write(receiver, f"{expr_text(receiver, f.self_name)}.{method}()", at=node)
            args = [a for a in node.args if a.star == ""]
            rtext = expr_text(receiver, f.self_name)
            if method == "setdefault" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("setdefault", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "__setitem__" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("subscript", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "update":
                for a in args:
                    if a.keyword is not None:
                        self._store(
                            "update", f"{rtext}['{a.keyword.value}']", rtext, receiver, a.value
                        )
                    elif isinstance(a.value, cst.Dict):
                        for el in a.value.elements:
                            if isinstance(el, cst.DictElement):
                                key = expr_text(el.key, f.self_name)
                                self._store("update", f"{rtext}[{key}]", rtext, receiver, el.value)
            elif method == "register_buffer" and len(args) >= 2:
                name = string_value(args[0].value)
                target = f"{rtext}.{name}" if name else f"{rtext}.<buffer>"
                self._store("register_buffer", target, None, receiver, args[1].value)
            elif method == "pop" and args:
                f.drops.append((f"{rtext}[{expr_text(args[0].value, f.self_name)}]", self._next()))
            elif method == "clear" and not args:
                f.drops.append((f"{rtext}[]", self._next()))
        elif isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) >= 3:
            obj = node.args[0].value
            name = string_value(node.args[1].value)
            otext = expr_text(obj, f.self_name)
            target = f"{otext}.{name}" if name else f"{otext}.<{expr_text(node.args[1].value)}>"
            self._store("setattr", target, None, obj, node.args[2].value)

    def _add_site(
        self,
        node: cst.Call,
        allocator: str,
        chain: str | None,
        object_result: bool,
        report_node: cst.CSTNode | None = None,
        helper: bool = False,
    ) -> AllocationSite:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        self._locate(node)
        if report_node is not None:
            self._locate(report_node)
        if stmt is not None:
            self._locate(stmt)
        site = AllocationSite(
            call=node,
            allocator=allocator,
            function=f,
            frames=self._snapshot(),
            stmt=stmt if isinstance(stmt, cst.SimpleStatementLine) else None,
            suite=stmt if isinstance(stmt, cst.SimpleStatementSuite) else None,
            order=self._next(),
            positions=self.positions,
            chain=chain,
            object_result=object_result,
            report_node=report_node,
            helper=helper,
        )
        f.allocations.append(site)
        self.allocations.append(site)
        return site

    def call_key(self, func: cst.BaseExpression) -> str | None:
        """A call's callee as the project index spells it (see ``FileFacts``)."""
        f = self.func
        text = dotted_name(func)
        if text is None or f is None:
            return None
        head, _, rest = text.partition(".")
        if f.self_name is not None and head == f.self_name:
            return f"{f.cls.name}|self.{rest}" if f.cls is not None and rest else None
        return text

    def _allocator(self, node: cst.Call) -> tuple[str, str | None, bool] | None:
        """(allocator, chain, returns an object) for a call that allocates, else None.

        The chain is None for torch's own factories; IM003 reads the others: configured
        allocators and the project's allocating callables.
        """
        if _zero_elements(node):
            return None  # ``torch.empty(0)``: a placeholder, not a buffer
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_NEW_METHODS:
            return f".{func.attr.value}", None, False
        q = self.imports.qualify(func)
        if q is None:
            return None
        head, _, rest = q.partition(".")
        if head == "torch" and rest in TORCH_FACTORIES:
            return q, None, False
        if self.options.extra_allocators and name_matches(q, self.options.extra_allocators):
            last = q.rsplit(".", 1)[-1]
            return q, f"`{q}` is a configured allocator (extra-allocators)", last[:1].isupper()
        if self.facts.allocators:
            key = self.call_key(func)
            known = self.facts.allocators.get(key) if key is not None else None
            if known is not None:
                return q, known[0], known[1]
        return None

    def _helper_site(self, node: cst.Call, f: FunctionModel) -> None:
        """A factory handed to a get-or-create helper that keeps what it returns."""
        key = self.call_key(node.func)
        helper = self.facts.helpers.get(key) if key is not None else None
        if helper is None:
            return
        position, param, name, stored = helper
        positional = [a for a in node.args if a.keyword is None and a.star == ""]
        arg: cst.BaseExpression | None = None
        for a in node.args:
            if a.keyword is not None and a.keyword.value == param:
                arg = a.value
        if arg is None and 0 <= position < len(positional):
            arg = positional[position].value
        if arg is None:
            return
        inner, via = self._factory_allocation(arg)
        if via is None:
            return
        chain = (
            f"`{name}` keeps what its factory `{param}` returns in `{stored}`; the factory {via}"
        )
        self._add_site(node, name, chain, False, report_node=inner, helper=True)

    def _factory_allocation(self, arg: cst.BaseExpression) -> tuple[cst.CSTNode | None, str | None]:
        """Where a factory argument allocates, and how (None: it does not)."""
        if isinstance(arg, cst.Lambda):
            for n in walk(arg.body):
                if isinstance(n, cst.Call):
                    found = self._allocator(n)
                    if found is not None:
                        return n, f"allocates via {found[1] or found[0]}"
            return None, None
        if isinstance(arg, cst.Call):
            q = self.imports.qualify(arg.func) or ""
            if q.rsplit(".", 1)[-1] == "partial" and arg.args:
                target = arg.args[0].value
                tq = self.imports.qualify(target) or ""
                head, _, rest = tq.partition(".")
                if head == "torch" and rest in TORCH_FACTORIES:
                    return arg, f"is `partial({tq}, ...)`"
                key = self.call_key(target)
                known = self.facts.allocators.get(key) if key is not None else None
                if known is not None:
                    return arg, f"is `partial({key}, ...)`: {known[0]}"
            return None, None
        key = self.call_key(arg)
        known = self.facts.allocators.get(key) if key is not None else None
        if known is not None:
            return None, f"`{key}`: {known[0]}"
        return None, None


_EMPTY = cst.Module(body=[])


def _module_level_imports(body: Sequence[cst.CSTNode]) -> Iterator[cst.Import | cst.ImportFrom]:
    """Imports executed at module level, also inside module-level ``if``/``try`` blocks."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for child in stmt.children:
                if isinstance(child, cst.IndentedBlock):
                    yield from _module_level_imports(child.body)
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally, cst.If)):
                    for grandchild in child.children:
                        if isinstance(grandchild, cst.IndentedBlock):
                            yield from _module_level_imports(grandchild.body)


def _zero_elements(node: cst.Call) -> bool:
    """Whether a sized factory call has a literal 0 in its size: an empty placeholder."""
    func = node.func
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else ""
    )
    if (
        name not in SIZED_FACTORIES
        or name.endswith("_like")
        or not node.args
        or node.args[0].keyword is not None
    ):
        return False
    first = node.args[0].value
    dims = (
        [el.value for el in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
    )
    return any(isinstance(d, cst.Integer) and d.value == "0" for d in dims)


def _string_keyed(target: cst.Subscript) -> bool:
    """``x["key"]``: a tensor cannot be indexed by a string, so ``x`` is a mapping."""
    return len(target.slice) == 1 and isinstance(
        getattr(target.slice[0].slice, "value", None),
        (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString),
    )


def _calls_is_inference(test: cst.BaseExpression) -> bool:
    for node in walk(test):
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Attribute, cst.Name)):
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
            if name == "is_inference":
                return True
    return False


_CONTAINER_METHODS = frozenset(
    {"get", "setdefault", "pop", "popitem", "items", "keys", "values", "update", "clear", "append"}
)
_CONTAINER_CALLS = frozenset(
    {
        "dict",
        "list",
        "defaultdict",
        "collections.defaultdict",
        "OrderedDict",
        "collections.OrderedDict",
        "weakref.WeakValueDictionary",
        "weakref.WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakKeyDictionary",
    }
)


def _is_container(value: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether an expression builds a dict or list (as opposed to a tensor)."""
    if isinstance(value, (cst.Dict, cst.List, cst.DictComp, cst.ListComp)):
        return True
    if isinstance(value, cst.BinaryOperation):  # [None] * n
        return isinstance(value.left, cst.List) or isinstance(value.right, cst.List)
    if isinstance(value, cst.Call):
        q = imports.qualify(value.func)
        return q is not None and q in _CONTAINER_CALLS
    return False


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_fresh(value: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether an expression builds a new object that nothing else references."""
    if isinstance(
        value,
        (
            cst.Dict,
            cst.List,
            cst.Set,
            cst.Tuple,
            cst.ListComp,
            cst.SetComp,
            cst.DictComp,
            cst.GeneratorExp,
        ),
    ):
        return True
    if isinstance(value, cst.Call):
        q = imports.qualify(value.func)
        if q is not None:
            if q in _FRESH_CALLS:
                return True
            last = q.rsplit(".", 1)[-1]
            if isinstance(value.func, cst.Name) and (last[:1].isupper() or last == "cls"):
                return True  # a constructor call: a new object
            head, _, rest = q.partition(".")
            if head == "torch" and rest in TORCH_FACTORIES:
                return True
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in ("copy", "clone"):
            return True
    return False


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, itself included, whitespace and punctuation aside
    (iteratively: deep trees are fine). LibCST's ``children`` rebuilds nodes to list
    them; this reads the fields."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for name, _ in _FIELDS.get(type(n)) or _fields(n):
            value = getattr(n, name)
            kind = type(value)
            if kind is tuple or kind is list:
                stack.extend(c for c in value if _walked(type(c)))
            elif _walked(kind):
                stack.append(value)


# --------------------------------------------------------------------------- resolution


class _FunctionAnalysis:
    """Resolves value flow, aliases and mentions inside one function."""

    def __init__(self, f: FunctionModel, model: _ModuleIndex) -> None:
        self.f = f
        self.index = model

    # -- locality

    def root_kind(self, expr: cst.BaseExpression | None) -> str:
        """How the object an expression names relates to this call.

        ``local`` means created by this call; anything else may outlive it.
        """
        f = self.f
        if expr is None:
            return "other"
        base = expr
        while True:
            text = expr_text(base, f.self_name)
            if text in f.fresh_texts:
                return "local"
            if isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
                continue
            break
        if isinstance(base, cst.Name):
            name = base.value
            if name in f.globals:
                return "global"
            if f.self_name is not None and name == f.self_name:
                return "self"
            if name in f.star_params:
                return "local"
            if name in f.params:
                return "param"
            values = f.defs.get(name)
            if values:
                if all(_is_fresh(v, self.index.imports) for v in values):
                    return "local"
                return "alias"
            if name in f.other_bound:
                return "alias"
            return "global" if f.parent is None else "closure"
        return "call"

    # -- value flow: which allocation sites reach an expression

    def flow(self, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> set[int]:
        sites = self.index.site_ids
        out: set[int] = set()
        stack: list[cst.BaseExpression] = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, cst.Call):
                sid = sites.get(id(e))
                if sid is not None:
                    out.add(sid)
                if (
                    isinstance(e.func, cst.Attribute)
                    and e.func.attr.value not in NON_TENSOR_METHODS
                ):
                    stack.append(e.func.value)
            elif isinstance(e, cst.Subscript):
                stack.append(e.value)
            elif isinstance(e, cst.Attribute):
                if e.attr.value in VIEW_ATTRIBUTES:
                    stack.append(e.value)
            elif isinstance(e, cst.Name):
                if e.value in seen or e.value in self.f.globals:
                    continue
                for v in self.f.defs.get(e.value, ()):
                    out |= self.flow(v, seen | {e.value})
            elif isinstance(e, (cst.Tuple, cst.List, cst.Set, cst.Dict)):
                stack.extend(el.value for el in e.elements)
            elif isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
                stack.append(e.elt)
            elif isinstance(e, cst.DictComp):
                stack.append(e.value)
            elif isinstance(e, cst.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, cst.BooleanOperation):
                stack.extend((e.left, e.right))
            elif isinstance(e, (cst.NamedExpr, cst.StarredElement)):
                stack.append(e.value)
            elif isinstance(e, cst.BinaryOperation):
                stack.extend(
                    (e.left, e.right)
                )  # ``1.0 / torch.tensor(...)``: a new tensor, same mode
            elif isinstance(e, cst.UnaryOperation):
                stack.append(e.expression)
        return out

    # -- handles: which storages an expression aliases

    def tokens(self, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> set[str]:
        f = self.f
        out: set[str] = set()
        stack: list[cst.BaseExpression] = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, cst.Name):
                name = e.value
                if name in seen:
                    continue
                if f.is_local(name):
                    for v in f.defs.get(name, ()):
                        out |= self.tokens(v, seen | {name})
                else:
                    out.add("store:" + name)
            elif isinstance(e, cst.Attribute):
                out.add("store:" + expr_text(e, f.self_name))
                if e.attr.value in VIEW_ATTRIBUTES:
                    stack.append(e.value)
            elif isinstance(e, cst.Subscript):
                out.add("store:" + expr_text(e, f.self_name))
                stack.append(e.value)
            elif isinstance(e, cst.Call):
                sid = self.index.site_ids.get(id(e))
                if sid is not None:
                    out.add(f"alloc:{sid}")
                func = e.func
                args = [a for a in e.args if a.star == ""]
                if isinstance(func, cst.Attribute):
                    method = func.attr.value
                    rtext = expr_text(func.value, f.self_name)
                    # ``self.m()`` calls the class's own ``m`` when it has one, whatever
                    # its name (a getter called ``view`` or ``get`` is not the tensor's
                    # or the dict's method).
                    callee = (
                        self.index.methods.get((id(f.cls), method))
                        if f.self_name is not None and rtext == "self"
                        else None
                    )
                    if callee is not None:
                        out |= self.index.returned(callee)
                    elif method in ("get", "setdefault", "__getitem__") and args:
                        out.add(f"store:{rtext}[{expr_text(args[0].value, f.self_name)}]")
                        if method == "setdefault" and len(args) > 1:
                            stack.append(args[1].value)
                    elif method in _DERIVED_METHODS or method.endswith("_"):
                        stack.append(func.value)
                elif isinstance(func, cst.Name):
                    if func.value == "getattr" and len(args) >= 2:
                        attr = string_value(args[1].value)
                        if attr:
                            out.add(f"store:{expr_text(args[0].value, f.self_name)}.{attr}")
                    elif func.value in self.index.functions and not f.is_local(func.value):
                        out |= self.index.returned(self.index.functions[func.value])
            elif isinstance(e, cst.IfExp):
                stack.extend((e.body, e.orelse))
            elif isinstance(e, cst.BooleanOperation):
                stack.extend((e.left, e.right))
            elif isinstance(e, cst.NamedExpr):
                stack.append(e.value)
        return out

    # -- mentions: which storages a condition looks at

    def mentions(self, expr: cst.CSTNode, seen: frozenset[str] = frozenset()) -> set[str]:
        f = self.f
        out: set[str] = set()
        for n in walk(expr):
            if isinstance(n, cst.Name):
                name = n.value
                out.add("self" if name == f.self_name else name)
                if name not in seen and f.is_local(name):
                    cached = f._mentions.get(name)
                    if cached is None:
                        acc: set[str] = set()
                        for v in f.defs.get(name, ()):
                            acc |= self.mentions(v, seen | {name})
                        cached = frozenset(acc)
                        if not seen:
                            f._mentions[name] = cached
                    out |= cached
            elif isinstance(n, (cst.Attribute, cst.Subscript)):
                out.add(expr_text(n, f.self_name))
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
                if n.func.value in ("hasattr", "getattr") and len(n.args) >= 2:
                    attr = string_value(n.args[1].value)
                    if attr:
                        out.add(f"{expr_text(n.args[0].value, f.self_name)}.{attr}")
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
                if n.func.attr.value in ("get", "__contains__") and n.args:
                    rtext = expr_text(n.func.value, f.self_name)
                    out.add(f"{rtext}[{expr_text(n.args[0].value, f.self_name)}]")
        return out


@dataclass
class _ModuleIndex:
    imports: ImportMap
    site_ids: dict[int, int]  # id(call node) -> index in allocations
    functions: dict[str, FunctionModel]  # module-level functions by name
    methods: dict[tuple[int, str], FunctionModel]  # (id(class), name) -> method
    container_texts: set[str]  # names/attributes assigned a dict or list anywhere
    analyses: dict[int, _FunctionAnalysis] = field(default_factory=dict)
    _returned: dict[int, frozenset[str]] = field(default_factory=dict)

    def returned(self, g: FunctionModel) -> frozenset[str]:
        """Storage that calling ``g`` hands back: a getter's result aliases its cache."""
        key = id(g)
        known = self._returned.get(key)
        if known is not None:
            return known
        self._returned[key] = frozenset()  # recursion guard
        out: set[str] = {f"store:{g.qualname}()"} if g.cached else set()
        ga = self.analyses[key]
        for value in g.returns:
            out |= ga.tokens(value)
        result = frozenset(out)
        self._returned[key] = result
        return result


def _persistent(store: Store, fa: _FunctionAnalysis) -> bool:
    """Whether a store fills storage that outlives the call. ``imlint/narrow.py`` keeps
    a superset of these rules (what a site needs, by name): a new kind of store here
    needs its counterpart there (``tests/test_narrow.py`` compares both paths)."""
    f = fa.f
    if store.kind == "return":
        return True
    if store.kind == "global":
        return True
    kind = fa.root_kind(store.root)
    if kind == "local":
        return False
    if store.kind in ("attribute", "setattr", "register_buffer"):
        return not f.is_constructor
    if store.kind in ("setdefault", "update"):
        return True
    if store.kind == "subscript":
        container = store.container or ""
        if f.is_constructor and container.startswith("self.__dict__"):
            return False
        # ``x[i] = t`` copies into a tensor unless ``x`` is known to be a dict or list.
        return (
            container in f.container_uses
            or container in fa.index.container_texts
            or container.endswith(".__dict__")
        ) and not _is_slice_store(store)
    return False


def _reads_target(call: cst.Call, target: str, fa: _FunctionAnalysis) -> bool:
    """Whether a call's arguments read ``target`` (the storage it is stored into)."""
    return any(target in fa.mentions(arg.value) for arg in call.args)


def _is_slice_store(store: Store) -> bool:
    target = store.target
    return ":" in target[target.rfind("[") :] or "..." in target


def _dropped(store: Store, f: FunctionModel) -> bool:
    """Per-call scratch: the same call resets or drops the storage after storing."""
    container_all = f"{store.container}[]" if store.container else None
    for text, order in f.drops:
        if order > store.order and (text == store.target or text == container_all):
            return True
    return False


def _related(store: Store, f: FunctionModel) -> set[str]:
    """Texts that, mentioned in a condition, make the allocation a cache miss."""
    rel = {store.target}
    if store.container is not None:
        rel.add(store.container)
    if store.kind == "register_buffer" and store.root is not None:
        rel.add(expr_text(store.root, f.self_name) + "._buffers")
    return rel


# --------------------------------------------------------------------------- the walk

#: Whitespace, comments and punctuation: nothing the collector looks at.
_SKIPPED: frozenset[type] = frozenset(
    cls
    for module in (cst._nodes.whitespace, cst._nodes.op)  # type: ignore[attr-defined]
    for cls in vars(module).values()
    if isinstance(cls, type) and issubclass(cls, cst.CSTNode)
)
#: Per node class: its child fields in LibCST's visiting order (source order), each
#: with whether the collector has a hook on it (``visit_If_body``).
_FIELDS: dict[type, list[tuple[str, bool]]] = {}


class _FieldRecorder(cst.CSTVisitor):
    """Records the order in which LibCST visits a node's fields, without descending."""

    def __init__(self, node: cst.CSTNode) -> None:
        self.node = node
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.node and attribute not in self.fields:
            self.fields.append(attribute)


def _hooked(method: str) -> bool:
    """Whether the collector defines ``method`` (CSTVisitor has empty stubs for all)."""
    return getattr(_Collector, method, None) is not getattr(cst.CSTVisitor, method, None)


#: Node classes whose visit skips a field when it is None (``format_spec``): their
#: fields are recorded per node, not per class.
_PER_NODE = frozenset({"FormattedStringExpression", "TemplatedStringExpression"})


def _fields(node: cst.CSTNode) -> list[tuple[str, bool]]:
    cls = type(node)
    recorder = _FieldRecorder(node)
    node._visit_and_replace_children(recorder)
    name = cls.__name__
    fields = [
        (f, _hooked(f"visit_{name}_{f}") or _hooked(f"leave_{name}_{f}")) for f in recorder.fields
    ]
    if name not in _PER_NODE:
        _FIELDS[cls] = fields
    return fields


_WALKED: dict[type, bool] = {}


def _walked(kind: type) -> bool:
    """Whether values of this type are nodes the walk enters (a cached ``issubclass``:
    ``isinstance`` against LibCST's abstract base classes is slow)."""
    found = _WALKED.get(kind)
    if found is None:
        found = _WALKED[kind] = issubclass(kind, cst.CSTNode) and kind not in _SKIPPED
    return found


def _walk(node: cst.CSTNode, collector: _Collector) -> None:
    """``node.visit(collector)``, read-only: LibCST's own visit rebuilds every node it
    passes and visits whitespace, which costs as much as the parse. The order, the node
    hooks and the field hooks (``visit_If_body``) are LibCST's."""
    if collector.on_visit(node):
        fields = _FIELDS.get(type(node)) or _fields(node)
        for name, hooked in fields:
            value = getattr(node, name)
            if hooked:
                collector.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    walked = _WALKED.get(type(child))
                    if walked is None:
                        walked = _walked(type(child))
                    if walked:
                        _walk(child, collector)
            else:
                walked = _WALKED.get(kind)
                if walked is None:
                    walked = _walked(kind)
                if walked:
                    _walk(value, collector)
            if hooked:
                collector.on_leave_attribute(node, name)
    collector.on_leave(node)


def _is_prefix(prefix: Frames, frames: Frames) -> bool:
    return len(prefix) <= len(frames) and all(a is b for a, b in zip(prefix, frames, strict=False))


def build_model(
    module: cst.Module,
    options: AnalysisOptions,
    facts: FileFacts = NO_FACTS,
    text: str | None = None,
) -> ModuleModel:
    """Walk a module once and resolve the facts every rule reads (``facts``: what the
    project index knows about this file's calls)."""
    positions = Positions(module, text)
    collector = _Collector(options, positions, facts)
    _walk(module, collector)
    allocations = collector.allocations
    index = _ModuleIndex(
        collector.imports,
        {id(site.call): i for i, site in enumerate(allocations)},
        {f.name: f for f in collector.functions if f.parent is None and f.cls is None},
        {(id(f.cls), f.name): f for f in collector.functions if f.cls is not None and f.self_name},
        collector.container_texts,
    )
    analyses = {id(f): _FunctionAnalysis(f, index) for f in collector.functions}
    index.analyses = analyses

    # A factory handed to a get-or-create helper: the helper keeps what it returns.
    for site in allocations:
        if site.helper:
            site.store = Store(
                "helper", f"{site.allocator}(...)", None, None, site.call, site.frames,
                site.order, site.stmt,
            )  # fmt: skip
            site.mode = _mode(site)
            site.lazy = "get-or-create helper"

    for f in collector.functions:
        fa = analyses[id(f)]
        persistent_stores = [s for s in f.stores if _persistent(s, fa) and not _dropped(s, f)]
        # Storage each persistent store fills, by text: a condition that tests storage
        # filled in its own branch is a cache test for everything that branch allocates.
        keys: dict[str, list[Store]] = {}
        for s in persistent_stores:
            keys.setdefault(s.target, []).append(s)
            if s.container is not None:
                keys.setdefault(s.container, []).append(s)
        flows: dict[int, Store] = {}
        for store in persistent_stores:
            if store.value is None:
                continue
            reaching = fa.flow(store.value)
            if any(allocations[sid].chain is None for sid in reaching):
                # A torch allocation is what is stored (``helper(n).new_zeros(n)``):
                # the calls it is derived from are not the site.
                reaching = {sid for sid in reaching if allocations[sid].chain is None}
            # ``x = convert(x)``: a call handed the stored value replaces what is there
            # (a conversion, a copy to the host), it does not fill storage on first use.
            reaching = {
                sid
                for sid in reaching
                if allocations[sid].chain is None
                or not _reads_target(allocations[sid].call, store.target, fa)
            }
            for sid in reaching:
                flows.setdefault(sid, store)
        for sid, store in flows.items():
            site = allocations[sid]
            if site.function is not f or site.store is not None:
                continue
            site.store = store
            site.mode = _mode(site)
            _laziness(site, fa, _related(store, f), keys)

    # In-place writes, per scope: the function, its class, or the module.
    for site in allocations:
        if site.store is not None:
            _find_writes(site, analyses, collector.functions, index)

    return ModuleModel(
        collector.imports,
        collector.functions,
        collector.classes,
        allocations,
        options,
        positions,
        collector.blocks,
    )


def _mode(site: AllocationSite) -> Mode:
    for frame in reversed(site.frames):
        if frame.kind == "lambda":
            return Mode.UNKNOWN  # runs later, under whatever mode its caller has
        if frame.mode is not None:
            return frame.mode
    f: FunctionModel | None = site.function
    while f is not None:
        if f.decorator_mode is not None:
            return f.decorator_mode
        f = f.parent
    return Mode.UNKNOWN


def _laziness(
    site: AllocationSite, fa: _FunctionAnalysis, related: set[str], keys: dict[str, list[Store]]
) -> None:
    """Decide whether the allocation runs only on a cache miss or a resize.

    A condition is a cache test when it mentions the storage (or an alias of it), or
    when it mentions storage that the same branch fills: a key it updates (``if
    self._key != key: self._key = key; self._buf = ...``) or a sibling cache
    (``if d not in _K: _K[d] = k; _V[d] = v``).
    """
    store = site.store
    assert store is not None
    if store.kind == "return":
        site.lazy = "cached function"
        return
    if store.kind == "setdefault":
        site.lazy = "setdefault"
        return
    for frame in reversed(site.frames):
        if frame.kind == "lambda":
            break
        if frame.kind in _LAZY_FRAMES and frame.test is not None:
            mentioned = fa.mentions(frame.test)
            filled_here = any(
                any(fr is frame for fr in store.frames)
                for k in mentioned & keys.keys()
                for store in keys[k]
            )
            if mentioned & related or filled_here:
                site.lazy = "cache miss"
                site.lazy_frame = frame
                site.lazy_test = expr_text(frame.test)
                return
        if frame.kind == "handler":
            try_node = _enclosing_try(site, frame)
            if try_node is not None and fa.mentions(try_node.body) & related:
                site.lazy = "cache miss"
                site.lazy_frame = frame
                return
    for exit_ in fa.f.early_exits:
        if exit_.order < site.order and _is_prefix(exit_.frames, site.frames):
            if fa.mentions(exit_.test) & related:
                site.lazy = "cache miss"
                site.lazy_exit = exit_
                site.lazy_test = expr_text(exit_.test)
                return


def _enclosing_try(site: AllocationSite, handler: Frame) -> cst.Try | None:
    idx = site.frames.index(handler)
    for frame in reversed(site.frames[:idx]):
        if (
            frame.kind == "try"
            and isinstance(frame.node, cst.Try)
            and handler.node in frame.node.handlers
        ):
            return frame.node
    # the handler's Try has no "try" frame on the stack (we were not inside its body)
    node = handler.node
    for f in reversed(site.frames[:idx]):
        for child in f.node.children:
            if isinstance(child, cst.IndentedBlock):
                for stmt in child.body:
                    if isinstance(stmt, cst.Try) and node in stmt.handlers:
                        return stmt
    body: Sequence[cst.CSTNode] = site.function.node.body.body
    for top in body:
        if isinstance(top, cst.Try) and node in top.handlers:
            return top
    return None


def _allocation_time(site: AllocationSite, write: InplaceWrite) -> bool:
    """Whether a write only runs right after the allocation, under the same mode."""
    if write.function is not site.function:
        return False
    if site.lazy == "cached function":
        return True
    if site.lazy_frame is not None:
        return any(fr is site.lazy_frame for fr in write.frames)
    if site.lazy_exit is not None:
        return write.order > site.lazy_exit.order and _is_prefix(
            site.lazy_exit.frames, write.frames
        )
    return False


def _find_writes(
    site: AllocationSite,
    analyses: dict[int, _FunctionAnalysis],
    functions: list[FunctionModel],
    index: _ModuleIndex,
) -> None:
    store = site.store
    assert store is not None
    f = site.function
    own = analyses[id(f)]
    sid = index.site_ids[id(site.call)]
    wanted = {store.token, f"alloc:{sid}"}
    # An object that holds tensors (IM003): writes reach them through its attributes.
    inside = store.token + "." if site.object_result else None

    def hits(tokens: set[str]) -> bool:
        return bool(tokens & wanted) or (
            inside is not None and any(t.startswith(inside) for t in tokens)
        )

    for w in f.writes:
        if hits(own.tokens(w.handle)) and not _allocation_time(site, w):
            site.writes.append(w)
    # Other functions that can see the same storage.
    kind = own.root_kind(store.root) if store.root is not None else "global"
    others: list[FunctionModel]
    if kind == "self" and f.cls is not None:
        others = [g for g in functions if g.cls is f.cls]
    elif kind == "global" or store.kind == "return":
        others = functions  # module storage: any function of the module may write it
    else:
        # Storage handed in (a parameter, a registry): other functions reach it only
        # through this function's return value (``st = get_ws(reg); st.zero_()``).
        others = [g for g in functions if f.name in g.calls]
    for g in others:
        if g is f:
            continue
        ga = analyses[id(g)]
        for w in g.writes:
            tokens = ga.tokens(w.handle)
            if store.token in tokens or (inside is not None and hits(tokens)):
                site.writes.append(w)
    # Visiting order is source order: the first write is the one a message cites.
    site.writes.sort(key=lambda w: w.order)


def parse_and_build(
    source: str, options: AnalysisOptions, facts: FileFacts = NO_FACTS
) -> tuple[cst.Module, ModuleModel]:
    """Parse a module and build its model (raises ``libcst.ParserSyntaxError``)."""
    module = parse_module(source)
    return module, build_model(module, options, facts, source)


def _unvalidated(self: cst.CSTNode) -> None:
    pass


def parse_module(source: str) -> cst.Module:
    """``libcst.parse_module`` without node validation. Every node LibCST builds runs
    ``_validate`` (``CSTNode.__post_init__``), a third of the parse; nodes that its own
    parser builds from source are valid by construction (LibCST's own note on
    ``__post_init__`` says as much). Nodes built later (the fixer's) are validated."""
    validate = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _unvalidated  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = validate  # type: ignore[method-assign]
