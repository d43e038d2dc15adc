"""Cache files that the tree being checked cannot forge or turn against the run.

The cache folder sits in the tree (``.imlint_cache/``), so in CI it comes from the pull
request under review like every other file. A cache is trusted only if this user wrote
it on this machine: each file carries an HMAC-SHA256 of its payload under a random key
kept outside the tree (``$XDG_CACHE_HOME/imlint/key``, else ``~/.cache/imlint/key``;
created ``0600`` in a ``0700`` folder). A file whose tag does not verify (forged,
copied from another machine, damaged) is ignored, once reported on stderr, and the
work is redone. The payload is parsed only after its tag verifies, so data that is
deserialised (JSON for results, ``marshal`` for summaries) is always imlint's own.

Files are opened without following symbolic links and without blocking (a FIFO planted
as a cache file is not read), checked with ``fstat`` on the opened descriptor (a
regular file, at most ``MAX_BYTES``); a cache folder that is a symbolic link is neither
read nor written; writes go to a fresh temporary file in the folder, renamed over the
target (which replaces a planted link instead of writing through it).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import sys
import tempfile
from pathlib import Path

MAGIC = b"imlint-cache 1\n"
MAX_BYTES = 1 << 30  # no cache of ours is near this; anything larger is not ours
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_key: list[bytes | None] = []
_reported: set[str] = set()


def key_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "imlint" / "key"


def _load_key() -> bytes | None:
    """This user's key, made on first use; None when it cannot be kept (no cache then)."""
    if _key:
        return _key[0]
    path = key_file()
    key: bytes | None = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_bytes(32))
        data = _read_regular(path, 4096)
        key = data if data is not None and len(data) == 32 else None
    except OSError:
        key = None
    _key.append(key)
    return key


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file (not a link, FIFO or device) of at most ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return fh.read(limit + 1)


def _tag(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).hexdigest().encode()


def report(path: Path, why: str) -> None:
    """One line on stderr per cache file ignored in this process."""
    if str(path) not in _reported:
        _reported.add(str(path))
        sys.stderr.write(f"imlint: ignoring cache {path}: {why}; it is rebuilt\n")


def usable_folder(folder: Path) -> bool:
    """Whether the cache folder may be read or written: absent, or a real folder."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        report(folder, "not a folder (a symbolic link or a file)")
        return False
    return True


def read(path: Path) -> bytes | None:
    """The payload of a cache file this user wrote on this machine, else None."""
    if not usable_folder(path.parent):
        return None
    try:
        info = os.lstat(path)
    except OSError:
        return None  # no cache yet: nothing to say
    if not stat.S_ISREG(info.st_mode):
        report(path, "not a regular file")
        return None
    key = _load_key()
    data = _read_regular(path, MAX_BYTES)
    if key is None or data is None:
        return None
    if len(data) > MAX_BYTES:
        report(path, "too large")
        return None
    if not data.startswith(MAGIC):
        return None  # another format (an older imlint's): silently rebuilt
    tag, _, payload = data[len(MAGIC) :].partition(b"\n")
    if not hmac.compare_digest(tag, _tag(key, payload)):
        report(path, "not written by imlint for this user on this machine (or damaged)")
        return None
    return payload


def write(path: Path, payload: bytes) -> None:
    """Write atomically (a temporary file renamed over ``path``); concurrent runs may
    each write, the last one wins. Silently nothing when the folder is unusable or no
    key can be kept."""
    folder = path.parent
    key = _load_key()
    if key is None or not usable_folder(folder):
        return
    tmp: str | None = None
    try:
        folder.mkdir(exist_ok=True)
        if not usable_folder(folder):
            return
        _ensure_gitignore(folder)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".cache")
        with os.fdopen(fd, "wb") as out:
            out.write(MAGIC + _tag(key, payload) + b"\n" + payload)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _ensure_gitignore(folder: Path) -> None:
    """``folder/.gitignore`` with ``*`` (created only if absent; never through a link)."""
    try:
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    except OSError:
        return  # there already (whatever it is, it is not written through)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# Created by imlint\n*\n")
