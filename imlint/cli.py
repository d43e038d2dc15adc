"""The ``imlint`` command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from imlint import __version__
from imlint.config import ConfigError, Settings, find_config, load_settings
from imlint.discovery import discover
from imlint.finding import Finding
from imlint.report import plural, summary, write_json, write_text
from imlint.runner import CACHE_DIR, default_jobs, run_files


def _codes(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(c.strip().upper() for c in value.split(",") if c.strip())


def resolve_settings(
    paths: tuple[str, ...],
    config: str | None,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
) -> Settings:
    """Config file (explicit, else the nearest to the first path), then CLI overrides."""
    config_path: Path | None
    if config is not None:
        if not Path(config).is_file():
            raise ConfigError(f"{config}: error: config file not found")
        config_path = Path(config)
    else:
        start = Path(paths[0]) if paths else Path.cwd()
        config_path = find_config(start if start.exists() else Path.cwd())
    settings = load_settings(config_path)
    if (s := _codes(select)) is not None:
        settings.select = s  # an explicit selection on the command line wins over the config
        settings.ignore = ()
        settings.extend_select = ()
    if (s := _codes(extend_select)) is not None:
        settings.extend_select = (*settings.extend_select, *s)
    if (s := _codes(ignore)) is not None:
        settings.ignore = (*settings.ignore, *s)
    return settings


def print_error(path: str, message: str) -> None:
    click.echo(f"{path}: error: {message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="imlint")
def cli() -> None:
    """Find lazily allocated persistent PyTorch buffers that can become inference tensors."""


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, file_okay=True)),
        click.option(
            "--select",
            metavar="CODES",
            help="Comma-separated rule codes or prefixes to enable (replaces the config's selection).",
        ),
        click.option(
            "--extend-select", metavar="CODES", help="Rule codes or prefixes to enable on top."
        ),
        click.option("--ignore", metavar="CODES", help="Rule codes or prefixes to disable."),
        click.option(
            "--config", metavar="FILE", help="A pyproject.toml to read [tool.imlint] from."
        ),
        click.option(
            "--force-exclude", is_flag=True, help="Apply excludes to paths given explicitly too."
        ),
        click.option(
            "--output-format",
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="How findings are printed.",
        ),
        click.option(
            "--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."
        ),
        click.option("--debug", is_flag=True, help="Show tracebacks for internal errors."),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(min=1),
            default=None,
            help="Worker processes (default: the CPUs available).",
        ),
        click.option("--no-cache", is_flag=True, help=f"Neither read nor write {CACHE_DIR}/."),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0),
            default=None,
            help="Seconds one file may take before it is reported and skipped (default 60; 0: none).",
        ),
        click.option(
            "--no-fast",
            is_flag=True,
            help="Parse every file, even those that cannot hold an allocation (the plain path).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@cli.command()
@common_options
@click.option(
    "--fix", "apply_fix", is_flag=True, help="Apply fixes in place (same as `imlint fix`)."
)
def check(apply_fix: bool, **kwargs: Any) -> None:
    """Check PATHS (default: the current directory) and report findings.

    Exit status: 0 clean, 1 findings, 2 usage or input errors.
    """
    mode = "diff" if kwargs["diff"] else "fix" if apply_fix else "check"
    sys.exit(run(mode=mode, **kwargs))


@cli.command()
@common_options
def fix(**kwargs: Any) -> None:
    """Wrap lazy persistent allocations in PATHS in `with torch.inference_mode(False):`.

    Exit status: 0 when no finding remains, 1 when unfixable findings remain, 2 on errors.
    """
    sys.exit(run(mode="diff" if kwargs["diff"] else "fix", **kwargs))


def run(
    mode: str,
    paths: tuple[str, ...],
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    config: str | None,
    force_exclude: bool,
    output_format: str,
    diff: bool,
    debug: bool,
    jobs: int | None,
    no_cache: bool,
    no_fast: bool,
    timeout: float | None,
) -> int:
    del diff  # folded into ``mode``
    try:
        settings = resolve_settings(paths, config, select, extend_select, ignore)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        return 2
    if timeout is not None:
        settings.timeout = timeout
    found = discover(paths or (".",), settings, force_exclude=force_exclude)
    outcomes = run_files(
        found.files,
        settings,
        mode,
        jobs=jobs if jobs is not None else default_jobs(),
        fast=not no_fast,
        use_cache=not no_cache,
        debug=debug,
    )
    errors = list(found.errors) + [(o.path, o.error) for o in outcomes if o.error is not None]
    findings = sorted((f for o in outcomes for f in o.findings), key=Finding.sort_key)
    for path, message in errors:
        print_error(path, message)
    if mode == "diff":
        for o in outcomes:
            sys.stdout.write(o.diff)
    if output_format == "json":
        write_json(sys.stdout, findings, errors)
    else:
        if mode != "diff":
            write_text(sys.stdout, findings, reasons=mode == "fix")
        fixed = sum(o.fixed for o in outcomes)
        fixed_files = sum(1 for o in outcomes if o.fixed)
        _summarise(mode, findings, errors, len(found.files), fixed, fixed_files)
    if errors:
        return 2
    return 1 if findings else 0


def _summarise(
    mode: str,
    findings: list[Finding],
    errors: list[tuple[str, str]],
    n_files: int,
    fixed: int,
    fixed_files: int,
) -> None:
    if mode == "check":
        click.echo(summary(findings, len(errors), n_files))
        n_fixable = sum(f.fixable for f in findings)
        if n_fixable:
            click.echo(f"{plural(n_fixable, 'finding')} fixable with `imlint fix` (marked [*]).")
        return
    verb = "Would fix" if mode == "diff" else "Fixed"
    line = f"{verb} {plural(fixed, 'finding')} in {plural(fixed_files, 'file')}"
    remaining = [f for f in findings if not (mode == "diff" and f.fixable)]
    if remaining:
        line += f"; {plural(len(remaining), 'finding')} left that cannot be fixed automatically"
    if errors:
        line += f"; {plural(len(errors), 'path')} could not be processed"
    click.echo(line + ".", err=mode == "diff")


def main() -> None:
    cli(prog_name="imlint")
