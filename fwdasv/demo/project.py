"""The demo project: a small PyTorch model package with a realistic git history.

`tinylm` is a decoder language model whose repository grows over 14 commits.
Most commits change nothing measurable (docs, tests, refactors); two change the
forward's speed the way real code does:

- "Use SDPA's native GQA": stop materialising repeated K/V heads with
  `repeat_interleave` before attention (faster);
- "Support attention logit soft-capping": compute attention scores explicitly
  (matmul, tanh cap, mask, softmax) instead of the fused
  `scaled_dot_product_attention` kernel (slower, the injected regression).

The package exposes `tinylm.bench:target`, a target of fwdasv's engine. Commit dates
and authors are fixed, so the history (and its hashes) is the same on every machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fwdasv.git import GitError, git

PACKAGE = "tinylm"
TARGET = "tinylm.bench:target"
SLOW_COMMIT_SUBJECT = "Support attention logit soft-capping"
FAST_COMMIT_SUBJECT = "Use SDPA's native GQA instead of repeating K/V heads"

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinylm"
version = "{version}"
description = "A small decoder language model"
requires-python = ">=3.10"
dependencies = []

[tool.setuptools]
packages = ["tinylm"]
"""

# The model's sizes: inline in model.py at first, a config module of their own later.
_CONFIG_FIELDS = """\
    vocab_size: int = 1024
    hidden_size: int = 256
    intermediate_size: int = 512
    num_layers: int = 4
    num_heads: int = 8
    num_kv_heads: int = 2
    head_dim: int = 32
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0
"""

_CONFIG_INLINE = (
    """

@dataclass(frozen=True)
class Config:
"""
    + _CONFIG_FIELDS
)

_CONFIG_MODULE = (
    '''"""Model configuration."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Sizes of the model; every field has the released model's value."""

'''
    + _CONFIG_FIELDS
    + """    # Gemma-2-style soft cap of attention logits (0 disables it).
    attn_logit_softcap: float = 0.0
"""
)

_ATTENTION_REPEAT = """
def attention(q, k, v, causal, config):
    # Expand the K/V heads so every query head has its own copy.
    group = config.num_heads // config.num_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
"""

_ATTENTION_GQA = """
def attention(q, k, v, causal, config):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
"""

_ATTENTION_SOFTCAP = """
def attention(q, k, v, causal, config):
    # Explicit scores, so the logits can be soft-capped before the softmax.
    group = config.num_heads // config.num_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if config.attn_logit_softcap:
        cap = config.attn_logit_softcap
        scores = cap * torch.tanh(scores / cap)
    if causal:
        q_len, k_len = scores.shape[-2:]
        allowed = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).tril(k_len - q_len)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
"""

