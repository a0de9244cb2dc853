"""The bundled decoder target on CPU: every case kind, its state, its attention, its stages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from fwdasv.core.cases import BenchCase, parse_case
from fwdasv.targets.base import PreparedForward, Target, TargetError, TargetSpec
from fwdasv.targets.decoder import SIZES, DecoderTarget, decoder, stage_layers, tiny

KINDS = {
    "decode": "decode=4*1@64",
    "prefill": "prefill=32",
    "prefix_hit": "hit=16@48",
    "chunk": "chunk=16@48c",
    "verify": "verify=2*4@40:3",
    "mixed": "mix=32,4*1@64,2*4@40:3,16@48c,16@48,1",
}
HIDDEN = SIZES["tiny"].hidden_size


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Tiny ops: extra intra-op threads only contend on a small shared machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def target() -> DecoderTarget:
    return tiny()


def run(prepared: PreparedForward) -> torch.Tensor:
    with torch.inference_mode():
        return next(iter(prepared.forward().values())).clone()


@pytest.mark.parametrize("text", KINDS.values(), ids=KINDS.keys())
def test_every_kind_runs_with_the_right_shape(target, text):
    case = parse_case(text)
    prepared = target.prepare(case, seed=0)
    assert prepared.num_tokens == case.num_tokens
    outputs = prepared.forward()
    assert list(outputs) == ["hidden_states"]
    out = outputs["hidden_states"]
    assert out.shape == (case.num_tokens, HIDDEN)
    assert out.dtype == torch.float32
    assert out.isfinite().all()
    assert out.abs().sum() > 0


def test_kinds_cover_the_grammar():
    kinds = {r.kind for text in KINDS.values() for r in parse_case(text).requests}
    assert kinds == {"decode", "verify", "prefill", "prefix_hit", "chunk"}


def test_tiny_is_a_target_and_resolves_by_name():
    built = TargetSpec.parse("fwdasv.targets.decoder:tiny").build("cpu", "float32")
    assert isinstance(built, Target)
    assert built.name == "decoder-tiny"


def test_kv_length_over_the_maximum_is_refused(target):
    with pytest.raises(TargetError, match="KV length 16385 > the decoder's maximum 16384"):
        target.prepare(parse_case("big=1@16385"), seed=0)


def test_same_seed_same_output_other_seed_other_output(target):
    case = parse_case(KINDS["mixed"])
    a = run(target.prepare(case, seed=3))
    b = run(target.prepare(case, seed=3))
    c = run(target.prepare(case, seed=4))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


# --- state and restore ----------------------------------------------------------------


def snapshot(views: list[torch.Tensor]) -> list[torch.Tensor]:
    return [v.clone() for v in views]


def restore(views: list[torch.Tensor], saved: list[torch.Tensor]) -> None:
    for view, copy in zip(views, saved, strict=True):
        view.copy_(copy)


@pytest.mark.parametrize("text", KINDS.values(), ids=KINDS.keys())
def test_restore_matters(target, text):
    prepared = target.prepare(parse_case(text), seed=0)
    saved = snapshot(prepared.state)
    first = run(prepared)
    # Without the restore the second step sees longer sequences: other positions.
    assert not torch.equal(run(prepared), first)
    restore(prepared.state, saved)
    again = run(prepared)
    assert torch.equal(again, first)
    restore(prepared.state, saved)
    assert torch.equal(run(prepared), first)


def written_tensors(prepared: PreparedForward) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every whole tensor behind the state views, with a mask of what the views cover."""
    out: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for view in prepared.state:
        base = view if view._base is None else view._base
        assert base.is_contiguous()
        if id(base) not in out:
            out[id(base)] = (base, torch.zeros(base.shape, dtype=torch.bool))
        mask = out[id(base)][1]
        mask.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    return list(out.values())


def model_tensors(target: DecoderTarget) -> list[torch.Tensor]:
    tensors = [target.final_norm, target.inv_freq]
    if target.embedding is not None:
        tensors.append(target.embedding)
    for layer in target.layers:
        tensors += [layer.input_norm, layer.post_norm, layer.qkv, layer.out, layer.gate_up]
        tensors.append(layer.down)
    return tensors


