"""Reading source files: bytes to text with PEP 263 cookies, BOMs and clear errors."""

from __future__ import annotations

import ast
import codecs
import io
import os
import stat
import tokenize
import warnings
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be checked; the message is one line without the path."""


class InvalidSource(Exception):
    """Python itself rejects the source; the message is one line."""


@dataclass(frozen=True)
class Source:
    """Decoded source plus what is needed to write it back byte-for-byte."""

    text: str  # without the BOM
    encoding: str  # codec name for writing back
    bom: bool
    raw: bytes

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data

    def round_trips(self) -> bool:
        """Whether writing the text back gives the bytes read: not for codecs that
        decode escapes (``unicode_escape``, ``raw_unicode_escape``) or transform the text
        (``punycode``), whose output a fix would re-encode differently."""
        try:
            return self.encode(self.text) == self.raw
        except (UnicodeError, LookupError):
            return False


def decode(raw: bytes) -> Source:
    if raw.startswith(
        (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
    ):
        raise SourceError(
            "UTF-16/32 encoded (byte-order mark); Python source must be UTF-8 or declare an ASCII-compatible encoding"
        )
    if b"\x00" in raw:
        raise SourceError("file contains NUL bytes; not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        msg = str(exc.msg if hasattr(exc, "msg") else exc)
        if "invalid or missing encoding declaration" not in msg:
            raise SourceError(f"bad encoding declaration: {msg}") from None
        encoding = "utf-8"  # no usable cookie and not UTF-8: say where decoding fails
    bom = encoding == "utf-8-sig"
    codec = "utf-8" if bom else encoding
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise SourceError(
            f"cannot decode as {codec} (byte 0x{body[exc.start]:02x} on line {line})"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {codec!r}") from None
    return Source(text=text, encoding=codec, bom=bom, raw=raw)


def read_source(path: str, max_bytes: int = 0) -> Source:
    """Read and decode a file, turning every failure into a one-line SourceError.

    The file is opened without blocking and checked through its descriptor (a FIFO
    swapped in after a check of the path cannot hang the run); ``max_bytes`` (0: no
    limit) skips generated giants before they are read."""
    try:
        if os.path.isdir(path):
            raise SourceError("is a directory, not a Python file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SourceError("not a regular file (a FIFO, socket or device)")  # never block
            if max_bytes and info.st_size > max_bytes:
                raise SourceError(
                    f"skipped: {info.st_size / 1e6:.1f} MB is over the `max-file-size` "
                    f"limit ({max_bytes / 1e6:g} MB)"
                )
            raw = fh.read()
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError("dangling symbolic link") from None
        raise SourceError("no such file") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise SourceError("symbolic link loop") from None
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(raw)


def quiet_parse(text: str) -> ast.Module:
    """``ast.parse`` without its warnings: invalid escapes and the like warn at parse
    time, on stderr and without the file's name; they are the file's business, not the
    linter's. Raises what ``ast.parse`` raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def python_parse(text: str) -> ast.Module:
    """Python's own parse of ``text`` (parsing only: nothing runs); raises
    ``InvalidSource`` with a one-line message when Python rejects it."""
    try:
        return quiet_parse(text)
    except SyntaxError as err:
        raise InvalidSource(f"syntax error at {err.lineno}:{err.offset}: {err.msg}") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise InvalidSource(f"cannot parse: {type(err).__name__}") from None


def python_syntax_error(text: str) -> str | None:
    """Python's own syntax error for ``text`` as one line, or None if it parses."""
    try:
        python_parse(text)
    except InvalidSource as exc:
        return str(exc)
    return None
