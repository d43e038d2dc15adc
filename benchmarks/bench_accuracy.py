"""Precision, recall and severity accuracy of `imlint check` against hand labels.

    python benchmarks/bench_accuracy.py [--trees a,b] [--verbose] [--json FILE] [--no-fail]
    python benchmarks/bench_accuracy.py --download [--trees a,b]
    python benchmarks/bench_accuracy.py --sample N --seed S [--exclude-labelled] [--out FILE]

Runs `imlint check --output-format json --exit-zero --no-cache` on the unpacked public
wheels of sglang 0.5.23, vllm 0.33.0 and lmdeploy 0.18.0 (and, with `--trees`,
flashinfer-python 0.7.4, a tree never tuned on; all downloaded at run time into the
ignored .cache/src/ folder; `--download` only fetches them) and scores the findings with
the labels in benchmarks/accuracy/ (see LABELLING.md):

- labels/*.jsonl: labelled findings, matched to findings by tree, path, function and
  statement (whitespace collapsed). Prints how many are still reported, precision
  TP/(TP+FP) over the matched ones with a Wilson 95% interval (unsure left out), and
  severity accuracy over matched TPs (the finding's tier equals the label's expected);
- known/*.jsonl: known positives found by reading the trees. One is found when a finding
  in the same file and function has the same statement, a line within 2 of it, or a
  line before it whose tensor is kept at or after it (the finding's ``kept_line``: the
  known line is a step of the chain the finding reports, which its fix wraps too).
  Prints recall with a Wilson 95% interval and severity accuracy over found ones;
- findings with no label, by code.

Regressions (exit 1 unless --no-fail): a labelled TP no longer reported, a labelled FP
reported, a failed seed check. The seed check runs on sglang 0.5.18: the page-split
buffer in `_split_kv_pages_to_64` (flash_mla_sm120.py) must be an IM002 at line 403 and
the int8 mask allocated there under `inference_mode(False)` must not be reported. The
seed tree is scored like the others too (labels match across releases, so most of its
findings carry 0.5.23's labels; fresh23 labels the code 0.5.23 changed).

`--sample N` draws a seeded random sample of N findings per tree (default sglang and
vllm; `--exclude-labelled` leaves out findings that have a label in any folder) as JSON
lines, to be labelled for an unbiased precision estimate; nothing is scored then.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import math
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from wheels import CACHE, wheel_sources  # noqa: E402

ACCURACY = REPO / "benchmarks" / "accuracy"
SEED_TREE = "sglang-0.5.18"
# tree name -> (distribution, version, top-level package folder)
TREES: dict[str, tuple[str, str, str]] = {
    "sglang-0.5.23": ("sglang", "0.5.23", "sglang"),
    "vllm-0.33.0": ("vllm", "0.33.0", "vllm"),
    "lmdeploy-0.18.0": ("lmdeploy", "0.18.0", "lmdeploy"),
    # a library of attention kernels that serving trees call: never tuned on, sampled
    # fresh (fresh8)
    "flashinfer-python-0.7.4": ("flashinfer-python", "0.7.4", "flashinfer"),
    # the next vllm release, out after the corpus was labelled: its new code is sampled
    # fresh (fresh10); findings whose code was labelled on 0.33.0 are left out
    "vllm-0.34.0": ("vllm", "0.34.0", "vllm"),
    # a serving engine forked from vllm, never tuned on: sampled fresh (fresh11)
    "aphrodite-engine-0.24.1": ("aphrodite-engine", "0.24.1", "aphrodite"),
    # never tuned on, sampled fresh (fresh12): serving for omni-modal models on vllm,
    # and a KV-cache offloading layer that serving engines load
    "vllm-omni-0.30.0": ("vllm-omni", "0.30.0", "vllm_omni"),
    "lmcache-0.5.6": ("lmcache", "0.5.6", "lmcache"),
    # never tuned on, sampled fresh (fresh13): an LLM inference runtime, and a library
    # of quantized inference with its own caches
    "tokenspeed-0.1.1": ("tokenspeed", "0.1.1", "tokenspeed"),
    "exllamav2-0.3.2": ("exllamav2", "0.3.2", "exllamav2"),
    # never tuned on, sampled fresh (fresh14): the next generation of exllama (a new
    # code base with its own generator and caches), and PyTorch's quantization library
    "exllamav3-1.6.5": ("exllamav3", "1.6.5", "exllamav3"),
    "torchao-0.18.0": ("torchao", "0.18.0", "torchao"),
    # never tuned on, sampled fresh (fresh15): vllm's serving plugin for Ascend NPUs
    # (a source release only: its Python files are read, nothing is built)
    "vllm-ascend-0.23.0.post1": ("vllm-ascend", "0.23.0.post1", "vllm_ascend"),
    # never tuned on, sampled fresh (fresh16): an inference and serving runtime for video
    # diffusion models, and a parallel inference engine for diffusion transformers
    "fastvideo-0.2.1": ("fastvideo", "0.2.1", "fastvideo"),
    "xfuser-0.7.0": ("xfuser", "0.7.0", "xfuser"),
    # never tuned on, sampled fresh (fresh16 too): vllm's plugin for IBM Spyre, and
    # Hugging Face's inference and training runtime for Intel Gaudi
    "vllm-spyre-1.10.0": ("vllm-spyre", "1.10.0", "vllm_spyre"),
    "optimum-habana-1.21.2": ("optimum-habana", "1.21.2", "optimum"),
    # never tuned on, sampled fresh (fresh17): KV-cache compression presses for
    # transformers, Triton kernels of linear attention, Triton kernels for LLM training
    # and serving, DeepSpeed's inference server, and vllm's TPU backend
    "kvpress-0.5.5": ("kvpress", "0.5.5", "kvpress"),
    "flash-linear-attention-0.6.0": ("flash-linear-attention", "0.6.0", "fla"),
    "liger-kernel-0.8.5": ("liger-kernel", "0.8.5", "liger_kernel"),
    "deepspeed-mii-0.3.3": ("deepspeed-mii", "0.3.3", "mii"),
    "tpu-inference-0.32.0": ("tpu-inference", "0.32.0", "tpu_inference"),
    "unsloth-2026.10.9": ("unsloth", "2026.10.9", "unsloth"),
    "gptqmodel-7.7.0": ("gptqmodel", "7.7.0", "gptqmodel"),
    "transformers-5.25.0": ("transformers", "5.25.0", "transformers"),
    "diffusers-0.42.1": ("diffusers", "0.42.1", "diffusers"),
    # never tuned on, sampled fresh (fresh18): AWQ's quantized inference with fused
    # modules and their caches, half-quadratic quantization, Mistral's reference
    # inference, a model-serving platform, and DeepSpeed (its inference engine's
    # workspaces)
    "autoawq-0.2.9": ("autoawq", "0.2.9", "awq"),
    "hqq-0.2.8.post1": ("hqq", "0.2.8.post1", "hqq"),
    "mistral-inference-1.6.0": ("mistral-inference", "1.6.0", "mistral_inference"),
    "xinference-4.1.0": ("xinference", "4.1.0", "xinference"),
    "deepspeed-0.19.8": ("deepspeed", "0.19.8", "deepspeed"),
    # never tuned on, sampled fresh (fresh19): reinforcement-learning frameworks that
    # run a model for generation (often under inference mode) and for training in one
    # process (verl, trl), adapters (peft), PyTorch's fine-tuning library, and
    # quantized tensors
    "verl-0.9.1": ("verl", "0.9.1", "verl"),
    "peft-0.21.2": ("peft", "0.21.2", "peft"),
    "trl-1.16.0": ("trl", "1.16.0", "trl"),
    "torchtune-0.6.1": ("torchtune", "0.6.1", "torchtune"),
    "optimum-quanto-0.2.7": ("optimum-quanto", "0.2.7", "optimum"),
    # fresh19 too: memory-efficient attention kernels, NVIDIA's model optimizer
    # (calibration, quantization), Intel's weight-only quantizer, and 8-bit optimizers
    # and quantized layers
    "xformers-0.0.35": ("xformers", "0.0.35", "xformers"),
    "nvidia-modelopt-0.47.0": ("nvidia-modelopt", "0.47.0", "modelopt"),
    "auto-round-0.16.1": ("auto-round", "0.16.1", "auto_round"),
    "bitsandbytes-0.50.2": ("bitsandbytes", "0.50.2", "bitsandbytes"),
    # never tuned on, sampled fresh (fresh21): a training and inference system with
    # its own serving engine and KV caches, a library of LLM recipes with generation
    # and KV caches, NVIDIA's toolkit for speech and language models (streaming
    # caches), state-space model kernels with inference caches, and a compressor that
    # calibrates models under no_grad
    "colossalai-0.5.0": ("colossalai", "0.5.0", "colossalai"),
    "litgpt-0.5.13": ("litgpt", "0.5.13", "litgpt"),
    "nemo-toolkit-3.0.0": ("nemo-toolkit", "3.0.0", "nemo"),
    "mamba-ssm-2.3.2.post1": ("mamba-ssm", "2.3.2.post1", "mamba_ssm"),
    "llmcompressor-0.14.0.1": ("llmcompressor", "0.14.0.1", "llmcompressor"),
    SEED_TREE: ("sglang", "0.5.18", "sglang"),
}
SCORED = ("sglang-0.5.23", "vllm-0.33.0", "lmdeploy-0.18.0")
SAMPLED = ("sglang-0.5.23", "vllm-0.33.0")
ALIASES = {
    "sglang": "sglang-0.5.23",
    "vllm": "vllm-0.33.0",
    "lmdeploy": "lmdeploy-0.18.0",
    "flashinfer": "flashinfer-python-0.7.4",
    "aphrodite": "aphrodite-engine-0.24.1",
    "vllm-omni": "vllm-omni-0.30.0",
    "lmcache": "lmcache-0.5.6",
    "tokenspeed": "tokenspeed-0.1.1",
    "exllamav2": "exllamav2-0.3.2",
    "exllamav3": "exllamav3-1.6.5",
    "torchao": "torchao-0.18.0",
    "vllm-ascend": "vllm-ascend-0.23.0.post1",
    "fastvideo": "fastvideo-0.2.1",
    "xfuser": "xfuser-0.7.0",
    "vllm-spyre": "vllm-spyre-1.10.0",
    "optimum-habana": "optimum-habana-1.21.2",
    "kvpress": "kvpress-0.5.5",
    "fla": "flash-linear-attention-0.6.0",
    "liger-kernel": "liger-kernel-0.8.5",
    "deepspeed-mii": "deepspeed-mii-0.3.3",
    "tpu-inference": "tpu-inference-0.32.0",
    "unsloth": "unsloth-2026.10.9",
    "gptqmodel": "gptqmodel-7.7.0",
    "transformers": "transformers-5.25.0",
    "diffusers": "diffusers-0.42.1",
    "autoawq": "autoawq-0.2.9",
    "hqq": "hqq-0.2.8.post1",
    "mistral-inference": "mistral-inference-1.6.0",
    "xinference": "xinference-4.1.0",
    "deepspeed": "deepspeed-0.19.8",
    "verl": "verl-0.9.1",
    "peft": "peft-0.21.2",
    "trl": "trl-1.16.0",
    "torchtune": "torchtune-0.6.1",
    "optimum-quanto": "optimum-quanto-0.2.7",
    "xformers": "xformers-0.0.35",
    "modelopt": "nvidia-modelopt-0.47.0",
    "auto-round": "auto-round-0.16.1",
    "bitsandbytes": "bitsandbytes-0.50.2",
}
VERDICTS = {"tp": "TP", "fp": "FP", "unsure": "unsure"}
IM003_BY_CATEGORY = {"torch-write": "error", "kernel-write": "warning"}
SEED_FILE = "flash_mla_sm120.py"
SEED_FUNCTION = "_split_kv_pages_to_64"
SEED_LINE = 403
NEAR = 2  # lines either side of a known positive's line that still count as found
#: Codes `imlint check` reports without options (IM004 and IM005 are opt-in): precision
#: is also printed over the labels whose findings these report, as a user sees them.
DEFAULT_CODES = frozenset({"IM001", "IM002", "IM003"})

Key = tuple[str, str, str, str]  # tree, path, function, statement (whitespace collapsed)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def collapse(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Finding:
    tree: str
    path: str
    line: int
    col: int
    code: str
    severity: str
    message: str
    function: str
    statement: str
    kept_line: int | None = None  # the statement that keeps the tensor, when another

    @property
    def key(self) -> Key:
        return (self.tree, self.path, self.function, collapse(self.statement))

    def covers(self, line: int) -> bool:
        """Whether ``line`` is on this finding's way from allocation to storage (``h =
        torch.ones(n)`` ... ``_CACHE[k] = h.to(d)``: the fix wraps all of it)."""
        return self.kept_line is not None and self.line <= line <= self.kept_line

    def record(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "path": self.path,
            "line": self.line,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "function": self.function,
            "statement": self.statement,
        }


@dataclass(frozen=True)
class Label:
    tree: str
    path: str
    function: str
    statement: str
    verdict: str  # TP, FP or unsure
    category: str
    expected: str
    reason: str
    source: str  # file:line it was read from

    @property
    def key(self) -> Key:
        return (self.tree, self.path, self.function, collapse(self.statement))


@dataclass(frozen=True)
class Known:
    tree: str
    path: str
    line: int
    function: str
    statement: str
    category: str
    expected: str
    source: str


@dataclass
class ImlintRun:
    findings: list[Finding]
    errors: list[str]
    seconds: float


@dataclass
class TreeScore:
    findings: int = 0
    errors: int = 0
    seconds: float = 0.0
    by_code: Counter[str] = field(default_factory=Counter)
    unlabelled_by_code: Counter[str] = field(default_factory=Counter)
    labelled: int = 0
    reported: int = 0
    tp: int = 0
    fp: int = 0
    unsure: int = 0
    #: the same over labels whose finding the default rules report (IM005 is opt-in)
    tp_default: int = 0
    fp_default: int = 0
    tier_ok: int = 0
    tier_total: int = 0
    known: int = 0
    found: int = 0
    known_tier_ok: int = 0
    known_tier_total: int = 0
    lost_tps: list[Label] = field(default_factory=list)
    reported_fps: list[Label] = field(default_factory=list)
    tier_misses: list[tuple[Label | Known, list[Finding]]] = field(default_factory=list)
    missed: list[Known] = field(default_factory=list)

    def add(self, other: TreeScore) -> None:
        for name in (
            "findings",
            "errors",
            "seconds",
            "labelled",
            "reported",
            "tp",
            "fp",
            "unsure",
            "tp_default",
            "fp_default",
            "tier_ok",
            "tier_total",
            "known",
            "found",
            "known_tier_ok",
            "known_tier_total",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.by_code.update(other.by_code)
        self.unlabelled_by_code.update(other.unlabelled_by_code)
        self.lost_tps += other.lost_tps
        self.reported_fps += other.reported_fps
        self.tier_misses += other.tier_misses
        self.missed += other.missed


# ---------------------------------------------------------------------------- statistics


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion (None when n is 0)."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio(successes: int, n: int) -> float | None:
    return successes / n if n else None


# ------------------------------------------------------------------------------ the trees


def tree_dir(tree: str) -> Path:
    return CACHE / "src" / tree


def ensure_tree(tree: str) -> Path:
    """The folder holding the tree's package, downloading the wheel when it is missing."""
    package, version, top = TREES[tree]
    if not (tree_dir(tree) / top).is_dir():
        print(f"fetching {package}=={version} into {tree_dir(tree)} ...", file=sys.stderr)
    return wheel_sources(package, version, top)


