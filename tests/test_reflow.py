"""Splitting lines the fix pushed past the line length, as ruff format would."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from imlint.config import Settings
from imlint.engine import Linter
from imlint.reflow import split_long_line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "            splits = torch.arange(1, V4_NM_MAX_SPLITS + 1, dtype=torch.int32, device=device)",
            [
                "            splits = torch.arange(",
                "                1, V4_NM_MAX_SPLITS + 1, dtype=torch.int32, device=device",
                "            )",
            ],
        ),
        (
            "            dmy = _D[device.index] = torch.zeros(64, dtype=torch.int64, device=device)  # hi",
            [
                "            dmy = _D[device.index] = torch.zeros(",
                "                64, dtype=torch.int64, device=device",
                "            )  # hi",
            ],
        ),
        (
            "        x = f(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccc)",
            [
                "        x = f(",
                "            aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,",
                "            bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb,",
                "            cccccccccccccccc,",
                "        )",
            ],
        ),
    ],
)
def test_split_like_the_formatter(line, expected):
    assert split_long_line(line, 88, "    ") == expected


@pytest.mark.parametrize(
    "line",
    [
        "                [-mean / std for mean, std in zip(self._image_mean, self._image_std_long_name)],",
        "        x = 'a string that is long enough to go past the limit of eighty-eight chars!!'",
        "            value)  # closes a bracket opened above",
    ],
)
def test_lines_it_must_not_touch(line):
    assert split_long_line(line, 88, "    ") is None


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_fixed_code_stays_ruff_formatted(tmp_path):
    body = (
        "import torch\n\n_WS = {}\n\n\n"
        "def workspace(n_dst_pages, device):\n"
        "    if device not in _WS:\n"
        "        _WS[device] = torch.empty(n_dst_pages, 37440, dtype=torch.uint8, device=device)\n"
        "    return _WS[device]\n"
    )
    src = tmp_path / "a.py"
    src.write_text(body)
    check = ["ruff", "format", "--isolated", "--check", "-q", str(src)]
    assert subprocess.run(check, capture_output=True).returncode == 0
    fixed = Linter(Settings(extend_select=("IM005",))).fix_text("a.py", body).text
    assert "            n_dst_pages, 37440, dtype=torch.uint8, device=device\n" in fixed
    src.write_text(fixed)
    assert subprocess.run(check, capture_output=True).returncode == 0


def test_contents_on_their_own_line_pushed_past_the_limit_get_one_item_per_line(tmp_path):
    body = (
        "import torch\n\n_BUF = None\n\n\n"
        "def workspace():\n"
        "    global _BUF\n"
        "    if _BUF is None:\n"
        "        _BUF = torch.zeros(\n"
        '            envs.VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE, dtype=torch.uint8, device="cuda"\n'
        "        )\n"
        "    return _BUF\n"
    )
    src = tmp_path / "a.py"
    src.write_text(body)
    check = ["ruff", "format", "--isolated", "--check", "-q", str(src)]
    assert subprocess.run(check, capture_output=True).returncode == 0
    fixed = Linter(Settings(extend_select=("IM005",))).fix_text("a.py", body).text
    assert (
        "                envs.VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE,\n"
        "                dtype=torch.uint8,\n"
        '                device="cuda",\n'
    ) in fixed
    src.write_text(fixed)
    assert subprocess.run(check, capture_output=True).returncode == 0
