"""The ``imlint`` command line."""

from __future__ import annotations

import difflib
import functools
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import libcst as cst

from imlint import __version__
from imlint.config import ConfigError, Settings, find_config, load_settings
from imlint.discovery import discover
from imlint.engine import FileResult, FixError, Linter, read_source, syntax_error_message
from imlint.report import plural, summary, write_json, write_text
from imlint.rule import Finding
from imlint.source import SourceError
from imlint.writer import WriteError, write_atomic


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


@dataclass
class _Run:
    findings: list[Finding] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    fixed: int = 0
    fixed_files: int = 0


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
) -> int:
    del diff  # folded into ``mode``
    try:
        settings = resolve_settings(paths, config, select, extend_select, ignore)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        return 2
    found = discover(paths or (".",), settings, force_exclude=force_exclude)
    linter = Linter(settings)
    state = _Run(errors=list(found.errors))
    for path in found.files:
        if mode == "check":
            result = _guarded(functools.partial(linter.check_path, path), path, debug)
            state.findings.extend(result.findings)
            if result.error is not None:
                state.errors.append((path, result.error))
        else:
            _fix_one(linter, path, mode, state, debug)
    findings = sorted(state.findings, key=Finding.sort_key)
    for path, message in state.errors:
        print_error(path, message)
    if output_format == "json":
        write_json(sys.stdout, findings, state.errors)
    else:
        if mode != "diff":
            write_text(sys.stdout, findings, reasons=mode == "fix")
        _summarise(mode, findings, state, len(found.files))
    if state.errors:
        return 2
    return 1 if findings else 0


def _summarise(mode: str, findings: list[Finding], state: _Run, n_files: int) -> None:
    if mode == "check":
        click.echo(summary(findings, len(state.errors), n_files))
        n_fixable = sum(f.fixable for f in findings)
        if n_fixable:
            click.echo(f"{plural(n_fixable, 'finding')} fixable with `imlint fix` (marked [*]).")
        return
    verb = "Would fix" if mode == "diff" else "Fixed"
    line = f"{verb} {plural(state.fixed, 'finding')} in {plural(state.fixed_files, 'file')}"
    remaining = [f for f in findings if not (mode == "diff" and f.fixable)]
    if remaining:
        line += f"; {plural(len(remaining), 'finding')} left that cannot be fixed automatically"
    if state.errors:
        line += f"; {plural(len(state.errors), 'path')} could not be processed"
    click.echo(line + ".", err=mode == "diff")


def _guarded(action: Callable[[], FileResult], path: str, debug: bool) -> FileResult:
    try:
        return action()
    except Exception as exc:  # an imlint bug must not stop the other files
        if debug:
            traceback.print_exc()
        return FileResult(
            path, error=f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
        )


def _fix_one(linter: Linter, path: str, mode: str, state: _Run, debug: bool) -> None:
    try:
        source = read_source(path)
    except SourceError as exc:
        state.errors.append((path, str(exc)))
        return
    try:
        report = linter.fix_text(path, source.text)
    except cst.ParserSyntaxError as exc:
        state.errors.append((path, syntax_error_message(exc, source.text)))
        return
    except RecursionError:
        state.errors.append((path, "too deeply nested to analyse"))
        return
    except FixError as exc:
        state.errors.append((path, str(exc)))
        state.findings.extend(linter.check_text(path, source.text))
        return
    except Exception as exc:
        if debug:
            traceback.print_exc()
        state.errors.append(
            (path, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)")
        )
        return
    if report.text == source.text:
        state.findings.extend(report.remaining)
        return
    if mode == "diff":
        sys.stdout.writelines(
            difflib.unified_diff(
                source.text.splitlines(keepends=True),
                report.text.splitlines(keepends=True),
                fromfile=path,
                tofile=path,
            )
        )
        # Until written, every finding is still there; the fixable ones would go.
        state.findings.extend(linter.check_text(path, source.text))
        state.fixed += report.fixed
        state.fixed_files += 1
        return
    try:
        write_atomic(path, source.encode(report.text), expected=source.raw)
    except WriteError as exc:
        state.errors.append((path, str(exc)))
        state.findings.extend(linter.check_text(path, source.text))
        return
    state.fixed += report.fixed
    state.fixed_files += 1
    state.findings.extend(report.remaining)


def main() -> None:
    cli(prog_name="imlint")