def parse_trees(value: str | None, default: Iterable[str]) -> list[str]:
    if value is None:
        return list(default)
    out: list[str] = []
    for name in (n.strip() for n in value.split(",")):
        if not name:
            continue
        name = ALIASES.get(name, name)
        if name not in TREES:
            raise SystemExit(f"unknown tree {name!r}; known: {', '.join(TREES)}")
        if name not in out:
            out.append(name)
    return out


# ------------------------------------------------------------------------------- imlint


def imlint_command() -> list[str]:
    """`python -m imlint` when the package is runnable that way, else the console script."""
    if (REPO / "imlint" / "__main__.py").is_file():
        return [sys.executable, "-m", "imlint"]
    beside = Path(sys.executable).parent / "imlint"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("imlint")
    if found is None:
        raise SystemExit("imlint is not installed (pip install -e .)")
    return [found]


def relative_path(raw: str, root: Path) -> str:
    """A finding's path relative to the tree folder (it starts with the package name)."""
    path = Path(raw)
    if not path.is_absolute():
        path = REPO / path  # imlint runs in REPO and prints paths as it was given them
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        warn(f"finding outside its tree: {raw}")
        return Path(raw).as_posix()


def run_imlint(
    tree: str, jobs: int | None, extend_select: str | None = None, config: str | None = None
) -> ImlintRun:
    root = tree_dir(tree)
    top = TREES[tree][2]
    target = root / top
    if target.is_relative_to(REPO):
        target = target.relative_to(REPO)
    cmd = [
        *imlint_command(),
        "check",
        "--output-format",
        "json",
        "--exit-zero",
        "--no-cache",
        str(target),
    ]
    if jobs is not None:
        cmd += ["-j", str(jobs)]
    if extend_select:
        cmd += ["--extend-select", extend_select]
    if config:
        cmd += ["--config", str(Path(config).resolve())]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    try:
        raw = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise SystemExit(
            f"{' '.join(cmd)} exited {proc.returncode} without JSON findings:\n{tail}"
        ) from None
    if not isinstance(raw, list):
        raise SystemExit(f"{' '.join(cmd)}: expected a JSON list of findings")
    errors = [line for line in proc.stderr.splitlines() if ": error:" in line]
    if proc.returncode not in (0, 1) or errors:
        warn(
            f"imlint exited {proc.returncode} on {tree} with {len(errors)} errors"
            + (f"; first: {errors[0]}" if errors else "")
        )
    findings = []
    for item in raw:
        raw_path = item.get("path", item.get("filename"))
        if not isinstance(raw_path, str):
            warn(f"finding without a path on {tree}: {item}")
            continue
        findings.append(
            Finding(
                tree=tree,
                path=relative_path(raw_path, root),
                line=int(item.get("line") or 0),
                col=int(item.get("col") or 0),
                code=str(item.get("code", "")),
                severity=str(item.get("severity", "")),
                message=str(item.get("message", "")),
                function=str(item.get("function") or ""),
                statement=str(item.get("statement") or ""),
                kept_line=int(item["kept_line"]) if item.get("kept_line") else None,
            )
        )
    findings.sort(key=lambda f: (f.path, f.line, f.col, f.code))
    return ImlintRun(findings, errors, seconds)


