"""fwdasv's bundled target: a Llama-style decoder over a per-request KV cache.

RMSNorm with the fused residual add, rotary embeddings, grouped-query attention, SwiGLU
MLP; pure PyTorch (scaled_dot_product_attention). It runs every case kind of the
grammar: decode, prefill, prefix-cache hit, chunked prefill, speculative verify
(Q = 1 + D) and mixed batches. Equal consecutive requests form a group that attends in
one batched call, so `decode=32*1@8192` is one attention over a [32, 8192] cache per
layer, not 32. Like a serving engine's step, the forward appends K/V at each request's
cached length, read from a device-side counter, and advances the counters: the state a
forward writes, which the engine restores before every replay. Pipeline: stage s of N
holds a contiguous slice of the layers; the first stage embeds the tokens, the others
receive `hidden_states` and `residual`, the last applies the final norm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from fwdasv.core.cases import BenchCase
from fwdasv.targets.base import PreparedForward, StageEnds, TargetError
from fwdasv.targets.device import torch_dtype

# SDPA may pick cuDNN's attention on Hopper; these backends' forwards are
# reproducible run to run. On an H200 (torch 2.11) fwdasv's eager-repeat and
# replay checks caught batched long-context decodes of this decoder giving
# different outputs on every run with SDPA's default choice (docs/measurements.md);
# a forward that is not reproducible cannot be validated.
DETERMINISTIC_SDPA_BACKENDS = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
]


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_eps: float = 1e-5
    rope_theta: float = 500000.0
    max_kv_len: int = 131072

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise TargetError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )

    @property
    def params_per_layer(self) -> int:
        qkv = self.hidden_size * (self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        out = self.num_heads * self.head_dim * self.hidden_size
        mlp = 3 * self.hidden_size * self.intermediate_size
        return qkv + out + mlp + 2 * self.hidden_size


SIZES: dict[str, DecoderConfig] = {
    # Small enough for CPU tests: a case runs in milliseconds.
    "tiny": DecoderConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        max_kv_len=16384,
    ),
    # Llama-3-8B's layer shapes (hidden 4096, GQA 32/8 heads of 128, MLP 14336,
    # vocab 128256), with 8 of its 32 layers: GPU figures without 16 GB of weights.
    "llama3-8b-layers": DecoderConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_layers=8,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        rope_theta=500000.0,
        max_kv_len=131072,
    ),
    # Qwen3-0.6B's shapes (vLLM's default model; no q/k norm, untied weights):
    # pipeline figures next to vLLM's own on the same shapes.
    "qwen3-0.6b-shapes": DecoderConfig(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_layers=28,
        num_heads=16,
        num_kv_heads=8,
        head_dim=128,
        rope_theta=1000000.0,
        max_kv_len=40960,
    ),
}


def stage_layers(num_layers: int, stage: int, num_stages: int) -> range:
    """Contiguous layer slice of a stage; earlier stages take the remainder."""
    if not 0 <= stage < num_stages:
        raise TargetError(f"stage {stage} is not in [0, {num_stages})")
    if num_stages > num_layers:
        raise TargetError(f"{num_layers} layers cannot be split into {num_stages} stages")
    base, extra = divmod(num_layers, num_stages)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (stage < extra))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.float().square().mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * weight


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's fused form: residual += x, then normalise the sum."""
    residual = x if residual is None else x + residual
    return rms_norm(residual, weight, eps), residual


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (the half-split form Llama uses); x is [..., T, heads, dim]."""
    first, second = x.float().chunk(2, dim=-1)
    cos = cos.unsqueeze(-2)
    sin = sin.unsqueeze(-2)
    out = torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    return out.to(x.dtype)


class Layer:
    def __init__(
        self, config: DecoderConfig, device: torch.device, dtype: torch.dtype, g: torch.Generator
    ):
        h, d = config.hidden_size, config.head_dim
        std = 0.02

        def weight(*shape: int, scale: float = std) -> torch.Tensor:
            return (
                torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * scale
            ).to(dtype)

        self.config = config
        self.input_norm = torch.ones(h, device=device, dtype=dtype)
        self.post_norm = torch.ones(h, device=device, dtype=dtype)
        self.qkv = weight((config.num_heads + 2 * config.num_kv_heads) * d, h)
        self.out = weight(h, config.num_heads * d, scale=std / math.sqrt(2 * config.num_layers))
        self.gate_up = weight(2 * config.intermediate_size, h)
        self.down = weight(
            h, config.intermediate_size, scale=std / math.sqrt(2 * config.num_layers)
        )


@dataclass
class _Group:
    """A run of equal requests: `count` requests of Q query tokens and KV length K."""

    token_start: int
    count: int
    query_len: int
    kv_len: int
    request_start: int
    # [2, count, capacity, kv_heads, head_dim] per layer of this stage.
    caches: list[torch.Tensor]
    mask: Any  # None, "causal", or a lower-right CausalBias

    @property
    def prefix_len(self) -> int:
        return self.kv_len - self.query_len


class DecoderTarget(StageEnds):
    """One stage (of `num_stages`) of the decoder, built with seeded random weights."""

    def __init__(
        self,
        config: DecoderConfig,
        device: str = "cpu",
        dtype: str = "float32",
        stage: int = 0,
        num_stages: int = 1,
        seed: int = 0,
        name: str = "decoder",
    ):
        self.config = config
        self.device = torch.device(device)
        self.dtype = torch_dtype(dtype)
        self.stage = stage
        self.num_stages = num_stages
        self.name = f"{name}[stage {stage}/{num_stages}]" if num_stages > 1 else name
        self.layer_ids = stage_layers(config.num_layers, stage, num_stages)
        # Every stage draws every layer from one generator, so a layer's weights
        # are the same whether or not the model is split.
        g = torch.Generator(device=self.device).manual_seed(seed)
        self.embedding = None
        if stage == 0:
            self.embedding = (
                torch.randn(config.vocab_size, config.hidden_size, generator=g, device=self.device)
                * 0.02
            ).to(self.dtype)
        self.layers: list[Layer] = []
        for index in range(config.num_layers):
            layer_g = torch.Generator(device=self.device).manual_seed(seed * 1000 + index + 1)
            if index in self.layer_ids:
                self.layers.append(Layer(config, self.device, self.dtype, layer_g))
        self.final_norm = torch.ones(config.hidden_size, device=self.device, dtype=self.dtype)
        inv_freq = 1.0 / (
            config.rope_theta
            ** (torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim)
        )
        self.inv_freq = inv_freq.to(self.device)

    def check(self, case: BenchCase) -> None:
        if case.max_kv_len > self.config.max_kv_len:
            raise TargetError(
                f"{case.name}: KV length {case.max_kv_len} > the decoder's maximum {self.config.max_kv_len}"
            )

    def prepare(self, case: BenchCase, seed: int) -> PreparedForward:
        self.check(case)
        cfg, device, dtype = self.config, self.device, self.dtype
        rng = np.random.default_rng([seed, 0])
        groups: list[_Group] = []
        token_start = request_start = 0
        for request, count in case.groups():
            q, k = request.query_len, request.kv_len
            # Room for one more step's writes, so a forward run twice without
            # the restore stays in bounds (and visibly computes something else).
            capacity = k + q
            caches = []
            for layer_index in self.layer_ids:
                cache = torch.zeros(
                    2, count, capacity, cfg.num_kv_heads, cfg.head_dim, device=device, dtype=dtype
                )
                if k > q:
                    # A prefix already in the cache: seeded values, not zeros, so
                    # attention over it is not degenerate. Seeded by layer, so a
                    # pipeline stage holds what the whole model would.
                    g = torch.Generator(device=device).manual_seed(
                        (seed * 1_000_003 + layer_index * 1009 + len(groups)) % 2**63
                    )
                    cache[:, :, : k - q] = torch.randn(
                        2, count, k - q, cfg.num_kv_heads, cfg.head_dim, generator=g, device=device
                    ).to(dtype)
                caches.append(cache)
            if q == 1:
                mask: Any = None
            elif q == k:
                mask = "causal"
            else:
                # Imported here: torch.nn.attention.bias imports torch._dynamo (about 2 s
                # of every bench process's start on a CPU box), and only a chunked
                # prefill (1 < query < context) needs it.
                from torch.nn.attention.bias import causal_lower_right

                mask = causal_lower_right(q, k)
            groups.append(_Group(token_start, count, q, k, request_start, caches, mask))
            token_start += count * q
            request_start += count
        num_tokens = token_start
        query_lens = torch.tensor(
            [g.query_len for g in groups for _ in range(g.count)], device=device, dtype=torch.int64
        )
        # Tokens already in each request's cache: the device-side counters the
        # forward reads for positions and write slots, and advances.
        computed = torch.tensor(
            [g.prefix_len for g in groups for _ in range(g.count)], device=device, dtype=torch.int64
        )
        token_ids = torch.from_numpy(rng.integers(0, cfg.vocab_size, num_tokens)).to(device)
        received: dict[str, torch.Tensor] = {}
        if not self.first:
            received = {
                "hidden_states": torch.zeros(
                    num_tokens, cfg.hidden_size, device=device, dtype=dtype
                ),
                "residual": torch.zeros(num_tokens, cfg.hidden_size, device=device, dtype=dtype),
            }
        state = [computed]
        for group in groups:
            state.extend(cache[:, :, group.prefix_len : group.kv_len] for cache in group.caches)

        def forward() -> dict[str, torch.Tensor]:
            with sdpa_kernel(DETERMINISTIC_SDPA_BACKENDS):
                return self._forward(groups, token_ids, computed, query_lens, received)

        return PreparedForward(
            forward=forward,
            state=state,
            num_tokens=num_tokens,
            received=received,
            info={"groups": len(groups), "layers": [self.layer_ids.start, self.layer_ids.stop]},
        )

    def _forward(
        self,
        groups: list[_Group],
        token_ids: torch.Tensor,
        computed: torch.Tensor,
        query_lens: torch.Tensor,
        received: dict[str, torch.Tensor],
    ) -> dict[str, torch.Tensor]:
        cfg = self.config
        # Positions of every group's tokens, [count, Q], from the counters.
        positions = []
        for g in groups:
            base = computed[g.request_start : g.request_start + g.count]
            positions.append(base[:, None] + torch.arange(g.query_len, device=self.device))
        flat_positions = torch.cat([p.reshape(-1) for p in positions])
        freqs = flat_positions.float()[:, None] * self.inv_freq[None, :]
        cos, sin = freqs.cos(), freqs.sin()
        if self.first:
            assert self.embedding is not None
            hidden = self.embedding[token_ids]
            residual = None
        else:
            hidden, residual = received["hidden_states"], received["residual"]
        for index, layer in enumerate(self.layers):
            x, residual = add_rms_norm(hidden, residual, layer.input_norm, cfg.rms_eps)
            hidden = self._attention(layer, index, x, groups, positions, cos, sin)
            x, residual = add_rms_norm(hidden, residual, layer.post_norm, cfg.rms_eps)
            gate, up = (x @ layer.gate_up.t()).chunk(2, dim=-1)
            hidden = (F.silu(gate) * up) @ layer.down.t()
        computed.add_(query_lens)
        if self.last:
            out, _ = add_rms_norm(hidden, residual, self.final_norm, cfg.rms_eps)
            return {"hidden_states": out}
        assert residual is not None  # every stage has a layer, which sets it
        return {"hidden_states": hidden, "residual": residual}

    def project_qkv(
        self, layer: Layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One layer's queries, keys and values of every token, rotary applied to q and k:
        [tokens, heads, dim], [tokens, kv_heads, dim] twice."""
        heads, kv_heads, dim = self.config.num_heads, self.config.num_kv_heads, self.config.head_dim
        q, k, v = (x @ layer.qkv.t()).split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
        return (
            rotate(q.view(-1, heads, dim), cos, sin),
            rotate(k.view(-1, kv_heads, dim), cos, sin),
            v.view(-1, kv_heads, dim),
        )

    def _attention(
        self,
        layer: Layer,
        index: int,
        x: torch.Tensor,
        groups: list[_Group],
        positions: list[torch.Tensor],
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> torch.Tensor:
        cfg = self.config
        heads, kv_heads, dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        q, k, v = self.project_qkv(layer, x, cos, sin)
        outputs = []
        for g, pos in zip(groups, positions, strict=True):
            tokens = slice(g.token_start, g.token_start + g.count * g.query_len)
            cache = g.caches[index]
            capacity = cache.shape[2]
            slots = pos.clamp(max=capacity - 1)
            rows = torch.arange(g.count, device=self.device)[:, None].expand_as(slots)
            cache[0].index_put_((rows, slots), k[tokens].view(g.count, g.query_len, kv_heads, dim))
            cache[1].index_put_((rows, slots), v[tokens].view(g.count, g.query_len, kv_heads, dim))
            query = q[tokens].view(g.count, g.query_len, heads, dim).transpose(1, 2)
            keys = cache[0, :, : g.kv_len].transpose(1, 2)
            values = cache[1, :, : g.kv_len].transpose(1, 2)
            if g.mask is None:
                out = F.scaled_dot_product_attention(query, keys, values, enable_gqa=True)
            elif g.mask == "causal":
                out = F.scaled_dot_product_attention(
                    query, keys, values, is_causal=True, enable_gqa=True
                )
            else:
                # Lower-right causal (a query block after a prefix): the fused
                # kernels take it with equal head counts.
                group = heads // kv_heads
                keys = keys.repeat_interleave(group, dim=1)
                values = values.repeat_interleave(group, dim=1)
                out = F.scaled_dot_product_attention(query, keys, values, attn_mask=g.mask)
            outputs.append(out.transpose(1, 2).reshape(g.count * g.query_len, heads * dim))
        attended = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
        return attended @ layer.out.t()


def decoder(
    size: str = "tiny",
    device: str = "cpu",
    dtype: str = "float32",
    stage: int = 0,
    num_stages: int = 1,
    seed: int = 0,
    num_layers: int | None = None,
) -> DecoderTarget:
    """The bundled decoder by size name ("tiny", "llama3-8b-layers", "qwen3-0.6b-shapes")."""
    try:
        config = SIZES[size]
    except KeyError:
        raise TargetError(f"Unknown decoder size {size!r}; known: {', '.join(SIZES)}") from None
    if num_layers is not None:
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
            raise TargetError(f"num_layers must be a positive integer, got {num_layers!r}")
        config = replace(config, num_layers=num_layers)
    return DecoderTarget(config, device, dtype, stage, num_stages, seed, name=f"decoder-{size}")


def _sized(size: str, doc: str) -> Callable[..., DecoderTarget]:
    """A factory of one size, with explicit keywords, not **kwargs: TargetSpec.build checks
    --target-option names against the signature and names an unknown one."""

    def factory(
        device: str = "cpu",
        dtype: str = "float32",
        stage: int = 0,
        num_stages: int = 1,
        seed: int = 0,
        num_layers: int | None = None,
    ) -> DecoderTarget:
        return decoder(size, device, dtype, stage, num_stages, seed, num_layers)

    def max_stages(num_layers: int | None = None, **_: object) -> int:
        """One layer per stage at least (a bad num_layers is reported by the build)."""
        if isinstance(num_layers, int) and not isinstance(num_layers, bool) and num_layers >= 1:
            return num_layers
        return SIZES[size].num_layers

    factory.__name__ = factory.__qualname__ = size.replace("-", "_").replace(".", "_")
    factory.__doc__ = doc
    factory.max_stages = max_stages  # type: ignore[attr-defined]
    return factory


tiny = _sized("tiny", "The tiny decoder (4 layers, hidden 64): CPU tests and the default target.")
llama3_8b_layers = _sized(
    "llama3-8b-layers", "Llama-3-8B-sized layers (8 of them by default): GPU figures."
)
qwen3_0_6b_shapes = _sized(
    "qwen3-0.6b-shapes",
    "Qwen3-0.6B's layer shapes and count (28): figures next to vLLM's default model.",
)
