"""Runtime evidence: ``imlint check --probe imlint-probe.json`` reads what ``imlint
probe`` saw (``imlint/probe.py``) and marks each finding whose site the probe saw
allocated under inference mode *armed (observed)*, with how often, in which threads,
whether a CUDA stream was capturing, and the first torch in-place write outside
inference mode with its outcome. Sites the probe saw allocated only with inference
mode off are noted; sites it never reached are left as they are.

A site is ``path:line`` as the probe printed it, relative to the folder the probe ran
in (or absolute): it is matched against findings by the real path, relative to the
current folder first, then to the folder holding the JSON file. The file is input like
any other: anything malformed is a one-line error."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from imlint.finding import Finding

_COUNTS = ("allocations", "under_inference_mode", "outside_inference_mode", "capturing")
_TEXTS = ("first_write", "outcome")
#: Bigger probe files are not read (a probe of a real server writes a few hundred rows).
MAX_BYTES = 64 * 1024 * 1024


class EvidenceError(Exception):
    """A probe file that cannot be read or is not one ``imlint probe`` writes."""


@dataclass(frozen=True)
class Observation:
    """What the probe saw at one site."""

    allocations: int
    under_inference_mode: int
    outside_inference_mode: int
    capturing: int
    threads: tuple[str, ...]
    first_write: str
    outcome: str

    def to_dict(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["threads"] = list(self.threads)
        return data

    def text(self) -> str:
        """``3 of 3 allocations under inference mode (thread MainThread), 1 while a CUDA
        stream was capturing; first write outside it: x.zero_() -> RuntimeError: ...``"""
        threads = ", ".join(self.threads) or "unknown"
        label = "thread" if len(self.threads) == 1 else "threads"
        text = (
            f"{self.under_inference_mode} of {self.allocations} allocations under "
            f"inference mode ({label} {threads})"
        )
        if self.capturing:
            text += f", {self.capturing} while a CUDA stream was capturing"
        if self.first_write:
            text += f"; first in-place write outside it: {self.first_write}"
            text += f" -> {self.outcome}" if self.outcome else ""
        return text


def load(path: str) -> dict[tuple[str, int], Observation]:
    """The probe file's sites, keyed by (real path, line)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise EvidenceError(f"{path}: probe file too large ({size} bytes)")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read probe file: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise EvidenceError(f"{path}: not a probe file (invalid JSON: {exc})") from None
    rows = data.get("sites") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise EvidenceError(
            f"{path}: not a probe file (no list of sites; write one with imlint probe)"
        )
    bases = [Path.cwd(), Path(path).resolve().parent]
    found: dict[tuple[str, int], Observation] = {}
    for i, row in enumerate(rows):
        site, obs = _row(row, path, i)
        where, _, line = site.rpartition(":")
        for base in bases:
            key = (os.path.realpath(base / where), int(line))
            found.setdefault(key, obs)
    return found


def _row(row: object, path: str, i: int) -> tuple[str, Observation]:
    bad = f"{path}: site {i + 1} is malformed"
    if not isinstance(row, dict):
        raise EvidenceError(bad)
    site = row.get("site")
    if not isinstance(site, str) or not site.rpartition(":")[2].isdigit() or "\0" in site:
        raise EvidenceError(f"{bad}: `site` must be `path:line`")
    counts = [row.get(k, 0) for k in _COUNTS]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise EvidenceError(f"{bad}: counts must be whole numbers")
    threads = row.get("threads", [])
    texts = [row.get(k, "") for k in _TEXTS]
    if not isinstance(threads, list) or not all(isinstance(t, str) for t in threads):
        raise EvidenceError(f"{bad}: `threads` must be a list of names")
    if not all(isinstance(t, str) for t in texts):
        raise EvidenceError(f"{bad}: `first_write` and `outcome` must be text")
    return site, Observation(
        allocations=counts[0],
        under_inference_mode=counts[1],
        outside_inference_mode=counts[2],
        capturing=counts[3],
        threads=tuple(threads),
        first_write=texts[0],
        outcome=texts[1],
    )


def mark(findings: list[Finding], observed: dict[tuple[str, int], Observation]) -> list[Finding]:
    """The findings with what the probe saw at their sites: under inference mode, the
    finding is armed (observed)."""
    out = []
    for f in findings:
        obs = observed.get((os.path.realpath(f.path), f.line))
        if obs is None or not obs.allocations:
            out.append(f)
        elif obs.under_inference_mode:
            out.append(dataclasses.replace(f, armed=True, tier="observed", observed=obs.to_dict()))
        else:
            out.append(dataclasses.replace(f, observed=obs.to_dict()))
    return out


def observed_text(f: Finding) -> str | None:
    """The line printed under a finding the probe saw allocated."""
    if not f.observed:
        return None
    seen = f.observed
    obs = Observation(
        allocations=_int(seen.get("allocations")),
        under_inference_mode=_int(seen.get("under_inference_mode")),
        outside_inference_mode=_int(seen.get("outside_inference_mode")),
        capturing=_int(seen.get("capturing")),
        threads=_names(seen.get("threads")),
        first_write=str(seen.get("first_write") or ""),
        outcome=str(seen.get("outcome") or ""),
    )
    if not obs.under_inference_mode:
        return f"observed: {obs.allocations} allocations, none under inference mode"
    return "observed: " + obs.text()


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _names(value: object) -> tuple[str, ...]:
    return tuple(t for t in value if isinstance(t, str)) if isinstance(value, list) else ()