# ------------------------------------------------------------------------------- labels


def jsonl_records(files: Iterable[Path], required: tuple[str, ...]) -> Iterator[tuple[str, dict]]:
    """(file:line, object) of each well-formed line; others are skipped with a warning."""
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            warn(f"{file}: skipped: {exc}")
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{file.relative_to(REPO) if file.is_relative_to(REPO) else file}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                warn(f"{where}: skipped malformed line: {exc}")
                continue
            if not isinstance(obj, dict):
                warn(f"{where}: skipped: not a JSON object")
                continue
            missing = [k for k in required if not isinstance(obj.get(k), str | int)]
            if missing:
                warn(f"{where}: skipped: missing {', '.join(missing)}")
                continue
            yield where, obj


def load_labels(trees: Iterable[str], folder: str = "labels") -> dict[Key, Label]:
    wanted = set(trees)
    labels: dict[Key, Label] = {}
    files = sorted((ACCURACY / folder).glob("*.jsonl"))
    for where, obj in jsonl_records(files, ("tree", "path", "function", "statement", "verdict")):
        verdict = VERDICTS.get(str(obj["verdict"]).strip().lower())
        if verdict is None:
            warn(f"{where}: skipped: verdict {obj['verdict']!r} is not TP, FP or unsure")
            continue
        if obj["tree"] not in wanted:
            continue
        label = Label(
            tree=str(obj["tree"]),
            path=str(obj["path"]),
            function=str(obj["function"]),
            statement=str(obj["statement"]),
            verdict=verdict,
            category=str(obj.get("category", "")),
            expected=str(obj.get("expected", "")),
            reason=str(obj.get("reason", "")),
            source=where,
        )
        earlier = labels.get(label.key)
        if earlier is not None:
            if earlier.verdict != label.verdict:
                warn(
                    f"{where}: {label.verdict} conflicts with {earlier.verdict} at "
                    f"{earlier.source}; keeping the first"
                )
            continue
        labels[label.key] = label
    return labels


