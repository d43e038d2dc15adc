"""Adversarial input, fix safety and the promise never to run checked code."""

from __future__ import annotations

import codecs
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from imlint.writer import WriteError, write_atomic

from .conftest import run_imlint

LAZY = "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n    return _C[n]\n"
# A kernel from outside the project fills what the getter returns (IM002).
LAZY += "\n\n\ndef use(n):\n    import fastops\n\n    fastops.fill(get(n))\n"
FIXED = LAZY.replace(
    "        _C[n] = torch.empty(n)\n",
    "        with torch.inference_mode(False):\n            _C[n] = torch.empty(n)\n",
)

_BEFORE_312 = "syntax error" if sys.version_info < (3, 12) else None
# name -> (bytes, substring of the one-line error, or None when the file is fine)
HOSTILE: dict[str, tuple[bytes, str | None]] = {
    # Python 3.12 syntax: an error for an older parser, fine from 3.12 on.
    "py312_syntax.py": (b"type Alias = list[int]\n", _BEFORE_312),
    "py312_generics.py": (b"def first[T](xs: list[T]) -> T:\n    return xs[0]\n", _BEFORE_312),
    "python2.py": (b"print 'hello'\nexec 'x = 1'\n", "syntax error"),
    "latin1_no_cookie.py": (b"name = 'caf\xe9'\n", "cannot decode as utf-8"),
    "utf16_bom.py": (codecs.BOM_UTF16_LE + "x = 1\n".encode("utf-16-le"), "UTF-16/32"),
    "wrong_cookie.py": (
        b"# -*- coding: ascii -*-\nname = 'caf\xc3\xa9'\n",
        "cannot decode as ascii",
    ),
    "bogus_cookie.py": (b"# coding: klingon\nx = 1\n", "encoding"),
    "nul.py": (b"x = 1\x00\n", "NUL bytes"),
    "deep_blocks.py": (
        (
            "def f():\n"
            + "".join("    " * (i + 1) + "if x:\n" for i in range(500))
            + "    " * 501
            + "pass\n"
        ).encode(),
        "too many levels of indentation",
    ),
    "deep_expr.py": (
        b"import torch\nx = " + b"(" * 500 + b"torch.empty(1)" + b")" * 500 + b"\n",
        "nested parentheses",
    ),
    "deep_list.py": (b"x = " + b"[" * 5000 + b"1" + b"]" * 5000 + b"\n", "syntax error"),
    "tabs_spaces.py": (b"def f():\n\tif x:\n        pass\n", "syntax error"),
    "crlf.py": (LAZY.replace("\n", "\r\n").encode(), None),
    "mixed_eol.py": (LAZY.replace("\n", "\r\n", 3).encode(), None),
    "form_feed.py": (b"\x0cimport torch\n\x0c\ndef f():\n    pass\n", None),
    "empty.py": (b"", None),
    "long_function.py": (
        (
            "import torch\n_C = {}\ndef f(n):\n"
            + "    x = n + 1\n" * 10000
            + "    if n not in _C:\n        _C[n] = torch.empty(n)\n    _C[n].zero_()\n"
        ).encode(),
        None,
    ),
}


def test_hostile_files_one_line_each_exit_2_others_checked(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name, (data, _) in HOSTILE.items():
        (src / name).write_bytes(data)
    (src / "good.py").write_text(LAZY)
    (src / "pkg.py").mkdir()
    os.symlink(src / "nowhere.py", src / "dangling.py")
    os.symlink(src / "loop.py", src / "loop.py")
    os.mkfifo(src / "fifo.py")
    r = run_imlint("check", "src", "src/good.py", "--no-cache", cwd=tmp_path)
    assert r.code == 2
    assert "Traceback" not in r.err
    errors = {Path(line.split(": error: ")[0]).name: line for line in r.err.strip().splitlines()}
    for name, (_, needle) in HOSTILE.items():
        if needle is None:
            assert name not in errors, errors.get(name)
        else:
            assert needle in errors[name], (name, errors.get(name))
    assert "dangling symbolic link" in errors["dangling.py"]
    assert "symbolic link loop" in errors["loop.py"]
    assert "not a regular file" in errors["fifo.py"]
    assert "pkg.py" not in errors  # a directory named .py is walked, not read
    # every good file was still checked, once, with the path as given
    assert r.out.count("good.py:8:") == 1
    for name in ("crlf.py", "mixed_eol.py", "long_function.py"):
        assert f"src/{name}:" in r.out.replace(os.sep, "/"), name


def _run_patched(
    patch: str, args: list[str], cwd: Path, **options: Any
) -> subprocess.CompletedProcess[str]:
    """The real command line in a fresh interpreter, with ``patch`` run first (workers
    are forked from it, so they carry it too); ``options`` go to ``subprocess.run``. The
    timeout only guards against a hang: nothing here depends on how fast the machine is."""
    code = f"import sys\n{patch}\nfrom imlint.cli import main\nsys.argv = ['imlint', *sys.argv[1:]]\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        **{"timeout": 1800, **options},
    )


