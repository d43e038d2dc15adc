"""The autofix: wrap the statement that allocates in ``with torch.inference_mode(False):``.

The fix edits text, line by line, from positions in the parsed tree, so that nothing but
the wrapped statements moves: comments, blank lines, line endings, indentation style,
the encoding cookie and the BOM stay as they were. Continuation lines of a multi-line
statement get one more indent unit, except lines inside a multi-line string, which are
left alone (re-indenting them would change the string).

Choices (documented in the README):
- the smallest statement performing the allocation is wrapped; ``buf = torch.empty()`` is
  wrapped and the following ``buffers[key] = buf`` stays outside; when the kept value is
  computed after the allocation, the statements up to the store are wrapped too
  (:func:`kept_span`);
- a statement that computes from tensors gets ``no_grad()`` next to the guard, which
  would otherwise switch grad mode on (:func:`records_grad`);
- adjacent flagged statements of one block share one ``with``;
- inside ``with torch.no_grad():`` the guard is nested inside that block (the wrapped
  statement is in it), never merged into its items;
- the guard is spelled with the module's torch alias (``th.inference_mode(False)``),
  else with an imported ``inference_mode``, else with the torch a function-local or
  conditional module-level import binds where the guard goes (:func:`reused_torch`),
  else ``import torch`` is added among the module's imports (an unsafe fix).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from imlint.names import dotted_name, torch_alias
from imlint.reflow import explode_items, split_long_line
from imlint.semantic import AllocationSite, FunctionModel, ModuleModel
from imlint.vocabulary import TORCH_FACTORIES
from imlint.walk import walk

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split only where Python (and LibCST) end lines."""
    return _LINE.findall(text)


def unfixable_reason(site: AllocationSite, model: ModuleModel) -> str | None:
    """Why wrapping this allocation would not be safe, or None if it can be fixed."""
    reason = _statement_reason(site)
    if reason is not None:
        return reason
    span = kept_span(site, model) if site.stmt is not None else []
    return span if isinstance(span, str) else None


def unsafe_reason(site: AllocationSite, model: ModuleModel) -> str | None:
    """Why the fix of a fixable site may change more than the mode its tensor is made
    under (an *unsafe* fix, applied only with ``--unsafe-fixes``), or None when it is
    safe: one statement that only calls torch factories (``torch.empty(n)``,
    ``x.new_zeros(n)``), whose result is the same tensor, now a normal one.

    Unsafe: a statement that computes from other tensors or calls other code (a helper,
    a constructor), which now runs outside inference mode and without recording
    gradients even when called with grad on; a guard that also spans the statements
    that compute the kept value."""
    if site.suite is not None:
        stmt: cst.CSTNode = site.suite
    else:
        span = kept_span(site, model) if site.stmt is not None else []
        if isinstance(span, str) or not span:
            return None  # not fixable at all
        if len(span) > 1:
            return (
                "the guard also spans the statements that compute the kept value, "
                "which then run outside inference mode and without recording gradients"
            )
        stmt = span[0]
    if not model.torch_imported_at_top and reused_torch(site, model) is None:
        return (
            "no `torch` is bound where the guard goes (the module imports it only for "
            "type checkers or inside other functions): the fix adds `import torch` at "
            "its top, so importing the module would need torch"
        )
    if _factories_only(stmt, model):
        return None
    return (
        "the statement computes from other tensors or calls other code, which then runs "
        "outside inference mode and without recording gradients even with grad on"
    )


def reused_torch(site: AllocationSite, model: ModuleModel) -> str | None:
    """The name torch is bound to where the guard goes, when the module does not import
    it unconditionally at its top: an ``import torch`` (or ``import torch as th``)
    earlier in the enclosing functions, else a conditional module-level one (``try:
    import torch``). The guard reuses it; nothing is added at module level."""
    anchor = site.stmt if site.stmt is not None else site.suite
    if anchor is None:
        return None
    at = model.positions[anchor].start.line
    f: FunctionModel | None = site.function
    while f is not None:
        stack: list[cst.CSTNode] = [f.node.body]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Import):
                name = torch_alias(node)
                if name is not None and model.positions[node].start.line < at:
                    return name
            elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.extend(node.children)  # not into nested scopes
        f = f.parent
    return model.torch_bound_conditionally