def load_known(trees: Iterable[str]) -> list[Known]:
    wanted = set(trees)
    files = sorted((ACCURACY / "known").glob("*.jsonl"))
    legacy = ACCURACY / "known_positives.jsonl"
    if legacy.is_file():
        files.append(legacy)
    seen: set[tuple[str, str, int, str, str]] = set()
    out: list[Known] = []
    for where, obj in jsonl_records(files, ("tree", "path", "line", "function", "statement")):
        if obj["tree"] not in wanted:
            continue
        try:
            line = int(obj["line"])
        except ValueError:
            warn(f"{where}: skipped: line {obj['line']!r} is not a number")
            continue
        known = Known(
            tree=str(obj["tree"]),
            path=str(obj["path"]),
            line=line,
            function=str(obj["function"]),
            statement=str(obj["statement"]),
            category=str(obj.get("category", "")),
            expected=str(obj.get("expected", "")),
            source=where,
        )
        ident = (known.tree, known.path, known.line, known.function, collapse(known.statement))
        if ident not in seen:
            seen.add(ident)
            out.append(known)
    return out


# ------------------------------------------------------------------------------ scoring


def expected_tier(expected: str, category: str) -> tuple[str, str | None] | None:
    """(code, severity or None) a TP should be reported with; None when unknown."""
    words = re.sub(r"[-_/]", " ", expected).split()
    if not words or not re.fullmatch(r"IM\d{3}", words[0].upper()):
        return None
    code = words[0].upper()
    if code != "IM003":
        return code, None
    severity = words[1].lower() if len(words) > 1 else IM003_BY_CATEGORY.get(category)
    if severity not in ("error", "warning"):
        return None
    return code, severity


