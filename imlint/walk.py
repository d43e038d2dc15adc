"""Read-only walks over LibCST trees, in LibCST's own visiting order."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, itself included, whitespace and punctuation aside
    (iteratively: deep trees are fine). LibCST's ``children`` rebuilds nodes to list
    them; this reads the fields."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for name, _ in _PLAIN.get(type(n)) or _fields(n, cst.CSTVisitor):
            value = getattr(n, name)
            kind = type(value)
            if kind is tuple or kind is list:
                stack.extend(c for c in value if _walked(type(c)))
            elif _walked(kind):
                stack.append(value)


#: Whitespace, comments and punctuation: nothing the collector looks at.
_SKIPPED: frozenset[type] = frozenset(
    cls
    for module in (cst._nodes.whitespace, cst._nodes.op)  # type: ignore[attr-defined]
    for cls in vars(module).values()
    if isinstance(cls, type) and issubclass(cls, cst.CSTNode)
)
#: Per visitor class, per node class: the node's child fields in LibCST's visiting
#: order (source order), each with whether the visitor has a hook on it
#: (``visit_If_body``).
_FIELDS: dict[type, dict[type, list[tuple[str, bool]]]] = {}
_PLAIN = _FIELDS.setdefault(cst.CSTVisitor, {})


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


def _hooked(visitor: type, method: str) -> bool:
    """Whether a visitor class defines ``method`` (CSTVisitor has empty stubs for all)."""
    return getattr(visitor, method, None) is not getattr(cst.CSTVisitor, method, None)


#: Node classes whose visit skips a field when it is None (``format_spec``): their
#: fields are recorded per node, not per class.
_PER_NODE = frozenset({"FormattedStringExpression", "TemplatedStringExpression"})


def _fields(node: cst.CSTNode, visitor: type) -> list[tuple[str, bool]]:
    cls = type(node)
    recorder = _FieldRecorder(node)
    node._visit_and_replace_children(recorder)
    name = cls.__name__
    fields = [
        (f, _hooked(visitor, f"visit_{name}_{f}") or _hooked(visitor, f"leave_{name}_{f}"))
        for f in recorder.fields
    ]
    if name not in _PER_NODE:
        _FIELDS.setdefault(visitor, {})[cls] = fields
    return fields


_WALKED: dict[type, bool] = {}


def _walked(kind: type) -> bool:
    """Whether values of this type are nodes the walk enters (a cached ``issubclass``:
    ``isinstance`` against LibCST's abstract base classes is slow)."""
    found = _WALKED.get(kind)
    if found is None:
        found = _WALKED[kind] = issubclass(kind, cst.CSTNode) and kind not in _SKIPPED
    return found


def visit_readonly(node: cst.CSTNode, collector: cst.CSTVisitor) -> None:
    """``node.visit(collector)``, read-only: LibCST's own visit rebuilds every node it
    passes and visits whitespace, which costs as much as the parse. The order, the node
    hooks and the field hooks (``visit_If_body``) are LibCST's."""
    visitor = type(collector)
    _visit(node, collector, _FIELDS.setdefault(visitor, {}), visitor)


def _visit(
    node: cst.CSTNode,
    collector: cst.CSTVisitor,
    table: dict[type, list[tuple[str, bool]]],
    visitor: type,
) -> None:
    if collector.on_visit(node):
        fields = table.get(type(node)) or _fields(node, visitor)
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
                        _visit(child, collector, table, visitor)
            else:
                walked = _WALKED.get(kind)
                if walked is None:
                    walked = _walked(kind)
                if walked:
                    _visit(value, collector, table, visitor)
            if hooked:
                collector.on_leave_attribute(node, name)
    collector.on_leave(node)
