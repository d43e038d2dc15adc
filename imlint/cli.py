"""The ``imlint`` command line."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from imlint import __version__
from imlint.config import ConfigError, Settings, find_config, load_settings
from imlint.discovery import discover
from imlint.engine import FileResult, Linter
from imlint.report import summary, write_json, write_text
from imlint.rule import Finding


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
    if config is not None:
        if not Path(config).is_file():
            raise ConfigError(f"{config}: error: config file not found")
        config_path: Path | None = Path(config)
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


def common_options(f):  # type: ignore[no-untyped-def]
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
        click.option("--debug", is_flag=True, help="Show tracebacks for internal errors."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@cli.command()
@common_options
@click.option(
    "--output-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How findings are printed.",
)
def check(
    paths: tuple[str, ...],
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    config: str | None,
    force_exclude: bool,
    debug: bool,
    output_format: str,
) -> None:
    """Check PATHS (default: the current directory) and report findings.

    Exit status: 0 clean, 1 findings, 2 usage or input errors.
    """
    try:
        settings = resolve_settings(paths, config, select, extend_select, ignore)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    found = discover(paths or (".",), settings, force_exclude=force_exclude)
    linter = Linter(settings)
    results: list[FileResult] = []
    for path in found.files:
        results.append(_check_one(linter, path, debug))
    findings: list[Finding] = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    errors = found.errors + [(r.path, r.error) for r in results if r.error is not None]
    for path, message in errors:
        print_error(path, message)
    if output_format == "json":
        write_json(sys.stdout, findings, errors)
    else:
        write_text(sys.stdout, findings)
        click.echo(summary(findings, len(errors), len(found.files)))
    sys.exit(2 if errors else 1 if findings else 0)


def _check_one(linter: Linter, path: str, debug: bool) -> FileResult:
    try:
        return linter.check_path(path)
    except Exception as exc:  # an imlint bug must not stop the other files
        if debug:
            traceback.print_exc()
        return FileResult(
            path, error=f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
        )


def main() -> None:
    cli(prog_name="imlint")