def tier_matches(tier: tuple[str, str | None], finding: Finding) -> bool:
    code, severity = tier
    return finding.code == code and (severity is None or finding.severity == severity)


def tier_of(finding: Finding) -> str:
    return f"{finding.code} {finding.severity}" if finding.code == "IM003" else finding.code


def score_tree(
    tree: str, findings: list[Finding], labels: dict[Key, Label], known: list[Known]
) -> TreeScore:
    score = TreeScore(findings=len(findings))
    by_key: dict[Key, list[Finding]] = {}
    by_place: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        by_key.setdefault(f.key, []).append(f)
        by_place.setdefault((f.path, f.function), []).append(f)
        score.by_code[f.code] += 1
        if f.key not in labels:
            score.unlabelled_by_code[f.code] += 1

    for label in labels.values():
        if label.tree != tree:
            continue
        score.labelled += 1
        matched = by_key.get(label.key, [])
        if matched:
            score.reported += 1
        if label.verdict == "TP":
            if not matched:
                score.lost_tps.append(label)
                continue
            score.tp += 1
            if any(f.code in DEFAULT_CODES for f in matched):
                score.tp_default += 1
            tier = expected_tier(label.expected, label.category)
            if tier is None:
                warn(f"{label.source}: expected {label.expected!r} is not a code; tier not scored")
                continue
            score.tier_total += 1
            if any(tier_matches(tier, f) for f in matched):
                score.tier_ok += 1
            else:
                score.tier_misses.append((label, matched))
        elif label.verdict == "FP":
            if matched:
                score.fp += 1
                score.reported_fps.append(label)
                if any(f.code in DEFAULT_CODES for f in matched):
                    score.fp_default += 1
        elif matched:
            score.unsure += 1

    for kp in known:
        if kp.tree != tree:
            continue
        score.known += 1
        statement = collapse(kp.statement)
        hits = [
            f
            for f in by_place.get((kp.path, kp.function), [])
            if collapse(f.statement) == statement
            or abs(f.line - kp.line) <= NEAR
            or f.covers(kp.line)
        ]
        if not hits:
            score.missed.append(kp)
            continue
        score.found += 1
        tier = expected_tier(kp.expected, kp.category)
        if tier is None:
            warn(f"{kp.source}: expected {kp.expected!r} is not a code; tier not scored")
            continue
        score.known_tier_total += 1
        if any(tier_matches(tier, f) for f in hits):
            score.known_tier_ok += 1
        else:
            score.tier_misses.append((kp, hits))
    return score


# --------------------------------------------------------------------------- seed check


def statement_span(node: ast.AST, line: int) -> tuple[int, int]:
    """Lines of the simple statement (not a block) that covers ``line``."""
    for child in ast.walk(node):
        if isinstance(child, ast.stmt) and not hasattr(child, "body"):
            end = child.end_lineno or child.lineno
            if child.lineno <= line <= end:
                return child.lineno, end
    return line, line


