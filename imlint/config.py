"""Configuration: ``[tool.imlint]`` in the nearest ``pyproject.toml``, plus CLI overrides."""

from __future__ import annotations

import fnmatch
import math
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by CI on the oldest Python
    import tomli as tomllib

from imlint.options import AnalysisOptions


class ConfigError(Exception):
    """A broken configuration: reported as one line, exit code 2."""


#: Directories never descended into (as ruff does), unless given explicitly.
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".imlint_cache",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pycache__",
    "__pypackages__",
    "_build",
    "buck-out",
    "node_modules",
    "site-packages",
    "venv",
)

#: key -> (python type of the value, description) for ``[tool.imlint]``.
KNOWN_KEYS: dict[str, str] = {
    "select": "list of rule codes or prefixes to enable",
    "extend-select": "list of rule codes or prefixes to enable on top of the defaults",
    "ignore": "list of rule codes or prefixes to disable",
    "exclude": "list of glob patterns of paths to skip",
    "extend-exclude": "list of glob patterns of paths to skip, on top of `exclude`",
    "extra-allocators": "list of callables (dotted names) that allocate tensors",
    "extra-guards": "list of context managers or decorators that act as inference_mode(False)",
    "extra-cache-decorators": "list of decorators that cache a function's return value",
    "inference-mode-regions": "list of context managers or decorators that turn inference mode on",
    "setup-functions": "list of functions a framework calls once while it sets up: construction",
    "per-file-ignores": "table of glob pattern -> list of rule codes",
    "timeout": "seconds one file may take before it is reported and skipped (0: no limit)",
    "line-length": "the formatter's line length: fixed lines past it are split as ruff would",
    "unsafe-fixes": "true to apply unsafe fixes too (see each rule's Fix safety)",
    "respect-gitignore": "false to walk into what .gitignore files ignore (default true)",
    "max-file-size": "bytes: larger files are reported as skipped (default 10000000; 0: no limit)",
    "installed-packages": "false to not read the installed packages the project imports",
    "skip-installed": "list of installed packages (top-level import names) not to read",
}


@dataclass
class Settings:
    """The effective configuration of one run."""

    root: Path = field(default_factory=Path.cwd)
    config_path: Path | None = None
    select: tuple[str, ...] | None = None  # None: the rules that are on by default
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    timeout: float = 60.0  # per file, seconds; 0 disables
    line_length: int = 88  # the formatter's; the fix splits lines it pushes past it
    unsafe_fixes: bool = False  # apply (and mark ``[*]``) unsafe fixes too
    respect_gitignore: bool = True  # skip what ``.gitignore`` files ignore when walking
    max_file_size: int = 10_000_000  # bytes; larger files are skipped (0: no limit)
    #: read installed packages the project imports (``imlint/installed.py``)
    installed_packages: bool = True
    skip_installed: tuple[str, ...] = ()  # their top-level names, left out
    #: the interpreter whose site-packages to read (``--python``; never from config:
    #: configuration comes with the tree, and must not choose a program to run)
    python: str | None = None

    # ---- rule selection

    def enabled_codes(self, all_codes: Iterable[tuple[str, bool]]) -> set[str]:
        """Codes enabled by select/extend-select/ignore. ``all_codes``: (code, default on)."""
        enabled: set[str] = set()
        for code, default_on in all_codes:
            if self.select is None:
                on = default_on
            else:
                on = _matches(code, self.select)
            on = on or _matches(code, self.extend_select)
            if on and not _matches(code, self.ignore):
                enabled.add(code)
        return enabled

    # ---- paths

    def relative(self, path: str) -> str:
        absolute = os.path.abspath(path)
        root = str(self.root)
        if absolute.startswith(root + os.sep):
            return absolute[len(root) + 1 :].replace(os.sep, "/")
        try:
            rel = os.path.relpath(absolute, self.root)
        except ValueError:  # another drive on Windows
            return path
        return rel.replace(os.sep, "/")

    def _exclude_matchers(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        """The exclude patterns as two regexes: on a base name or relative path, and
        (for patterns with a slash) on anything below a matching folder."""
        patterns = (*DEFAULT_EXCLUDE, *self.exclude, *self.extend_exclude)
        cached = getattr(self, "_matchers", None)
        if cached is not None and cached[0] == patterns:
            return cached[1]
        any_of = re.compile("|".join(fnmatch.translate(p) for p in patterns))
        below = [fnmatch.translate(p.rstrip("/") + "/*") for p in patterns if "/" in p]
        matchers = (any_of, re.compile("|".join(below)) if below else None)
        self._matchers = (patterns, matchers)
        return matchers

    def is_excluded(self, path: str) -> bool:
        """Whether a path (file or directory) matches an exclude pattern."""
        any_of, below = self._exclude_matchers()
        name = os.path.basename(os.path.normpath(path))
        if any_of.match(name):
            return True
        rel = self.relative(path)
        return bool(any_of.match(rel) or (below is not None and below.match(rel)))

    def is_excluded_anywhere(self, path: str) -> bool:
        """Whether a path or any folder above it (inside the root) is excluded."""
        current = os.path.normpath(path)
        while current and current not in (".", os.sep):
            if self.is_excluded(current):
                return True
            parent = os.path.dirname(current)
            if parent == current or self.relative(parent).startswith(".."):
                break
            current = parent
        return False

    def ignored_for(self, path: str) -> tuple[str, ...]:
        rel = self.relative(path)
        name = os.path.basename(path)
        out: list[str] = []
        for pat, codes in self.per_file_ignores.items():
            if fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(name, pat):
                out.extend(codes)
        return tuple(out)

    def cache_key(self) -> str:
        return "|".join(
            [
                ",".join(self.select or ("<default>",)),
                ",".join(self.extend_select),
                ",".join(self.ignore),
                ";".join(f"{k}={','.join(v)}" for k, v in sorted(self.per_file_ignores.items())),
                self.options.key(),
                f"unsafe={self.unsafe_fixes}",
                f"installed={self.installed_packages}:{','.join(sorted(self.skip_installed))}",
                f"python={self.python}",
            ]
        )


def _matches(code: str, selectors: Iterable[str]) -> bool:
    return any(s == "ALL" or code.startswith(s) for s in selectors)


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.imlint]`` table, from ``start`` up."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{candidate}: error: cannot read config: {exc}") from None
            if "imlint" in text and _has_imlint_table(candidate, text):
                return candidate
    return None


