"""The ``imlint`` command line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from imlint import __version__, evidence, installed
from imlint.baseline import BaselineError, LineCache, load_baseline
from imlint.baseline import write_baseline as write_baseline_file
from imlint.config import ConfigError, Settings
from imlint.discovery import discover, project_context
from imlint.finding import Finding
from imlint.outcome import Outcome
from imlint.pool import default_jobs
from imlint.progress import Progress
from imlint.report import (
    display_path,
    plural,
    summary,
    want_color,
    write_concise,
    write_github,
    write_json,
    write_sarif,
    write_source,
    write_statistics,
    write_text,
)
from imlint.resolve import Overrides, SettingsResolver
from imlint.runner import CACHE_DIR, RunStats, facts_of_text, run_files


def print_error(path: str, message: str) -> None:
    click.echo(f"{display_path(path)}: error: {message}", err=True)


class _Seconds(click.ParamType):
    """A finite number of seconds, 0 or more (``inf`` and ``nan`` are refused)."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        import math

        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(f"{value!r} is not a finite number of seconds, 0 or more", param, ctx)
        return number


FINITE_SECONDS = _Seconds()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="imlint")
def cli() -> None:
    """Find lazily allocated persistent PyTorch buffers that can become inference tensors."""


#: What to check and which rules: the paths, the selection, the configuration.
_SELECTION_OPTIONS = [
    click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, file_okay=True)),
    click.option(
        "--select",
        metavar="CODES",
        multiple=True,
        help="Comma-separated rule codes or prefixes to enable (replaces the config's "
        "selection; repeats accumulate).",
    ),
    click.option(
        "--extend-select",
        metavar="CODES",
        multiple=True,
        help="Rule codes or prefixes to enable on top (repeats accumulate).",
    ),
    click.option(
        "--ignore",
        metavar="CODES",
        multiple=True,
        help="Rule codes or prefixes to disable (repeats accumulate).",
    ),
    click.option("--config", metavar="FILE", help="A pyproject.toml to read [tool.imlint] from."),
    click.option(
        "--force-exclude", is_flag=True, help="Apply excludes to paths given explicitly too."
    ),
]

#: How findings are reported.
_OUTPUT_OPTIONS = [
    click.option(
        "--output-format",
        type=click.Choice(["text", "concise", "json", "sarif", "github"]),
        default="text",
        show_default=True,
        help="How findings are printed.",
    ),
    click.option("--statistics", is_flag=True, help="Print counts per rule instead of findings."),
    click.option(
        "--show-source/--no-show-source",
        default=None,
        help="Show the offending lines with a caret (default: on in text output to a terminal).",
    ),
    click.option("--baseline", metavar="FILE", help="Report only findings not recorded in FILE."),
    click.option(
        "--stdin-filename",
        metavar="NAME",
        help="Read the source from stdin and report it as NAME (for editors).",
    ),
    click.option(
        "--exit-zero",
        is_flag=True,
        help="Exit 0 even when findings remain (errors still exit 2).",
    ),
    click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary."),
    click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
]

