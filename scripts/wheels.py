"""Download public wheels at run time into an ignored cache folder (never committed)."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import urllib.request
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
                "--only-binary",
                ":all:",
                f"{package}=={version}",
                "-d",
                str(wheels),
            ],
            check=False,
        )
        found = sorted(wheels.glob(pattern))
    if not found:
        # Only a source release (``vllm-ascend``): its Python files, not a build.
        _unpack_sdist(_sdist(package, version, wheels), top, dest)
        _mark_project(dest, package)
        return dest
    with zipfile.ZipFile(found[0]) as zf:
        members = [m for m in zf.namelist() if m.startswith(top + "/")]
        zf.extractall(dest, members)
    _mark_project(dest, package)
    return dest


def _sdist(package: str, version: str, folder: Path) -> Path:
    """The source release ``package==version`` from PyPI's simple index, downloaded
    once into ``folder``."""
    name = f"{re.sub(r'[-_.]+', '_', package)}-{version}.tar.gz"
    path = folder / name
    if path.exists():
        return path
    index = f"https://pypi.org/simple/{re.sub(r'[-_.]+', '-', package).lower()}/"
    with urllib.request.urlopen(index, timeout=60) as response:
        page = response.read().decode("utf-8", "replace")
    link = re.search(rf'href="([^"#]*/{re.escape(name)})(?:#[^"]*)?"', page)
    if link is None:
        raise SystemExit(f"no wheel or source release for {package}=={version}")
    partial = path.with_suffix(".part")
    with urllib.request.urlopen(link.group(1), timeout=300) as response:
        partial.write_bytes(response.read())
    partial.replace(path)
    return path


def _unpack_sdist(archive: Path, top: str, dest: Path) -> None:
    """The regular files under ``<release>/<top>/`` of a source archive, into
    ``dest/<top>`` (links and anything outside ``top`` left out)."""
    with tarfile.open(archive) as tf:
        for member in tf.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 3 or parts[1] != top or ".." in parts or not member.isfile():
                continue
            target = dest.joinpath(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tf.extractfile(member)
            if source is not None:
                target.write_bytes(source.read())


def _mark_project(dest: Path, package: str) -> None:
    """An unpacked wheel is a project of its own, as its source checkout is: a
    ``pyproject.toml`` marks its root, so that imlint indexes it alone (not with
    whatever repository the cache folder sits in)."""
    marker = dest / "pyproject.toml"
    if not marker.exists():
        marker.write_text(f'[project]\nname = "{package}-unpacked"\n', encoding="utf-8")