def test_a_20_mb_generated_file_is_never_given_to_libcst(tmp_path):
    """A file without an allocator is vetted by Python's parser only: LibCST, which
    would take minutes and gigabytes on it, never sees it (a planted failure proves it)."""
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400_000))
    (tmp_path / "big.py").write_text(body)
    assert (tmp_path / "big.py").stat().st_size > 10_000_000
    (tmp_path / "good.py").write_text(LAZY)
    patch = (
        "import imlint.engine as e\n"
        "real = e.parse_and_build\n"
        "def guarded(text, *a, **k):\n"
        "    if len(text) > 1_000_000: raise RuntimeError('LibCST was given the big file')\n"
        "    return real(text, *a, **k)\n"
        "e.parse_and_build = guarded\n"
    )
    # No per-file limit: parsing 20 MB may take minutes on a loaded machine.
    args = ["check", ".", "--no-cache", "-j", "1", "--timeout", "0", "--max-file-size", "0"]
    r = _run_patched(patch, args, tmp_path)
    assert r.returncode == 1, r.stderr
    assert "good.py:8:" in r.stdout and "big.py" not in r.stdout + r.stderr


def test_per_file_time_limit_reports_and_skips(tmp_path):
    """A file whose check never ends (a planted wait) is reported and skipped; the
    others are checked. The limit is generous, so a loaded machine does not trip it
    on the good file."""
    (tmp_path / "slow.py").write_text(LAZY.replace("_C", "_S"))
    (tmp_path / "good.py").write_text(LAZY)
    patch = (
        "import time, imlint.engine as e\n"
        "real = e.Linter.check_all\n"
        "def hang(self, path, *a, **k):\n"
        "    if path.endswith('slow.py'):\n"
        "        while True: time.sleep(60)\n"
        "    return real(self, path, *a, **k)\n"
        "e.Linter.check_all = hang\n"
    )
    for jobs in ("1", "2"):
        r = _run_patched(
            patch, ["check", ".", "--no-cache", "--timeout", "10", "-j", jobs], tmp_path
        )
        assert r.returncode == 2, r.stderr
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("slow.py")]
        assert "took longer than 10 s" in line or "time limit" in line
        assert "good.py:8:" in r.stdout


