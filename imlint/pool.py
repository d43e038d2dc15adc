"""The worker processes of a run: their start, the per-file time limit, and the pool.

Each file runs under a time limit (a signal, and a C-level watchdog that ends a worker
stuck in native code). A worker that ends mid-run (the watchdog, a crash) breaks the
pool: the :class:`Journal` then says which file each worker was on and what a worker
that fixes files had written, so that a written file is reported as written, a file
that ran out of time is reported once and never run again, and only the files whose
results were lost run again.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import faulthandler
import functools
import gc
import hashlib
import itertools
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imlint.config import Settings
from imlint.index_facts import FileFacts
from imlint.outcome import Outcome
from imlint.vocabulary import DERIVING_CALL, TENSOR_NEW_METHODS, TORCH_ALLOCATORS

#: Seconds after the per-file limit at which the watchdog ends a worker stuck in native code.
WATCHDOG_GRACE = 5

#: The worker process's own state: its settings, mode and linter (made once).
_WORKER: dict[str, Any] = {}


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


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
    import imlint.engine  # brings LibCST, the model and the rules
    import imlint.project
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


def _work(phase: str, journal: str, tasks: list[tuple[Any, ...]]) -> list[Any]:
    _WORKER["hard"] = True  # in a worker process: a hard time limit may end it
    task = _summarize_task if phase == "summarize" else _check_task
    done = []
    for args in tasks:
        Journal.started(journal, args[0], _WORKER["settings"].timeout)
        result = _guarded(args[0], task, args)
        if _WORKER["mode"] != "check" and phase == "check":
            Journal.finished(journal, result)  # written: must be reported even if lost
        done.append(result)
    return done


class FileTimeout(Exception):
    """A file took longer than the per-file limit."""


def _alarm(signum: int, frame: object) -> None:
    raise FileTimeout


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the work on one file after ``seconds`` (where SIGALRM exists, in the
    main thread only: the language server builds its index in another thread, and a
    worker process keeps the C-level watchdog)."""
    if (
        seconds <= 0
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
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
        faulthandler.dump_traceback_later(limit + WATCHDOG_GRACE, exit=True, file=_devnull())
    try:
        with _time_limit(limit):
            return task(*args)
    except FileTimeout:
        return failed(path, error=_out_of_time(limit))
    except MemoryError:
        return failed(path, error=_out_of_memory(path))
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


_CRASHED = "the worker ended on this file (a crash)"


def _out_of_time(limit: float) -> str:
    return f"skipped: took longer than {limit:g} s (the per-file `timeout`)"


def _out_of_memory(path: str) -> str:
    """The one line for a file whose check ran out of memory (a limit such as
    ``ulimit -v``, a giant file read with ``max-file-size = 0``)."""
    try:
        size = f" ({os.stat(path).st_size / 1e6:.1f} MB)"
    except OSError:
        size = ""
    return f"skipped: ran out of memory on this file{size}; `max-file-size` skips such files"


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


#: Numbers the outcomes a worker notes (``Journal.finished``), one file each.
_FINISHED = itertools.count()


def _put(path: Path, data: bytes) -> None:
    """Write a note whole: aside, then renamed into place (a worker may end mid-write)."""
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


class Journal:
    """A private folder (made ``0700`` by :func:`tempfile.mkdtemp`, outside the tree)
    where each worker notes the file it starts, with the time its watchdog ends it, and,
    when it writes files, each outcome as it finishes. Read only by the run that made
    it, after its pool broke; removed when the run ends."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="imlint-run-")

    @staticmethod
    def started(folder: str, path: str, limit: float) -> None:
        deadline = time.time() + limit + WATCHDOG_GRACE if limit > 0 else float("inf")
        text = f"{deadline!r}\n{path}".encode("utf-8", "surrogateescape")
        _put(Path(folder, f"{os.getpid()}.now"), text)

    @staticmethod
    def finished(folder: str, result: Any) -> None:
        _put(Path(folder, f"{os.getpid()}.{next(_FINISHED)}.done"), pickle.dumps(result))

    def read(self) -> tuple[list[tuple[float, str]], list[Any]]:
        """(deadline, path) of the file each worker was on, and the outcomes the workers
        finished, since the last read (the notes are removed as they are read). A note
        is whole or absent: each is written aside and renamed into place."""
        current: list[tuple[float, str]] = []
        finished: list[Any] = []
        for note in sorted(Path(self.folder).iterdir()):
            if note.suffix == ".now":
                deadline, _, path = (
                    note.read_bytes().decode("utf-8", "surrogateescape").partition("\n")
                )
                current.append((float(deadline), path))
            elif note.suffix == ".done":
                finished.append(pickle.loads(note.read_bytes()))  # this run's own folder
            note.unlink()  # a ``.part`` a worker ended before renaming: nothing noted
        return current, finished

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Workers:
    """The worker processes of one run, shared by both phases.

    They are started by the first phase that needs them, while this process is still
    small (forked workers share its memory: started after the project index is built,
    each would count the index in its own size).
    """

    def __init__(
        self, settings: Settings, mode: str, jobs: int, fast: bool, debug: bool, spawn: bool = False
    ) -> None:
        self.args = (settings, mode, fast, debug)
        self.jobs = jobs
        #: start workers fresh rather than forked: a process with threads (the language
        #: server) may be forked while another thread holds a lock the child then waits on
        self.spawn = spawn
        self.pool: cf.ProcessPoolExecutor | None = None
        self._journal: Journal | None = None

    @property
    def journal(self) -> Journal:
        if self._journal is None:
            self._journal = Journal()
        return self._journal

    def get(self) -> cf.ProcessPoolExecutor:
        if self.pool is None:
            self.pool = self.start(self.jobs)
        return self.pool

    def start(self, size: int) -> cf.ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn") if self.spawn else None
        return cf.ProcessPoolExecutor(
            max_workers=size, mp_context=context, initializer=_init_pool_worker, initargs=self.args
        )

    def discard(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def close(self) -> None:
        self.discard()
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def abort(self) -> None:
        """End every worker now (an interrupted run: a worker may be mid-file, and
        waiting for it could take as long as the file does)."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        manager = getattr(pool, "_executor_manager_thread", None)
        for process in list(getattr(pool, "_processes", {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        _settle(manager)


def _settle(manager: threading.Thread | None) -> None:
    """Let an aborted pool's manager thread see its dead workers and close its pipes
    before the interpreter exits. concurrent.futures' exit hook wakes every manager
    thread that is still registered, unlocked: if this one closes its wake-up pipe at
    that moment, the hook writes to a closed descriptor and Python prints a traceback
    after "imlint: interrupted" (seen under load in CI). Once the thread has ended, the
    hook finds the pipe closed and skips it."""
    if manager is None:
        return
    manager.join(timeout=30)  # workers are terminated: it ends at once (a hang guard)
    if manager.is_alive():  # never wake a thread that may be closing its pipe
        cf.process._threads_wakeups.pop(manager, None)


def run_tasks(tasks: list[tuple[Any, ...]], workers: Workers, phase: str) -> Iterable[Any]:
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
    work = functools.partial(_work, phase, workers.journal.folder)
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
    yield from _after_a_broken_pool(tasks, workers, phase, work, done)


def _after_a_broken_pool(
    tasks: list[tuple[Any, ...]],
    workers: Workers,
    phase: str,
    work: Any,
    done: set[str],
) -> Iterator[Any]:
    """A worker ended mid-run. What the journal shows is reported as it is: outcomes a
    worker finished (a file it wrote), and the file a watchdog ended (out of time: never
    run again). The rest runs again, in a fresh pool; when a worker ended before its
    deadline (a crash), one worker, one file at a time, finds the file that did it."""
    failed = Summarized if phase == "summarize" else Outcome
    isolate = False
    while True:
        current, finished = workers.journal.read()
        for result in finished:
            if result.path not in done:
                done.add(result.path)
                yield result
        now = time.time()
        for deadline, path in current:
            if path in done:
                continue
            if deadline <= now:
                done.add(path)
                yield failed(path, error=_out_of_time(workers.args[0].timeout))
            elif isolate:  # the only worker ended on it before its deadline
                done.add(path)
                yield failed(path, error=_CRASHED)
        ended_in_time = isolate or not any(d <= now for d, _ in current)
        remaining = [t for t in tasks if t[0] not in done]
        if isolate and remaining and not any(path in done for _, path in current):
            # No note names a file (the worker ended before it noted one): files run in
            # order on the lone worker, so the first unfinished one ended it.
            culprit, remaining = remaining[0], remaining[1:]
            done.add(culprit[0])
            yield failed(culprit[0], error=_CRASHED)
        if not remaining:
            return
        isolate = ended_in_time and not isolate
        size = 1 if isolate else workers.jobs
        try:
            with workers.start(size) as pool:
                for batch in pool.map(work, _chunks(remaining, 1)):
                    for result in batch:
                        done.add(result.path)
                        yield result
            return
        except cf.process.BrokenProcessPool:
            continue