def seed_checks(findings: list[Finding]) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for the sglang 0.5.18 seed."""
    root = tree_dir(SEED_TREE)
    candidates = sorted(root.rglob(SEED_FILE))
    if not candidates:
        return [(f"{SEED_FILE} present in {SEED_TREE}", False, "file not found")]
    file = candidates[0]
    rel = file.relative_to(root).as_posix()
    here = [f for f in findings if f.path == rel]
    checks: list[tuple[str, bool, str]] = []

    at_line = [f for f in here if f.line == SEED_LINE]
    ok = any(f.code == "IM002" for f in at_line)
    detail = ", ".join(f"{tier_of(f)} at {f.line}" for f in here) or "no findings in the file"
    checks.append((f"{rel}:{SEED_LINE} split buffer reported as IM002", ok, detail))

    name = f"{rel} guarded int8 mask not reported"
    text = file.read_text(encoding="utf-8")
    try:
        module = ast.parse(text)
    except SyntaxError as exc:
        return [*checks, (name, False, f"cannot parse: {exc}")]
    func = next(
        (
            n
            for n in ast.walk(module)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == SEED_FUNCTION
        ),
        None,
    )
    if func is None:
        return [*checks, (name, False, f"no function {SEED_FUNCTION}")]
    lines = text.splitlines()
    first, last = func.lineno, func.end_lineno or func.lineno
    guard = next(
        (n for n in range(first, last + 1) if "inference_mode(False)" in lines[n - 1]), None
    )
    mask = (
        next((n for n in range(guard + 1, last + 1) if "torch.int8" in lines[n - 1]), None)
        if guard is not None
        else None
    )
    if mask is None:
        return [*checks, (name, False, "no torch.int8 line after inference_mode(False)")]
    start, end = statement_span(func, mask)
    on_mask = [f for f in here if start <= f.line <= end]
    detail = f"line {start}" + (f"-{end}" if end != start else "")
    if on_mask:
        detail += ": " + ", ".join(f"{tier_of(f)} at {f.line}" for f in on_mask)
    checks.append((name, not on_mask, detail))
    return checks


# ------------------------------------------------------------------------------- output


def fmt_ratio(successes: int, n: int) -> str:
    r = ratio(successes, n)
    return f"{r:.3f}" if r is not None else "-"


def fmt_ci(successes: int, n: int) -> str:
    ci = wilson(successes, n)
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None else "-"


def print_table(header: list[str], rows: list[list[str]], text_columns: int = 0) -> None:
    """Columns padded to their widest cell: numbers right-aligned; the first column and the
    last ``text_columns`` left-aligned."""
    width = len(header)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(width)]
    for row in [header, *rows]:
        cells = [
            cell.ljust(w) if i == 0 or i >= width - text_columns else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())


def fmt_counts(counts: Counter[str]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) or "-"


def describe_label(label: Label) -> str:
    return (
        f"{label.tree} {label.path} {label.function}: {collapse(label.statement)}"
        f"  ({label.verdict} {label.category}, expected {label.expected})"
    )


def describe_known(kp: Known) -> str:
    return (
        f"{kp.tree} {kp.path}:{kp.line} {kp.function}: {collapse(kp.statement)}"
        f"  (expected {kp.expected})"
    )


def print_report(scores: dict[str, TreeScore], total: TreeScore, verbose: bool) -> None:
    rows = [*scores.items(), ("overall", total)] if len(scores) > 1 else list(scores.items())
    print()
    print_table(
        ["tree", "findings", "errors", "wall s", "unlabelled", "by code", "unlabelled by code"],
        [
            [
                name,
                str(s.findings),
                str(s.errors),
                f"{s.seconds:.1f}",
                str(sum(s.unlabelled_by_code.values())),
                fmt_counts(s.by_code),
                fmt_counts(s.unlabelled_by_code),
            ]
            for name, s in rows
        ],
        text_columns=2,
    )
    print()
    print_table(
        [
            "labelled",
            "reported",
            "TP",
            "FP",
            "unsure",
            "precision",
            "95% CI",
            "default rules",
            "95% CI",
            "severity ok",
            "",
        ],
        [
            [
                name,
                f"{s.reported}/{s.labelled}",
                str(s.tp),
                str(s.fp),
                str(s.unsure),
                fmt_ratio(s.tp, s.tp + s.fp),
                fmt_ci(s.tp, s.tp + s.fp),
                f"{s.tp_default}/{s.tp_default + s.fp_default}",
                fmt_ci(s.tp_default, s.tp_default + s.fp_default),
                f"{s.tier_ok}/{s.tier_total}",
                fmt_ratio(s.tier_ok, s.tier_total),
            ]
            for name, s in rows
        ],
    )
    print()
    print_table(
        ["known positives", "found", "recall", "95% CI", "severity ok", ""],
        [
            [
                name,
                f"{s.found}/{s.known}",
                fmt_ratio(s.found, s.known),
                fmt_ci(s.found, s.known),
                f"{s.known_tier_ok}/{s.known_tier_total}",
                fmt_ratio(s.known_tier_ok, s.known_tier_total),
            ]
            for name, s in rows
        ],
    )
    if verbose:
        print()
        print(f"missed known positives ({len(total.missed)}):")
        for kp in total.missed:
            print(f"  {describe_known(kp)}")
        print(f"severity mismatches ({len(total.tier_misses)}):")
        for item, got in total.tier_misses:
            text = describe_label(item) if isinstance(item, Label) else describe_known(item)
            print(f"  {text}; reported {', '.join(tier_of(f) for f in got)}")


def score_json(s: TreeScore) -> dict[str, Any]:
    def interval(k: int, n: int) -> list[float] | None:
        ci = wilson(k, n)
        return [round(ci[0], 4), round(ci[1], 4)] if ci is not None else None

    return {
        "findings": s.findings,
        "errors": s.errors,
        "seconds": round(s.seconds, 2),
        "by_code": dict(sorted(s.by_code.items())),
        "unlabelled": sum(s.unlabelled_by_code.values()),
        "unlabelled_by_code": dict(sorted(s.unlabelled_by_code.items())),
        "labelled": s.labelled,
        "labelled_reported": s.reported,
        "tp": s.tp,
        "fp": s.fp,
        "unsure": s.unsure,
        "precision": ratio(s.tp, s.tp + s.fp),
        "precision_ci95": interval(s.tp, s.tp + s.fp),
        "default_rules_tp": s.tp_default,
        "default_rules_fp": s.fp_default,
        "default_rules_precision": ratio(s.tp_default, s.tp_default + s.fp_default),
        "default_rules_precision_ci95": interval(s.tp_default, s.tp_default + s.fp_default),
        "severity_ok": s.tier_ok,
        "severity_scored": s.tier_total,
        "severity_accuracy": ratio(s.tier_ok, s.tier_total),
        "known": s.known,
        "known_found": s.found,
        "recall": ratio(s.found, s.known),
        "recall_ci95": interval(s.found, s.known),
        "known_severity_ok": s.known_tier_ok,
        "known_severity_scored": s.known_tier_total,
        "known_severity_accuracy": ratio(s.known_tier_ok, s.known_tier_total),
        "missed_known": [
            {"path": k.path, "line": k.line, "function": k.function, "expected": k.expected}
            for k in s.missed
        ],
    }


# -------------------------------------------------------------------------------- census


def label_folders() -> list[str]:
    """Every folder of finding labels: the tuning corpus and each sample (``known/``
    holds known positives, ``samples/`` unlabelled draws)."""
    return sorted(
        p.name for p in ACCURACY.iterdir() if p.is_dir() and p.name not in ("known", "samples")
    )


def print_census(folders: list[str], scored: list[str], runs: dict[str, ImlintRun]) -> None:
    """Every label of every folder read as one set (a finding labelled in any sample
    counts once), against each tree's findings under the default rules: how much of
    the tree's output carries a label, and the precision over all of it. Where a tree's
    output is labelled whole, that precision is the tree's, not a sample's estimate; it
    includes findings the rules were tuned on."""
    labels: dict[Key, Label] = {}
    for folder in folders:
        for key, label in load_labels(scored, folder).items():
            labels.setdefault(release_free(key), label)
    rows = []
    for tree in scored:
        seen: set[Key] = set()
        tp = fp = unsure = 0
        for f in runs[tree].findings:
            if f.code not in DEFAULT_CODES or f.key in seen:
                continue
            seen.add(f.key)
            label = labels.get(release_free(f.key))
            if label is None:
                continue
            tp += label.verdict == "TP"
            fp += label.verdict == "FP"
            unsure += label.verdict not in ("TP", "FP")
        if not seen:
            continue
        labelled = tp + fp + unsure
        rows.append(
            [tree, str(len(seen)), f"{labelled}/{len(seen)}", str(tp), str(fp), str(unsure),
             fmt_ratio(tp, tp + fp), fmt_ci(tp, tp + fp)]
        )  # fmt: skip
    print("\ncensus (default rules; every folder's labels as one set)")
    header = ["tree", "findings", "labelled", "TP", "FP", "unsure", "precision", "95% CI"]
    print_table(header, rows)


# --------------------------------------------------------------------------------- modes


def release_free(key: Key) -> Key:
    """``key`` with its tree's release left out (the package name in its place)."""
    tree, *rest = key
    return (TREES[tree][0], *rest) if tree in TREES else key  # type: ignore[return-value]


