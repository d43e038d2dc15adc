"""The settings of each file: the nearest ``pyproject.toml`` with ``[tool.imlint]``
above it (as ruff's hierarchical configuration), or ``--config`` for every file, then
the command line's overrides. So a run's findings do not depend on the order of the
paths given: each file is checked under its own configuration."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from imlint.config import ConfigError, Settings, find_config, load_settings


def codes(values: str | tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Codes from a flag's values (repeated flags accumulate: ``--select IM001
    --select IM002`` is ``--select IM001,IM002``); None when the flag was not given."""
    if values is None or (isinstance(values, tuple) and not values):
        return None
    joined = ",".join(values) if isinstance(values, tuple) else values
    return tuple(c.strip().upper() for c in joined.split(",") if c.strip())


def check_selectors(settings: Settings, flags: dict[str, tuple[str, ...] | None]) -> None:
    """Every selector must name a rule, a prefix of one, or ALL (a typo would
    otherwise turn rules off silently): a ConfigError names the bad one."""
    from imlint.rules import RULES_BY_CODE

    def bad(selectors: tuple[str, ...]) -> list[str]:
        return [
            s for s in selectors if s != "ALL" and not any(c.startswith(s) for c in RULES_BY_CODE)
        ]

    known = f"known: {', '.join(RULES_BY_CODE)}, a prefix of them, or ALL"
    for flag, given in flags.items():
        if given and (wrong := bad(given)):
            raise ConfigError(f"error: unknown rule selector {wrong[0]!r} in --{flag} ({known})")
    where = f"{settings.config_path}: error: [tool.imlint]"
    for key, selectors in (
        ("select", settings.select or ()),
        ("extend-select", settings.extend_select),
        ("ignore", settings.ignore),
        *((f"per-file-ignores.{pat!r}", c) for pat, c in settings.per_file_ignores.items()),
    ):
        if wrong := bad(tuple(c.upper() for c in selectors)):
            raise ConfigError(f"{where} unknown rule selector {wrong[0]!r} in {key} ({known})")


@dataclass(frozen=True)
class Overrides:
    """What the command line says on top of (or instead of) the configuration."""

    config: str | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    timeout: float | None = None
    unsafe_fixes: bool | None = None
    respect_gitignore: bool | None = None
    max_file_size: int | None = None
    python: str | None = None

    @classmethod
    def from_flags(
        cls,
        config: str | None = None,
        select: str | tuple[str, ...] | None = None,
        extend_select: str | tuple[str, ...] | None = None,
        ignore: str | tuple[str, ...] | None = None,
        **rest: object,
    ) -> Overrides:
        out = cls(config, codes(select), codes(extend_select), codes(ignore), **rest)  # type: ignore[arg-type]
        flags = {"select": out.select, "extend-select": out.extend_select, "ignore": out.ignore}
        check_selectors(Settings(), flags)
        return out

    def apply(self, settings: Settings) -> Settings:
        if self.select is not None:
            settings.select = self.select  # an explicit selection wins over the config
            settings.ignore = ()
            settings.extend_select = ()
        if self.extend_select is not None:
            settings.extend_select = (*settings.extend_select, *self.extend_select)
        if self.ignore is not None:
            settings.ignore = (*settings.ignore, *self.ignore)
        if self.timeout is not None:
            settings.timeout = self.timeout
        if self.unsafe_fixes is not None:
            settings.unsafe_fixes = self.unsafe_fixes
        if self.respect_gitignore is not None:
            settings.respect_gitignore = self.respect_gitignore
        if self.max_file_size is not None:
            settings.max_file_size = self.max_file_size
        if self.python is not None:
            settings.python = self.python
        return settings


class SettingsResolver:
    """Settings per path, one :class:`Settings` object per configuration file."""

    def __init__(self, overrides: Overrides) -> None:
        self.overrides = overrides
        self._explicit: Path | None = None
        if overrides.config is not None:
            if not Path(overrides.config).is_file():
                raise ConfigError(f"{overrides.config}: error: config file not found")
            self._explicit = Path(overrides.config)
        self._by_config: dict[Path | None, Settings] = {}
        self._by_folder: dict[str, Path | None] = {}

    def config_for(self, path: str) -> Path | None:
        if self._explicit is not None:
            return self._explicit
        folder = os.path.abspath(path)
        if not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        if folder not in self._by_folder:
            start = Path(folder)
            self._by_folder[folder] = find_config(start if start.exists() else Path.cwd())
        return self._by_folder[folder]

    def for_path(self, path: str) -> Settings:
        """The settings ``path`` is checked under (raises ConfigError)."""
        config = self.config_for(path)
        settings = self._by_config.get(config)
        if settings is None:
            settings = load_settings(config)
            check_selectors(settings, {})
            settings = self._by_config[config] = self.overrides.apply(settings)
        return settings

    def all(self) -> list[Settings]:
        return list(self._by_config.values())
