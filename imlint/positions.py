"""Source ranges of LibCST nodes, computed on demand."""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import CodePosition, CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

from imlint.source import quiet_parse

EMPTY_MODULE = cst.Module(body=[])


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
        if _slice(self._lines, rng).split() != EMPTY_MODULE.code_for_node(bare).split():
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
        tree = quiet_parse("\n".join(lines))
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
