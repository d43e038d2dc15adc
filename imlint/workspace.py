"""The editor's view of the projects it has open (``imlint server``), apart from the
protocol: which project a file belongs to, that project's index kept warm between
edits, the findings of a buffer, and fixes and suppressions as new text. Nothing here
imports pygls (``imlint/server.py`` speaks the protocol).

- A file belongs to the project of its root (``roots.project_root``: the nearest
  folder with a ``pyproject.toml`` or ``.git``) under the settings its path resolves
  to, as ``imlint check`` groups files: the editor shows what CI reports.
- A project's index is built in the background (minutes on a tree of thousands of
  files, seconds once the summary cache is warm). Until it is ready a buffer is checked
  as a project of one file; it is checked again once the index is there.
- An edit re-summarises the buffer (Python's parser, tens of milliseconds). The
  buffer is always checked at once with the facts the index has; when its summary
  changed (a function added, a call changed; not an edit that only moves lines), the
  index is rebuilt from the summaries as they are now, and every open file whose facts
  changed is checked again (``Project.rebuild``), so that a cross-file IM003 follows
  an allocator that appears or goes in another file.
- A file that does not parse has no findings; ``Checked.error`` says why.
"""

from __future__ import annotations

import gc
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from imlint.config import ConfigError, Settings
from imlint.discovery import discover
from imlint.engine import Linter
from imlint.finding import Finding
from imlint.index_facts import FileFacts
from imlint.pool import Workers
from imlint.resolve import Overrides, SettingsResolver
from imlint.roots import project_root
from imlint.runner import ProjectSummaries, RunStats
from imlint.source import InvalidSource, Source, python_parse
from imlint.suppress import suppressed_codes


@dataclass
class Checked:
    """One buffer's findings, for the text they were computed from."""

    path: str
    text: str
    version: int | None
    findings: list[Finding] = field(default_factory=list)
    #: why the buffer was not checked (it does not parse), or None
    error: str | None = None
    #: whether the project's index gave the facts (else the file was its own project)
    indexed: bool = False


class Project:
    """One project root under one configuration: its summaries and index."""

    def __init__(self, root: str, settings: Settings, jobs: int, use_cache: bool) -> None:
        self.root = root
        self.settings = settings
        self.linter = Linter(settings)
        self.summaries = ProjectSummaries(
            settings, Workers(settings, "check", jobs, True, False, spawn=True), use_cache
        )
        self.index: Any = None
        #: summaries of buffers (or of files changed on disk) not yet in the index;
        #: None for a file that is gone
        self._pending: dict[str, Any] = {}
        self._facts: dict[str, FileFacts] = {}
        #: how long the last build took (seconds): a large project waits longer
        #: before the next one (``imlint.server.rebuild_delay``)
        self.build_seconds = 0.0
        self._lock = threading.RLock()  # the index and the facts read from it
        self._building = threading.Lock()  # one build at a time

    @property
    def ready(self) -> bool:
        return self.index is not None

    @property
    def stale(self) -> bool:
        """Whether summaries changed since the index was built."""
        return bool(self._pending)

    def note(self, path: str, summary: Any) -> bool:
        """A new summary for ``path`` (None: the file is gone), for the next build:
        whether it differs from the one the index has (or was to get)."""
        from imlint.project import summary_digest

        digest = None if summary is None else summary_digest(summary)
        with self._lock:
            if path in self._pending:
                before = self._pending[path]
                old = None if before is None else summary_digest(before)
            else:
                old = self.summaries.known.get(path)
            if digest == old:
                return False
            self._pending[path] = summary
            return True

    def facts(self, path: str) -> FileFacts | None:
        """What the index says of ``path``; None while there is no index."""
        with self._lock:
            if self.index is None:
                return None
            known = self._facts.get(path)
            if known is None:
                known = self._facts[path] = self.index.facts(path)
            return known

    def rebuild(self, open_paths: list[str]) -> list[str] | None:
        """Build the index from the summaries as they are now (the first time: every
        file of the project, from the summary cache where it can); the open files whose
        facts changed (all of them after the first build), or None when no summary
        changed (nothing was built)."""
        with self._building:
            first = self.index is None
            if first:
                found = discover((self.root,), self.settings)
                self.summaries.summarise([os.path.abspath(p) for p in found.files])
            with self._lock:
                pending, self._pending = self._pending, {}
            changed = False
            for path, summary in pending.items():
                if summary is None:
                    changed |= self.summaries.forget(path)
                else:
                    changed |= self.summaries.replace(path, summary)
            if not first and not changed:
                return None
            started = time.perf_counter()
            gc.unfreeze()  # the last index's objects: collectable again once it is dropped
            index = self.summaries.rebuild(RunStats())
            self.build_seconds = time.perf_counter() - started
            if self.summaries.cache is not None:
                self.summaries.cache.save()
            with self._lock:
                before = {p: self._facts.get(p) for p in open_paths}
                self.index, self._facts = index, {}
            # The index is millions of objects: collect once here, in the background, then
            # keep them out of the collector's way, or its next full pass lands on a
            # keystroke (seconds on a tree of thousands of files).
            gc.collect()
            gc.freeze()
            with self._lock:
                return [p for p in open_paths if first or _key(before[p]) != self._facts_key(p)]

    def _facts_key(self, path: str) -> str:
        facts = self.facts(path)
        return facts.key() if facts is not None else ""

    def reach(self, finding: Finding) -> tuple[bool, str, str] | None:
        """(armed, tier, path text) of a finding's function, or None without an index."""
        with self._lock:
            if self.index is None:
                return None
            target = self.index.target_of(finding.path, finding.function)
            if target is None:
                return None
            r = self.index.reach(target)
            return r.armed, r.tier, r.text()


