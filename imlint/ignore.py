"""``.gitignore`` files, as git reads them, for discovery (``respect-gitignore``).

Each ``.gitignore`` applies to the paths below its folder, matched relative to it; a
deeper file's decision (a match or a ``!`` negation) wins over a shallower one's. The
files of the folders above a walked path count too, up to its project root, so that
``imlint check .`` from a subfolder skips what git skips. A folder given explicitly is
walked even if ignored there (as a file given explicitly is checked), and the
ignores above it are then left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pathspec

from imlint.config import Settings
from imlint.roots import project_root


@dataclass(frozen=True)
class GitIgnores:
    """The ``.gitignore`` specs in force in one folder: (base folder, spec), shallowest
    first. Immutable: each folder of a walk extends its parent's."""

    specs: tuple[tuple[str, pathspec.GitIgnoreSpec], ...] = ()
    enabled: bool = True

    @classmethod
    def above(cls, top: str, settings: Settings) -> GitIgnores:
        """The ignores in force at ``top`` from the folders above it, up to its project
        root (none when ``top`` itself is ignored there: it was asked for)."""
        if not settings.respect_gitignore:
            return cls(enabled=False)
        here = os.path.abspath(top)
        root = project_root(here)
        if root is None or root == here:
            return cls()
        chain: list[str] = []
        folder = os.path.dirname(here)
        while True:
            chain.append(folder)
            if folder == root or os.path.dirname(folder) == folder:
                break
            folder = os.path.dirname(folder)
        out = cls()
        for folder in reversed(chain):
            out = out.entering(folder)
        return cls() if out.ignored(here, is_dir=True) else out

    def entering(self, folder: str) -> GitIgnores:
        """The ignores in force inside ``folder`` (its own ``.gitignore`` added)."""
        if not self.enabled:
            return self
        try:
            with open(os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:  # none (or unreadable: git would not read it either)
            return self
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        return GitIgnores((*self.specs, (os.path.abspath(folder), spec)))

    def ignored(self, path: str, is_dir: bool) -> bool:
        if not self.specs:
            return False
        absolute = os.path.abspath(path)
        for base, spec in reversed(self.specs):  # the deepest decision wins
            rel = os.path.relpath(absolute, base).replace(os.sep, "/")
            if rel.startswith("../"):
                continue
            result = spec.check_file(rel + "/" if is_dir else rel)
            if result.include is not None:
                return bool(result.include)
        return False