@pytest.mark.parametrize("text", KINDS.values(), ids=KINDS.keys())
@pytest.mark.parametrize("dirty", [False, True], ids=["fresh", "after-restore"])
def test_state_views_cover_exactly_the_slots_the_forward_writes(target, text, dirty):
    prepared = target.prepare(parse_case(text), seed=0)
    saved = snapshot(prepared.state)
    if dirty:
        run(prepared)
        run(prepared)  # writes past the views: the restore must not care
        restore(prepared.state, saved)
    tensors = written_tensors(prepared)
    before = [base.clone() for base, _ in tensors]
    weights = [t.clone() for t in model_tensors(target)]
    run(prepared)
    for (base, mask), old in zip(tensors, before, strict=True):
        changed = base != old
        assert not changed[~mask].any(), "the forward wrote outside the state views"
        assert changed[mask].all(), "a state view the forward does not write"
    for tensor, old in zip(model_tensors(target), weights, strict=True):
        assert torch.equal(tensor, old)


def test_state_is_the_counters_and_one_view_per_group_and_layer(target):
    case = parse_case(KINDS["mixed"])
    prepared = target.prepare(case, seed=0)
    counters = prepared.state[0]
    assert counters.tolist() == [r.prefix_len for r in case.requests]
    assert len(prepared.state) == 1 + len(case.groups()) * SIZES["tiny"].num_layers
    run(prepared)
    assert counters.tolist() == [r.kv_len for r in case.requests]


# --- attention against a naive reference -----------------------------------------------


class NaiveAttentionDecoder(DecoderTarget):
    """The decoder with attention written out per request and head, in float64.

    It writes the cache like the decoder (the counters' slots) but reads the
    prefix from the cache and the new keys from this step's projections, so a
    write to the wrong slots or a wrong mask shows up as a difference.
    `mistake` plants a known bug, to show the comparison would see it.
    """

    mistake: str | None = None

    def _attention(self, layer, index, x, groups, positions, cos, sin):
        cfg = self.config
        heads, kv_heads, dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        q, k, v = self.project_qkv(layer, x, cos, sin)
        outputs = []
        for g in groups:
            cache = g.caches[index]
            for row in range(g.count):
                first = g.token_start + row * g.query_len
                tokens = slice(first, first + g.query_len)
                prefix = g.prefix_len
                keys = torch.cat([cache[0, row, :prefix], k[tokens]]).double()
                values = torch.cat([cache[1, row, :prefix], v[tokens]]).double()
                out = torch.empty(g.query_len, heads, dim, dtype=torch.float64)
                for head in range(heads):
                    kv_head = head // (heads // kv_heads)
                    if self.mistake == "gqa":
                        kv_head = head % kv_heads
                    scores = q[tokens, head].double() @ keys[:, kv_head].t() / math.sqrt(dim)
                    # Query i sees the prefix and the new tokens up to itself.
                    seen = 0 if self.mistake == "upper_left_mask" else prefix
                    for i in range(g.query_len):
                        scores[i, seen + i + 1 :] = -math.inf
                    out[:, head] = scores.softmax(-1) @ values[:, kv_head]
                outputs.append(out.reshape(g.query_len, heads * dim).to(x.dtype))
                cache[0, row, prefix : g.kv_len] = k[tokens]
                cache[1, row, prefix : g.kv_len] = v[tokens]
        return torch.cat(outputs) @ layer.out.t()


@pytest.mark.parametrize("text", KINDS.values(), ids=KINDS.keys())
def test_attention_matches_a_naive_reference(target, text):
    case = parse_case(text)
    naive = NaiveAttentionDecoder(SIZES["tiny"], name="decoder-tiny")
    expected = run(naive.prepare(case, seed=0))
    actual = run(target.prepare(case, seed=0))
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("mistake", "text"),
    [
        ("upper_left_mask", KINDS["prefix_hit"]),
        ("upper_left_mask", KINDS["verify"]),
        ("gqa", KINDS["decode"]),
    ],
)
def test_the_comparison_sees_a_planted_mistake(target, mistake, text):
    case = parse_case(text)
    wrong = NaiveAttentionDecoder(SIZES["tiny"])
    wrong.mistake = mistake
    with pytest.raises(AssertionError):
        torch.testing.assert_close(
            run(target.prepare(case, seed=0)),
            run(wrong.prepare(case, seed=0)),
            rtol=1e-4,
            atol=1e-5,
        )