def _factories_only(stmt: cst.CSTNode, model: ModuleModel) -> bool:
    """Whether a simple statement's values only call torch factories."""
    body = (
        stmt.body if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    )
    values = [
        small.value
        for small in body
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Return, cst.Expr))
        and small.value is not None
    ]
    if not (len(values) == len(body) > 0 and all(_only_factories(v, model) for v in values)):
        return False
    # What the factories are handed: sizes, dtypes, devices; a call there runs under
    # the guard too, so only builtins, torch and math, and size queries pass.
    for value in values:
        for node in walk(value):
            if isinstance(node, cst.Call) and not _only_factories(node, model):
                func = node.func
                if isinstance(func, cst.Name) and func.value in _SIZE_BUILTINS:
                    continue
                if isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS:
                    continue
                head = (model.imports.qualify(func) or "").partition(".")[0]
                if head not in ("torch", "math"):
                    return False
    return True


#: Calls that compute sizes and options for a factory (safe under the guard).
_SIZE_BUILTINS = frozenset(
    {"len", "max", "min", "int", "float", "bool", "abs", "round", "sum", "tuple", "list", "range"}
)
_SIZE_METHODS = frozenset({"size", "numel", "dim", "stride", "element_size", "get"})


def _statement_reason(site: AllocationSite) -> str | None:
    for frame in site.frames:
        if frame.kind == "lambda":
            return "allocation inside a lambda: it runs when the lambda is called"
        if frame.kind == "comp" and isinstance(frame.node, cst.GeneratorExp):
            return (
                "allocation inside a generator expression: it runs when the generator is consumed"
            )
    if site.suite is not None:
        if len(site.suite.body) != 1:
            return "one-line compound statement with several statements: split it first"
        if "\\" in site.suite.leading_whitespace.value:
            return (
                "compound statement continued with a backslash: put its body on its own line first"
            )
        return _unsafe_contents(site.suite.body[0])
    if site.stmt is None:
        return "allocation in a compound statement's header (a condition, a default argument, a decorator)"
    if len(site.stmt.body) != 1:
        return "several statements on one line: split them first"
    return _unsafe_contents(site.stmt.body[0])


def kept_span(site: AllocationSite, model: ModuleModel) -> list[cst.CSTNode] | str:
    """The statements to wrap so that what is kept is made outside inference mode: the
    allocating statement, and when the kept value is computed from it later (``ids =
    make(n)``, then ``self._c[k] = torch.cat([ids, tail])``), every statement of the
    block up to the store. A reason when that is not one block of siblings."""
    stmt, store = site.stmt, site.store
    assert stmt is not None
    if store is None or store.stmt is None or store.stmt is stmt or _keeps_result(site):
        return [stmt]
    here, there = model.blocks.get(id(stmt)), model.blocks.get(id(store.stmt))
    if here is None or there is None or here[0] != there[0] or there[1] < here[1]:
        return (
            "the kept value is computed from the allocation in another block: wrap the "
            "allocation and the statements that compute the kept value by hand"
        )
    span = list(model.bodies[here[0]][here[1] : there[1] + 1])
    for s in span:
        if not isinstance(s, cst.SimpleStatementLine):
            return "a compound statement computes the kept value: wrap it by hand"
        if len(s.body) != 1 or (reason := _unsafe_contents(s.body[0])) is not None:
            return reason or "several statements on one line: split them first"
    return span


