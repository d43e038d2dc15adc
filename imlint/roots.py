"""Where a project starts: the folder whose files are indexed together."""

from __future__ import annotations

import functools
import os
import posixpath
from pathlib import PurePath

#: What marks a project's root folder: the nearest one above a file holds its project.
ROOT_MARKERS = ("pyproject.toml", ".git")


def project_root(path: str) -> str | None:
    """The nearest folder at or above ``path`` holding a ``pyproject.toml`` or ``.git``
    (absolute), or None when there is none (the given files are then the project)."""
    here = os.path.abspath(path)
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    while True:
        if any(os.path.lexists(os.path.join(here, m)) for m in ROOT_MARKERS):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def repository_root(path: str) -> str | None:
    """The folder paths in reports and baselines are relative to: ``GITHUB_WORKSPACE``
    when set and holding ``path`` (annotations must name files as the repository does),
    else the nearest folder above ``path`` with a ``.git``, else its project root."""
    here = os.path.abspath(path)
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        workspace = os.path.abspath(workspace)
        if here == workspace or here.startswith(workspace.rstrip(os.sep) + os.sep):
            return workspace
    return _git_root(here if os.path.isdir(here) else os.path.dirname(here))


@functools.lru_cache(maxsize=4096)
def _git_root(folder: str) -> str | None:
    """The nearest folder at or above ``folder`` with a ``.git``, else its project root
    (cached per folder: every finding of a run asks)."""
    start = folder
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return project_root(start)
        folder = parent


def repository_path(path: str) -> str:
    """``path`` relative to its repository root, with forward slashes (``src/a.py`` even
    when run from ``src/``); relative to the working folder when there is no root."""
    root = repository_root(path)
    if root is None:
        return normalize_path(path)
    rel = os.path.relpath(os.path.abspath(path), root)
    return rel.replace(os.sep, "/")


def normalize_path(path: str) -> str:
    """A finding's path as a stable, relative, forward-slash path.

    ``./src/a.py`` and ``src//a.py`` become ``src/a.py``; an absolute path inside the
    current directory becomes relative to it; other absolute paths stay absolute.
    """
    native = os.path.normpath(path)
    if os.path.isabs(native):
        try:
            rel = os.path.relpath(native)
        except ValueError:  # another drive on Windows
            rel = native
        if not rel.startswith(os.pardir):
            native = rel
    posix = PurePath(native).as_posix()
    return posixpath.normpath(posix) if posix else posix
