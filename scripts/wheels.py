"""Download public wheels at run time into an ignored cache folder (never committed)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache"


def wheel_sources(package: str, version: str, top: str | None = None) -> Path:
    """Unpacked sources of ``package==version`` under ``.cache/src/package-version``.

    Returns the folder that holds the top-level package (``top``, default: package).
    """
    dest = CACHE / "src" / f"{package}-{version}"
    top = top or package
    if (dest / top).is_dir():
        _mark_project(dest, package)
        return dest
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                f"{package}=={version}",
                "-d",
                str(wheels),
            ],
            check=True,
        )
        found = sorted(wheels.glob(pattern))
    if not found:
        raise SystemExit(f"no wheel for {package}=={version} in {wheels}")
    with zipfile.ZipFile(found[0]) as zf:
        members = [m for m in zf.namelist() if m.startswith(top + "/")]
        zf.extractall(dest, members)
    _mark_project(dest, package)
    return dest


def _mark_project(dest: Path, package: str) -> None:
    """An unpacked wheel is a project of its own, as its source checkout is: a
    ``pyproject.toml`` marks its root, so that imlint indexes it alone (not with
    whatever repository the cache folder sits in)."""
    marker = dest / "pyproject.toml"
    if not marker.exists():
        marker.write_text(f'[project]\nname = "{package}-unpacked"\n', encoding="utf-8")
