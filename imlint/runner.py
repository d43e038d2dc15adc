"""Running the linter over many files: pre-filter, result cache, parallel workers.

The speed levers sit here so that the plain path (one process, no cache, a full LibCST
parse of every file: ``--no-fast --no-cache -j 1``) and the fast path give the same
findings:

- **pre-filter**: a file whose bytes hold none of the allocator names the rules look for
  (torch factories, ``new_*`` methods, configured extra allocators) cannot contain an
  allocation site, so it cannot produce a finding; it is decoded (so encoding errors are
  still reported) but never parsed;
- **cache**: results keyed by the file's content hash, imlint's version and the effective
  configuration, stored in ``.imlint_cache/`` and written atomically;
- **workers**: ``-j N`` processes (default: the CPUs available), each file isolated (an
  internal error is one line for that file), output in discovery order.

Nothing here imports LibCST: a warm run (everything cached) never loads the parser.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imlint import __version__, cachefile
from imlint.config import Settings
from imlint.finding import Finding
from imlint.index_facts import FileFacts
from imlint.outcome import Outcome
from imlint.pool import Summarized, Workers, run_tasks

CACHE_DIR = ".imlint_cache"
#: What a file means depends on the Python that parses it (syntax errors, the marshal
#: format): every cache is kept per Python version.
_PYTHON = "py{}.{}".format(*sys.version_info[:2])


# ---------------------------------------------------------------------------- the cache


class ResultCache:
    """Per-file check results keyed by content hash, for one version and configuration."""

    def __init__(self, root: Path, settings: Settings) -> None:
        key = _key(f"{__version__}|{_PYTHON}|{settings.cache_key()}")
        self.folder = root / CACHE_DIR
        self.file = self.folder / f"results-{key}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        payload = cachefile.read(self.file)
        try:
            data = json.loads(payload) if payload is not None else None
        except ValueError:
            data = None  # damaged: start afresh
        if isinstance(data, dict) and data.get("version") == __version__:
            files = data.get("files")
            self.entries = files if isinstance(files, dict) else {}

    @staticmethod
    def _key(path: str) -> str:
        return os.path.abspath(path)

    def get(self, path: str, digest: str) -> Outcome | None:
        entry = self.entries.get(self._key(path))
        if not isinstance(entry, dict) or entry.get("hash") != digest:
            return None
        try:
            findings = [Finding.from_dict({**f, "path": path}) for f in entry["findings"]]
            guarded = [Finding.from_dict({**f, "path": path}) for f in entry.get("guarded", [])]
        except (KeyError, TypeError):
            return None  # a damaged entry: recompute
        if not all(_plausible(f) for f in (*findings, *guarded)):
            return None
        return Outcome(path, findings, entry.get("error"), cached=True, guarded=guarded)

    def put(self, path: str, digest: str, outcome: Outcome) -> None:
        self.entries[self._key(path)] = {
            "hash": digest,
            "findings": [f.to_dict() for f in outcome.findings],
            "guarded": [f.to_dict() for f in outcome.guarded],
            "error": outcome.error,
        }
        self.dirty = True

    def save(self) -> None:
        """Write atomically and authenticated (``imlint.cachefile``)."""
        if self.dirty:
            data = {"version": __version__, "files": self.entries}
            cachefile.write(self.file, json.dumps(data).encode("utf-8"))


def _plausible(f: Finding) -> bool:
    """A cached finding names a rule and a place (defence in depth: the cache file is
    authenticated already)."""
    from imlint.rules import RULES_BY_CODE

    return (
        f.code in RULES_BY_CODE
        and isinstance(f.line, int)
        and isinstance(f.end_line, int)
        and 1 <= f.line <= f.end_line
    )


def _stream_digest(path: str, limit: int) -> str | None:
    """The content digest of a regular file of at most ``limit`` bytes (0: any), read
    in chunks; None otherwise (the summary task then reports why). Opened without
    blocking and checked through the descriptor: a FIFO swapped in cannot hang this."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or (limit and info.st_size > limit):
            return None
        h = hashlib.blake2b(digest_size=16)
        while chunk := fh.read(1 << 20):
            h.update(chunk)
        return h.hexdigest()


