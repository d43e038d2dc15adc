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
import faulthandler
import hashlib
import json
import os
import re
import signal
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imlint import __version__
from imlint.config import Settings
from imlint.finding import Finding
from imlint.vocabulary import TENSOR_NEW_METHODS, TORCH_FACTORIES

CACHE_DIR = ".imlint_cache"


@dataclass
class Outcome:
    """What processing one file produced (picklable: findings carry no tree)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    fixed: int = 0  # fix/diff modes: findings fixed (or that would be)
    diff: str = ""  # diff mode: the unified diff
    cached: bool = False


def allocator_pattern(settings: Settings) -> re.Pattern[bytes]:
    """Bytes that every file with an allocation site contains, from the rules' vocabulary.

    An allocation is a call whose callee resolves to a torch factory, a ``new_*`` tensor
    method or a configured allocator; its spelling, or the import that aliases it, holds
    the name as a word.
    """
    words = set(TORCH_FACTORIES | TENSOR_NEW_METHODS)
    for name in settings.options.extra_allocators:
        words.add(name.rsplit(".", 1)[-1])
    alternation = "|".join(sorted(re.escape(w) for w in words))
    return re.compile(rb"\b(?:" + alternation.encode() + rb")\b")


# ---------------------------------------------------------------------------- the cache


class ResultCache:
    """Per-file check results keyed by content hash, for one version and configuration."""

    def __init__(self, root: Path, settings: Settings) -> None:
        key = hashlib.sha256(f"{__version__}|{settings.cache_key()}".encode()).hexdigest()[:16]
        self.folder = root / CACHE_DIR
        self.file = self.folder / f"results-{key}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
            files = data.get("files") if isinstance(data, dict) else None
            if isinstance(files, dict) and data.get("version") == __version__:
                self.entries = files
        except (OSError, ValueError):
            self.entries = {}  # missing or corrupt: start afresh

    @staticmethod
    def _key(path: str) -> str:
        return os.path.abspath(path)

    def get(self, path: str, digest: str) -> Outcome | None:
        entry = self.entries.get(self._key(path))
        if not isinstance(entry, dict) or entry.get("hash") != digest:
            return None
        try:
            findings = [Finding.from_dict({**f, "path": path}) for f in entry["findings"]]
        except (KeyError, TypeError):
            return None  # a damaged entry: recompute
        return Outcome(path, findings, entry.get("error"), cached=True)

    def put(self, path: str, digest: str, outcome: Outcome) -> None:
        self.entries[self._key(path)] = {
            "hash": digest,
            "findings": [f.to_dict() for f in outcome.findings],
            "error": outcome.error,
        }
        self.dirty = True

    def save(self) -> None:
        """Write atomically; concurrent runs may each write, the last one wins."""
        if not self.dirty:
            return
        try:
            self.folder.mkdir(exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by imlint\n*\n", encoding="utf-8")
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".results-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"version": __version__, "files": self.entries}, out)
            os.replace(tmp, self.file)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# -------------------------------------------------------------------------- the workers

_WORKER: dict[str, Any] = {}


def _init_worker(settings: Settings, mode: str, fast: bool, debug: bool) -> None:
    from imlint.engine import Linter  # imported in the worker: the parent may never need it

    _WORKER.update(
        linter=Linter(settings),
        mode=mode,
        fast=fast,
        debug=debug,
        pattern=allocator_pattern(settings),
    )


def _work(paths: list[str]) -> list[Outcome]:
    _WORKER["hard"] = True  # in a worker process: a hard time limit may end it
    return [_process(path) for path in paths]


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


def _process(path: str) -> Outcome:
    from imlint.engine import process_file

    limit = _WORKER["linter"].settings.timeout
    hard = _WORKER.get("hard", False) and limit > 0
    if hard:
        # Native code (the parser) cannot be interrupted by a signal handler; a C-level
        # watchdog ends the worker instead, and the parent reports this file.
        faulthandler.dump_traceback_later(limit + 5, exit=True, file=_devnull())
    try:
        with _time_limit(limit):
            return process_file(
                _WORKER["linter"],
                path,
                _WORKER["mode"],
                _WORKER["pattern"] if _WORKER["fast"] else None,
            )
    except FileTimeout:
        return Outcome(
            path, error=f"skipped: took longer than {limit:g} s (the per-file `timeout`)"
        )
    except Exception as exc:  # an imlint bug must not stop the other files
        if _WORKER["debug"]:
            import traceback

            traceback.print_exc()
        return Outcome(
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


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_files(
    files: list[str],
    settings: Settings,
    mode: str,
    *,
    jobs: int,
    fast: bool,
    use_cache: bool,
    debug: bool,
) -> list[Outcome]:
    """Process files (``mode``: check, fix or diff); outcomes in the order of ``files``."""
    results: dict[str, Outcome] = {}
    cache = ResultCache(settings.root, settings) if use_cache and mode == "check" else None
    digests: dict[str, str] = {}
    todo: list[str] = []
    for path in files:
        if cache is not None:
            try:
                with open(path, "rb") as fh:
                    digest = digest_of(fh.read())
            except OSError:
                todo.append(path)  # the worker reports the error
                continue
            hit = cache.get(path, digest)
            if hit is not None:
                results[path] = hit
                continue
            digests[path] = digest
        todo.append(path)

    for outcome in _run(todo, settings, mode, jobs, fast, debug):
        results[outcome.path] = outcome
        if cache is not None and outcome.path in digests and not outcome.error:
            cache.put(outcome.path, digests[outcome.path], outcome)
    if cache is not None:
        cache.save()
    return [results[p] for p in files]


def _run(
    todo: list[str], settings: Settings, mode: str, jobs: int, fast: bool, debug: bool
) -> Iterable[Outcome]:
    if jobs <= 1 or len(todo) < 2:
        _init_worker(settings, mode, fast, debug)
        yield from (_process(p) for p in todo)
        return
    done: set[str] = set()
    remaining = todo
    isolate = False  # after a worker died: one worker, one file at a time, to find the culprit
    while remaining:
        workers, chunk = (
            (1, 1) if isolate else (jobs, max(1, min(16, len(remaining) // (jobs * 4))))
        )
        try:
            with cf.ProcessPoolExecutor(
                max_workers=workers,
                initializer=_init_worker,
                initargs=(settings, mode, fast, debug),
            ) as pool:
                for batch in pool.map(_work, _chunks(remaining, chunk)):
                    for outcome in batch:
                        done.add(outcome.path)
                        yield outcome
            remaining = []
        except cf.process.BrokenProcessPool:
            remaining = [p for p in remaining if p not in done]
            if isolate and remaining:
                # Files run in order on the single worker: the first unfinished one killed it.
                culprit, remaining = remaining[0], remaining[1:]
                done.add(culprit)
                yield Outcome(
                    culprit,
                    error="the worker ended on this file (a crash, or the time limit hit in native code)",
                )
            isolate = not isolate
