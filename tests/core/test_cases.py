"""`fwdasv.core.cases`: the case grammar and shapes files, against vLLM 0.33's documented
rules, and, with vLLM installed, against its own parsers (the contract).

The contract: generated case strings, mostly near-valid pieces of the
`[N*]Q[@K][c][:D]` grammar plus mutations and garbage, go through both parsers; they
must give the same requests or both reject, except where fwdasv is documented stricter
(no requests, an empty name): there fwdasv must reject.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwdasv.core.cases import (
    MAX_KV_LEN,
    MAX_REQUESTS,
    MAX_TOKENS,
    SUITES,
    BenchCase,
    BenchRequest,
    CaseError,
    cases_to_shapes,
    load_cases,
    parse_case,
    suite_cases,
    unique_cases,
)
from fwdasv.core.errors import UserError


def R(q: int, k: int | None = None, d: int = 0, c: bool = False) -> BenchRequest:
    return BenchRequest(q, q if k is None else k, d, chunked=c)


# --- grammar semantics ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "requests"),
    [
        ("decode=32*1@8192", "decode", [R(1, 8192)] * 32),
        ("verify=16*4@4096:3", "verify", [R(4, 4096, 3)] * 16),
        ("prefill=8192", "prefill", [R(8192)]),
        ("hit=2048@10240", "hit", [R(2048, 10240)]),
        ("chunk=8192@40960c", "chunk", [R(8192, 40960, c=True)]),
        ("mix=8192,32*1@8192", "mix", [R(8192)] + [R(1, 8192)] * 32),
        # Without "=", the whole text is both the name and the body.
        ("8192", "8192", [R(8192)]),
        ("4*1@64", "4*1@64", [R(1, 64)] * 4),
        # Items are stripped; only the first "=" separates the name.
        ("x= 2 , 1*1@4 ", "x", [R(2), R(1, 4)]),
        ("a b=1@3", "a b", [R(1, 3)]),
        # Chunked prefill with drafts 0 spelled out, leading zeros, count 1.
        ("z=1*0003@0010c:0", "z", [R(3, 10, c=True)]),
    ],
)
def test_parse_case_gives_the_documented_requests(text, name, requests):
    case = parse_case(text)
    assert case.name == name
    assert case.requests == tuple(requests)


def test_parse_case_mix_counts_requests_and_tokens():
    case = parse_case("mix=8192,32*1@8192")
    assert len(case.requests) == 33
    assert case.num_tokens == 8224
    assert case.max_kv_len == 8192


def test_parse_case_verify_tokens():
    assert parse_case("verify=16*4@4096:3").num_tokens == 64


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Q < 1, K < Q, (D < 0 cannot be written: digits only)
        ("x=0", "Invalid request: 0 query tokens (Q is at least 1)"),
        ("x=8@4", "Invalid request 8@4: the KV length K counts the query, so it is at least Q"),
        # D > 0 on a row that is not a decode
        ("x=4@4:3", "Verify needs query_len == 1 + num_draft_tokens and a prefix"),
        ("x=5@40:3", "Verify needs query_len == 1 + num_draft_tokens and a prefix"),
        ("x=1@1:0,4:3", "Verify needs query_len == 1 + num_draft_tokens and a prefix"),
        # c on a decode, on a verify, or without a prefix
        ("x=1@64c", "A chunk needs a prefill with a prefix"),
        ("x=4@40c:3", "A chunk needs a prefill with a prefix"),
        ("x=16c", "A chunk needs a prefill with a prefix"),
        # no regex match
        ("x=4@10:3c", "Invalid request '4@10:3c'"),
        ("x=", "Invalid request ''"),
        ("x=1,", "Invalid request ''"),
        ("x=1,,2", "Invalid request ''"),
        ("x=-1", "Invalid request '-1'"),
        ("x=1.5", "Invalid request '1.5'"),
        ("x=*4", "Invalid request '*4'"),
        ("x=2*", "Invalid request '2*'"),
        ("x=4@", "Invalid request '4@'"),
        ("x=4:", "Invalid request '4:'"),
        ("x=4C", "Invalid request '4C'"),
        ("x=1@8=2", "Invalid request '1@8=2'"),
        ("x=2 *4", "Invalid request '2 *4'"),
        ("decode", "Invalid request 'decode'"),
        ("", "Invalid request ''"),
    ],
)
def test_parse_case_rejects_like_vllm(text, message):
    with pytest.raises(CaseError) as info:
        parse_case(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, UserError)


def test_invalid_request_error_names_the_case_and_shows_the_grammar():
    with pytest.raises(CaseError, match=r"in case 'x=4@10:3c'.*\[N\*\]Q\[@K\]\[c\]\[:D\]"):
        parse_case("x=4@10:3c")


@pytest.mark.parametrize("text", ["x=0*4", "x=0*1@8,0*16", "0*2"])
def test_zero_request_case_is_rejected(text):
    # vLLM silently returns a case with no requests.
    with pytest.raises(CaseError, match="has no requests"):
        parse_case(text)


def test_a_zero_count_item_next_to_real_requests_is_fine():
    assert parse_case("x=0*4,2").requests == (R(2),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The MemoryError: refused before any request list is built.
        ("big=99999999999*1@64", "has 99999999999 requests; at most 65536"),
        ("d=65537*1@64", "has 65537 requests; at most 65536"),
        ("d=40000*1@64,40000*1@64", "has 80000 requests"),
        ("p=2000000", "Request too large"),
        ("p=2*600000", "has 1200000 query tokens; at most 1048576"),
        ("k=1@16777217", "Request too large"),
        # More digits than Python converts to an int.
        ("x=1@" + "9" * 5000, "the number 99999999999999999999... is too large"),
    ],
)
def test_parse_case_bounds_requests_and_tokens_while_parsing(text, message):
    with pytest.raises(CaseError) as info:
        parse_case(text)
    assert message in str(info.value)


def test_the_largest_allowed_batches_parse():
    assert len(parse_case(f"d={MAX_REQUESTS}*1@64").requests) == MAX_REQUESTS
    assert parse_case(f"p={MAX_TOKENS}").num_tokens == MAX_TOKENS
    assert parse_case(f"k=1@{MAX_KV_LEN}").max_kv_len == MAX_KV_LEN


def test_shapes_files_are_bounded_before_expanding(tmp_path):
    path = tmp_path / "s.json"
    rows = [{"query_len": 1, "kv_len": 64, "count": 10**12}]
    path.write_text(json.dumps({"cases": [{"name": "big", "requests": rows}]}))
    with pytest.raises(CaseError, match="has 1000000000000 requests; at most 65536"):
        load_cases(path)


@pytest.mark.parametrize("text", ["=32*1@8192", " =4", "\t=4"])
def test_empty_name_is_rejected(text):
    with pytest.raises(CaseError, match="empty name"):
        parse_case(text)


# --- canonical strings ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("decode=32*1@8192", "decode=32*1@8192"),
        ("p=1*0008@8", "p=8"),
        ("8192", "8192=8192"),
        ("v = 2*4@40:3, 1@9 ,1@9", "v =2*4@40:3,2*1@9"),
        ("c=16@48c:0", "c=16@48c"),
        ("m=1@9,2,1@9", "m=1@9,2,1@9"),
    ],
)
def test_to_string_is_canonical(text, canonical):
    case = parse_case(text)
    assert case.to_string() == canonical
    assert str(case) == canonical
    assert parse_case(canonical) == case


@st.composite
def requests(draw) -> BenchRequest:
    kind = draw(st.sampled_from(["decode", "verify", "prefill", "hit", "chunk"]))
    prefix = draw(st.integers(1, 5000))
    if kind == "decode":
        return R(1, 1 + prefix)
    if kind == "verify":
        d = draw(st.integers(1, 7))
        return R(1 + d, 1 + d + prefix, d)
    if kind == "prefill":
        return R(draw(st.integers(1, 5000)))
    # A single query token after a prefix is a decode, not a hit or a chunk.
    q = draw(st.integers(2, 5000))
    return R(q, q + prefix, c=kind == "chunk")


names = st.text(
    st.characters(blacklist_characters="=", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: s.strip())


@st.composite
def cases(draw) -> BenchCase:
    runs = draw(st.lists(st.tuples(requests(), st.integers(1, 4)), min_size=1, max_size=5))
    return BenchCase(draw(names), tuple(r for r, n in runs for _ in range(n)))


@settings(max_examples=200, deadline=None)
@given(cases())
def test_parse_of_to_string_round_trips(case):
    text = case.to_string()
    assert parse_case(text) == case
    assert parse_case(text).to_string() == text


def test_name_with_equals_sign_is_rejected_by_shapes_files(tmp_path):
    # "a=b" could never be read back from its NAME=REQS string.
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"cases": [{"name": "a=b", "requests": [{"query_len": 1, "kv_len": 1}]}]})
    )
    with pytest.raises(CaseError, match=rf"'a=b'.*{path.name}.*'='"):
        load_cases(path)


# --- groups and kinds ---------------------------------------------------------------


def test_groups_are_runs_of_equal_consecutive_requests_in_order():
    case = parse_case("m=1@9,1@9,2,3*1@9,1@9:0")
    assert case.groups() == [(R(1, 9), 2), (R(2), 1), (R(1, 9), 4)]
    assert sum(n for _, n in case.groups()) == len(case.requests)


@pytest.mark.parametrize(
    ("item", "kind", "prefix_len", "is_decode", "prefix_hit"),
    [
        ("1@8192", "decode", 8191, True, False),
        ("4@4096:3", "verify", 4092, True, False),
        ("8192", "prefill", 0, False, False),
        ("1", "prefill", 0, False, False),
        ("2048@10240", "prefix_hit", 8192, False, True),
        ("8192@40960c", "chunk", 32768, False, False),
        # Q == 1 + D but D == 0 and Q > 1 is no decode: a hit.
        ("2@10", "prefix_hit", 8, False, True),
    ],
)
def test_request_kinds(item, kind, prefix_len, is_decode, prefix_hit):
    (request,) = parse_case(f"x={item}").requests
    assert request.kind == kind
    assert request.prefix_len == prefix_len
    assert request.is_decode is is_decode
    assert request.prefix_hit is prefix_hit


def test_suites_parse_and_kinds_suite_covers_every_kind():
    for name in SUITES:
        assert suite_cases(name), name
    kinds = {r.kind for case in suite_cases("kinds") for r in case.requests}
    assert kinds == {"decode", "verify", "prefill", "prefix_hit", "chunk"}
    assert any(len({r.kind for r in c.requests}) > 1 for c in suite_cases("kinds"))


def test_unknown_suite_lists_the_known_ones():
    with pytest.raises(CaseError, match=r"Unknown suite 'nope'.*kinds"):
        suite_cases("nope")


# --- shapes files -------------------------------------------------------------------

SAMPLE_YAML = """\
cases:
  - name: decode_bs32_8k
    requests: [{query_len: 1, kv_len: 8192, count: 32}]
  - name: mix
    requests:
      - {query_len: 8192, kv_len: 40960, chunked: true}
      - {query_len: 4, kv_len: 4096, num_draft_tokens: 3, count: 16}