def _has_imlint_table(path: Path, text: str) -> bool:
    """Whether a ``pyproject.toml`` configures imlint, however it spells the table
    (``[tool.imlint]``, or ``imlint.select = ...`` under ``[tool]``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if "tool.imlint" in text:  # it meant to: say why it cannot be read
            raise ConfigError(f"{path}: error: invalid TOML: {exc}") from None
        return False
    tool = data.get("tool")
    return isinstance(tool, dict) and "imlint" in tool


def _int(path: Path, key: str, table: dict[str, Any], minimum: int, what: str) -> int:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{path}: error: [tool.imlint] {key} must be {what}, got {value!r}")
    return value


def _bool(path: Path, key: str, table: dict[str, Any]) -> bool:
    value = table[key]
    if not isinstance(value, bool):
        raise ConfigError(
            f"{path}: error: [tool.imlint] {key} must be true or false, got {value!r}"
        )
    return value


def _string_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{path}: error: [tool.imlint] {key} must be a list of strings, got {type(value).__name__}: {value!r}"
        )
    return tuple(value)


def _read_table(config_path: Path) -> dict[str, Any]:
    """The ``[tool.imlint]`` table of a file, its keys checked (a ``ConfigError`` with
    one line that says what is wrong)."""
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{config_path}: error: cannot read config: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{config_path}: error: config is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_path}: error: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("imlint", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: error: [tool.imlint] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(
            f"{config_path}: error: unknown key(s) in [tool.imlint]: {', '.join(unknown)} "
            f"(known: {', '.join(KNOWN_KEYS)})"
        )
    return table


def _analysis_options(config_path: Path, table: dict[str, Any]) -> AnalysisOptions:
    """The options of the analysis a configuration sets."""
    return AnalysisOptions(
        extra_allocators=frozenset(
            _string_list(config_path, "extra-allocators", table.get("extra-allocators", []))
        ),
        extra_guards=frozenset(
            _string_list(config_path, "extra-guards", table.get("extra-guards", []))
        ),
        extra_cache_decorators=frozenset(
            _string_list(
                config_path, "extra-cache-decorators", table.get("extra-cache-decorators", [])
            )
        ),
        inference_mode_regions=frozenset(
            _string_list(
                config_path, "inference-mode-regions", table.get("inference-mode-regions", [])
            )
        ),
        setup_functions=frozenset(
            _string_list(config_path, "setup-functions", table.get("setup-functions", []))
        ),
    )


def load_settings(config_path: Path | None) -> Settings:
    """Read ``[tool.imlint]`` from a file (``None``: defaults rooted at the cwd)."""
    if config_path is None:
        return Settings(root=Path.cwd())
    table = _read_table(config_path)
    settings = Settings(root=config_path.parent.resolve(), config_path=config_path)
    if "select" in table:
        settings.select = _string_list(config_path, "select", table["select"])
    if "extend-select" in table:
        settings.extend_select = _string_list(config_path, "extend-select", table["extend-select"])
    if "ignore" in table:
        settings.ignore = _string_list(config_path, "ignore", table["ignore"])
    if "exclude" in table:
        settings.exclude = _string_list(config_path, "exclude", table["exclude"])
    if "extend-exclude" in table:
        settings.extend_exclude = _string_list(
            config_path, "extend-exclude", table["extend-exclude"]
        )
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(
                f"{config_path}: error: [tool.imlint] per-file-ignores must be a table"
            )
        settings.per_file_ignores = {
            str(k): _string_list(config_path, f"per-file-ignores.{k!r}", v) for k, v in pfi.items()
        }
    if "timeout" in table:
        value = table["timeout"]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigError(
                f"{config_path}: error: [tool.imlint] timeout must be a non-negative number of seconds, got {value!r}"
            )
        settings.timeout = float(value)
    if "line-length" in table:
        settings.line_length = _int(config_path, "line-length", table, 1, "a positive integer")
    if "max-file-size" in table:
        settings.max_file_size = _int(
            config_path, "max-file-size", table, 0, "a number of bytes (0: no limit)"
        )
    if "respect-gitignore" in table:
        settings.respect_gitignore = _bool(config_path, "respect-gitignore", table)
    if "unsafe-fixes" in table:
        settings.unsafe_fixes = _bool(config_path, "unsafe-fixes", table)
    if "installed-packages" in table:
        settings.installed_packages = _bool(config_path, "installed-packages", table)
    if "skip-installed" in table:
        settings.skip_installed = _string_list(
            config_path, "skip-installed", table["skip-installed"]
        )
    settings.options = _analysis_options(config_path, table)
    return settings