class SummaryCache:
    """Project summaries by content hash (marshal: loads fast), for one version and
    configuration. Loaded only when the project index has to be rebuilt."""

    def __init__(self, root: Path, settings: Settings) -> None:
        from imlint.project import SUMMARY_VERSION

        key = _key(f"{__version__}|{_PYTHON}|{SUMMARY_VERSION}|{settings.options.key()}")
        self.folder = root / CACHE_DIR
        self.file = self.folder / f"summaries-{key}.marshal"
        self.entries: dict[str, tuple[str, Any]] = {}
        self.dirty = False
        self.loaded = False

    def load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        data = _load_marshal(self.file)
        if isinstance(data, dict):
            self.entries = data

    def get(self, path: str, digest: str) -> Any:
        entry = self.entries.get(os.path.abspath(path))
        if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == digest:
            return entry[1]
        return None

    def put(self, path: str, digest: str, data: Any) -> None:
        self.entries[os.path.abspath(path)] = (digest, data)
        self.dirty = True

    def save(self) -> None:
        if self.dirty:
            _save_marshal(self.folder, self.file, self.entries)


class ProjectCache:
    """The project pass of the last run: per file, content and summary digests and the
    facts the index gave it; the reach of the findings. A run whose summaries are all
    the same (however the files' contents changed) reuses it without the index."""

    def __init__(self, root: Path, settings: Settings) -> None:
        from imlint.project import SUMMARY_VERSION

        key = _key(
            f"{__version__}|{_PYTHON}|{SUMMARY_VERSION}|{settings.options.key()}"
            f"|{settings.max_file_size}"
        )
        self.folder = root / CACHE_DIR
        self.file = self.folder / f"project-{key}.marshal"
        data = _load_marshal(self.file)
        ok = (
            isinstance(data, dict)
            and {
                "state",
                "digests",
                "facts",
                "reach",
                "counts",
            }
            <= data.keys()
        )
        self.state: str = data["state"] if ok else ""  # type: ignore[index]
        self.digests: dict[str, tuple[str, str]] = data["digests"] if ok else {}  # type: ignore[index]
        self.facts: dict[str, Any] = data["facts"] if ok else {}  # type: ignore[index]
        self.reach: dict[str, Any] = data["reach"] if ok else {}  # type: ignore[index]
        #: files indexed, allocating callables, unresolved calls
        self.counts: tuple[int, int, int] = data["counts"] if ok else (0, 0, 0)  # type: ignore[index]

    def save(self) -> None:
        data = {
            "state": self.state,
            "digests": self.digests,
            "facts": self.facts,
            "reach": self.reach,
            "counts": self.counts,
        }
        _save_marshal(self.folder, self.file, data)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _load_marshal(path: Path) -> object:
    """A marshal cache file, if this user wrote it here (authenticated first: only
    imlint's own bytes are ever unmarshalled)."""
    import marshal

    payload = cachefile.read(path)
    if payload is None:
        return None
    try:
        return marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None  # damaged: start afresh


def _save_marshal(folder: Path, path: Path, data: object) -> None:
    """Write atomically and authenticated; concurrent runs may each write, the last wins."""
    import marshal

    del folder  # the file's own folder
    try:
        payload = marshal.dumps(data)  # type: ignore[arg-type]
    except ValueError:
        return
    cachefile.write(path, payload)


