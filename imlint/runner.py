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

import concurrent.futures as cf
import contextlib
import dataclasses
import faulthandler
import functools
import gc
import hashlib
import json
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imlint import __version__, cachefile
from imlint.config import Settings
from imlint.finding import Finding
from imlint.index_facts import FileFacts
from imlint.outcome import Outcome
from imlint.vocabulary import DERIVING_CALL, TENSOR_NEW_METHODS, TORCH_ALLOCATORS

CACHE_DIR = ".imlint_cache"
#: What a file means depends on the Python that parses it (syntax errors, the marshal
#: format): every cache is kept per Python version.
_PYTHON = "py{}.{}".format(*sys.version_info[:2])


def allocator_pattern(settings: Settings) -> re.Pattern[bytes]:
    """Bytes that every file with an allocation site contains, from the rules' vocabulary.

    An allocation is a call whose callee resolves to a torch factory, a ``new_*`` tensor
    method or a configured allocator; its spelling, or the import that aliases it, holds
    the name as a word.
    """
    words = set(TORCH_ALLOCATORS | TENSOR_NEW_METHODS)
    for name in settings.options.extra_allocators:
        words.add(name.rsplit(".", 1)[-1])
    alternation = "|".join(sorted(re.escape(w) for w in words))
    # ``x.to(d)``: a deriving method only as a call (``to`` is a word of every file).
    return re.compile(rb"\b(?:" + alternation.encode() + rb")\b|" + DERIVING_CALL.encode())


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


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# -------------------------------------------------------------------------- the workers

_WORKER: dict[str, Any] = {}


def _init_pool_worker(settings: Settings, mode: str, fast: bool, debug: bool) -> None:
    """A worker process's start. Parsing builds hundreds of thousands of objects, and
    with the default thresholds the cyclic collector runs every 700 of them: a quarter
    of Python's parse time. Parse trees hold no cycles (the models' few are collected,
    less often); objects that live from start-up on are left out of collections. Only
    in worker processes: a run in this process leaves the caller's collector alone."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler
    _die_with_parent()
    _init_worker(settings, mode, fast, debug)
    _load_work_modules()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def _load_work_modules() -> None:
    """Import what the tasks run (LibCST, the engine) before any per-file time limit is
    armed: a limit that fired inside an import would leave modules half made (LibCST's
    ``_nodes``), failing every later file of the process. A worker that is spawned, not
    forked, imports them here (macOS, and Linux from Python 3.14)."""
    import imlint.engine  # noqa: F401  # brings LibCST, the model and the rules
    import imlint.project  # noqa: F401
    import imlint.source  # noqa: F401


def _die_with_parent() -> None:
    """A worker ends when the run that started it ends, however it ends (killed
    included): Linux's parent-death signal; Ctrl-C reaches the whole process group."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown still applies
        return
    if os.getppid() == 1:  # the parent died before the signal was set
        os._exit(1)


def _init_worker(settings: Settings, mode: str, fast: bool, debug: bool) -> None:
    if _WORKER.get("settings") is not settings:
        _WORKER.pop("linter", None)  # made for other settings (another configuration)
    _WORKER.update(
        settings=settings,
        mode=mode,
        fast=fast,
        debug=debug,
        pattern=allocator_pattern(settings),
    )


def _linter() -> Any:
    linter = _WORKER.get("linter")
    if linter is None:
        from imlint.engine import Linter  # in the worker: phase one never loads LibCST

        linter = _WORKER["linter"] = Linter(_WORKER["settings"])
    return linter


def _work(phase: str, tasks: list[tuple[Any, ...]]) -> list[Any]:
    _WORKER["hard"] = True  # in a worker process: a hard time limit may end it
    task = _summarize_task if phase == "summarize" else _check_task
    return [_guarded(args[0], task, args) for args in tasks]


class FileTimeout(Exception):
    """A file took longer than the per-file limit."""


def _alarm(signum: int, frame: object) -> None:
    raise FileTimeout


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the work on one file after ``seconds`` (where SIGALRM exists)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Summarized:
    """Phase one for one file: its project summary, or the one-line error that the
    file gets instead of a check (it cannot be read, decoded or parsed by Python)."""

    path: str
    digest: str = ""
    summary: tuple[object, ...] | None = None
    error: str | None = None


def _summarize_task(path: str) -> Summarized:
    from imlint.project import summarize
    from imlint.source import InvalidSource, SourceError, python_parse, read_source

    try:
        source = read_source(path, _WORKER["settings"].max_file_size)
    except SourceError as exc:
        return Summarized(path, error=str(exc))
    digest = digest_of(source.raw)
    try:
        tree = python_parse(source.text)
    except InvalidSource as exc:
        return Summarized(path, digest, error=str(exc))
    summary = summarize(path, source.text, _WORKER["settings"].options, tree)
    return Summarized(path, digest, summary.to_data())


def _check_task(path: str, facts: FileFacts) -> Outcome:
    from imlint.engine import process_file

    return process_file(
        _linter(),
        path,
        _WORKER["mode"],
        _WORKER["pattern"] if _WORKER["fast"] else None,
        facts,
    )


