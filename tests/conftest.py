"""Shared helpers for imlint's tests."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

_EXPECT = re.compile(r"# expect: ([A-Z0-9, ]+)")


def fixture_text(path: Path) -> str:
    """A fixture's source, decoded as Python would (cookies, BOMs)."""
    from imlint.source import decode

    return decode(path.read_bytes()).text


def expected_markers(text: str) -> list[tuple[int, str]]:
    """(line, code) pairs from ``# expect: IM001`` markers."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for m in _EXPECT.finditer(line):
            out.extend((i, c.strip()) for c in m.group(1).split(",") if c.strip())
    return sorted(out)


def project_facts(linter, path: Path, text: str | None = None):
    """What the project index of the fixtures' before files says of ``path``, as
    ``imlint check fixtures`` sees it; ``text`` stands in for ``path``'s own content
    (an after file checked in its before file's place)."""
    from imlint.project import ProjectIndex, summarize

    before = sorted(p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py"))
    options = linter.settings.options
    summaries = [
        summarize(str(p), text if text is not None and p == path else fixture_text(p), options)
        for p in before
    ]
    return ProjectIndex(summaries).facts(str(path))


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_imlint(*args: str, cwd: Path | str | None = None, stdin: str | None = None) -> Result:
    """Run the real command line in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "imlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=900,  # a hang guard only: a loaded machine may be slow
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def imlint_cli():
    return run_imlint


# No test may depend on how fast the machine is: hypothesis's per-example deadline
# would fail a loaded machine's slow example, so it is off everywhere.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("imlint", deadline=None)
    _hypothesis_settings.load_profile("imlint")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass


@pytest.fixture(autouse=True)
def _own_cache_key(tmp_path_factory, monkeypatch):
    """Each test's imlint runs (in process and in subprocesses) keep their cache key
    under a temporary folder, never in the user's own ``~/.cache/imlint``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    from imlint import cachefile

    cachefile._key.clear()


def cache_payload(path: Path) -> bytes:
    """The payload of an imlint cache file (after its magic line and tag)."""
    return path.read_bytes().split(b"\n", 2)[2]


def sign_cache(path: Path, payload: bytes) -> None:
    """Rewrite a cache file as imlint would, with this test's key (a legitimate write)."""
    import hashlib
    import hmac
    import os

    from imlint.cachefile import MAGIC

    key = (Path(os.environ["XDG_CACHE_HOME"]) / "imlint" / "key").read_bytes()
    tag = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    path.write_bytes(MAGIC + tag + b"\n" + payload)