def test_a_time_limit_never_fires_inside_the_import_of_libcst(tmp_path):
    """The per-file time limit is armed only around a file's own work: the parser's
    import (slow on a cold disk) runs before it, so a limit can never leave LibCST half
    imported and fail the files after it (``AttributeError`` about ``libcst._nodes``).
    Workers are spawned, as on macOS and on Linux from Python 3.14, so that they import
    LibCST themselves; a planted import hook (``sitecustomize``, which spawned workers
    run too) waits for as long as a time limit is armed: without one it returns at once,
    so nothing here depends on how fast the machine is."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(4):
        (tree / f"m{i}.py").write_text(LAZY.replace("_C", f"_C{i}"))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import signal, sys, time\n"
        "class Slow:\n"
        "    done = False\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('libcst') and not Slow.done:\n"
        "            Slow.done = True\n"
        "            while signal.getitimer(signal.ITIMER_REAL)[0] > 0:\n"
        "                time.sleep(0.05)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n"
    )
    spawn = "import multiprocessing\nmultiprocessing.set_start_method('spawn', force=True)"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(hooks), *filter(None, [env.get("PYTHONPATH")])])
    for jobs in ("1", "2"):
        args = ["check", ".", "--no-cache", "--timeout", "5", "-j", jobs]
        r = _run_patched(spawn, args, tree, env=env)
        assert r.returncode == 1, r.stderr
        assert "error" not in r.stderr, r.stderr
        assert sorted(x.split(":")[0] for x in r.stdout.splitlines() if ":8:" in x) == [
            f"m{i}.py" for i in range(4)
        ]


def test_a_worker_ended_by_the_watchdog_loses_nothing_and_runs_its_file_once(tmp_path):
    """A file stuck where the time limit's signal cannot reach (native code: here the
    signal is blocked) is ended by the watchdog with its worker, which breaks the pool.
    The files the workers had already fixed are reported as fixed (their outcomes were
    lost with the pool), and the stuck file is reported once and never started again."""
    fixable = 24
    for i in range(fixable):
        (tmp_path / f"m{i:02}.py").write_text(LAZY.replace("_C", f"_C{i}"))
    (tmp_path / "a_stuck.py").write_text(LAZY.replace("_C", "_S"))
    starts = tmp_path.parent / f"{tmp_path.name}-starts"
    patch = (
        "import os, signal, time, imlint.engine as e\n"
        "real = e.Linter.check_all\n"
        "def stuck(self, path, *a, **k):\n"
        "    if path.endswith('a_stuck.py'):\n"
        f"        with open({str(starts)!r}, 'a') as fh: fh.write('started\\n')\n"
        "        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\n"
        "        while True: time.sleep(60)\n"
        "    return real(self, path, *a, **k)\n"
        "e.Linter.check_all = stuck\n"
    )
    r = _run_patched(patch, ["fix", ".", "--no-cache", "--timeout", "10", "-j", "2"], tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"Fixed {fixable} findings in {fixable} files" in r.stdout + r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("a_stuck.py")]
    assert "took longer than 10 s" in line
    assert starts.read_text() == "started\n"
    assert all(
        "inference_mode(False)" in (tmp_path / f"m{i:02}.py").read_text() for i in range(fixable)
    )


def test_running_out_of_memory_on_a_file_is_one_line_and_the_others_are_checked(tmp_path):
    """Under a memory limit (``ulimit -v``: 1.5 GiB here), a 2 GiB file read with the
    size limit off fails alone, with one line that says so; the other files are still
    checked, with and without the cache (whose digest streams the file)."""
    resource = pytest.importorskip("resource")
    big = tmp_path / "big.py"
    with open(big, "wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: no disk is used
    (tmp_path / "good.py").write_text(LAZY)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3 // 2, 3 * 1024**3 // 2))

    for extra in (["--no-cache"], []):
        args = ["check", ".", "--max-file-size", "0", "-j", "1", *extra]
        r = _run_patched("", args, tmp_path, preexec_fn=limit)
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("big.py")]
        assert "ran out of memory on this file (2147.5 MB)" in line
        assert "good.py:8:" in r.stdout


def test_no_traceback_unless_debug(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    code = (
        "import sys, imlint.engine as e\n"
        "def boom(*a, **k): raise ValueError('planted')\n"
        "e.Linter.check_all = boom\n"
        "from imlint.cli import main\n"
        "sys.argv = ['imlint', 'check', 'a.py', '--no-cache', '-j', '1'] + sys.argv[1:]\n"
        "main()\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert quiet.returncode == 2
    assert "a.py: error: internal error: ValueError: planted" in quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-c", code, "--debug"], cwd=tmp_path, capture_output=True, text=True
    )
    assert "Traceback" in loud.stderr


def test_writer_refuses_a_file_changed_since_it_was_read(tmp_path):
    p = tmp_path / "a.py"
    p.write_text(LAZY)
    original = p.read_bytes()
    p.write_text(LAZY + "# edited meanwhile\n")
    with pytest.raises(WriteError, match="changed on disk"):
        write_atomic(str(p), FIXED.encode(), expected=original)
    assert p.read_text().endswith("# edited meanwhile\n")
    assert [x.name for x in tmp_path.iterdir()] == ["a.py"]


def test_fix_survives_sigkill_at_random_points(tmp_path):
    """Every file is either its original bytes or its fully fixed bytes, never torn."""
    rng = random.Random(7)
    tree = tmp_path / "tree"
    for trial in range(4):
        if tree.exists():
            for p in tree.iterdir():
                p.unlink()
        else:
            tree.mkdir()
        for i in range(200):
            (tree / f"m{i:03d}.py").write_text(LAZY.replace("_C", f"_C{i}"))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "imlint",
                "fix",
                "tree",
                "--no-cache",
                "-j",
                "1" if trial % 2 else "2",
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.4, 2.5))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        states = set()
        for i in range(200):
            data = (tree / f"m{i:03d}.py").read_text()
            before, after = LAZY.replace("_C", f"_C{i}"), FIXED.replace("_C", f"_C{i}")
            assert data in (before, after), f"torn file m{i:03d}.py"
            states.add(data == after)
        leftovers = [p.name for p in tree.iterdir() if not p.name.endswith(".py")]
        # a temporary file may survive the kill, but never in place of a source file
        assert all(n.startswith(".imlint-") and n.endswith(".tmp") for n in leftovers)
    r = run_imlint("fix", "tree", "--no-cache", cwd=tmp_path)
    assert r.code == 0
    assert all(
        (tree / f"m{i:03d}.py").read_text() == FIXED.replace("_C", f"_C{i}") for i in range(200)
    )


def test_symlink_pointing_outside_is_reported_not_written(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(LAZY)
    proj = tmp_path / "proj"
    proj.mkdir()
    os.symlink(outside, proj / "link.py")
    r = run_imlint("fix", ".", "--no-cache", cwd=proj)
    assert r.code == 2 and "link.py: error: is a symbolic link" in r.err
    assert outside.read_text() == LAZY
    # paths are printed as given, never resolved to the target
    assert str(outside) not in r.out + r.err


def test_no_code_runs_in_any_mode(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    payload = (
        "import pathlib\npathlib.Path(__file__).with_name('MARKER').write_text('ran')\n" + LAZY
    )
    for name in ("__init__.py", "conftest.py", "setup.py", "mod.py"):
        (pkg / name).write_text(payload)
    (tmp_path / "pyproject.toml").write_text('[tool.imlint]\nextra-allocators = ["pkg.mod.get"]\n')
    for args in (
        ("check", "pkg"),
        ("check", "pkg", "-j", "1", "--no-fast"),
        ("fix", "--diff", "pkg"),
        ("fix", "pkg"),
    ):
        run_imlint(*args, "--no-cache", cwd=tmp_path)
        assert not (pkg / "MARKER").exists(), args


def test_the_run_journal_reads_only_whole_notes(monkeypatch):
    """A worker ended while writing its note (the pool ends the others when one dies)
    never leaves a half-written note: the run reads whole notes only."""
    from imlint.outcome import Outcome
    from imlint.pool import Journal

    journal = Journal()
    try:
        Journal.started(journal.folder, "a.py", 0)
        Journal.finished(journal.folder, Outcome("b.py", []))

        def ended(self: Path, *args: object, **kwargs: object) -> None:
            open(self, "wb").close()  # the file exists, empty: the worker died here
            raise SystemExit

        with monkeypatch.context() as m:
            m.setattr(Path, "write_bytes", ended)
            m.setattr(Path, "write_text", ended)
            with pytest.raises(SystemExit):
                Journal.started(journal.folder, "c.py", 0)
        current, finished = journal.read()
        assert current == [(float("inf"), "a.py")]
        assert [o.path for o in finished] == ["b.py"]
        assert list(Path(journal.folder).iterdir()) == []
    finally:
        journal.close()
    assert not Path(journal.folder).exists()


def test_workers_that_end_before_their_first_file_do_not_hang_the_run(tmp_path):
    """A worker that ends while it starts (before it notes a file) is still progress:
    the lone worker's first unfinished file is reported, and the run ends."""
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(LAZY.replace("_C", f"_C{i}"))
    patch = (
        "import multiprocessing, os, imlint.pool as p\n"
        "real = p._load_work_modules\n"
        "def dying():\n"
        "    if multiprocessing.parent_process() is not None: os._exit(3)\n"
        "    real()\n"
        "p._load_work_modules = dying\n"
    )
    r = _run_patched(patch, ["check", ".", "--no-cache", "-j", "2"], tmp_path, timeout=600)
    assert r.returncode == 2, r.stderr
    lines = sorted(x for x in r.stderr.splitlines() if x.startswith("m"))
    assert lines == [f"m{i}.py: error: the worker ended on this file (a crash)" for i in range(3)]