# --- pipeline stages --------------------------------------------------------------------


def test_stage_layers_split_contiguously():
    assert [list(stage_layers(4, s, 2)) for s in range(2)] == [[0, 1], [2, 3]]
    assert [list(stage_layers(4, s, 3)) for s in range(3)] == [[0, 1], [2], [3]]
    assert [list(stage_layers(5, s, 5)) for s in range(5)] == [[0], [1], [2], [3], [4]]
    with pytest.raises(TargetError, match="cannot be split"):
        stage_layers(2, 0, 3)
    with pytest.raises(TargetError, match="stage 3 is not in"):
        stage_layers(4, 3, 3)


def run_stages(case: BenchCase, num_stages: int) -> torch.Tensor:
    sent: dict[str, torch.Tensor] = {}
    for stage in range(num_stages):
        part = tiny(stage=stage, num_stages=num_stages)
        prepared = part.prepare(case, seed=0)
        if stage == 0:
            assert prepared.received == {}
        else:
            assert set(prepared.received) == {"hidden_states", "residual"}
            for name, buffer in prepared.received.items():
                buffer.copy_(sent[name])
        with torch.inference_mode():
            outputs = prepared.forward()
        if stage < num_stages - 1:
            assert set(outputs) == {"hidden_states", "residual"}
        sent = {name: t.clone() for name, t in outputs.items()}
    assert set(sent) == {"hidden_states"}
    return sent["hidden_states"]


@pytest.mark.parametrize("num_stages", [2, 3])
@pytest.mark.parametrize("text", [KINDS["mixed"], KINDS["decode"]], ids=["mixed", "decode"])
def test_stage_split_is_bitwise_the_unsplit_model(target, text, num_stages):
    case = parse_case(text)
    whole = run(target.prepare(case, seed=0))
    assert torch.equal(run_stages(case, num_stages), whole)


def test_stages_hold_only_their_layers():
    parts = [tiny(stage=s, num_stages=3) for s in range(3)]
    assert [len(p.layers) for p in parts] == [2, 1, 1]
    assert parts[0].embedding is not None
    assert parts[1].embedding is None and parts[2].embedding is None
    assert parts[1].name == "decoder-tiny[stage 1/3]"


def test_decoder_sizes_and_options():
    assert len(decoder("tiny", num_layers=2).layers) == 2
    with pytest.raises(TargetError, match="Unknown decoder size 'huge'"):
        decoder("huge")
    assert tiny(dtype="bfloat16").layers[0].qkv.dtype == torch.bfloat16


def test_the_check_process_says_ok_or_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `fwdasv init` shows the last line of `python -m fwdasv.targets.check`.
    from fwdasv.targets import check

    target = "fwdasv.targets.decoder:tiny"
    assert check.main(["--target", target, "--case", "d=1*1@64", "--device", "cpu"]) == 0
    said = capsys.readouterr()
    assert said.out.startswith(f"ok: {target} imports, builds on cpu")
    # A case the target cannot prepare is the input's mistake (a ValueError): its own words.
    assert check.main(["--target", target, "--case", "long=1*1@99999", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fwdasv: {target} cannot prepare case long"), err
    assert err.count("\n") == 1, err
    # A factory that fails: the target, the error's type and first line, where it was raised.
    (tmp_path / "broken_factory.py").write_text(
        "def build(device, dtype):\n    raise RuntimeError('no kernel\\nfor this device')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check.main(["--target", "broken_factory:build", "--case", "d=1*1@64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "fwdasv: Target 'broken_factory:build' failed to build: RuntimeError: no kernel (at "
    ), err
    assert err.endswith("broken_factory.py:2)\n") and err.count("\n") == 1, err
