"""Progress on stderr for long runs on a terminal: one line, redrawn in place, shown
only after the run has taken ``delay`` seconds (short runs print nothing) and cleared
at the end. Nothing at all when stderr is not a terminal."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TextIO

#: Seconds before the line appears (``IMLINT_PROGRESS_DELAY`` overrides, for tests).
DELAY = 1.0


class Progress:
    def __init__(
        self,
        stream: TextIO,
        delay: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        env = os.environ.get("IMLINT_PROGRESS_DELAY")
        self.delay = delay if delay is not None else float(env) if env else DELAY
        self.clock = clock
        self.start = clock()
        self.last = 0.0
        self.width = 0

    @classmethod
    def for_terminal(cls, stream: TextIO, quiet: bool) -> Progress | None:
        """A progress line when ``stream`` is a terminal and output is not quiet."""
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(stream) if tty and not quiet else None

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        if now - self.start < self.delay or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        text = f"imlint: {phase} {done}/{total} files"
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = max(self.width, len(text))

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
