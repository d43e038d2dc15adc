"""Where a project starts: the folder whose files are indexed together."""

from __future__ import annotations

import os

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
