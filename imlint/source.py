"""Reading source files: bytes to text with PEP 263 cookies, BOMs and clear errors."""

from __future__ import annotations

import codecs
import io
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be checked; the message is one line without the path."""


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
