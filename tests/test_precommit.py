"""The pre-commit hooks, run by the real ``pre-commit`` in throw-away git repositories.

pre-commit clones the hook repository at a commit and pip-installs it into a fresh
virtualenv (from the package index), so the end-to-end test is slow: one test covers
every scenario to build that environment once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.slow

#: What a hook repository needs to install: the package and its metadata, no tests.
HOOK_REPO_FILES = (
    "pyproject.toml",
    "README.md",
    ".pre-commit-hooks.yaml",
    "imlint",
    "rules",
    "kernels",
)

FLAGGED = textwrap.dedent(
    """\
    import torch

    def split_pages(kv, buffers, n):
        mbuf = buffers.get("mask")
        if mbuf is None or mbuf.shape[0] < n:
            mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)
            buffers["mask"] = mbuf
        mask = mbuf[:n]
        mask.zero_()
    """
)

CLEAN = textwrap.dedent(
    """\
    import torch

    def scratch(n):
        return torch.empty(n).sum()
    """
)


def test_hooks_file():
    yaml = pytest.importorskip("yaml")
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"imlint", "imlint-fix"}
    assert hooks["imlint"]["entry"] == "imlint check --force-exclude"
    assert hooks["imlint-fix"]["entry"] == "imlint fix --force-exclude"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types"] == ["python"]
        assert hook["require_serial"] is False
        assert hook.get("pass_filenames", True) is True


def test_runtime_dependencies_do_not_pull_torch():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {
        dep.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip().lower()
        for dep in project["dependencies"]
    }
    assert names == {"libcst", "click", "pathspec", "tomli"}
    assert "torch" in str(project["optional-dependencies"]["kernels"])


def _git_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = imlint tests\n\temail = tests@imlint.invalid\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.pop("SKIP", None)
    # PIP_* stay: the hook environment's pip needs this machine's index settings.
    env.update(
        GIT_CONFIG_GLOBAL=str(config),
        GIT_CONFIG_NOSYSTEM="1",
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        PRE_COMMIT_COLOR="never",
        NO_COLOR="1",
    )
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> tuple[int, str]:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    code, out = _run(["git", *args], cwd, env)
    assert code == 0, f"git {' '.join(args)} failed:\n{out}"
    return out.strip()


def _hook_repo(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    """A git repository with imlint's installable files committed; returns it and the sha."""
    repo = tmp_path / "imlint-hooks"
    repo.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in HOOK_REPO_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, repo / name, ignore=ignore)
        else:
            shutil.copy2(source, repo / name)
    _git(repo, env, "init", "-q")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "imlint")
    return repo, _git(repo, env, "rev-parse", "HEAD")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_pre_commit_hooks_end_to_end(tmp_path):
    pytest.importorskip("pre_commit")
    env = _git_env(tmp_path)
    hook_repo, sha = _hook_repo(tmp_path, env)
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    (project / ".pre-commit-config.yaml").write_text(
        textwrap.dedent(
            f"""\
            repos:
              - repo: {hook_repo}
                rev: {sha}
                hooks:
                  - id: imlint
                  - id: imlint-fix
                    stages: [manual]
            """
        ),
        encoding="utf-8",
    )
    (project / "pyproject.toml").write_text(
        '[tool.imlint]\nexclude = ["vendor"]\n', encoding="utf-8"
    )
    pre_commit = [sys.executable, "-m", "pre_commit"]
    _git(project, env, "init", "-q")
    code, out = _run([*pre_commit, "install"], project, env)
    assert code == 0, out

    # A clean file passes; a flagged file in an excluded folder is skipped
    # (--force-exclude applies `exclude` to the file names pre-commit passes).
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    (project / "vendor" / "legacy.py").write_text(FLAGGED, encoding="utf-8")
    _git(project, env, "add", "-A")
    code, out = _run(["git", "commit", "-m", "clean"], project, env, timeout=900)
    assert code == 0, out
    assert "imlint" in out and "Passed" in out

    # The hook environment holds imlint's runtime dependencies, not torch.
    (py_env,) = Path(env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*")
    python = next(
        p for p in (py_env / "bin" / "python", py_env / "Scripts" / "python.exe") if p.exists()
    )
    code, out = _run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, json; "
            "print(json.dumps([(d.metadata['Name'] or '').lower() for d in m.distributions()]))",
        ],
        project,
        env,
    )
    assert code == 0, out
    installed = set(json.loads(out))
    assert {"imlint", "libcst", "click"} <= installed
    assert not installed & {"torch", "triton", "pytest", "hypothesis"}

    # Committing a flagged file fails and shows the finding.
    (project / "model.py").write_text(FLAGGED, encoding="utf-8")
    _git(project, env, "add", "model.py")
    code, out = _run(["git", "commit", "-m", "flagged"], project, env)
    assert code != 0, out
    assert "Failed" in out
    assert "model.py:6:16: IM001 [*] Lazy buffer" in out
    assert "vendor/legacy.py" not in out

    # The fix hook rewrites the file (and fails, as pre-commit does for modified files).
    code, out = _run(
        [*pre_commit, "run", "imlint-fix", "--hook-stage", "manual", "--files", "model.py"],
        project,
        env,
    )
    assert code == 1, out
    assert "files were modified by this hook" in out
    fixed = (project / "model.py").read_text(encoding="utf-8")
    assert "        with torch.inference_mode(False):\n            mbuf = torch.empty(" in fixed

    # The next commit passes.
    _git(project, env, "add", "model.py")
    code, out = _run(["git", "commit", "-m", "fixed"], project, env)
    assert code == 0, out
    assert _git(project, env, "status", "--porcelain") == ""
    assert _git(project, env, "log", "--format=%s") == "fixed\nclean"
