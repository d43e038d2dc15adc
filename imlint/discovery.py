"""Finding the Python files to check, as the user named them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from imlint.config import Settings


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
            _walk(given, settings, add, out)
        elif os.path.lexists(given):
            add(given)
        else:
            out.errors.append((given, "no such file or directory"))
    return out


def _walk(top: str, settings: Settings, add: object, out: Discovery) -> None:
    assert callable(add)
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except PermissionError:
            out.errors.append((directory, "permission denied"))
            continue
        except OSError as exc:
            out.errors.append((directory, f"cannot list directory: {exc.strerror or exc}"))
            continue
        subdirs: list[str] = []
        for entry in entries:
            path = entry.path if directory != "." else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if settings.is_excluded(path) or os.path.exists(os.path.join(path, "pyvenv.cfg")):
                    continue
                subdirs.append(path)
            elif _is_python(entry.name):
                if settings.is_excluded(path):
                    continue
                add(path)  # symlinks, dangling or looping, are reported when read
        stack.extend(reversed(subdirs))