@dataclass
class RunStats:
    """What the project pass saw (for ``--statistics`` and the benchmark)."""

    indexed: int = 0
    allocating: int = 0
    unresolved_calls: int = 0
    index_rebuilt: bool = False
    #: installed packages read into the index (``name version``)
    libraries: list[str] = field(default_factory=list)
    #: wall seconds per step: summaries, index (with facts), checks, reach
    timings: dict[str, float] = field(default_factory=dict)
    facts: dict[str, FileFacts] = field(default_factory=dict)  # per path
    #: called as (phase, files done, files in the phase) while a run goes on
    progress: Callable[[str, int, int], None] | None = None

    def merge(self, other: RunStats) -> None:
        """Add another group's run (files under another configuration)."""
        self.indexed += other.indexed
        self.allocating += other.allocating
        self.unresolved_calls += other.unresolved_calls
        self.index_rebuilt |= other.index_rebuilt
        self.libraries += [x for x in other.libraries if x not in self.libraries]
        for step, seconds in other.timings.items():
            self.timings[step] = self.timings.get(step, 0.0) + seconds
        self.facts.update(other.facts)


def run_files(
    files: list[str],
    settings: Settings,
    mode: str,
    *,
    jobs: int,
    fast: bool,
    use_cache: bool,
    debug: bool,
    stats: RunStats | None = None,
    context: list[str] | None = None,
) -> list[Outcome]:
    """Process files (``mode``: check, fix or diff); outcomes in the order of ``files``.
    ``context``: the project's other files, summarised and indexed, not checked.

    Two phases: every file's project summary (Python's parser; cached), joined into
    the project index in this process, then each file's check with what the index
    says about it (LibCST; cached by content and those facts). Findings then get their
    reach: a call path from an inference-mode region, if the index finds one.
    """
    # One worker per file at most: ``-j 256`` on one file starts one process, not 256.
    workers = Workers(
        settings, mode, max(1, min(jobs, len(files) + len(context or []))), fast, debug
    )
    try:
        return _run_files(
            files, context or [], settings, mode, workers, use_cache, stats or RunStats()
        )
    except BaseException:  # an interrupt: end the workers now, mid-file included
        workers.abort()
        raise
    finally:
        workers.close()