def _keeps_result(site: AllocationSite) -> bool:
    """Whether the store keeps the allocation's own result (``self._buf = buf`` after
    ``buf = torch.empty(n)``), not a value computed from it."""
    store = site.store
    assert store is not None and site.stmt is not None
    small = site.stmt.body[0]
    names: set[str] = set()
    if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is site.call:
        targets = (
            [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
        )
        names = {t.value for t in targets if isinstance(t, cst.Name)}
    value = store.value
    parts = (
        [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
    )
    return bool(names) and all(isinstance(p, cst.Name) and p.value in names for p in parts)


def records_grad(stmt: cst.CSTNode, model: ModuleModel) -> bool:
    """Whether wrapping ``stmt`` in ``inference_mode(False)`` alone could switch autograd on
    for it: ``InferenceMode(false)`` turns grad mode on, even inside ``no_grad()``, so a
    statement that computes from tensors (``torch.arange(n) * self.scale``, ``x.clone()``,
    ``torch.cat``, a constructor or helper) would start recording a graph. A statement
    that only calls torch factories (``torch.empty``, ``x.new_zeros``) records nothing.
    Code that asks for gradients (``requires_grad=True``, ``nn.Parameter``) keeps them."""
    values: list[cst.BaseExpression] = []
    for small in (
        stmt.body if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    ):
        if (
            isinstance(small, (cst.Assign, cst.AnnAssign, cst.Return, cst.Expr))
            and small.value is not None
        ):
            values.append(small.value)
        else:
            return True
    for node in walk(stmt):
        if isinstance(node, cst.Arg) and node.keyword is not None:
            if node.keyword.value == "requires_grad" and not (
                isinstance(node.value, cst.Name) and node.value.value == "False"
            ):
                return False
        if isinstance(node, cst.Call):
            q = model.imports.qualify(node.func) or ""
            if q.rsplit(".", 1)[-1] == "Parameter":
                return False
    return not all(_only_factories(v, model) for v in values)


def _only_factories(value: cst.BaseExpression, model: ModuleModel) -> bool:
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(_only_factories(e.value, model) for e in value.elements)
    if isinstance(value, cst.Dict):
        return all(
            isinstance(e, cst.DictElement) and _only_factories(e.value, model)
            for e in value.elements
        )
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in _NEW_METHODS:
        return True
    q = model.imports.qualify(func) or ""
    head, _, name = q.partition(".")
    return head == "torch" and name in TORCH_FACTORIES


#: Tensor methods that make a new tensor from sizes alone: no graph to record.
_NEW_METHODS = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"})


def _unsafe_contents(stmt: cst.BaseSmallStatement) -> str | None:
    for node in walk(stmt):
        if isinstance(node, (cst.Yield, cst.Await)):
            return "the statement suspends (yield/await) and would leak the mode to other code"
        if isinstance(node, (cst.Lambda, cst.FunctionDef)):
            break
    if isinstance(stmt, (cst.Global, cst.Nonlocal, cst.Import, cst.ImportFrom)):
        return "not an allocating statement"
    return None


@dataclass
class FixOutcome:
    text: str
    fixed: list[AllocationSite] = field(default_factory=list)


@dataclass
class _Guard:
    call: str  # e.g. "torch.inference_mode(False)"
    import_line: str | None  # "import torch" when it must be added
    import_at: int = 0  # 0-based line index to insert the import before
    no_grad: str = "torch.no_grad()"
    no_grad_import: bool = False  # ``no_grad`` needs ``import torch`` added
    used_no_grad: bool = False
    used: bool = False  # some wrap spelled this guard

    def items(self, no_grad: bool) -> str:
        self.used = True
        if not no_grad:
            return self.call
        self.used_no_grad = True
        return f"{self.call}, {self.no_grad}"

    def needs_import(self) -> bool:
        return self.used and (
            self.import_line is not None or (self.no_grad_import and self.used_no_grad)
        )


def _guard_at(site: AllocationSite, module_guard: _Guard, model: ModuleModel) -> _Guard:
    """The guard for one site: the module's, or one naming the torch a conditional or
    function-local import binds there (``reused_torch``), which needs no import."""
    if model.torch_imported_at_top:
        return module_guard
    name = reused_torch(site, model)
    if name is None:
        return module_guard
    return _Guard(f"{name}.inference_mode(False)", None, 0, f"{name}.no_grad()")


def _guard(module: cst.Module, model: ModuleModel) -> _Guard:
    """How to spell the guard in this module, and where ``import torch`` goes if needed."""
    torch_alias: str | None = None
    mode_alias: str | None = None
    first_torch_from: int | None = None  # 1-based line of the first ``from torch import``
    last_import_end: int | None = None
    after_header = 0  # after the docstring and ``from __future__`` imports
    for i, stmt in enumerate(module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        rng = model.positions[stmt]
        first = stmt.body[0]
        if (
            i == 0
            and isinstance(first, cst.Expr)
            and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            after_header = rng.end.line
            continue
        for s in stmt.body:
            if isinstance(s, cst.Import):
                last_import_end = rng.end.line
                for alias in s.names:
                    name = dotted_name(alias.name) or ""
                    if (
                        name == "torch"
                        and alias.asname is not None
                        and isinstance(alias.asname.name, cst.Name)
                    ):
                        torch_alias = torch_alias or alias.asname.name.value
                    elif (name == "torch" or name.startswith("torch.")) and alias.asname is None:
                        torch_alias = "torch"  # ``import torch.nn`` binds ``torch`` too
            elif isinstance(s, cst.ImportFrom):
                last_import_end = rng.end.line
                module_name = dotted_name(s.module) if s.module is not None else None
                if module_name == "__future__":
                    after_header = rng.end.line
                elif module_name == "torch" and not s.relative:
                    if first_torch_from is None:
                        first_torch_from = rng.start.line
                    if not isinstance(s.names, cst.ImportStar):
                        for alias in s.names:
                            if (
                                isinstance(alias.name, cst.Name)
                                and alias.name.value == "inference_mode"
                            ):
                                mode_alias = alias.name.value
                                if alias.asname is not None and isinstance(
                                    alias.asname.name, cst.Name
                                ):
                                    mode_alias = alias.asname.name.value
    if torch_alias is not None:
        return _Guard(f"{torch_alias}.inference_mode(False)", None, 0, f"{torch_alias}.no_grad()")
    if first_torch_from is not None:
        at = first_torch_from - 1
    elif last_import_end is not None:
        at = last_import_end
    else:
        at = after_header
    if mode_alias is not None:  # ``from torch import inference_mode``: no ``torch`` bound
        return _Guard(f"{mode_alias}(False)", None, at, "torch.no_grad()", True)
    return _Guard("torch.inference_mode(False)", "import torch", at)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t\f"))]


def _newline(line: str, default: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return default


def _unit(indent: str, module: cst.Module) -> str:
    """One more level of indentation, in the style the block already uses."""
    if indent.endswith("\t") or (not indent and module.default_indent == "\t"):
        return "\t"
    return module.default_indent if module.default_indent.strip(" ") == "" else "    "


def _deeper(line: str, indent: str, unit: str) -> str:
    """``line`` one level deeper: the unit goes after the statement's own indentation,
    so mixed tab/space prefixes stay consistent; other continuation lines get it first."""
    if line.startswith(indent):
        return indent + unit + line[len(indent) :]
    return unit + line


def _string_interior_lines(node: cst.CSTNode, owner: cst.CSTNode, model: ModuleModel) -> set[int]:
    """1-based lines that start inside a multi-line string literal within ``node``."""
    out: set[int] = set()
    for n in walk(node):
        if isinstance(n, (cst.SimpleString, cst.FormattedString)):
            rng = model.positions.range_within(n, owner)
            if rng is not None and rng.end.line > rng.start.line:
                out.update(range(rng.start.line + 1, rng.end.line + 1))
    return out


def apply_fixes(
    text: str,
    module: cst.Module,
    model: ModuleModel,
    sites: Sequence[AllocationSite],
    line_length: int = 88,
) -> FixOutcome:
    """Wrap every fixable site's statement; returns the new text and the sites fixed."""
    fixable = [s for s in sites if unfixable_reason(s, model) is None]
    if not fixable:
        return FixOutcome(text)
    lines = split_lines(text)
    guard = _guard(module, model)
    default_nl = module.default_newline

    # Statements to wrap (deduplicated), grouped by block into runs of adjacent siblings.
    line_stmts: dict[int, tuple[cst.SimpleStatementLine, list[AllocationSite]]] = {}
    suites: dict[int, tuple[cst.SimpleStatementSuite, list[AllocationSite]]] = {}
    for site in fixable:
        if site.stmt is not None:
            span = kept_span(site, model)
            assert not isinstance(span, str)  # unfixable sites were left out above
            for stmt in span:
                line_stmts.setdefault(id(stmt), (stmt, []))[1].append(site)  # type: ignore[arg-type]
        elif site.suite is not None:
            suites.setdefault(id(site.suite), (site.suite, []))[1].append(site)

    by_block: dict[int, list[tuple[int, cst.SimpleStatementLine, list[AllocationSite]]]] = {}
    for stmt, owners in line_stmts.values():
        block, index = model.blocks[id(stmt)]
        by_block.setdefault(block, []).append((index, stmt, owners))

    # Edits: (first line index, last line index, replacement lines), applied bottom-up.
    edits: list[tuple[int, int, list[str]]] = []
    fixed: list[AllocationSite] = []
    for entries in by_block.values():
        entries.sort(key=lambda e: e[0])
        run: list[tuple[int, cst.SimpleStatementLine, list[AllocationSite]]] = []
        for entry in entries:
            if run and entry[0] != run[-1][0] + 1:
                g = _guard_at(run[0][2][0], guard, model)
                edits.append(
                    _wrap_run(run, lines, model, module, g, default_nl, fixed, line_length)
                )
                run = []
            run.append(entry)
        if run:
            g = _guard_at(run[0][2][0], guard, model)
            edits.append(_wrap_run(run, lines, model, module, g, default_nl, fixed, line_length))
    for suite, owners in suites.values():
        g = _guard_at(owners[0], guard, model)
        edit = _split_suite(suite, lines, model, module, g, default_nl)
        if edit is not None:
            edits.append(edit)
            fixed.extend(owners)

    if guard.needs_import() and fixed:
        at = min(guard.import_at, len(lines))
        nl = _newline(lines[at - 1], default_nl) if at > 0 else default_nl
        edits.append((at, at - 1, ["import torch" + nl]))  # an insertion before line ``at``
    # Bottom-up, so earlier line numbers stay valid; an insertion goes after edits below it.
    edits.sort(key=lambda e: (e[0], e[1]), reverse=True)
    for first, last, replacement in edits:
        lines[first : last + 1] = replacement
    return FixOutcome("".join(lines), fixed)


def _wrap_run(
    run: list[tuple[int, cst.SimpleStatementLine, list[AllocationSite]]],
    lines: list[str],
    model: ModuleModel,
    module: cst.Module,
    guard: _Guard,
    default_nl: str,
    fixed: list[AllocationSite],
    line_length: int,
) -> tuple[int, int, list[str]]:
    first_stmt, last_stmt = run[0][1], run[-1][1]
    first = model.positions[first_stmt].start.line - 1
    last = model.positions[last_stmt].end.line - 1
    indent = _indent_of(lines[first])
    unit = _unit(indent, module)
    nl = _newline(lines[first], default_nl)
    keep: set[int] = set()
    for _, stmt, owners in run:
        keep |= _string_interior_lines(stmt, stmt, model)
        fixed.extend(o for o in owners if o not in fixed)
    no_grad = any(records_grad(stmt, model) for _, stmt, _ in run)
    out = [f"{indent}with {guard.items(no_grad)}:{nl}"]
    for i in range(first, last + 1):
        line = lines[i]
        if (i + 1) in keep or not line.strip():
            out.append(line)
            continue
        deeper = _deeper(line, indent, unit)
        body, ending = deeper.rstrip("\r\n"), deeper[len(deeper.rstrip("\r\n")) :]
        if len(body) > line_length >= len(line.rstrip("\r\n")):
            # The extra level pushed a line that fitted past the limit: split it as the
            # formatter would, so formatted code stays formatted.
            split = split_long_line(body, line_length, unit)
            if split is None and _between_brackets(out[-1], lines, i, last):
                split = explode_items(body, line_length)
            if split is not None:
                out.extend(part + (ending or nl) for part in split[:-1])
                out.append(split[-1] + ending)
                continue
        out.append(deeper)
    return first, last, out


def _between_brackets(previous: str, lines: list[str], i: int, last: int) -> bool:
    """Whether line ``i`` holds a bracket's contents alone: the line before ends with an
    opening bracket and the next one starts with the closing one."""
    return (
        previous.rstrip().endswith(("(", "[", "{"))
        and i < last
        and lines[i + 1].lstrip().startswith((")", "]", "}"))
    )


def _split_suite(
    suite: cst.SimpleStatementSuite,
    lines: list[str],
    model: ModuleModel,
    module: cst.Module,
    guard: _Guard,
    default_nl: str,
) -> tuple[int, int, list[str]] | None:
    """``if x: buf = alloc(...)`` becomes a block holding the guarded statement."""
    small = suite.body[0]
    suite_rng = model.positions[suite]
    rng = model.positions.range_within(small, suite)
    if rng is None:
        return None
    first = rng.start.line - 1
    last = suite_rng.end.line - 1
    line = lines[first]
    header = line[: rng.start.column].rstrip(" \t")
    if not header.endswith(":"):
        return None
    indent = _indent_of(line)
    unit = _unit(indent, module)
    nl = _newline(lines[last], default_nl)
    body_lines = [line[rng.start.column :], *lines[first + 1 : last + 1]]
    out = [header + nl, f"{indent}{unit}with {guard.items(records_grad(suite, model))}:{nl}"]
    keep = _string_interior_lines(small, suite, model)
    for offset, text in enumerate(body_lines):
        if offset and ((first + offset + 1) in keep or not text.strip()):
            out.append(text)
        else:
            out.append(
                indent + unit + unit + text if offset == 0 else _deeper(text, indent, unit + unit)
            )
    return first, last, out