def sample_mode(args: argparse.Namespace, trees: list[str]) -> int:
    # every folder of labels (the tuning corpus and earlier samples), matched across
    # releases of a package: code labelled on vllm 0.33.0 is not fresh in 0.34.0
    labelled: set[Key] = set()
    if args.exclude_labelled:
        for folder in label_folders():
            labelled.update(map(release_free, load_labels(TREES, folder)))
    codes = DEFAULT_CODES | {c.strip() for c in (args.extend_select or "").split(",") if c.strip()}
    records: list[dict[str, Any]] = []
    for tree in trees:
        run = saved_run(tree, args)  # with --findings, what an earlier run kept there
        pool: list[Finding] = []
        seen: set[Key] = set()
        for f in run.findings:  # one finding per key: a label covers them all
            if f.code not in codes:
                continue  # a saved run's extra rules (IM005) when --extend-select has none
            if f.key in seen or release_free(f.key) in labelled:
                continue
            seen.add(f.key)
            pool.append(f)
        rng = random.Random(f"{args.seed}:{tree}")
        picked = rng.sample(pool, min(args.sample, len(pool)))
        picked.sort(key=lambda f: (f.path, f.line, f.col))
        records += [f.record() for f in picked]
        print(
            f"{tree}: {len(picked)} of {len(pool)} findings"
            f"{' without a label' if args.exclude_labelled else ''} (seed {args.seed})",
            file=sys.stderr,
        )
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {len(records)} findings to {args.out}", file=sys.stderr)
    return 0


def score_folder(
    folder: str,
    scored: list[str],
    runs: dict[str, ImlintRun],
    known: list[Known],
    verbose: bool,
) -> dict[str, Any]:
    """Score every tree's findings against one label folder, print it, and return the
    folder's part of the JSON report."""
    labels = load_labels(scored, folder)
    scores: dict[str, TreeScore] = {}
    for tree in scored:
        score = scores[tree] = score_tree(tree, runs[tree].findings, labels, known)
        score.errors, score.seconds = len(runs[tree].errors), runs[tree].seconds
    total = TreeScore()
    for s in scores.values():
        total.add(s)
    if scores:
        print_report(scores, total, verbose)
    print()
    print(f"labelled TPs no longer reported ({len(total.lost_tps)}):")
    for label in total.lost_tps:
        print(f"  {describe_label(label)}")
    print(f"labelled FPs reported ({len(total.reported_fps)}):")
    for label in total.reported_fps:
        print(f"  {describe_label(label)}")
    return {
        "trees": {name: score_json(s) for name, s in scores.items()},
        "overall": score_json(total),
        "lost_tps": [describe_label(label) for label in total.lost_tps],
        "reported_fps": [describe_label(label) for label in total.reported_fps],
    }


