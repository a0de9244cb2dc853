"""Exact batch shapes: requests, cases, the case grammar and shapes files.

The grammar and the shapes-file schema are vLLM 0.33's (`vllm bench forward
--case/--shapes`), so a case string means the same batch to fwdasv's engine and
to vLLM's bench. fwdasv is stricter where vLLM is silently wrong: a case with no
requests (`x=0*4`), an empty name, a name with `=` (a shapes file's only; its
`NAME=REQS` string would not read back), and shapes-file fields of the wrong
type are errors here, and so are batches beyond `MAX_REQUESTS` requests,
`MAX_TOKENS` tokens or `MAX_KV_LEN` KV length: they are refused while parsing,
before a request list is built (`big=99999999999*1@64` would not fit in memory).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fwdasv.core.errors import UserError
from fwdasv.core.files import NotRegularFileError, read_regular


class CaseError(UserError, ValueError):
    """A case string or shapes file the user wrote is not a valid batch."""


# Far above any batch a serving engine schedules (vLLM's max_num_seqs is 256-1024,
# its max_num_batched_tokens 8k-64k; the longest contexts are ~10M tokens), far
# below what would exhaust memory while the request list is built.
MAX_REQUESTS = 1 << 16
MAX_TOKENS = 1 << 20
MAX_KV_LEN = 1 << 24


@dataclass(frozen=True)
class BenchRequest:
    """One request of a batch: the step computes `query_len` tokens.

    `kv_len` is the KV length after the step, the query included, so the
    prefix already in the cache is `kv_len - query_len`.
    """

    query_len: int
    kv_len: int
    # Speculative verify: query_len == 1 + num_draft_tokens.
    num_draft_tokens: int = 0
    # The prefix was computed by this request's earlier chunks; otherwise a
    # prefill's prefix is a prefix-cache hit.
    chunked: bool = False

    def __post_init__(self) -> None:
        if self.query_len < 1:
            raise CaseError(f"Invalid request: {self.query_len} query tokens (Q is at least 1)")
        if self.kv_len < self.query_len:
            raise CaseError(
                f"Invalid request {self.query_len}@{self.kv_len}: the KV length K counts the "
                f"query, so it is at least Q ({self.query_len}@{self.query_len} or more)"
            )
        if self.num_draft_tokens < 0:
            raise CaseError(f"Invalid request: {self.num_draft_tokens} draft tokens (D >= 0)")
        if self.query_len > MAX_TOKENS or self.kv_len > MAX_KV_LEN:
            raise CaseError(
                f"Request too large: {self} (at most {MAX_TOKENS} query tokens and a KV "
                f"length of {MAX_KV_LEN})"
            )
        if self.num_draft_tokens and not self.is_decode:
            raise CaseError(f"Verify needs query_len == 1 + num_draft_tokens and a prefix: {self}")
        if self.chunked and (self.is_decode or not self.prefix_len):
            raise CaseError(f"A chunk needs a prefill with a prefix: {self}")

    @property
    def prefix_len(self) -> int:
        return self.kv_len - self.query_len

    @property
    def is_decode(self) -> bool:
        """Decode or verify; otherwise a prefill."""
        return self.prefix_len > 0 and self.query_len == 1 + self.num_draft_tokens

    @property
    def prefix_hit(self) -> bool:
        return self.prefix_len > 0 and not self.is_decode and not self.chunked

    @property
    def kind(self) -> str:
        """decode, verify, prefill, prefix_hit or chunk."""
        if self.is_decode:
            return "verify" if self.num_draft_tokens else "decode"
        if self.chunked:
            return "chunk"
        return "prefix_hit" if self.prefix_len else "prefill"

    def to_string(self) -> str:
        """`Q[@K][c][:D]`, leaving out what takes its default."""
        text = str(self.query_len)
        if self.kv_len != self.query_len:
            text += f"@{self.kv_len}"
        if self.chunked:
            text += "c"
        if self.num_draft_tokens:
            text += f":{self.num_draft_tokens}"
        return text

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class BenchCase:
    name: str
    requests: tuple[BenchRequest, ...]

    def __post_init__(self) -> None:
        _check_size(repr(self.name), len(self.requests), self.num_tokens)

    @property
    def num_tokens(self) -> int:
        return sum(r.query_len for r in self.requests)

    @property
    def max_kv_len(self) -> int:
        return max(r.kv_len for r in self.requests)

    def groups(self) -> list[tuple[BenchRequest, int]]:
        """Runs of equal consecutive requests as (request, count), in order."""
        runs: list[tuple[BenchRequest, int]] = []
        for request in self.requests:
            if runs and runs[-1][0] == request:
                runs[-1] = (request, runs[-1][1] + 1)
            else:
                runs.append((request, 1))
        return runs

    def body(self) -> str:
        return ",".join(
            (f"{count}*" if count > 1 else "") + request.to_string()
            for request, count in self.groups()
        )

    def to_string(self) -> str:
        """The canonical `NAME=REQS` string; `parse_case` reads it back to this case."""
        return f"{self.name}={self.body()}"

    def __str__(self) -> str:
        return self.to_string()


# vLLM's pattern; `\d` is Unicode-aware there (the `regex` module) and here.
_REQUEST_RE = re.compile(r"^(?:(\d+)\*)?(\d+)(?:@(\d+))?(c)?(?::(\d+))?$")

GRAMMAR_HELP = (
    "NAME=REQS, REQS a comma list of [N*]Q[@K][c][:D]: N requests of Q query tokens "
    "with KV length K including the query (K omitted: Q), c for a chunked prefill, "
    "D draft tokens (verify). E.g. decode=32*1@8192, prefill=2048, "
    "verify=16*4@4096:3, mix=2048,32*1@4096"
)


def parse_case(text: str) -> BenchCase:
    """Parse `NAME=REQS` exactly as vLLM 0.33's `parse_case` does, but reject
    cases with no requests or no name.

    Without `=`, the whole text is both the name and the body (`8192` is a
    prefill of 8192 tokens named "8192").
    """
    name, sep, body = text.partition("=")
    if not sep:
        name, body = text, text
    groups: list[tuple[BenchRequest, int]] = []
    for item in body.split(","):
        match = _REQUEST_RE.match(item.strip())
        if match is None:
            raise CaseError(f"Invalid request {item!r} in case {text!r}; expected {GRAMMAR_HELP}")
        count, query, kv, drafts = (
            None if digits is None else _number(digits, text) for digits in match.group(1, 2, 3, 5)
        )
        assert query is not None, text  # the pattern's one required group
        try:
            request = BenchRequest(
                query, query if kv is None else kv, drafts or 0, chunked=bool(match.group(4))
            )
        except CaseError as error:
            raise CaseError(f"Case {text!r}: {error}") from None
        groups.append((request, 1 if count is None else count))
    # Sizes are checked before the request list is built.
    _check_size(repr(text), sum(n for _, n in groups), sum(r.query_len * n for r, n in groups))
    requests = [request for request, count in groups for _ in range(count)]
    return _checked_case(name, requests, source=repr(text))


def _number(digits: str, text: str) -> int:
    """A number of the grammar; one of absurd length is refused before `int` sees it
    (Python refuses to convert more than 4300 digits); the limits are checked after."""
    if len(digits.lstrip("0")) > 18:
        shown = digits if len(digits) <= 20 else digits[:20] + "..."
        raise CaseError(f"Case {text!r}: the number {shown} is too large")
    return int(digits)


def _check_size(source: str, requests: int, tokens: int) -> None:
    if requests > MAX_REQUESTS:
        raise CaseError(f"Case {source} has {requests} requests; at most {MAX_REQUESTS} per case")
    if tokens > MAX_TOKENS:
        raise CaseError(f"Case {source} has {tokens} query tokens; at most {MAX_TOKENS} per case")


def _checked_case(name: str, requests: Sequence[BenchRequest], source: str) -> BenchCase:
    if not name.strip():
        raise CaseError(f"Case {source} has an empty name; write NAME=REQS, e.g. decode=32*1@8192")
    if "=" in name:
        # Only a shapes file can get here: its NAME=REQS string would not read back.
        raise CaseError(
            f"Case {source} has '=' in its name, which the NAME=REQS form cannot hold; rename it"
        )
    if not requests:
        raise CaseError(
            f"Case {source} has no requests (a count of 0?); every case needs at least one request"
        )
    return BenchCase(name, tuple(requests))


_SHAPES_REQUEST_KEYS = {"query_len", "kv_len", "num_draft_tokens", "chunked", "count"}


def load_cases(path: str | Path) -> list[BenchCase]:
    """Load the cases of a shapes file (vLLM's `--shapes` schema), JSON or YAML.

    `{"cases": [{"name": str, "requests": [{"query_len": int, "kv_len": int,
    "num_draft_tokens": int = 0, "chunked": bool = false, "count": int = 1}]}]}`.
    YAML when the name ends in .yaml or .yml, JSON otherwise, as in vLLM.
    """
    path = Path(path)
    try:
        # Not path.read_text(): a FIFO with no writer would hold the bench until killed.
        text = read_regular(path).decode()
    except FileNotFoundError:
        raise CaseError(
            f"Shapes file {path} does not exist; pass an existing JSON or YAML file"
        ) from None
    except NotRegularFileError as error:
        raise CaseError(f"Shapes file {path} is {error}; pass a JSON or YAML file") from None
    except OSError as error:
        raise CaseError(f"Shapes file {path} cannot be read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise CaseError(f"Shapes file {path} is not UTF-8 text; pass a JSON or YAML file") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as error:  # json.JSONDecodeError, yaml.YAMLError
        raise CaseError(
            f"Shapes file {path} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: "
            + _syntax_error(error)
        ) from None
    where = f"shapes file {path}"
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise CaseError(f"{where}: missing top-level 'cases' list; see `fwdasv forward --help`")
    cases = []
    for index, raw_case in enumerate(data["cases"]):
        at = f"{where}, cases[{index}]"
        if not isinstance(raw_case, dict):
            raise CaseError(f"{at}: a case must be a mapping with 'name' and 'requests'")
        if "name" not in raw_case:
            raise CaseError(f"{at}: missing 'name' (a string)")
        if not isinstance(raw_case["name"], str):
            raise CaseError(
                f"{at}: 'name' must be a string, got {raw_case['name']!r} (quote it in YAML)"
            )
        if not isinstance(raw_case.get("requests"), list):
            raise CaseError(f"{at} ({raw_case['name']}): missing 'requests' list")
        source = f"{raw_case['name']!r} in {where}"
        groups = [
            _shapes_request(raw, f"{at}.requests[{j}]")
            for j, raw in enumerate(raw_case["requests"])
        ]
        _check_size(source, sum(n for _, n in groups), sum(r.query_len * n for r, n in groups))
        requests = [request for request, count in groups for _ in range(count)]
        cases.append(_checked_case(raw_case["name"], requests, source=source))
    if not cases:
        raise CaseError(f"{where} has an empty 'cases' list")
    return cases


def _syntax_error(error: Exception) -> str:
    """One line: yaml's messages span several lines (the problem, then a source excerpt)."""
    problem = getattr(error, "problem", None)
    mark = getattr(error, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(error).split())


def _shapes_request(raw: Any, at: str) -> tuple[BenchRequest, int]:
    """One row of a shapes file: the request and its count."""
    if not isinstance(raw, dict):
        raise CaseError(f"{at}: a request must be a mapping, got {raw!r}")
    unknown = set(raw) - _SHAPES_REQUEST_KEYS
    if unknown:
        raise CaseError(
            f"{at}: unknown keys {sorted(unknown)}; allowed: {sorted(_SHAPES_REQUEST_KEYS)}"
        )
    for key in ("query_len", "kv_len"):
        if key not in raw:
            raise CaseError(f"{at}: missing {key!r}")
    for key in ("query_len", "kv_len", "num_draft_tokens", "count"):
        if key in raw and (not isinstance(raw[key], int) or isinstance(raw[key], bool)):
            raise CaseError(f"{at}: {key} must be an integer, got {raw[key]!r}")
    if "chunked" in raw and not isinstance(raw["chunked"], bool):
        raise CaseError(f"{at}: chunked must be true or false, got {raw['chunked']!r}")
    fields = dict(raw)
    count = fields.pop("count", 1)
    if count < 0:
        raise CaseError(f"{at}: count must be >= 0, got {count}")
    try:
        return BenchRequest(**fields), count
    except CaseError as error:
        raise CaseError(f"{at}: {error}") from None


def cases_to_shapes(cases: Iterable[BenchCase]) -> dict[str, Any]:
    """The shapes-file form of `cases` (what `load_cases` reads back)."""
    return {
        "cases": [
            {
                "name": case.name,
                "requests": [
                    {**request.to_json(), **({"count": count} if count > 1 else {})}
                    for request, count in case.groups()
                ],
            }
            for case in cases
        ]
    }


def unique_cases(cases: Iterable[BenchCase]) -> list[BenchCase]:
    """Refuse two cases with one name: results are keyed by case name."""
    seen: dict[str, BenchCase] = {}
    for case in cases:
        if case.name in seen and seen[case.name] != case:
            raise CaseError(
                f"Two cases are named {case.name!r} ({seen[case.name].body()} and {case.body()}); "
                "give each case its own name"
            )
        seen[case.name] = case
    return list(seen.values())


# Named suites: the cases fwdasv's asv suites and the GPU figures use.
SUITES: dict[str, tuple[str, ...]] = {
    "smoke": ("decode=4*1@64", "prefill=32"),
    "kinds": (
        "decode=4*1@64",
        "prefill=32",
        "hit=16@48",
        "chunk=16@48c",
        "verify=2*4@40:3",
        "mix=32,4*1@64",
    ),
    "h200": ("decode=1*1@1024", "decode32=32*1@8192", "prefill=2048", "mix=2048,32*1@4096"),
    "vllm-decode": (
        "decode_bs1_1k=1*1@1024",
        "decode_bs8_1k=8*1@1024",
        "decode_bs32_1k=32*1@1024",
        "decode_bs128_1k=128*1@1024",
        "decode_bs1_8k=1*1@8192",
        "decode_bs8_8k=8*1@8192",
        "decode_bs32_8k=32*1@8192",
        "decode_bs128_8k=128*1@8192",
    ),
    "vllm-prefill": ("prefill_512=512", "prefill_2k=2048", "prefill_8k=8192"),
    "vllm-mixed": ("mix_2k_bs32=2048,32*1@4096", "verify_bs16=16*4@4096:3"),
}


def suite_cases(name: str) -> list[BenchCase]:
    try:
        texts = SUITES[name]
    except KeyError:
        raise CaseError(f"Unknown suite {name!r}; known: {', '.join(sorted(SUITES))}") from None
    return [parse_case(text) for text in texts]