_MODEL = '''"""tinylm: a small decoder language model (RMSNorm, RoPE, GQA, SwiGLU)."""

import math
{config_import}
import torch
import torch.nn.functional as F
{config_inline}

def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight

{rope}
{attention}

class TinyLM:
    """Weights and the forward of one decoding step over per-request KV caches."""

    def __init__(self, config=None, device="cpu", dtype=torch.float32, seed=0):
        self.config = config = config or Config()
        g = torch.Generator(device=device).manual_seed(seed)

        def weight(*shape):
            return (torch.randn(*shape, generator=g, device=device) * 0.02).to(dtype)

        h, d = config.hidden_size, config.head_dim
        self.embed = weight(config.vocab_size, h)
        self.layers = [
            {{
                "attn_norm": torch.ones(h, device=device, dtype=dtype),
                "wq": weight(config.num_heads * d, h),
                "wk": weight(config.num_kv_heads * d, h),
                "wv": weight(config.num_kv_heads * d, h),
                "wo": weight(h, config.num_heads * d),
                "mlp_norm": torch.ones(h, device=device, dtype=dtype),
                "w_gate": weight(config.intermediate_size, h),
                "w_up": weight(config.intermediate_size, h),
                "w_down": weight(h, config.intermediate_size),
            }}
            for _ in range(config.num_layers)
        ]
        self.norm = torch.ones(h, device=device, dtype=dtype)
        self.inv_freq = 1.0 / (
            config.rope_theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
        )

    def forward(self, tokens, positions, groups):
        """One step. `groups`: (token slice, count, query_len, kv_len, caches, lengths) per
        run of equal requests; caches[layer] is [2, count, capacity, kv_heads, head_dim]."""
        cfg = self.config
        x = self.embed[tokens]
        cos, sin = rope_tables(positions, self.inv_freq)
        for index, layer in enumerate(self.layers):
            h = rms_norm(x, layer["attn_norm"], cfg.rms_eps)
            q = (h @ layer["wq"].t()).view(-1, cfg.num_heads, cfg.head_dim)
            k = (h @ layer["wk"].t()).view(-1, cfg.num_kv_heads, cfg.head_dim)
            v = (h @ layer["wv"].t()).view(-1, cfg.num_kv_heads, cfg.head_dim)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            outs = []
            for tokens_slice, count, q_len, kv_len, caches, lengths in groups:
                cache = caches[index]
                slots = (lengths[:, None] + torch.arange(q_len, device=x.device)).clamp(
                    max=cache.shape[2] - 1
                )
                rows = torch.arange(count, device=x.device)[:, None].expand_as(slots)
                cache[0].index_put_((rows, slots), k[tokens_slice].view(count, q_len, *k.shape[1:]))
                cache[1].index_put_((rows, slots), v[tokens_slice].view(count, q_len, *v.shape[1:]))
                qg = q[tokens_slice].view(count, q_len, cfg.num_heads, cfg.head_dim).transpose(1, 2)
                kg = cache[0, :, :kv_len].transpose(1, 2)
                vg = cache[1, :, :kv_len].transpose(1, 2)
                o = attention(qg, kg, vg, q_len > 1, cfg)
                outs.append(o.transpose(1, 2).reshape(count * q_len, -1))
            x = x + torch.cat(outs) @ layer["wo"].t()
            h = rms_norm(x, layer["mlp_norm"], cfg.rms_eps)
            x = x + (F.silu(h @ layer["w_gate"].t()) * (h @ layer["w_up"].t())) @ layer["w_down"].t()
        for _, _, q_len, _, _, lengths in groups:
            lengths.add_(q_len)
        return rms_norm(x, self.norm, cfg.rms_eps)
'''

_ROPE = """
def rope_tables(positions, inv_freq):
    freqs = positions.float()[:, None] * inv_freq[None, :]
    return freqs.cos(), freqs.sin()


def apply_rope(x, cos, sin):
    # The tables are float32; x keeps its own dtype (bfloat16 on a GPU) for the KV cache.
    first, second = x.chunk(2, dim=-1)
    cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
"""

_BENCH = '''"""fwdasv target: prepare exact batches of tinylm for timing (`tinylm.bench:target`)."""

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from fwdasv.targets.base import PreparedForward
{config_import}from tinylm.model import TinyLM


class TinyLMTarget:
    name = "tinylm"

    def __init__(self, device="cpu", dtype="float32", seed=0):
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.model = TinyLM({config_arg}device=self.device, dtype=self.dtype, seed=seed)

    def prepare(self, case, seed):
        cfg = self.model.config
        g = torch.Generator().manual_seed(seed)
        groups, positions, state = [], [], []
        start = 0
        for request, count in case.groups():
            if request.num_draft_tokens or request.chunked:
                raise ValueError(f"{{case.name}}: tinylm benches decode and prefill steps only")
            q_len, kv_len = request.query_len, request.kv_len
            prefix = kv_len - q_len
            caches = []
            for _ in range(cfg.num_layers):
                cache = torch.zeros(2, count, kv_len + q_len, cfg.num_kv_heads, cfg.head_dim, dtype=self.dtype)
                cache[:, :, :prefix] = torch.randn(2, count, prefix, cfg.num_kv_heads, cfg.head_dim, generator=g)
                caches.append(cache.to(self.device))
            lengths = torch.full((count,), prefix, dtype=torch.int64, device=self.device)
            groups.append((slice(start, start + count * q_len), count, q_len, kv_len, caches, lengths))
            positions.append((torch.arange(q_len) + prefix).repeat(count))
            state.append(lengths)
            state.extend(c[:, :, prefix:kv_len] for c in caches)
            start += count * q_len
        tokens = torch.randint(0, cfg.vocab_size, (start,), generator=g).to(self.device)
        positions = torch.cat(positions).to(self.device)

        def forward():
            # Reproducible attention kernels only (no cuDNN): the bench checks replays bitwise.
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                return {{"hidden_states": self.model.forward(tokens, positions, groups)}}

        return PreparedForward(forward=forward, state=state, num_tokens=start)


def target(device="cpu", dtype="float32", seed=0):
    return TinyLMTarget(device=device, dtype=dtype, seed=seed)
'''