#: How the run goes: workers, caches, limits, fixes.
_RUN_OPTIONS = [
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
        type=FINITE_SECONDS,
        default=None,
        help="Seconds one file may take before it is reported and skipped (default 60; 0: none).",
    ),
    click.option(
        "--explain-reach",
        is_flag=True,
        help="Under each finding, print the call path from an inference-mode region "
        "(or why none was found), and list the sites not reported because every "
        "caller guards them.",
    ),
    click.option(
        "--respect-gitignore/--no-respect-gitignore",
        default=None,
        help="Skip files and folders that .gitignore files ignore (default: on; "
        "overrides the config's respect-gitignore).",
    ),
    click.option(
        "--max-file-size",
        type=click.IntRange(min=0),
        default=None,
        metavar="BYTES",
        help="Skip (and report) files larger than this (default 10000000; 0: no limit).",
    ),
    click.option(
        "--unsafe-fixes/--no-unsafe-fixes",
        default=None,
        help="Apply (and mark [*]) unsafe fixes too; overrides the config's unsafe-fixes.",
    ),
    click.option(
        "--python",
        metavar="PATH",
        default=None,
        help="Read installed packages from this interpreter's site-packages (default: "
        "the one running imlint).",
    ),
    click.option(
        "--no-fast",
        is_flag=True,
        help="Parse every file, even those that cannot hold an allocation (the plain path).",
    ),
]


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``check`` and ``fix`` share, in the order ``--help`` lists them."""
    for option in reversed([*_SELECTION_OPTIONS, *_OUTPUT_OPTIONS, *_RUN_OPTIONS]):
        f = option(f)
    return f


@cli.command()
@common_options
@click.option(
    "--fix", "apply_fix", is_flag=True, help="Apply fixes in place (same as `imlint fix`)."
)
@click.option(
    "--write-baseline",
    metavar="FILE",
    help="Record the current findings in FILE (for --baseline) and exit 0.",
)
@click.option(
    "--show-settings",
    is_flag=True,
    help="Print the settings the first file is checked under, and where they come from.",
)
@click.option("--show-files", is_flag=True, help="Print the files that would be checked.")
@click.option(
    "--probe",
    "probe_file",
    metavar="FILE",
    help="Mark findings whose site `imlint probe` (its JSON, FILE) saw allocated under "
    "inference mode as armed (observed), and note sites it saw allocated normally.",
)
def check(
    apply_fix: bool,
    write_baseline: str | None,
    show_settings: bool,
    show_files: bool,
    probe_file: str | None,
    **kwargs: Any,
) -> None:
    """Check PATHS (default: the current directory) and report findings.

    Exit status: 0 clean, 1 findings, 2 usage or input errors.
    """
    if show_settings or show_files:
        from imlint.show import show

        sys.exit(show(kwargs, settings=show_settings))
    mode = "diff" if kwargs["diff"] else "fix" if apply_fix else "check"
    sys.exit(run(mode=mode, write_baseline=write_baseline, probe_file=probe_file, **kwargs))


@cli.command()
@common_options
def fix(**kwargs: Any) -> None:
    """Wrap lazy persistent allocations in PATHS in `with torch.inference_mode(False):`.

    Safe fixes only, unless --unsafe-fixes (see each rule's Fix safety). Exit status: 0
    when no finding remains (with --diff: would remain), 1 when some do, 2 on errors.
    """
    sys.exit(run(mode="diff" if kwargs["diff"] else "fix", write_baseline=None, **kwargs))


@cli.command("rules")
def rules_command() -> None:
    """List every rule: code, name, severity, default on/off, fixable."""
    from imlint.docs import rules_table
    from imlint.rules import ALL_RULES

    click.echo(rules_table(ALL_RULES), nl=False)


@cli.command("server")
def server_command() -> None:
    """Run the language server (LSP over stdin and stdout) for editors. Needs the
    ``lsp`` extra: pip install 'imlint[lsp]'."""
    try:
        from imlint.server import serve
    except ImportError as exc:
        click.echo(
            f"error: `imlint server` needs pygls ({exc}); install it with: "
            "pip install 'imlint[lsp]'",
            err=True,
        )
        sys.exit(2)
    serve()


@cli.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Print the documentation of rule CODE (e.g. IM001)."""
    from imlint.docs import rule_markdown
    from imlint.rules import RULES_BY_CODE

    rule = RULES_BY_CODE.get(code.upper())
    if rule is None:
        click.echo(f"error: unknown rule {code!r} (known: {', '.join(RULES_BY_CODE)})", err=True)
        sys.exit(2)
    click.echo(rule_markdown(rule), nl=False)


@cli.command(
    "probe", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--package", metavar="NAME", help="Probe modules of this package.")
@click.option("--path", "folder", metavar="DIR", help="Probe modules whose files are under DIR.")
@click.option("--all-sites", is_flag=True, help="Also probe lazy allocations that are guarded.")
@click.option("--out", default="imlint-probe.json", show_default=True, help="Where the JSON goes.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def probe_command(
    package: str | None, folder: str | None, all_sites: bool, out: str, command: tuple[str, ...]
) -> None:
    """Run COMMAND (after `--`) and record which mode each lazy allocation ran under.

    Example: imlint probe --package mypkg -- python -m mypkg.serve --warmup
    Needs torch in the program's environment. Exits with COMMAND's status.
    """
    if not package and not folder:
        click.echo("imlint probe: error: give --package NAME or --path DIR", err=True)
        sys.exit(2)
    from imlint.probe import run_probe

    sys.exit(run_probe(command, package, folder, all_sites, out))


def run(
    mode: str,
    paths: tuple[str, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    config: str | None,
    force_exclude: bool,
    output_format: str,
    diff: bool,
    debug: bool,
    jobs: int | None,
    no_cache: bool,
    no_fast: bool,
    timeout: float | None,
    statistics: bool,
    show_source: bool | None,
    baseline: str | None,
    write_baseline: str | None,
    stdin_filename: str | None,
    exit_zero: bool,
    quiet: bool,
    explain_reach: bool = False,
    unsafe_fixes: bool | None = None,
    respect_gitignore: bool | None = None,
    max_file_size: int | None = None,
    probe_file: str | None = None,
    python: str | None = None,
) -> int:
    del diff  # folded into ``mode``
    try:
        observed = evidence.load(probe_file) if probe_file is not None else None
        resolver = SettingsResolver(
            Overrides.from_flags(
                config, select, extend_select, ignore, timeout=timeout,
                unsafe_fixes=unsafe_fixes, respect_gitignore=respect_gitignore,
                max_file_size=max_file_size, python=_asked(python),
            )
        )  # fmt: skip
        settings = resolver.for_path(stdin_filename or (paths[0] if paths else "."))
    except (ConfigError, evidence.EvidenceError, installed.InstalledError) as exc:
        click.echo(str(exc) if isinstance(exc, ConfigError) else f"error: {exc}", err=True)
        return 2
    lines_of = LineCache()
    progress = Progress.for_terminal(sys.stderr, quiet)
    stats = RunStats(progress=progress)
    try:
        ran = _check_inputs(
            paths, stdin_filename, resolver, settings, mode, force_exclude, lines_of, jobs,
            no_fast, no_cache, debug, stats,
        )  # fmt: skip
    finally:
        if progress is not None:
            progress.close()
    if isinstance(ran, int):
        return ran
    outcomes, n_files, errors = ran
    errors += [(o.path, o.error) for o in outcomes if o.error is not None]
    findings, guarded = _in_report_order(outcomes, observed)
    if write_baseline is not None or baseline is not None:
        kept = _baseline_step(write_baseline, baseline, findings, errors, lines_of, quiet)
        if isinstance(kept, int):
            return kept
        findings = kept
    for path, message in errors:
        print_error(path, message)
    if mode == "diff":
        for o in outcomes:
            sys.stdout.write(o.diff)
    # A fix of stdin prints the fixed source on stdout, and nothing else there.
    with contextlib.redirect_stdout(
        sys.stderr if stdin_filename is not None and mode == "fix" else sys.stdout
    ):
        _report(
            output_format, findings, errors, mode, statistics, show_source, lines_of,
            resolver.for_path, explain_reach, stats, guarded, quiet, outcomes, n_files,
        )  # fmt: skip
    return _exit_code(findings, errors, mode, exit_zero)


def _check_inputs(
    paths: tuple[str, ...],
    stdin_filename: str | None,
    resolver: SettingsResolver,
    settings: Settings,
    mode: str,
    force_exclude: bool,
    lines_of: LineCache,
    jobs: int | None,
    no_fast: bool,
    no_cache: bool,
    debug: bool,
    stats: RunStats,
) -> tuple[list[Outcome], int, list[tuple[str, str]]] | int:
    """Check the files (or stdin's text): their outcomes, how many files, errors; or
    the exit code when there is nothing to report (an excluded stdin file: 0; a bad
    configuration met on the way: 2)."""
    # Never more workers than a few per CPU (run_files also caps them at the files).
    jobs = min(jobs if jobs is not None else default_jobs(), 4 * default_jobs())
    try:
        if stdin_filename is not None:
            ran = _run_stdin_unless_excluded(
                stdin_filename, settings, mode, force_exclude, lines_of, jobs, no_cache
            )
            return 0 if ran is None else ran
        return _run_paths(
            paths or (".",), resolver, mode, force_exclude, jobs, no_fast, no_cache,
            debug, stats,
        )  # fmt: skip
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        return 2


def _baseline_step(
    write_to: str | None,
    baseline: str | None,
    findings: list[Finding],
    errors: list[tuple[str, str]],
    lines_of: LineCache,
    quiet: bool,
) -> list[Finding] | int:
    """``--write-baseline`` (its exit status) or ``--baseline`` (the findings left)."""
    try:
        if write_to is not None:
            return _write_baseline(write_to, findings, errors, lines_of)
        assert baseline is not None
        return _hide_baselined(baseline, findings, lines_of, quiet)
    except BaselineError as exc:
        click.echo(str(exc), err=True)
        return 2


def _asked(python: str | None) -> str | None:
    """``--python``, once that interpreter has told its site-packages (a clear error
    now rather than mid-run)."""
    if python is not None:
        installed.site_folders(python)
    return python


def _exit_code(
    findings: list[Finding], errors: list[tuple[str, str]], mode: str, exit_zero: bool
) -> int:
    """2 for errors; else 1 for findings left (``--diff`` exits as the fix itself would:
    1 only for what it would leave) unless ``--exit-zero``."""
    if errors:
        return 2
    left = [f for f in findings if not f.fixable] if mode == "diff" else findings
    return 1 if left and not exit_zero else 0


def _in_report_order(
    outcomes: list[Outcome], observed: dict[tuple[str, int], evidence.Observation] | None
) -> tuple[list[Finding], list[Finding]]:
    """The findings (with what a probe run saw at their sites, if given), armed ones (an
    inference-mode region reaches them) first, then errors; and the sites every caller
    guards, in source order."""
    found = [f for o in outcomes for f in o.findings]
    if observed is not None:
        found = evidence.mark(found, observed)
    findings = sorted(
        found,
        key=lambda f: (f.armed_rank(), f.severity != "error", f.sort_key()),
    )
    guarded = sorted((f for o in outcomes for f in o.guarded), key=Finding.sort_key)
    return findings, guarded


def _run_stdin_unless_excluded(
    name: str,
    settings: Settings,
    mode: str,
    force_exclude: bool,
    lines_of: LineCache,
    jobs: int,
    no_cache: bool,
) -> tuple[list[Outcome], int, list[tuple[str, str]]] | None:
    """``--stdin-filename``: check or fix stdin as ``name``; None when ``name`` is
    excluded and ``--force-exclude`` is on (as ruff does: nothing is reported; a fix
    echoes the input)."""
    if force_exclude and settings.is_excluded_anywhere(name):
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        if mode == "fix":
            sys.stdout.buffer.write(data)
        return None
    context = project_context((), [name], settings)
    return _run_stdin(name, settings, mode, lines_of, context, jobs, not no_cache)


def _write_baseline(
    path: str, findings: list[Finding], errors: list[tuple[str, str]], lines_of: LineCache
) -> int:
    """``--write-baseline``: record the findings; 2 when some file had an error."""
    written = write_baseline_file(path, findings, lines_of)
    for where, message in errors:
        print_error(where, message)
    click.echo(f"Wrote {plural(len(written.entries), 'finding')} to baseline {path}.")
    return 2 if errors else 0


def _hide_baselined(
    path: str, findings: list[Finding], lines_of: LineCache, quiet: bool
) -> list[Finding]:
    """``--baseline``: the findings the baseline does not record, and one line on
    stderr for what it hid."""
    matched = load_baseline(path).match(findings, lines_of)
    if not quiet:
        moved = f" ({matched.moved} after their code moved)" if matched.moved else ""
        stale = (
            f"; {plural(matched.stale, 'entry', 'entries')} stale (fixed or gone: "
            "rewrite it with --write-baseline)"
            if matched.stale
            else ""
        )
        click.echo(
            f"Baseline {path}: {plural(matched.hidden, 'finding')} hidden{moved}{stale}.",
            err=True,
        )
    return matched.new


def _run_paths(
    paths: tuple[str, ...],
    resolver: SettingsResolver,
    mode: str,
    force_exclude: bool,
    jobs: int,
    no_fast: bool,
    no_cache: bool,
    debug: bool,
    stats: RunStats,
) -> tuple[list[Outcome], int, list[tuple[str, str]]]:
    """Discover the files under each path (with that path's settings), then run each
    group of files that share a configuration under it, indexed with its project."""
    files: list[str] = []
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path in paths:
        found = discover((path,), resolver.for_path(path), force_exclude=force_exclude)
        errors += found.errors
        for f in found.files:
            key = os.path.normcase(os.path.abspath(f))
            if key not in seen:
                seen.add(key)
                files.append(f)
    groups: dict[int, tuple[Settings, list[str]]] = {}
    for f in files:
        settings = resolver.for_path(f)
        groups.setdefault(id(settings), (settings, []))[1].append(f)
    by_path: dict[str, Outcome] = {}
    for settings, group in groups.values():
        part = RunStats(progress=stats.progress)
        outcomes = run_files(
            group,
            settings,
            mode,
            jobs=jobs,
            fast=not no_fast,
            use_cache=not no_cache,
            debug=debug,
            stats=part,
            context=project_context(paths, group, settings),
        )
        by_path.update((o.path, o) for o in outcomes)
        stats.merge(part)
    return [by_path[f] for f in files], len(files), errors


def _report(
    output_format: str,
    findings: list[Finding],
    errors: list[tuple[str, str]],
    mode: str,
    statistics: bool,
    show_source: bool | None,
    lines_of: LineCache,
    settings_for: Callable[[str], Settings],
    explain_reach: bool,
    stats: RunStats,
    guarded: list[Finding],
    quiet: bool,
    outcomes: list[Outcome],
    n_files: int,
) -> None:
    """Findings in the chosen format, what every caller guards (``--explain-reach``),
    and the summary line."""
    _output(
        output_format,
        findings,
        errors,
        mode,
        statistics,
        show_source,
        lines_of,
        settings_for,
        explain_reach,
        stats,
    )
    if explain_reach and output_format == "text" and not statistics:
        for g in guarded:
            click.echo(f"{g.path}:{g.line}:{g.col}: {g.code} {g.message}")
        if stats.indexed:
            click.echo(
                f"Project index: {plural(stats.indexed, 'file')}, "
                f"{plural(stats.allocating, 'allocating callable')}, "
                f"{plural(stats.unresolved_calls, 'unresolved call')}"
                + (f"; installed: {', '.join(stats.libraries)}" if stats.libraries else "")
                + "."
            )
    if not quiet and output_format == "text":
        fixed = sum(o.fixed for o in outcomes)
        fixed_files = sum(1 for o in outcomes if o.fixed)
        _summarise(mode, findings, errors, n_files, fixed, fixed_files)


def _output(
    output_format: str,
    findings: list[Finding],
    errors: list[tuple[str, str]],
    mode: str,
    statistics: bool,
    show_source: bool | None,
    lines_of: LineCache,
    settings_for: Callable[[str], Settings],
    explain_reach: bool = False,
    stats: RunStats | None = None,
) -> None:
    out = sys.stdout
    if statistics:
        write_statistics(out, findings)
    elif output_format == "json":
        originals, fixed = _fixed_texts(findings, settings_for, stats, lines_of, every_fix=True)
        write_json(out, findings, errors, originals, fixed)
    elif output_format == "concise":
        write_concise(out, findings)
    elif output_format == "github":
        write_github(out, findings)
    elif output_format == "sarif":
        from imlint.rules import ALL_RULES

        originals, fixed = _fixed_texts(findings, settings_for, stats, lines_of, every_fix=False)
        write_sarif(
            out,
            findings,
            ALL_RULES,
            lines_of=lines_of,
            original_text_by_path=originals,
            fixed_text_by_path=fixed,
            errors=errors,
        )
    elif mode != "diff":
        if show_source is None:
            show_source = out.isatty()
        if show_source:
            write_source(out, findings, lines_of, color=want_color(out), reach=explain_reach)
        else:
            write_text(out, findings, reasons=mode == "fix", reach=explain_reach)


def _fixed_texts(
    findings: list[Finding],
    settings_for: Callable[[str], Settings],
    stats: RunStats | None,
    lines_of: LineCache,
    every_fix: bool,
) -> tuple[dict[str, str], dict[str, str]]:
    """Each file's text and its text after ``imlint fix``, for the fixes a report
    carries: the run's (SARIF), or every one, unsafe included (JSON marks which)."""
    import dataclasses

    from imlint.engine import Linter, read_source

    originals: dict[str, str] = {}
    fixed: dict[str, str] = {}
    linters: dict[int, Linter] = {}
    wanted = {f.path for f in findings if (f.applicability if every_fix else f.fixable)}
    for path in sorted(wanted):
        try:
            settings = settings_for(path)
            linter = linters.get(id(settings))
            if linter is None:
                own = dataclasses.replace(settings, unsafe_fixes=True) if every_fix else settings
                linter = linters[id(settings)] = Linter(own)
            text = lines_of.texts.get(path) or read_source(path).text  # stdin's, or the file's
            facts = stats.facts.get(path) if stats is not None else None
            originals[path], fixed[path] = text, linter.fix_text(path, text, facts).text
        except Exception:  # a fix is optional in a report: leave it out
            continue
    return originals, fixed


def _run_stdin(
    name: str,
    settings: Settings,
    mode: str,
    lines_of: LineCache,
    context: list[str],
    jobs: int,
    use_cache: bool,
) -> tuple[list[Outcome], int, list[tuple[str, str]]]:
    """Check (or fix, printing the fixed source) what stdin holds, reported as ``name``,
    indexed with ``context`` (the other files of its project)."""
    from imlint.engine import Linter
    from imlint.source import InvalidSource, SourceError, decode

    if sys.stdin is None:
        return [], 1, [(name, "cannot read stdin: it is closed")]
    raw = sys.stdin.buffer.read()
    try:
        source = decode(raw)
    except SourceError as exc:
        return [], 1, [(name, str(exc))]
    lines_of.add(name, source.text)
    linter = Linter(settings)
    facts = None
    with contextlib.suppress(InvalidSource):  # the check reports why it does not parse
        facts = facts_of_text(name, source.text, context, settings, jobs=jobs, use_cache=use_cache)
    if mode == "check":
        result = linter.check_source(name, source, facts)
        return [Outcome(name, result.findings, result.error)], 1, []
    from imlint.engine import PARSE_FAILURES, parse_failure, unified_diff

    try:
        report = linter.fix_text(name, source.text, facts)
    except Exception as exc:  # a syntax error or worse: echo the input unchanged
        if mode == "fix":
            sys.stdout.buffer.write(raw)
        message = (
            parse_failure(exc, source.text)
            if isinstance(exc, PARSE_FAILURES)
            else f"cannot fix: {exc}"
        )
        return [], 1, [(name, message)]
    if mode == "fix":
        sys.stdout.buffer.write(source.encode(report.text))
        return [Outcome(name, report.remaining, fixed=report.fixed)], 1, []
    diff = unified_diff(name, source.text, report.text)
    return (
        [Outcome(name, linter.check_text(name, source.text, facts), fixed=report.fixed, diff=diff)],
        1,
        [],
    )


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
        hidden = _hidden_fixes(findings)
        more = (
            f"{plural(hidden, 'hidden fix', 'hidden fixes')} can be enabled with `--unsafe-fixes`"
        )
        if n_fixable:
            line = f"{plural(n_fixable, 'finding')} fixable with `imlint fix` (marked [*])"
            click.echo(line + (f"; {more}." if hidden else "."))
        elif hidden:
            click.echo(f"No safe fixes available ({more}).")
        return
    verb = "Would fix" if mode == "diff" else "Fixed"
    line = f"{verb} {plural(fixed, 'finding')} in {plural(fixed_files, 'file')}"
    if not fixed:
        line = "No fixes to apply" if mode == "diff" else "No fixes applied"
    remaining = [f for f in findings if not (mode == "diff" and f.fixable)]
    hidden = _hidden_fixes(remaining)
    if len(remaining) > hidden:
        line += f"; {plural(len(remaining) - hidden, 'finding')} left that cannot be fixed automatically"
    if hidden:
        line += f"; {plural(hidden, 'unsafe fix', 'unsafe fixes')} not applied (`--unsafe-fixes`)"
    if errors:
        line += f"; {plural(len(errors), 'path')} could not be processed"
    click.echo(line + ".", err=mode == "diff")


def _hidden_fixes(findings: list[Finding]) -> int:
    """Findings with an unsafe fix that this run does not apply."""
    return sum(1 for f in findings if f.applicability == "unsafe" and not f.fixable)


#: Exit status of an interrupted run (as shells report SIGINT): never 0 or 1, which CI
#: reads as "clean" and "findings".
INTERRUPTED = 130


def main() -> None:
    """The console script: click's errors as click prints them; Ctrl-C and SIGTERM
    exit 130 (no partial cache is written: caches are saved at the end of a run);
    output that cannot be written is one line and exit 2."""
    import signal

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        try:
            cli.main(prog_name="imlint", standalone_mode=False)
        finally:
            sys.stdout.flush()
    except (KeyboardInterrupt, click.exceptions.Abort):
        _last_words("imlint: interrupted")
        sys.exit(INTERRUPTED)  # the pool was shut down on the way out of run_files
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except OSError as exc:  # stdout full, closed, a broken pipe
        _last_words(f"imlint: error: cannot write the output: {exc.strerror or exc}")
        os._exit(2)


def _last_words(text: str) -> None:
    """One line on stderr, if stderr can still take it."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
