"""Finding the Python files to check, as the user named them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from imlint.config import Settings
from imlint.ignore import GitIgnores
from imlint.roots import project_root


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line error)


def _is_python(name: str) -> bool:
    return name.endswith(".py")


def discover(paths: Iterable[str], settings: Settings, force_exclude: bool = False) -> Discovery:
    """Expand paths into ``.py`` files, keeping the spelling the user gave.

    Directories are walked without following symbolic links to directories; files
    given explicitly are checked even if excluded, unless ``force_exclude``.
    """
    out = Discovery()
    seen: set[str] = set()

    def add(path: str) -> None:
        key = os.path.normcase(os.path.abspath(path))
        if key not in seen:
            seen.add(key)
            out.files.append(path)

    for given in paths:
        if force_exclude and settings.is_excluded_anywhere(given):
            continue
        if os.path.isdir(given) and not (os.path.islink(given) and _is_python(given)):
            _walk(given, settings, add, out, GitIgnores.above(given, settings))
        elif os.path.lexists(given):
            add(given)
        else:
            out.errors.append((given, "no such file or directory"))
    return out


def project_context(given: Iterable[str], files: list[str], settings: Settings) -> list[str]:
    """The other Python files of the projects that ``files`` belong to: indexed with
    them, so that a check of some files (a pre-commit batch, an editor's buffer, one
    file on the command line) sees the same allocators, writers and callers as a check
    of the whole project, and reports the same findings for those files. Excludes
    apply as when the project is walked; folders given whole are not walked again."""
    cwd = os.getcwd()
    walked = {os.path.abspath(p) for p in given if os.path.isdir(p)}
    roots: list[str] = []
    for path in files:
        root = project_root(path)
        if root is not None and root not in roots:
            roots.append(root)
    # A root inside another root is walked with it.
    roots = [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]
    seen = {os.path.normcase(os.path.abspath(p)) for p in files}
    out: list[str] = []

    def add(path: str) -> None:
        absolute = os.path.abspath(path)
        key = os.path.normcase(absolute)
        if key not in seen:
            seen.add(key)
            inside = absolute.startswith(cwd + os.sep)
            out.append(os.path.relpath(absolute, cwd) if inside else absolute)

    for root in roots:
        if root in walked:
            continue
        top = os.path.relpath(root, cwd) if root == cwd or root.startswith(cwd + os.sep) else root
        _walk(top, settings, add, Discovery(), GitIgnores.above(top, settings))
    return out


def _walk(top: str, settings: Settings, add: object, out: Discovery, ignores: GitIgnores) -> None:
    assert callable(add)
    stack = [(top, ignores)]
    while stack:
        directory, ignores = stack.pop()
        ignores = ignores.entering(directory)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except PermissionError:
            out.errors.append((directory, "permission denied"))
            continue
        except OSError as exc:
            out.errors.append((directory, f"cannot list directory: {exc.strerror or exc}"))
            continue
        subdirs: list[tuple[str, GitIgnores]] = []
        for entry in entries:
            path = entry.path if directory != "." else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if settings.is_excluded(path) or os.path.exists(os.path.join(path, "pyvenv.cfg")):
                    continue
                if ignores.ignored(path, is_dir=True):
                    continue
                subdirs.append((path, ignores))
            elif _is_python(entry.name):
                if settings.is_excluded(path) or ignores.ignored(path, is_dir=False):
                    continue
                add(path)  # symlinks, dangling or looping, are reported when read
        stack.extend(reversed(subdirs))