_README = """# tinylm

A small decoder language model (RMSNorm, rotary embeddings, grouped-query
attention, SwiGLU MLP) with a per-request KV cache.

`tinylm.bench:target` is a target for fwdasv's forward engine:

    python -m fwdasv.engine --target tinylm.bench:target --case decode=8*1@512
"""

_README_CACHE = """
## KV cache layout

Each run of equal requests keeps, per layer, one tensor of shape
`[2, requests, capacity, kv_heads, head_dim]` (keys, then values). A step
appends its tokens at each request's length and advances the lengths.
"""

_README_UNITS = """
Lengths count tokens; `capacity` is the longest sequence a cache holds.
"""

_TESTS = """import torch

from tinylm.model import TinyLM


def test_forward_shape():
    model = TinyLM()
    cfg = model.config
    tokens = torch.randint(0, cfg.vocab_size, (4,))
    caches = [torch.zeros(2, 1, 8, cfg.num_kv_heads, cfg.head_dim) for _ in range(cfg.num_layers)]
    lengths = torch.zeros(1, dtype=torch.int64)
    out = model.forward(tokens, torch.arange(4), [(slice(0, 4), 1, 4, 4, caches, lengths)])
    assert out.shape == (4, cfg.hidden_size)
    assert int(lengths[0]) == 4
"""

_README_RUN = """
## Timing the forward

    fwdasv forward --target tinylm.bench:target --case decode=8*1@512 --case prefill=256
"""

_EXPORTS = """from tinylm.config import Config
from tinylm.model import TinyLM

__all__ = ["Config", "TinyLM"]

"""

_CHANGELOG = """# Changelog

## 0.2.0
- Attention logit soft-capping (`Config.attn_logit_softcap`).
- Grouped-query attention uses SDPA's native GQA.

## 0.1.0
- First release.
"""


@dataclass(frozen=True)
class Stage:
    """What the tree looks like after a commit."""

    version: str = "0.1.0"
    config_module: bool = False
    attention: str = _ATTENTION_REPEAT
    readme_cache: bool = False
    tests: bool = False
    changelog: bool = False
    license: bool = False
    readme_run: bool = False
    exports: bool = False
    readme_units: bool = False


def _files(stage: Stage) -> dict[str, str]:
    if stage.config_module:
        config_import, config_inline = "\nfrom tinylm.config import Config", ""
    else:
        config_import, config_inline = "from dataclasses import dataclass", _CONFIG_INLINE
    files = {
        "pyproject.toml": _PYPROJECT.format(version=stage.version),
        "README.md": _README
        + (_README_CACHE if stage.readme_cache else "")
        + (_README_UNITS if stage.readme_units else "")
        + (_README_RUN if stage.readme_run else ""),
        "tinylm/__init__.py": '"""tinylm: a small decoder language model."""\n\n'
        + (_EXPORTS if stage.exports else "")
        + f'__version__ = "{stage.version}"\n',
        "tinylm/model.py": _MODEL.format(
            config_import=config_import,
            config_inline=config_inline,
            rope=_ROPE,
            attention=stage.attention,
        ),
        "tinylm/bench.py": _BENCH.format(config_import="", config_arg=""),
    }
    if stage.config_module:
        files["tinylm/config.py"] = _CONFIG_MODULE
    if stage.tests:
        files["tests/test_model.py"] = _TESTS
    if stage.changelog:
        files["CHANGELOG.md"] = _CHANGELOG
    if stage.license:
        files["LICENSE"] = "Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)\n"
    return files


