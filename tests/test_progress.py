"""Progress on stderr: only on a terminal, only for runs that take a while."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from imlint.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_before_the_delay_then_one_line_redrawn_and_cleared():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, delay=1.0, clock=clock)
    progress("indexing", 1, 10)
    assert out.getvalue() == ""  # a short run prints nothing
    clock.now = 1.5
    progress("indexing", 5, 10)
    clock.now = 1.55
    progress("indexing", 6, 10)  # throttled
    clock.now = 1.7
    progress("checking", 10, 10)
    text = out.getvalue()
    assert text.count("\r") == 2 and "indexing 5/10 files" in text and "6/10" not in text
    assert "checking 10/10 files" in text
    progress.close()
    assert out.getvalue().endswith("\r")
    assert Progress.for_terminal(io.StringIO(), quiet=False) is None  # not a terminal


@pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")
def test_on_a_terminal_the_cli_shows_progress_on_stderr_only(tmp_path: Path):
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("import torch\n\n\ndef f(n):\n    return n\n")
    env = {**os.environ, "IMLINT_PROGRESS_DELAY": "0"}
    command = [sys.executable, "-m", "imlint", "check", ".", "--no-cache", "-j", "1"]
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=secondary, timeout=120
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(primary)
    err = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "imlint: indexing 3/3 files" in err and "\r" in err
    assert b"imlint:" not in proc.stdout  # findings and summary stay clean
    piped = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert piped.stderr == b""