class ProjectSummaries:
    """Phase one, for every indexed file: its project summary (Python's parser), from
    the project cache, the summary cache or a worker; and the index built from them
    when some file's facts are not in the project cache."""

    def __init__(
        self,
        settings: Settings,
        workers: Workers,
        use_cache: bool,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.progress = progress
        self.settings = settings
        self.workers = workers
        self.cache = SummaryCache(settings.root, settings) if use_cache else None
        self.project = ProjectCache(settings.root, settings) if use_cache else None
        self.use_cache = use_cache
        self.digests: dict[str, str] = {}  # path -> content digest (regular files)
        self.known: dict[str, str] = {}  # path -> summary digest
        self.errors: dict[str, str] = {}  # path -> why it has no summary
        self.fresh: dict[str, Any] = {}  # path -> summary data computed or loaded now
        self._index: Any = None
        self._site: list[Path] | None = None

    def summarise(self, paths: list[str]) -> None:
        from imlint.project import summary_digest

        # Content digests, for the caches (workers read the files again). Only regular
        # files are opened here: a FIFO would block; the summary reports what is wrong.
        if self.use_cache:
            limit = self.settings.max_file_size
            for path in paths:
                digest = _stream_digest(path, limit)
                if digest is not None:
                    self.digests[path] = digest
        need: list[str] = []
        project = self.project
        for path in paths:
            entry = project.digests.get(os.path.abspath(path)) if project is not None else None
            if entry is not None and path in self.digests and entry[0] == self.digests[path]:
                if entry[1].startswith("!"):
                    self.errors[path] = entry[1][1:]
                else:
                    self.known[path] = entry[1]
            else:
                need.append(path)
        # Many files to summarise (a first run, a new checkout): try the summary cache;
        # for a few, parsing them costs less than loading it.
        if need and self.cache is not None and len(need) > 64:
            self.cache.load()
            for path in list(need):
                data = self.cache.get(path, self.digests.get(path, ""))
                if data is not None:
                    self.fresh[path] = data
                    self.known[path] = summary_digest(data)
            need = [p for p in need if p not in self.fresh]
        for n, done in enumerate(run_tasks([(p,) for p in need], self.workers, "summarize"), 1):
            assert isinstance(done, Summarized)
            if self.progress is not None:
                self.progress("indexing", n, len(need))
            if done.error is not None:
                self.errors[done.path] = done.error
                if project is not None and done.digest:
                    project.digests[os.path.abspath(done.path)] = (done.digest, "!" + done.error)
                continue
            self.add(done.path, done.digest, done.summary)

    def add(self, path: str, digest: str, summary: Any) -> None:
        """A summary computed now (by a worker, or of text that is not on disk)."""
        from imlint.project import summary_digest

        self.fresh[path] = summary
        self.known[path] = summary_digest(summary)
        if digest:
            self.digests[path] = digest
            if self.cache is not None:
                self.cache.put(path, digest, summary)

    def replace(self, path: str, summary: Any) -> bool:
        """Another summary for ``path`` (an editor's unsaved buffer, or the file as it is
        now on disk): whether it differs from the one the index was built with. A
        different one takes effect at the next ``rebuild``."""
        from imlint.project import summary_digest

        changed = self.known.get(path) != summary_digest(summary)
        if changed:
            self.fresh[path] = summary
            self.known[path] = summary_digest(summary)
            self.errors.pop(path, None)
        return changed

    def forget(self, path: str) -> bool:
        """``path`` is gone from the project (deleted): whether it was indexed."""
        known = self.known.pop(path, None) is not None
        self.fresh.pop(path, None)
        self.errors.pop(path, None)
        return known

    def rebuild(self, stats: RunStats) -> Any:
        """A new index from the summaries as they are now (``replace``, ``forget``)."""
        self._index = None
        return self.index(stats)

    def state(self) -> str:
        """What the facts depend on: every file's summary and the configuration."""
        known = self.known
        return _key(
            repr(sorted((os.path.abspath(p), known[p]) for p in known))
            + self.settings.cache_key()
            + self.environment()
        )

    def site(self) -> list[Path]:
        """The folders installed packages are read from (none when turned off)."""
        if self._site is None:
            from imlint.installed import site_folders

            self._site = (
                site_folders(self.settings.python) if self.settings.installed_packages else []
            )
        return self._site

    def environment(self) -> str:
        """Which installed packages there are, for the project facts' key."""
        from imlint.installed import environment_key

        site = self.site()
        return f"|site={','.join(map(str, site))}:{environment_key(site)}" if site else ""

    def libraries(self, project: list[Any], stats: RunStats) -> list[Any]:
        """Summaries of the modules of installed packages the project reaches
        (``installed.py``): from this user's cache, else summarised now and cached."""
        from imlint.installed import (
            cache_path,
            find_libraries,
            imported_names,
            library_files,
            load_cached,
            reachable,
            store_cached,
            wanted_names,
        )
        from imlint.project import SUMMARY_VERSION

        site = self.site()
        if not site:
            return []
        roots = {s.module.split(".", 1)[0] for s in project}
        names = imported_names(
            (q for s in project for q in s.imports.values()), roots, self.settings.skip_installed
        )
        wanted = wanted_names(project)
        layout = f"{SUMMARY_VERSION}|{self.settings.options.key()}"
        out: list[Any] = []
        for lib in find_libraries(names, site):
            files = library_files(lib)
            if not files:  # more files than ``MAX_FILES``
                stats.libraries.append(f"{lib.name} {lib.version} (left out: too many files)")
                continue
            cached = cache_path(lib, layout)
            known = {str(d[0]): d for d in load_cached(cached) or () if isinstance(d, tuple)}
            before = len(known)
            read = reachable(lib, wanted, self._summaries, known)
            if len(known) > before:
                store_cached(cached, list(known.values()))
            out += read
            stats.libraries.append(f"{lib.name} {lib.version} ({len(read)} of {len(files)} files)")
        return out

    def _summaries(self, paths: list[str]) -> dict[str, tuple[object, ...]]:
        return {
            done.path: done.summary
            for done in run_tasks([(p,) for p in paths], self.workers, "summarize")
            if isinstance(done, Summarized) and done.summary is not None
        }

    def index(self, stats: RunStats) -> Any:
        """The project index (built once, on first need)."""
        from imlint.project import FileSummary, ProjectIndex

        if self._index is None:
            stats.index_rebuilt = True
            data = dict(self.fresh)
            missing = [p for p in self.known if p not in data]
            if missing and self.cache is not None:
                self.cache.load()
                for p in missing:
                    cached = self.cache.get(p, self.digests.get(p, ""))
                    if cached is not None:
                        data[p] = cached
            missing = [p for p in self.known if p not in data]
            for done in run_tasks([(p,) for p in missing], self.workers, "summarize"):
                if isinstance(done, Summarized) and done.summary is not None:
                    data[done.path] = done.summary
                    if self.cache is not None:
                        self.cache.put(done.path, done.digest, done.summary)
            # Millions of small tuples, none cyclic: the cyclic collector would only
            # walk them again and again while they are built.
            gc.disable()
            try:
                # In path order: what the index reports first (a writer cited in a
                # message) must not depend on which files were given or came first.
                project = [
                    FileSummary.from_data(data[p]) for p in sorted(data, key=os.path.abspath)
                ]
                self._index = ProjectIndex(project, self.libraries(project, stats))
            finally:
                gc.enable()
        return self._index

    def facts(self, stats: RunStats, reuse: bool) -> dict[str, FileFacts]:
        """Every summarised file's facts: from the project cache when the project is
        as it was (``reuse``), else from the index."""
        project = self.project
        out: dict[str, FileFacts] = {}
        for path in self.known:
            stored = project.facts.get(os.path.abspath(path)) if reuse and project else None
            out[path] = (
                FileFacts.from_data(stored) if stored is not None else self.index(stats).facts(path)
            )
        return out

    def save(self, state: str, facts: dict[str, FileFacts], reach: dict[str, Any],
             stats: RunStats) -> None:  # fmt: skip
        if self.cache is not None:
            self.cache.save()
        project = self.project
        if project is None:
            return
        project.state = state
        entries = {
            os.path.abspath(p): (self.digests[p], self.known[p])
            for p in self.known
            if p in self.digests
        }
        for p in self.errors:  # files Python cannot parse: known bad until their content changes
            entry = project.digests.get(os.path.abspath(p))
            if entry is not None and entry[1].startswith("!"):
                entries[os.path.abspath(p)] = entry
        project.digests = entries
        project.facts = {os.path.abspath(p): facts[p].to_data() for p in facts}
        project.reach = reach
        project.counts = (stats.indexed, stats.allocating, stats.unresolved_calls)
        project.save()


def _run_files(
    files: list[str],
    context: list[str],
    settings: Settings,
    mode: str,
    workers: Workers,
    use_cache: bool,
    stats: RunStats,
) -> list[Outcome]:
    """The pipeline: summarise (the checked files and their project) -> index (facts
    per file) -> check -> reach."""
    clock = time.perf_counter()
    summaries = ProjectSummaries(settings, workers, use_cache, stats.progress)
    summaries.summarise(files + context)
    stats.timings["summaries"] = time.perf_counter() - clock

    clock = time.perf_counter()
    state = summaries.state()
    project = summaries.project
    reuse = project is not None and project.state == state
    facts = summaries.facts(stats, reuse)
    stats.timings["index"] = time.perf_counter() - clock

    clock = time.perf_counter()
    results = _check(files, facts, summaries, settings, mode, workers, use_cache, stats.progress)
    stats.timings["checks"] = time.perf_counter() - clock

    clock = time.perf_counter()
    reach = dict(project.reach) if reuse and project is not None else {}
    for path in files:
        _add_reach(results[path], reach, lambda: summaries.index(stats))
    stats.timings["reach"] = time.perf_counter() - clock

    stats.facts = facts
    index = summaries._index
    if index is not None:
        stats.indexed = len(index.files)
        stats.allocating = index.allocating_count()
        stats.unresolved_calls = index.unresolved_total
    elif reuse and project is not None:
        stats.indexed, stats.allocating, stats.unresolved_calls = project.counts
    summaries.save(state, facts, reach, stats)
    return [results[p] for p in files]


def _check(
    files: list[str],
    facts: dict[str, FileFacts],
    summaries: ProjectSummaries,
    settings: Settings,
    mode: str,
    workers: Workers,
    use_cache: bool,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Outcome]:
    """Phase two: each file's check with its facts, through the result cache (keyed by
    content and facts)."""
    results: dict[str, Outcome] = {}
    cache = ResultCache(settings.root, settings) if use_cache and mode == "check" else None
    todo: list[tuple[str, FileFacts]] = []
    keys: dict[str, str] = {}
    for path in files:
        if path in summaries.errors:
            results[path] = Outcome(path, error=summaries.errors[path])
            continue
        if path not in facts:
            results[path] = Outcome(path, error="could not be read")
            continue
        if cache is not None and path in summaries.digests:
            keys[path] = f"{summaries.digests[path]}:{facts[path].key()}"
            hit = cache.get(path, keys[path])
            if hit is not None:
                results[path] = hit
                continue
        todo.append((path, facts[path]))
    for n, outcome in enumerate(run_tasks(todo, workers, "check"), 1):
        assert isinstance(outcome, Outcome)
        if progress is not None:
            progress("checking", n, len(todo))
        results[outcome.path] = outcome
        if cache is not None and outcome.path in keys and not outcome.error:
            cache.put(outcome.path, keys[outcome.path], outcome)
    if cache is not None:
        cache.save()
    return results


def _add_reach(outcome: Outcome, reach_of: dict[str, Any], index: Any) -> None:
    """Each finding's reach: a call path from an inference-mode region, if any."""
    if not outcome.findings:
        return
    updated = []
    for f in outcome.findings:
        rkey = f"{os.path.abspath(outcome.path)}::{f.function}"
        if rkey not in reach_of:
            idx = index()
            target = idx.target_of(outcome.path, f.function)
            r = idx.reach(target) if target is not None else None
            reach_of[rkey] = (
                (r.armed, r.tier, r.text())
                if r is not None
                else (False, "", "no path found (function not indexed)")
            )
        armed, tier, text = reach_of[rkey]
        updated.append(dataclasses.replace(f, armed=armed, tier=tier, reach=text))
    outcome.findings = updated


def facts_of_text(
    name: str,
    text: str,
    context: list[str],
    settings: Settings,
    *,
    jobs: int,
    use_cache: bool,
) -> FileFacts:
    """What the project index says of text that is not on disk as it is (an editor's
    buffer on stdin, reported as ``name``), indexed with the project's other files."""
    from imlint.project import summarize
    from imlint.source import python_parse

    workers = Workers(settings, "check", jobs, True, False)
    try:
        summaries = ProjectSummaries(settings, workers, use_cache)
        summaries.summarise([p for p in context if os.path.abspath(p) != os.path.abspath(name)])
        summary = summarize(name, text, settings.options, python_parse(text))
        summaries.add(name, "", summary.to_data())
        if summaries.cache is not None:
            summaries.cache.save()
        return summaries.index(RunStats()).facts(name)
    except BaseException:
        workers.abort()
        raise
    finally:
        workers.close()