def _history() -> list[tuple[str, Callable[[Stage], Stage]]]:
    def change(**kwargs):
        return lambda stage: Stage(**{**stage.__dict__, **kwargs})

    softcap = _ATTENTION_SOFTCAP
    return [
        ("Initial tiny decoder: RMSNorm, RoPE, GQA attention, SwiGLU MLP", change()),
        ("Add a license", change(license=True)),
        # Early, so that the faster level holds several commits before the slower one.
        (FAST_COMMIT_SUBJECT, change(attention=_ATTENTION_GQA)),
        ("Add a forward shape test", change(tests=True)),
        ("Move the configuration into tinylm.config", change(config_module=True)),
        ("Document the KV cache layout", change(readme_cache=True)),
        ("Bump version to 0.1.1", change(version="0.1.1")),
        (SLOW_COMMIT_SUBJECT, change(attention=softcap)),
        ("Add a changelog", change(changelog=True)),
        ("Bump version to 0.2.0", change(version="0.2.0")),
        ("README: how to run the forward bench", change(readme_run=True)),
        ("Export TinyLM and Config from the package", change(exports=True)),
        ("README: the KV cache layout's units", change(readme_units=True)),
        ("Bump version to 0.2.1", change(version="0.2.1")),
    ]


HISTORY_LENGTH = len(_history())


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    try:
        return git(cwd, *args, env=env)
    except GitError as error:
        if error.returncode is None:
            raise  # git could not start: the machine's problem, said as such
        raise RuntimeError(str(error)) from None  # the demo's own history: a fwdasv bug


def slow_commit(hashes: list[str]) -> str:
    """The injected regression's hash among `build_project`'s hashes (oldest first)."""
    return hashes[[subject for subject, _ in _history()].index(SLOW_COMMIT_SUBJECT)]


def build_project(path: str | os.PathLike[str], commits: int | None = None) -> list[str]:
    """Create (or reuse) the demo repository at `path`; returns its hashes, oldest first.

    An existing repository built by this function is reused when its commit
    subjects match, so re-running the demo keeps its hashes and results; one
    made by an earlier, shorter history is extended with the commits since.
    """
    path = Path(path)
    history = _history()[: commits or None]
    subjects = [subject for subject, _ in history]
    done = 0
    if (path / ".git").is_dir():
        existing = _git(path, "log", "--reverse", "--format=%s", "main").splitlines()
        if existing == subjects[: len(existing)] and _git(path, "status", "--porcelain") == "":
            done = len(existing)
        else:
            raise FileExistsError(
                f"{path} holds another git repository; remove it or choose another --dir"
            )
    else:
        path.mkdir(parents=True, exist_ok=True)
        _git(path, "init", "-q", "-b", "main")
    stage = Stage()
    for index, (subject, step) in enumerate(history):
        stage = step(stage)
        if index < done:
            continue
        for name, text in _files(stage).items():
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        # Fixed dates (one a day) and identity: the same hashes everywhere.
        stamp = f"2026-11-{index + 1:02d}T12:00:00+00:00"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "tinylm dev",
            "GIT_AUTHOR_EMAIL": "dev@tinylm.example",
            "GIT_COMMITTER_NAME": "tinylm dev",
            "GIT_COMMITTER_EMAIL": "dev@tinylm.example",
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        _git(path, "add", "-A", env=env)
        _git(path, "commit", "-q", "--no-gpg-sign", "-m", subject, env=env)
    return _git(path, "rev-list", "--reverse", "main").splitlines()
