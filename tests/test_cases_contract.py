"""Contract: fwdasv's case grammar and shapes files mean what vLLM 0.33's mean.

Generated case strings, mostly near-valid pieces of the `[N*]Q[@K][c][:D]`
grammar plus mutations and garbage, go through both parsers; they must give
the same requests or both reject, except where fwdasv is documented stricter
(no requests, an empty name): there fwdasv must reject.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwdasv.core.cases import CaseError, load_cases, parse_case

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_shapes():
    # In-process, vLLM cannot infer a platform without this (reference section 6).
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.benchmarks.forward import shapes

    return shapes


def _fields(requests) -> list[tuple[int, int, int, bool]]:
    return [(r.query_len, r.kv_len, r.num_draft_tokens, r.chunked) for r in requests]


# --- the string strategy ----------------------------------------------------------------

small = st.integers(0, 12)
digits = st.one_of(
    small.map(str),
    small.map(lambda n: f"0{n}"),  # leading zeros
    st.sampled_from(["", "00", "٣", "１", "99", "-1", "1.0", " 2"]),
)


@st.composite
def items(draw) -> str:
    """One request item, usually well-formed and often valid."""
    q = draw(st.integers(0, 6)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 6))
    shape = draw(st.sampled_from(["decode", "verify", "prefill", "prefix", "chunk", "any"]))
    if shape == "decode":
        q, k, d = 1, 1 + draw(st.integers(0, 9)), 0
    elif shape == "verify":
        d = draw(st.integers(0, 4))
        q, k = 1 + d, 1 + d + draw(st.integers(0, 9))
    elif shape == "prefill":
        k, d = q, 0
    elif shape in ("prefix", "chunk"):
        k, d = q + draw(st.integers(0, 9)), 0
    else:
        k, d = draw(small), draw(st.integers(0, 4))
    text = ""
    if draw(st.booleans()):
        text += f"{draw(st.integers(0, 3))}*"
    text += str(q)
    if k != q or draw(st.integers(0, 3)) == 0:
        text += f"@{k}"
    if shape == "chunk" or draw(st.integers(0, 9)) == 0:
        text += "c"
    if d or draw(st.integers(0, 5)) == 0:
        text += f":{d}"
    if draw(st.integers(0, 6)) == 0:
        text = draw(st.sampled_from([" ", "\t", "  "])) + text + draw(st.sampled_from([" ", ""]))
    return text


@st.composite
def raw_items(draw) -> str:
    """An item assembled from grammar pieces in any order, digits of any form."""
    pieces = draw(
        st.lists(
            st.one_of(digits, st.sampled_from(["*", "@", "c", ":", "C", "x", " "])),
            min_size=0,
            max_size=6,
        )
    )
    return "".join(pieces)


ALPHABET = "0123456789*@c:,= \t\nxC-+.٣"


@st.composite
def mutated(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            text = text[:at] + char + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + char + text[at + 1 :]
    return text


@st.composite
def case_strings(draw) -> str:
    body = draw(st.sampled_from([",", ", ", " ,"])).join(
        draw(
            st.lists(
                st.integers(0, 9).flatmap(lambda roll: raw_items() if roll == 0 else items()),
                min_size=1,
                max_size=3,
            )
        )
    )
    name = draw(st.sampled_from(["x", "decode", "a b", "8192", "", " ", "n=", "x,y", None]))
    text = body if name is None else f"{name}={body}"
    roll = draw(st.integers(0, 9))
    if roll < 2:
        text = draw(mutated(text))
    elif roll == 2:
        text = draw(st.text(ALPHABET, max_size=12))
    # Keep counts small: "99999999*1" is valid, but a list of 10^8 requests.
    return re.sub(r"(\d{3})\d+\*", r"\1*", text)


# --- the contract -------------------------------------------------------------------

TALLY: Counter[str] = Counter()


def _stricter(case) -> bool:
    """A vLLM case fwdasv rejects on purpose: empty, unnamed, or beyond fwdasv's size limits."""
    from fwdasv.core.cases import MAX_KV_LEN, MAX_REQUESTS, MAX_TOKENS

    return (
        not case.requests
        or not case.name.strip()
        or len(case.requests) > MAX_REQUESTS
        or sum(r.query_len for r in case.requests) > MAX_TOKENS
        or any(r.query_len > MAX_TOKENS or r.kv_len > MAX_KV_LEN for r in case.requests)
    )


def check_same_meaning(shapes, text: str) -> None:
    try:
        expected = shapes.parse_case(text)
    except ValueError:
        expected = None
    try:
        actual = parse_case(text)
    except CaseError:
        actual = None
    if expected is None:
        assert actual is None, f"fwdasv accepts {text!r}, vLLM rejects it"
        TALLY["both reject"] += 1
    elif _stricter(expected):
        assert actual is None, f"fwdasv accepts {text!r}, which vLLM reads as {expected}"
        TALLY["stricter"] += 1
    else:
        assert actual is not None, f"fwdasv rejects {text!r}, vLLM reads {expected}"
        assert actual.name == expected.name
        assert _fields(actual.requests) == _fields(expected.requests), text
        assert actual.num_tokens == expected.num_tokens
        for ours, theirs in zip(actual.requests, expected.requests, strict=True):
            assert ours.prefix_len == theirs.prefix_len
            assert ours.is_decode == theirs.is_decode
            assert ours.prefix_hit == theirs.prefix_hit
        TALLY["both accept"] += 1