def _guarded(path: str, task: Any, args: tuple[Any, ...]) -> Any:
    """Run ``task`` on one file under the time limit; failures become one line."""
    limit = _WORKER["settings"].timeout
    hard = _WORKER.get("hard", False) and limit > 0
    failed = Summarized if task is _summarize_task else Outcome
    if hard:
        # Native code (the parser) cannot be interrupted by a signal handler; a C-level
        # watchdog ends the worker instead, and the parent reports this file.
        faulthandler.dump_traceback_later(limit + 5, exit=True, file=_devnull())
    try:
        with _time_limit(limit):
            return task(*args)
    except FileTimeout:
        return failed(path, error=f"skipped: took longer than {limit:g} s (the per-file `timeout`)")
    except Exception as exc:  # an imlint bug must not stop the other files
        if _WORKER["debug"]:
            import traceback

            traceback.print_exc()
        return failed(
            path, error=f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
        )
    finally:
        if hard:
            faulthandler.cancel_dump_traceback_later()


_DEVNULL: list[Any] = []


def _devnull() -> Any:
    if not _DEVNULL:
        _DEVNULL.append(open(os.devnull, "w"))  # noqa: SIM115  # kept open for the watchdog
    return _DEVNULL[0]


def _chunks(items: list[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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


class _Summaries:
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
        for n, done in enumerate(_run([(p,) for p in need], self.workers, "summarize"), 1):
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

    def state(self) -> str:
        """What the facts depend on: every file's summary and the configuration."""
        known = self.known
        return _key(
            repr(sorted((os.path.abspath(p), known[p]) for p in known)) + self.settings.cache_key()
        )

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
            for done in _run([(p,) for p in missing], self.workers, "summarize"):
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
                self._index = ProjectIndex(
                    FileSummary.from_data(data[p]) for p in sorted(data, key=os.path.abspath)
                )
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
    summaries = _Summaries(settings, workers, use_cache, stats.progress)
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
    summaries: _Summaries,
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
    for n, outcome in enumerate(_run(todo, workers, "check"), 1):
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
                (r.armed, r.text())
                if r is not None
                else (False, "no path found (function not indexed)")
            )
        armed, text = reach_of[rkey]
        updated.append(dataclasses.replace(f, armed=armed, reach=text))
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
        summaries = _Summaries(settings, workers, use_cache)
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


class Workers:
    """The worker processes of one run, shared by both phases.

    They are started by the first phase that needs them, while this process is still
    small (forked workers share its memory: started after the project index is built,
    each would count the index in its own size).
    """

    def __init__(self, settings: Settings, mode: str, jobs: int, fast: bool, debug: bool) -> None:
        self.args = (settings, mode, fast, debug)
        self.jobs = jobs
        self.pool: cf.ProcessPoolExecutor | None = None

    def get(self) -> cf.ProcessPoolExecutor:
        if self.pool is None:
            self.pool = cf.ProcessPoolExecutor(
                max_workers=self.jobs, initializer=_init_pool_worker, initargs=self.args
            )
        return self.pool

    def discard(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def close(self) -> None:
        self.discard()

    def abort(self) -> None:
        """End every worker now (an interrupted run: a worker may be mid-file, and
        waiting for it could take as long as the file does)."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)


def _run(tasks: list[tuple[Any, ...]], workers: Workers, phase: str) -> Iterable[Any]:
    """Run one phase's tasks (``(path, ...)``) in workers; results as they finish."""
    if not tasks:
        return
    settings, mode, fast, debug = workers.args
    if workers.jobs <= 1 or len(tasks) < 2:
        _init_worker(settings, mode, fast, debug)
        _load_work_modules()
        task = _summarize_task if phase == "summarize" else _check_task
        yield from (_guarded(args[0], task, args) for args in tasks)
        return
    failed = Summarized if phase == "summarize" else Outcome
    work = functools.partial(_work, phase)
    done: set[str] = set()
    chunk = max(1, min(16, len(tasks) // (workers.jobs * 4)))
    try:
        for batch in workers.get().map(work, _chunks(tasks, chunk)):
            for result in batch:
                done.add(result.path)
                yield result
        return
    except cf.process.BrokenProcessPool:
        workers.discard()
    # A worker died: one worker, one file at a time, to find the culprit; then the rest
    # of the files in a fresh pool, and so on.
    remaining = [t for t in tasks if t[0] not in done]
    isolate = True
    while remaining:
        size, chunk = (1, 1) if isolate else (workers.jobs, 1)
        try:
            with cf.ProcessPoolExecutor(
                max_workers=size, initializer=_init_pool_worker, initargs=workers.args
            ) as pool:
                for batch in pool.map(work, _chunks(remaining, chunk)):
                    for result in batch:
                        done.add(result.path)
                        yield result
            remaining = []
        except cf.process.BrokenProcessPool:
            remaining = [t for t in remaining if t[0] not in done]
            if isolate and remaining:
                # Files run in order on the single worker: the first unfinished one killed it.
                culprit, remaining = remaining[0], remaining[1:]
                done.add(culprit[0])
                yield failed(
                    culprit[0],
                    error="the worker ended on this file (a crash, or the time limit hit in native code)",
                )
            isolate = not isolate