def _key(facts: FileFacts | None) -> str | None:
    return facts.key() if facts is not None else None


def summary_of(path: str, text: str, settings: Settings) -> Any:
    """The project summary of a buffer (raises InvalidSource when it does not parse)."""
    from imlint.project import summarize

    return summarize(path, text, settings.options, python_parse(text)).to_data()


class Workspace:
    """Open buffers and the projects they belong to."""

    def __init__(
        self, overrides: Overrides | None = None, jobs: int = 1, use_cache: bool = True
    ) -> None:
        self.overrides = overrides or Overrides()
        self.jobs = jobs
        self.use_cache = use_cache
        self.resolver = SettingsResolver(self.overrides)
        self.projects: dict[tuple[str, int], Project] = {}
        self.buffers: dict[str, tuple[str, int | None]] = {}  # path -> (text, version)
        self.last: dict[str, Checked] = {}
        self._lock = threading.RLock()

    # ---- buffers

    def store(self, path: str, text: str, version: int | None) -> None:
        """A buffer's text, as the editor has it now (``set_text`` summarises it)."""
        with self._lock:
            self.buffers[path] = (text, version)

    def set_text(self, path: str, text: str, version: int | None) -> Project | None:
        """An opened or edited buffer; its project when the edit changed its summary
        (that project needs a ``rebuild``), else None."""
        self.store(path, text, version)
        project = self.project_of(path)
        if project is None:
            return None
        try:
            summary = summary_of(path, text, project.settings)
        except (InvalidSource, SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # the index keeps the file's last summary that parsed
        changed = project.note(path, summary)
        return project if changed and project.ready else None

    def close(self, path: str) -> Project | None:
        """A buffer closed: the file on disk counts again (its project, to rebuild)."""
        with self._lock:
            self.buffers.pop(path, None)
            self.last.pop(path, None)
        return self.disk_changed(path)

    def disk_changed(self, path: str) -> Project | None:
        """A file changed, appeared or went on disk (not an open buffer: the buffer
        wins): its project, to rebuild, when one is loaded."""
        if path in self.buffers or not path.endswith(".py"):
            return None
        project = self.project_of(path, create=False)
        if project is None or project.settings.is_excluded_anywhere(path):
            return None
        try:
            with open(path, encoding="utf-8") as handle:
                summary = summary_of(path, handle.read(), project.settings)
        except FileNotFoundError:
            summary = None
        except (OSError, InvalidSource, SyntaxError, ValueError, RecursionError):
            return None
        return project if project.note(path, summary) else None

    def open_paths(self, project: Project) -> list[str]:
        with self._lock:
            return [p for p in self.buffers if self.project_of(p, create=False) is project]

    # ---- projects and settings

    def settings_for(self, path: str) -> Settings:
        """The settings ``path`` is checked under (raises ConfigError)."""
        return self.resolver.for_path(path)

    def project_of(self, path: str, create: bool = True) -> Project | None:
        """The project ``path`` belongs to (None without a project root, or when its
        configuration is broken: the file is then checked on its own)."""
        root = project_root(path) if os.path.isabs(path) else None
        if root is None:
            return None
        try:
            settings = self.settings_for(path)
        except ConfigError:
            return None
        key = (root, id(settings))
        with self._lock:
            project = self.projects.get(key)
            if project is None and create:
                project = self.projects[key] = Project(root, settings, self.jobs, self.use_cache)
            return project

    def reload_settings(self) -> None:
        """A configuration file changed: settings and projects are read anew."""
        with self._lock:
            self.resolver = SettingsResolver(self.overrides)
            self.projects = {}
            self.last = {}

    # ---- checks

    def check(self, path: str) -> Checked:
        """The buffer's findings with the facts its project's index has now."""
        with self._lock:
            text, version = self.buffers.get(path, ("", None))
        try:
            settings = self.settings_for(path)
        except ConfigError as exc:
            return self._keep(Checked(path, text, version, error=str(exc)))
        if os.path.isabs(path) and settings.is_excluded_anywhere(path):
            return self._keep(Checked(path, text, version))
        project = self.project_of(path)
        facts = project.facts(path) if project is not None else None
        linter = project.linter if project is not None else Linter(settings)
        source = Source(text=text, encoding="utf-8", bom=False, raw=b"")
        try:
            result = linter.check_source(path, source, facts, narrowed=facts is not None)
        except InvalidSource as exc:
            return self._keep(Checked(path, text, version, error=str(exc)))
        return self._keep(
            Checked(path, text, version, result.findings, result.error, indexed=facts is not None)
        )

    def _keep(self, checked: Checked) -> Checked:
        with self._lock:
            self.last[checked.path] = checked
        return checked

    def reach(self, finding: Finding) -> tuple[bool, str, str] | None:
        project = self.project_of(finding.path, create=False)
        return project.reach(finding) if project is not None else None

    # ---- edits

    def fixed_text(self, path: str, only: Callable[[Finding], bool] | None = None) -> str | None:
        """The buffer with the chosen findings fixed (``only``: any finding with a fix,
        unsafe ones included; None: what ``imlint fix`` applies under the settings), or
        None when nothing changes or the buffer cannot be fixed."""
        with self._lock:
            text, _ = self.buffers.get(path, ("", None))
        project = self.project_of(path)
        facts = project.facts(path) if project is not None else None
        linter = project.linter if project is not None else Linter(self.settings_for(path))
        try:
            fixed = linter.fix_text(path, text, facts, only).text
        except Exception:  # the buffer does not parse, or the fixer refused it
            return None
        return fixed if fixed != text else None


def with_noqa(line: str, code: str) -> str:
    """``line`` with ``code`` suppressed by a ``# noqa`` comment (added to one that
    names codes already). A line that ends in a backslash continuation cannot take a
    comment: it is returned as it is."""
    body = line.rstrip("\r\n")
    newline = line[len(body) :]
    codes = suppressed_codes(body)
    if codes is not None and ("*" in codes or code in codes):
        return line
    if body.rstrip().endswith("\\"):
        return line
    noqa = re.search(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*", body, re.IGNORECASE)
    if noqa is not None:
        return body[: noqa.end()] + f", {code}" + body[noqa.end() :] + newline
    return body.rstrip() + f"  # noqa: {code}" + newline


def noqa_line(finding: Finding, text: str) -> tuple[int, str] | None:
    """(0-based line, its new text) that suppresses ``finding``: its first line, or its
    last when the first cannot take a comment; None when neither can."""
    lines = text.splitlines(keepends=True)
    for number in dict.fromkeys((finding.line, finding.end_line)):
        if 1 <= number <= len(lines):
            new = with_noqa(lines[number - 1], finding.code)
            if new != lines[number - 1]:
                return number - 1, new
    return None