def test_parse_case_agrees_with_vllm(vllm_shapes):
    TALLY.clear()

    @settings(
        max_examples=1500,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case_strings())
    def run(text: str) -> None:
        check_same_meaning(vllm_shapes, text)

    run()
    assert sum(TALLY.values()) >= 1000, TALLY
    # About 30% / 60% / 10% of 1500: far from these floors.
    assert TALLY["both accept"] >= 250, TALLY
    assert TALLY["both reject"] >= 250, TALLY
    assert TALLY["stricter"] >= 20, TALLY


@pytest.mark.parametrize(
    "text",
    [
        "decode=32*1@8192",
        "verify=16*4@4096:3",
        "prefill=8192",
        "hit=2048@10240",
        "chunk=8192@40960c",
        "mix=8192,32*1@8192",
        "8192",
        "x=4@10:3c",
        "x=1@64c",
        "x=4@4:3",
        "x=8@4",
        "x=0*4",
        "=1",
        "x=١٢",
    ],
)
def test_documented_examples_agree_with_vllm(vllm_shapes, text):
    check_same_meaning(vllm_shapes, text)


SHAPES = {
    "cases": [
        {"name": "decode_bs32_8k", "requests": [{"query_len": 1, "kv_len": 8192, "count": 32}]},
        {
            "name": "mix",
            "requests": [
                {"query_len": 8192, "kv_len": 40960, "chunked": True},
                {"query_len": 4, "kv_len": 4096, "num_draft_tokens": 3, "count": 16},
                {"query_len": 2048, "kv_len": 2048, "count": 0},
                {"query_len": 2048, "kv_len": 10240, "chunked": False, "num_draft_tokens": 0},
            ],
        },
        {"name": "prefill", "requests": [{"query_len": 512, "kv_len": 512, "count": 1}]},
    ]
}


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml", ".txt"])
def test_load_cases_agrees_with_vllm_on_valid_files(vllm_shapes, tmp_path, suffix):
    import yaml

    path = tmp_path / f"shapes{suffix}"
    path.write_text(yaml.safe_dump(SHAPES) if suffix in (".yaml", ".yml") else json.dumps(SHAPES))
    ours = load_cases(path)
    theirs = vllm_shapes.load_cases(str(path))
    assert [c.name for c in ours] == [c.name for c in theirs]
    assert [_fields(c.requests) for c in ours] == [_fields(c.requests) for c in theirs]
    assert len(ours[1].requests) == 1 + 16 + 1


@st.composite
def shapes_requests(draw) -> dict:
    """A valid request row, with defaults sometimes spelled out, sometimes left out."""
    kind = draw(st.sampled_from(["decode", "verify", "prefill", "hit", "chunk"]))
    prefix = draw(st.integers(1, 300))
    if kind == "decode":
        row = {"query_len": 1, "kv_len": 1 + prefix}
    elif kind == "verify":
        drafts = draw(st.integers(1, 5))
        row = {"query_len": 1 + drafts, "kv_len": 1 + drafts + prefix}
        row["num_draft_tokens"] = drafts
    elif kind == "prefill":
        query = draw(st.integers(1, 300))
        row = {"query_len": query, "kv_len": query}
    else:
        query = draw(st.integers(2, 300))
        row = {"query_len": query, "kv_len": query + prefix}
        if kind == "chunk":
            row["chunked"] = True
    if "num_draft_tokens" not in row and draw(st.booleans()):
        row["num_draft_tokens"] = 0
    if "chunked" not in row and draw(st.booleans()):
        row["chunked"] = False
    if draw(st.booleans()):
        row["count"] = draw(st.integers(0, 4))
    return row


shapes_files = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.text(st.characters(blacklist_characters="="), min_size=1).filter(str.strip),
            "requests": st.lists(shapes_requests(), min_size=1, max_size=4).filter(
                lambda rows: any(row.get("count", 1) for row in rows)
            ),
        }
    ),
    min_size=1,
    max_size=3,
).map(lambda cases: {"cases": cases})


def test_load_cases_agrees_with_vllm_on_generated_files(vllm_shapes, tmp_path_factory):
    import yaml

    @settings(max_examples=60, deadline=None, database=None)
    @given(shapes_files, st.sampled_from([".json", ".yaml"]))
    def run(data: dict, suffix: str) -> None:
        path = tmp_path_factory.mktemp("shapes") / f"s{suffix}"
        path.write_text(yaml.safe_dump(data) if suffix == ".yaml" else json.dumps(data))
        ours = load_cases(path)
        theirs = vllm_shapes.load_cases(str(path))
        assert [c.name for c in ours] == [c.name for c in theirs]
        assert [_fields(c.requests) for c in ours] == [_fields(c.requests) for c in theirs]
        TALLY["files"] += 1

    TALLY["files"] = 0
    run()
    assert TALLY["files"] >= 60
