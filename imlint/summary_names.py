"""What a module's names stand for (``imlint/project.py``): each local name a module
imports, with relative imports resolved to the qualified name it stands for, the local
names bound to an allocator's name (``from torch import empty as e``: a call ``e(...)``
may allocate), and the test that marks a script's own code (``__name__ ==
"__main__"``)."""

from __future__ import annotations

import ast

from imlint.names import imported_from


def is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round): the test of a script's own code."""
    if not (isinstance(test, ast.Compare) and [type(op) for op in test.ops] == [ast.Eq]):
        return False
    pair = (test.left, test.comparators[0])
    return any(
        isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant)
        and b.value == "__main__"
        for a, b in (pair, pair[::-1])
    )  # fmt: skip


class NameFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    module: str
    is_package: bool
    #: local name -> qualified name
    imports: dict[str, str]
    #: the last names of every callable the model treats as an allocator
    vocabulary: frozenset[str]
    #: local names bound to one of them
    allocating_names: set[str]

    def qualify(self, text: str) -> str:
        head, _, rest = text.partition(".")
        target = self.imports.get(head)
        if target is None:
            return text
        return f"{target}.{rest}" if rest else target

    def _relative(self, level: int, module: str | None) -> str:
        if level == 0:
            return module or ""
        parts = self.module.split(".")
        base = parts if self.is_package else parts[:-1]
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, module] if module else base)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.imports[alias.asname] = alias.name
                self._alias(alias.asname, alias.name)
            else:
                head = alias.name.split(".", 1)[0]
                self.imports[head] = head

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._relative(node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                continue
            self.imports[alias.asname or alias.name] = imported_from(base, alias.name)
            self._alias(alias.asname or alias.name, alias.name)

    def _alias(self, local: str, target: str) -> None:
        if target.rsplit(".", 1)[-1] in self.vocabulary:
            self.allocating_names.add(local)
