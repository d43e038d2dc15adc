"""A hostile or unlucky run: interrupts, closed or full streams, option values, file
names that try to forge output, configuration spelled unusually (issue 21)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import run_imlint

LAZY = (
    "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n"
    "        _C[n] = torch.empty(n)\n    _C[n].zero_()\n    return _C[n]\n"
)
HANG = (
    "import time, imlint.engine as e\n"
    "real = e.Linter.check_all\n"
    "def hang(self, path, *a, **k):\n"
    "    if path.endswith('slow.py'):\n"
    "        open(path + '.started', 'w').close()\n"
    "        while True: time.sleep(60)\n"
    "    return real(self, path, *a, **k)\n"
    "e.Linter.check_all = hang\n"
)


def _start(patch: str, args: list[str], cwd: Path) -> subprocess.Popen[str]:
    code = f"import sys\n{patch}\nfrom imlint.cli import main\nsys.argv = ['imlint', *sys.argv[1:]]\nmain()\n"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_for(path: Path) -> None:
    """Until the planted hang has started (a hang guard, not a speed budget)."""
    for _ in range(9000):
        if path.exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_interrupted_run_exits_130_and_leaves_nothing_behind(tmp_path, sig, jobs):
    (tmp_path / "good.py").write_text(LAZY)
    (tmp_path / "slow.py").write_text(LAZY.replace("_C", "_S"))
    proc = _start(HANG, ["check", ".", "--timeout", "0", "-j", jobs], tmp_path)
    _wait_for(tmp_path / "slow.py.started")
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=900)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Aborted" not in err and "Traceback" not in err
    # Caches are written only when a run ends: an interrupted one leaves none, and no
    # temporary file either.
    cache = tmp_path / ".imlint_cache"
    assert not cache.exists() or [p.name for p in cache.iterdir()] == [".gitignore"]


#: Widens a race in concurrent.futures: the manager thread of an aborted pool closes its
#: wake-up pipe slowly, and the interpreter's exit hook (which wakes every registered
#: manager without a lock) lingers between its "still open?" check and its write.
SLOW_EXIT = (
    "import time, concurrent.futures.process as P\n"
    "real_close = P._ThreadWakeup.close\n"
    "def close(self):\n"
    "    time.sleep(0.3)\n"
    "    real_close(self)\n"
    "def wakeup(self):\n"
    "    if not self._closed:\n"
    "        if P._global_shutdown:\n"
    "            time.sleep(0.6)\n"
    "        self._writer.send_bytes(b'')\n"
    "P._ThreadWakeup.close = close\n"
    "P._ThreadWakeup.wakeup = wakeup\n"
)


def test_an_interrupted_run_prints_no_traceback_from_the_pools_exit_hook(tmp_path):
    # Seen in CI under load: "imlint: interrupted", then Python's exit hook wrote to the
    # aborted pool's closed pipe and printed a traceback. The run now waits for the
    # manager thread to end before it exits.
    (tmp_path / "good.py").write_text(LAZY)
    (tmp_path / "slow.py").write_text(LAZY.replace("_C", "_S"))
    proc = _start(HANG + SLOW_EXIT, ["check", ".", "--timeout", "0", "-j", "2"], tmp_path)
    _wait_for(tmp_path / "slow.py.started")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=900)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["imlint: interrupted"], err


def test_workers_end_when_the_run_is_killed(tmp_path):
    (tmp_path / "good.py").write_text(LAZY)
    (tmp_path / "slow.py").write_text(LAZY.replace("_C", "_S"))
    proc = _start(HANG, ["check", ".", "--timeout", "0", "-j", "2"], tmp_path)
    _wait_for(tmp_path / "slow.py.started")
    children = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert children
    proc.kill()
    proc.communicate(timeout=900)
    for _ in range(9000):  # the parent-death signal ends them (a hang guard only)
        if not any(Path(f"/proc/{c}").exists() and "zombie" not in _state(c) for c in children):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"workers {children} outlived the run")


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "imlint", "check", "a.py"], cwd=tmp_path, stdout=full,
            stderr=subprocess.PIPE, text=True, timeout=900,
        )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "imlint: error: cannot write the output: No space left on device"
    ]


def test_closed_stdin_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "imlint", "check", "--stdin-filename", "m.py"], cwd=tmp_path,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "m.py: error: cannot read stdin: it is closed" in proc.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "soon"])
def test_non_finite_timeouts_are_refused(tmp_path, value):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "a.py", "--timeout", value, cwd=tmp_path)
    assert r.code == 2 and "--timeout" in r.err and "Traceback" not in r.err


def test_jobs_are_capped_at_the_files(tmp_path, monkeypatch):
    from imlint import runner
    from imlint.config import Settings

    seen = []
    real = runner.Workers.__init__

    def record(self, settings, mode, jobs, fast, debug):
        seen.append(jobs)
        real(self, settings, mode, jobs, fast, debug)

    monkeypatch.setattr(runner.Workers, "__init__", record)
    (tmp_path / "a.py").write_text(LAZY)
    monkeypatch.chdir(tmp_path)
    (out,) = runner.run_files(
        ["a.py"], Settings(root=tmp_path), "check", jobs=256, fast=True, use_cache=False,
        debug=False,
    )  # fmt: skip
    assert seen == [1] and out.findings


HOSTILE_NAME = "x\n::error file=evil.py,line=1::INJECTED\x1b[31m.py"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")
def test_file_names_cannot_forge_output_lines(tmp_path):
    (tmp_path / HOSTILE_NAME).write_text(LAZY)
    (tmp_path / "bad\n::error::FORGED.py").write_text("def (:\n")
    for fmt in ("text", "concise", "github"):
        r = run_imlint("check", ".", "--output-format", fmt, "--no-show-source", cwd=tmp_path)
        lines = (r.out + r.err).splitlines()
        assert not any(line.startswith("::error file=evil.py") for line in lines), fmt
        assert not any(line.startswith("::error::FORGED") for line in lines), fmt
        assert "\x1b" not in r.out + r.err
    r = run_imlint("check", ".", "--no-show-source", cwd=tmp_path)
    assert "x\\n::error file=evil.py,line=1::INJECTED\\x1b[31m.py:8:" in r.out


@pytest.mark.skipif(sys.platform != "linux", reason="bytes file names")
def test_names_that_are_not_utf8_are_reported_in_every_format(tmp_path):
    name = os.fsdecode(b"lat\xe9n1.py")
    (tmp_path / name).write_text(LAZY)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    for args in (
        ["--output-format", "text"],
        ["--output-format", "sarif"],
        ["--output-format", "json"],
        ["--write-baseline", "base.json"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "imlint", "check", ".", *args], cwd=tmp_path,
            capture_output=True, text=True, env=env, timeout=900,
        )  # fmt: skip
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.returncode in (0, 1), (args, proc.stderr)
    assert "lat\\xe9n1.py:8:" in subprocess.run(
        [sys.executable, "-m", "imlint", "check", "."], cwd=tmp_path, capture_output=True,
        text=True, env=env,
    ).stdout  # fmt: skip
    sarif = json.loads(
        subprocess.run(
            [sys.executable, "-m", "imlint", "check", ".", "--output-format", "sarif"],
            cwd=tmp_path, capture_output=True, text=True, env=env,
        ).stdout
    )  # fmt: skip
    uri = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri["uri"] == "lat%E9n1.py"
    new = subprocess.run(
        [sys.executable, "-m", "imlint", "check", ".", "--baseline", "base.json"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert new.returncode == 0, new.stderr


def test_config_as_a_dotted_key_under_tool_is_read(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "pyproject.toml").write_text('[tool]\nimlint.ignore = ["IM001"]\n')
    assert run_imlint("check", "a.py", cwd=tmp_path).code == 0


def test_a_nested_unknown_table_is_an_error(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "pyproject.toml").write_text("[tool.imlint.lint]\nselect = ['IM001']\n")
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and "unknown key(s) in [tool.imlint]: lint" in r.err


def test_a_file_with_a_name_at_the_length_limit_is_fixed(tmp_path):
    name = "a" * 250 + ".py"  # 253 bytes: the temporary file must not add to it
    (tmp_path / name).write_text(LAZY)
    r = run_imlint("fix", name, cwd=tmp_path)
    assert r.code == 0, r.err
    assert "inference_mode(False)" in (tmp_path / name).read_text()


def test_parser_warnings_are_not_printed(tmp_path):
    (tmp_path / "a.py").write_text(LAZY + '\n\nPATTERN = "\\d+"\n')
    r = run_imlint("fix", "--diff", "a.py", cwd=tmp_path)
    assert "Warning" not in r.err and "<unknown>" not in r.err
    assert "inference_mode(False)" in r.out


def test_an_edit_made_while_the_fix_writes_is_kept(tmp_path, monkeypatch):
    """The file is compared again just before the rename: an edit that lands while
    the new bytes are written wins, and the file is reported as changed."""
    from imlint import writer

    path = tmp_path / "a.py"
    path.write_text(LAZY)
    real_fsync = os.fsync

    def edit_meanwhile(fd: int) -> None:
        real_fsync(fd)
        path.write_text(LAZY + "# edited by someone else\n")

    monkeypatch.setattr(writer.os, "fsync", edit_meanwhile)
    with pytest.raises(writer.WriteError, match="changed on disk"):
        writer.write_atomic(str(path), b"fixed\n", expected=LAZY.encode())
    assert path.read_text().endswith("# edited by someone else\n")
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


@pytest.mark.parametrize("value", ["inf", "nan", "-1", '"60"'])
def test_config_timeouts_must_be_finite(tmp_path, value):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "pyproject.toml").write_text(f"[tool.imlint]\ntimeout = {value}\n")
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and "timeout must be a non-negative number" in r.err


def test_files_over_the_size_limit_are_skipped_with_one_line(tmp_path):
    (tmp_path / "good.py").write_text(LAZY)
    (tmp_path / "huge.py").write_text(LAZY + "# padding\n" * 200)
    for args in (["--max-file-size", "1000"], ["--max-file-size", "1000", "-j", "2"]):
        r = run_imlint("check", ".", *args, cwd=tmp_path)
        assert r.code == 2 and "good.py:8:" in r.out
        (line,) = [x for x in r.err.splitlines() if x.startswith("huge.py")]
        assert "over the `max-file-size` limit (0.001 MB)" in line
    assert run_imlint("check", ".", "--max-file-size", "0", cwd=tmp_path).code == 1
    (tmp_path / "pyproject.toml").write_text("[tool.imlint]\nmax-file-size = 1000\n")
    assert "huge.py: error: skipped" in run_imlint("check", ".", cwd=tmp_path).err
    (tmp_path / "pyproject.toml").write_text("[tool.imlint]\nmax-file-size = -1\n")
    assert run_imlint("check", ".", cwd=tmp_path).code == 2


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("line-length = 0", "line-length must be a positive integer, got 0"),
        ("line-length = true", "line-length must be a positive integer, got True"),
        ('max-file-size = "10MB"', "max-file-size must be a number of bytes (0: no limit)"),
    ],
)
def test_integer_keys_are_checked(tmp_path, table, message):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "pyproject.toml").write_text(f"[tool.imlint]\n{table}\n")
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and message in r.err
