"""Writing fixed files: atomically, keeping the mode, never over a concurrent change."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile


class WriteError(Exception):
    """The file was not written; the message is one line without the path."""


def write_atomic(path: str, data: bytes, expected: bytes) -> None:
    """Replace ``path`` with ``data`` if it still holds ``expected``.

    The new content goes to a temporary file in the same folder, is flushed to disk and
    renamed over the original, so a crash at any point leaves either the old or the new
    bytes. Symbolic links and read-only files are refused, not followed or forced.
    The mode (set-user-ID and set-group-ID bits included) and, where allowed, the owner
    are kept; the file is replaced, so a hard link to it keeps the old bytes (as ruff
    and black do).
    """
    if os.path.islink(path):
        raise WriteError("is a symbolic link; not modified (fix the file it points to)")
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise WriteError(f"cannot re-read before writing: {exc.strerror or exc}") from None
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(
        path, os.W_OK
    ):
        raise WriteError("file is read-only; not modified")
    if hashlib.sha256(current).digest() != hashlib.sha256(expected).digest():
        raise WriteError("file changed on disk since it was read; not modified")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        # A short name: the original's may already be at the file system's limit.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".imlint-", suffix=".tmp")
    except OSError as exc:
        raise WriteError(
            f"cannot create a temporary file next to it: {exc.strerror or exc}"
        ) from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
            # Owner first: a change of owner clears the set-user-ID and set-group-ID
            # bits, which the mode then puts back.
            with contextlib.suppress(OSError):
                os.fchown(out.fileno(), st.st_uid, st.st_gid)
            os.fchmod(out.fileno(), stat.S_IMODE(st.st_mode))
        # Once more, just before the rename: an edit made while the new bytes were
        # written must not be replaced (the window left is the rename itself).
        with open(path, "rb") as fh:
            if hashlib.sha256(fh.read()).digest() != hashlib.sha256(expected).digest():
                raise WriteError("file changed on disk since it was read; not modified")
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, WriteError):
            raise
        if isinstance(exc, OSError):
            raise WriteError(f"cannot write: {exc.strerror or exc}") from None
        raise