def saved_run(tree: str, args: argparse.Namespace) -> ImlintRun:
    """The tree's findings: from ``--findings DIR`` when kept there, else a run of
    imlint (kept there when ``--findings`` is given)."""
    root = ensure_tree(tree)
    files = sum(1 for _ in (root / TREES[tree][2]).rglob("*.py"))
    saved = Path(args.findings) / f"{tree}.json" if args.findings else None
    if saved is not None and saved.is_file():
        data = json.loads(saved.read_text(encoding="utf-8"))
        findings = [Finding(**item) for item in data["findings"]]
        run = ImlintRun(findings, data["errors"], data["seconds"])
    else:
        run = run_imlint(tree, args.jobs, args.extend_select, args.config)
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            data = {
                "findings": [dataclasses.asdict(f) for f in run.findings],
                "errors": run.errors,
                "seconds": run.seconds,
            }
            saved.write_text(json.dumps(data) + "\n", encoding="utf-8")
    print(
        f"{tree}: {files} files, {len(run.findings)} findings, "
        f"{len(run.errors)} errors, {run.seconds:.1f} s",
        file=sys.stderr,
    )
    return run


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--trees",
        metavar="A,B",
        help=f"trees to run (default: all; aliases {', '.join(ALIASES)}): {', '.join(TREES)}",
    )
    ap.add_argument("--download", action="store_true", help="fetch the trees and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="list misses and mismatches")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON to FILE")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even on regressions")
    ap.add_argument(
        "--labels",
        default="labels",
        metavar="FOLDER[,FOLDER]",
        help="label folders under benchmarks/accuracy/, each scored apart (default labels: "
        "the tuning corpus; fresh10 and the other fresh*: seeded samples)",
    )
    ap.add_argument(
        "--findings",
        metavar="DIR",
        help="keep each tree's findings in DIR/<tree>.json and score those on later runs "
        "instead of running imlint again (delete them after changing imlint)",
    )
    ap.add_argument(
        "--census",
        action="store_true",
        help="also print, per tree, how much of the default-rule output any folder labels "
        "and the precision over all of it",
    )
    ap.add_argument("-j", "--jobs", type=int, help="passed to imlint (default: its own)")
    ap.add_argument(
        "--extend-select",
        metavar="CODES",
        default="IM005",
        help="passed to imlint (default IM005: the read-only tier is labelled too; '' for none)",
    )
    ap.add_argument(
        "--config",
        metavar="FILE",
        help="passed to imlint: a [tool.imlint] table every tree is checked with (default: "
        "none, as a tree without configuration; setup-hooks.toml: the set-up hooks of "
        "vllm-style frameworks)",
    )
    ap.add_argument("--sample", type=int, metavar="N", help="write N random findings per tree")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    ap.add_argument(
        "--exclude-labelled", action="store_true", help="--sample: leave out labelled findings"
    )
    ap.add_argument("--out", metavar="FILE", help="--sample: JSON lines file (default stdout)")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if args.download:
        for tree in parse_trees(args.trees, TREES):
            print(f"{tree}: {ensure_tree(tree) / TREES[tree][2]}")
        return 0
    if args.sample is not None:
        if args.sample < 0:
            raise SystemExit("--sample must be >= 0")
        return sample_mode(args, parse_trees(args.trees, SAMPLED))

    trees = parse_trees(args.trees, TREES)
    scored = list(trees)  # the seed tree too (see the module doc)
    known = load_known(scored)
    runs = {tree: saved_run(tree, args) for tree in trees}
    checks = seed_checks(runs[SEED_TREE].findings) if SEED_TREE in runs else []
    folders = [f for f in args.labels.split(",") if f] or ["labels"]
    reports: dict[str, dict[str, Any]] = {}
    regressions = sum(1 for _, ok, _ in checks if not ok)
    for folder in folders:
        if len(folders) > 1:
            print(f"\n===== {folder}")
        reports[folder] = score_folder(folder, scored, runs, known, args.verbose)
        regressions += len(reports[folder]["lost_tps"]) + len(reports[folder]["reported_fps"])
    if args.census:
        print_census(label_folders(), scored, runs)
    if SEED_TREE in trees:
        print(f"seed checks ({SEED_TREE}):")
        for name, ok, detail in checks:
            print(f"  {'PASS' if ok else 'FAIL'}  {name}  [{detail}]")
    else:
        print(f"seed checks: skipped ({SEED_TREE} not in --trees)")
    print(f"regressions: {regressions}" + (" (--no-fail)" if regressions and args.no_fail else ""))

    if args.json:
        report = dict(reports[folders[0]]) if len(folders) == 1 else {"folders": reports}
        report["seed_checks"] = [{"check": n, "passed": ok, "detail": d} for n, ok, d in checks]
        report["regressions"] = regressions
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 1 if regressions and not args.no_fail else 0


if __name__ == "__main__":
    raise SystemExit(main())
