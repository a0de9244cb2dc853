"""`fwdasv.core.kernels`: safe file names for cases, and the kernels.json loader's errors."""

from __future__ import annotations

import pytest

from fwdasv.core.errors import UserError
from fwdasv.core.kernels import ProfileError, load_summary, safe_case_name


def test_safe_case_names():
    assert safe_case_name("decode_bs1_1k") == "decode_bs1_1k"
    assert safe_case_name("8192") == "8192"
    odd = [safe_case_name(name) for name in ("a/b", "a_b", "a b", "..", ".hidden", "x" * 300)]
    assert odd[1] == "a_b" and odd[0] != odd[1] and odd[0].startswith("a_b-")
    for stem in odd:
        assert stem and not stem.startswith(".") and len(stem) <= 109
        assert all(c.isalnum() or c in "._-" for c in stem)
    assert len(set(odd)) == len(odd)


# --- the loader's errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"replays": 3}', "missing key 'kernels'"),
        (
            '{"replays": 3, "span_us": 1, "busy_us": 1, "pre_forward_us": 0, "activities": 1, '
            '"kernels": [{"name": "k", "us": 1.0, "pct": 100, "calls": 1.5}]}',
            "kernels[0]: 'calls' must be int, got 1.5",
        ),
        (
            '{"replays": 3, "span_us": 1, "busy_us": 1, "pre_forward_us": 0, "activities": 1, '
            '"kernels": [], "device": "tpu"}',
            "'device' must be 'cuda' or 'cpu'",
        ),
    ],
)
def test_loader_names_the_file_when_it_is_missing_or_malformed(tmp_path, text, message):
    path = tmp_path / "case.rank0.kernels.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_summary(path)
    assert isinstance(caught.value, UserError)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


def test_the_attribution_keys_round_trip_and_vllms_keys_come_first():
    import json

    from fwdasv.core.kernels import KernelRow, KernelSummary, SourceFrame, Unmatched

    frame = SourceFrame("vllm/model_executor/models/qwen3.py", 123, "Qwen3Attention.forward")
    summary = KernelSummary(
        replays=3,
        span_us=10.0,
        busy_us=9.0,
        pre_forward_us=1.0,
        activities=3,
        kernels=(
            KernelRow("cast", 5.0, 55.6, 2, "void cast<int>(int)", (frame,), op="aten::_to_copy"),
            KernelRow("memcpy32_post", 4.0, 44.4, 1, unmatched=1),
        ),
        attribution="partly by name: ...",
        attribution_s=1.25,
        unmatched=Unmatched(graph=(("memcpy32_post", 1),), eager=(("Memset (Device)", 2),)),
    )
    data = summary.to_json()
    assert list(data)[:7] == [
        "trace", "replays", "span_us", "busy_us", "pre_forward_us", "activities", "kernels",
    ]  # fmt: skip
    again = KernelSummary.from_json(json.loads(json.dumps(data)), "x")
    assert again.unmatched == summary.unmatched and again.attribution_s == 1.25
    assert [(r.op, r.unmatched) for r in again.kernels] == [("aten::_to_copy", 0), ("", 1)]
    assert "op" not in data["kernels"][1] and "unmatched" not in data["kernels"][0]
    with pytest.raises(ProfileError, match="'graph' must be a list"):
        KernelSummary.from_json({**data, "unmatched": {"graph": 3}}, "x")