"""

SAMPLE_CASES = [
    BenchCase("decode_bs32_8k", (R(1, 8192),) * 32),
    BenchCase("mix", (R(8192, 40960, c=True), *(R(4, 4096, 3),) * 16)),
]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_yaml_shapes_file(tmp_path, suffix):
    path = tmp_path / f"shapes{suffix}"
    path.write_text(SAMPLE_YAML)
    assert load_cases(path) == SAMPLE_CASES
    assert load_cases(str(path)) == SAMPLE_CASES


@pytest.mark.parametrize("suffix", [".json", ".txt", ""])
def test_json_shapes_file_whatever_the_suffix(tmp_path, suffix):
    path = tmp_path / f"shapes{suffix}"
    path.write_text(json.dumps(yaml.safe_load(SAMPLE_YAML)))
    assert load_cases(path) == SAMPLE_CASES


def test_shapes_defaults(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"cases": [{"name": "p", "requests": [{"query_len": 4, "kv_len": 4}]}]})
    )
    (case,) = load_cases(path)
    assert case.requests == (BenchRequest(4, 4, num_draft_tokens=0, chunked=False),)


def test_shapes_count_expands_and_zero_count_rows_are_dropped(tmp_path):
    path = tmp_path / "s.json"
    rows = [
        {"query_len": 1, "kv_len": 9, "count": 3},
        {"query_len": 2, "kv_len": 2, "count": 0},
        {"query_len": 5, "kv_len": 5, "count": 1},
    ]
    path.write_text(json.dumps({"cases": [{"name": "p", "requests": rows}]}))
    (case,) = load_cases(path)
    assert case.requests == (R(1, 9), R(1, 9), R(1, 9), R(5))


def _write(tmp_path: Path, data, suffix: str = ".json") -> Path:
    path = tmp_path / f"bad{suffix}"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _case(requests, name="c0"):
    return {
        "cases": [
            {"name": "ok", "requests": [{"query_len": 1, "kv_len": 1}]},
            {"name": name, "requests": requests},
        ]
    }


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        # schema
        ({}, r"missing top-level 'cases' list"),
        ([], r"missing top-level 'cases' list"),
        ({"cases": {"name": "x"}}, r"missing top-level 'cases' list"),
        ({"cases": []}, r"empty 'cases' list"),
        ({"cases": ["x=1"]}, r"cases\[0\]: a case must be a mapping"),
        ({"cases": [{"requests": []}]}, r"cases\[0\]: missing 'name'"),
        ({"cases": [{"name": 7, "requests": []}]}, r"cases\[0\]: 'name' must be a string, got 7"),
        ({"cases": [{"name": "x"}]}, r"cases\[0\] \(x\): missing 'requests' list"),
        (
            {"cases": [{"name": "x", "requests": "1@8"}]},
            r"cases\[0\] \(x\): missing 'requests' list",
        ),
        # count: none left, negative, wrong type
        (_case([{"query_len": 1, "kv_len": 1, "count": 0}]), r"'c0' in shapes file .* no requests"),
        (_case([]), r"'c0' in shapes file .* no requests"),
        (
            _case([{"query_len": 1, "kv_len": 1, "count": -2}]),
            r"cases\[1\]\.requests\[0\]: count must be >= 0",
        ),
        (
            _case([{"query_len": 1, "kv_len": 1, "count": 1.5}]),
            r"cases\[1\]\.requests\[0\]: count must be an integer",
        ),
        (_case([{"query_len": 1, "kv_len": 1, "count": True}]), r"count must be an integer"),
        # empty name
        (_case([{"query_len": 1, "kv_len": 1}], name=""), r"empty name"),
        (_case([{"query_len": 1, "kv_len": 1}], name="  "), r"empty name"),
        # unknown and missing keys
        (
            _case([{"query_len": 1, "kv_len": 1, "kv": 3}]),
            r"cases\[1\]\.requests\[0\]: unknown keys \['kv'\]",
        ),
        (_case([{"query_len": 1}]), r"cases\[1\]\.requests\[0\]: missing 'kv_len'"),
        (_case([{"kv_len": 1}]), r"cases\[1\]\.requests\[0\]: missing 'query_len'"),
        (_case(["1@8"]), r"cases\[1\]\.requests\[0\]: a request must be a mapping"),
        # wrong types
        (_case([{"query_len": "1", "kv_len": 1}]), r"query_len must be an integer, got '1'"),
        (_case([{"query_len": 1, "kv_len": 2.0}]), r"kv_len must be an integer, got 2.0"),
        (_case([{"query_len": 1, "kv_len": True}]), r"kv_len must be an integer, got True"),
        (
            _case([{"query_len": 2, "kv_len": 9, "num_draft_tokens": None}]),
            r"num_draft_tokens must be an integer",
        ),
        (
            _case([{"query_len": 2, "kv_len": 9, "chunked": "yes"}]),
            r"chunked must be true or false, got 'yes'",
        ),
        (_case([{"query_len": 2, "kv_len": 9, "chunked": 1}]), r"chunked must be true or false"),
        # a request vLLM's BenchRequest refuses
        (_case([{"query_len": 9, "kv_len": 2}]), r"cases\[1\]\.requests\[0\]: Invalid request"),
        (
            _case([{"query_len": 1, "kv_len": 9, "chunked": True}]),
            r"cases\[1\]\.requests\[0\]: A chunk needs",
        ),
        # not JSON at all
        ("{cases: [", r"is not valid JSON"),
    ],
)
def test_bad_shapes_file_is_one_clear_error_naming_file_and_entry(tmp_path, data, pattern):
    path = _write(tmp_path, data)
    with pytest.raises(CaseError) as info:
        load_cases(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    assert re.search(pattern, message), message


def test_bad_yaml_shapes_file_is_one_line_with_the_position(tmp_path):
    path = _write(tmp_path, "cases: [\n  - name: x\n    requests: [", suffix=".yaml")
    with pytest.raises(CaseError) as info:
        load_cases(path)
    assert str(info.value) == (
        f"Shapes file {path} is not valid YAML: "
        "expected the node content, but found '-' at line 2, column 3"
    )


def test_yaml_wrong_type_names_the_entry(tmp_path):
    path = _write(
        tmp_path, "cases:\n  - name: x\n    requests: [{query_len: one, kv_len: 4}]\n", ".yml"
    )
    with pytest.raises(
        CaseError, match=rf"{path}, cases\[0\]\.requests\[0\]: query_len must be an integer"
    ):
        load_cases(path)


def test_missing_shapes_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(CaseError, match=rf"Shapes file {path} does not exist"):
        load_cases(path)


def test_shapes_path_that_is_a_directory(tmp_path):
    with pytest.raises(CaseError, match=rf"Shapes file {tmp_path} is a directory, not a regular"):
        load_cases(tmp_path)


def test_a_shapes_fifo_is_refused_at_once_and_binary_is_named(tmp_path):
    """A FIFO with no writer held the bench until it was killed (path.read_text waits)."""
    fifo = tmp_path / "shapes.json"
    os.mkfifo(fifo)
    with pytest.raises(CaseError, match=rf"^Shapes file {fifo} is a FIFO, not a regular file"):
        load_cases(fifo)
    binary = tmp_path / "shapes.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CaseError, match=rf"^Shapes file {binary} is not UTF-8 text"):
        load_cases(binary)


@settings(max_examples=100, deadline=None)
@given(st.lists(cases(), min_size=1, max_size=4))
def test_cases_to_shapes_round_trips_through_json_and_yaml(tmp_path_factory, case_list):
    directory = tmp_path_factory.mktemp("shapes")
    shapes = cases_to_shapes(case_list)
    (directory / "s.json").write_text(json.dumps(shapes))
    (directory / "s.yaml").write_text(yaml.safe_dump(shapes))
    assert load_cases(directory / "s.json") == case_list
    assert load_cases(directory / "s.yaml") == case_list


def test_cases_to_shapes_writes_counts_only_above_one():
    (entry,) = cases_to_shapes([parse_case("m=2*1@9,4")])["cases"]
    assert entry == {
        "name": "m",
        "requests": [
            {"query_len": 1, "kv_len": 9, "num_draft_tokens": 0, "chunked": False, "count": 2},
            {"query_len": 4, "kv_len": 4, "num_draft_tokens": 0, "chunked": False},
        ],
    }


# --- unique_cases -------------------------------------------------------------------


def test_unique_cases_drops_exact_duplicates_and_keeps_order():
    a, b = parse_case("a=1@8"), parse_case("b=4")
    assert unique_cases([a, b, parse_case("a=1@8"), b]) == [a, b]


def test_unique_cases_refuses_one_name_for_two_batches():
    with pytest.raises(CaseError, match=r"Two cases are named 'a' \(1@8 and 2\*1@8\)"):
        unique_cases([parse_case("a=1@8"), parse_case("b=2"), parse_case("a=2*1@8")])


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


@pytest.mark.vllm
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


@pytest.mark.vllm
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


@pytest.mark.vllm
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


@pytest.mark.vllm
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
