"""``imlint check --show-settings`` and ``--show-files``: what a run would use."""

from __future__ import annotations

import os
from typing import Any

import click

from imlint.config import ConfigError, Settings
from imlint.discovery import discover
from imlint.resolve import Overrides, SettingsResolver
from imlint.roots import project_root


def show(flags: dict[str, Any], settings: bool) -> int:
    """Print the first file's settings (``settings``) or every file to check; 0, or 2
    on a bad configuration."""
    paths = flags["paths"] or (".",)
    try:
        resolver = SettingsResolver(
            Overrides.from_flags(
                flags["config"],
                flags["select"],
                flags["extend_select"],
                flags["ignore"],
                timeout=flags["timeout"],
                unsafe_fixes=flags["unsafe_fixes"],
                respect_gitignore=flags["respect_gitignore"],
                max_file_size=flags["max_file_size"],
            )
        )
        files: list[str] = []
        for path in paths:
            found = discover((path,), resolver.for_path(path), flags["force_exclude"])
            files += [f for f in found.files if f not in files]
            for bad, message in found.errors:
                click.echo(f"{bad}: error: {message}", err=True)
        if not settings:
            for f in sorted(files):
                click.echo(f)
            return 0
        first = files[0] if files else paths[0]
        click.echo(describe(first, resolver.for_path(first)), nl=False)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        return 2
    return 0


def describe(path: str, s: Settings) -> str:
    """The resolved settings of ``path`` as ``key = value`` lines."""
    from imlint.rules import ALL_RULES

    enabled = s.enabled_codes((r.code, r.default_enabled) for r in ALL_RULES)
    root = project_root(path)
    rows = [
        ("config file", str(s.config_path or "(none: defaults)")),
        ("root", str(s.root)),
        ("project index root", root or "(none: the given files)"),
        ("enabled rules", ", ".join(sorted(enabled))),
        ("select", str(list(s.select)) if s.select is not None else "(default)"),
        ("extend-select", str(list(s.extend_select))),
        ("ignore", str(list(s.ignore))),
        ("exclude", str(list(s.exclude))),
        ("extend-exclude", str(list(s.extend_exclude))),
        ("per-file-ignores", str(dict(s.per_file_ignores))),
        ("extra-allocators", str(sorted(s.options.extra_allocators))),
        ("extra-guards", str(sorted(s.options.extra_guards))),
        ("extra-cache-decorators", str(sorted(s.options.extra_cache_decorators))),
        ("inference-mode-regions", str(sorted(s.options.inference_mode_regions))),
        ("setup-functions", str(sorted(s.options.setup_functions))),
        ("timeout", f"{s.timeout:g}"),
        ("line-length", str(s.line_length)),
        ("unsafe-fixes", str(s.unsafe_fixes).lower()),
        ("respect-gitignore", str(s.respect_gitignore).lower()),
        ("max-file-size", str(s.max_file_size)),
        ("ignored here", str(list(s.ignored_for(path)) if os.path.exists(path) else [])),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"Settings for {path}"] + [f"{k.ljust(width)} = {v}" for k, v in rows]
    return "\n".join(lines) + "\n"
