"""The verdicts file's line, read and written by one owner (`fwdasv.analysis.findings.verdict_file`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwdasv.analysis.findings.verdict_file import (
    ConfirmationRecord,
    ExplainRecord,
    FindingIdent,
    FindingVerdict,
    TriageRecord,
    VerdictFileError,
    append_verdict,
    read_verdicts,
)
from fwdasv.analysis.rules.confirm import judge_ab
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status

A, B, C = "a" * 40, "b" * 40, "c" * 40
IDENT = FindingIdent("box", "virtualenv-py3.11", "forward.S.track_latency", "decode", C)
NOISE = Noise(0.2, 0.2, 0.05, 60, "history", 35.0)  # a history's estimate: finite dof
CONFIRMATION = ConfirmationRecord.of(judge_ab([1.0, 1.0005, 0.9995], [1.02] * 3, NOISE), A, C)
EXPLAIN = ExplainRecord("A -> C: +3 us", "table", ("aten::mm",), 90.0, 3.0, "/tmp/p", (A, C))


def _verdict(**fields) -> FindingVerdict:
    base = {
        "ident": IDENT,
        "recorded_at": "2026-12-02T00:00:00+00:00",
        "before_commit": A,
        "range_commits": (B, C),
    }
    return FindingVerdict(**{**base, **fields})


def test_a_line_round_trips_with_sorted_keys(tmp_path: Path) -> None:
    verdict = _verdict(status=Status.CONFIRMED, confirmation=CONFIRMATION, explain=EXPLAIN)
    line = json.loads(verdict.to_line())
    assert list(line) == sorted(line)
    assert line["finding"] == {
        "machine": "box",
        "env_name": "virtualenv-py3.11",
        "benchmark": "forward.S.track_latency",
        "case": "decode",
        "after_commit": C,
    }
    assert line["status"] == "confirmed" and line["range_commits"] == [B, C]
    assert line["confirmation"]["a_commit"] == A and line["confirmation"]["processes_a"] == 3
    assert line["confirmation"]["summary"] == CONFIRMATION.figures.summary()
    assert line["explain"]["commits"] == [A, C] and line["explain"]["top5"] == ["aten::mm"]
    assert FindingVerdict.from_line(line) == verdict
    # What `fwdasv regressions --format json` shows: the line without `finding`.
    assert verdict.to_json() == {k: v for k, v in line.items() if k != "finding"}

    path = tmp_path / "fwdasv-verdicts.jsonl"
    append_verdict(path, verdict)
    append_verdict(path, verdict)
    assert path.read_text() == (verdict.to_line() + "\n") * 2
    assert read_verdicts(path).by_finding == {IDENT: verdict}


def test_lines_about_one_finding_merge_the_last_one_winning(tmp_path: Path) -> None:
    path = tmp_path / "fwdasv-verdicts.jsonl"
    append_verdict(path, _verdict(status=Status.CONFIRMED, confirmation=CONFIRMATION))
    later = _verdict(recorded_at="2026-12-03T00:00:00+00:00", status=Status.CONFIRMED)
    append_verdict(path, _verdict(**{**later.__dict__, "explain": EXPLAIN}))
    (merged,) = read_verdicts(path).by_finding.values()
    # The diff's line keeps the confirmation before it.
    assert merged.confirmation == CONFIRMATION and merged.explain == EXPLAIN
    assert merged.recorded_at == "2026-12-03T00:00:00+00:00"
    append_verdict(path, _verdict(status=Status.NOT_REPRODUCED, recorded_at="2026-12-04"))
    (merged,) = read_verdicts(path).by_finding.values()
    assert merged.status == Status.NOT_REPRODUCED and merged.confirmation == CONFIRMATION


def test_a_triage_line_keeps_the_status_and_a_later_one_replaces_the_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fwdasv-verdicts.jsonl"
    append_verdict(path, _verdict(status=Status.CONFIRMED, confirmation=CONFIRMATION))
    said = TriageRecord("acknowledged", "being fixed", "https://example.org/issues/7")
    append_verdict(path, _verdict(recorded_at="2026-12-03", triage=said))
    (merged,) = read_verdicts(path).by_finding.values()
    assert merged.status == Status.CONFIRMED and merged.confirmation == CONFIRMATION
    assert merged.triage == said
    assert json.loads(path.read_text().splitlines()[-1])["triage"] == {
        "fix_check": None,
        "fixed_by": None,
        "issue": "https://example.org/issues/7",
        "note": "being fixed",
        "state": "acknowledged",
    }
    fixed = TriageRecord("fixed-by", fixed_by=B, fix_check="A aaaaaaaa vs fix bbbbbbbb: ...")
    append_verdict(path, _verdict(recorded_at="2026-12-04", triage=fixed))
    (merged,) = read_verdicts(path).by_finding.values()
    assert merged.triage == fixed and merged.status == Status.CONFIRMED


def test_a_verdict_on_a_wider_range_holds_for_a_narrower_finding() -> None:
    stored = read_verdicts_of(_verdict(status=Status.CONFIRMED))
    narrower = FindingIdent(*IDENT.series, B)  # the step's first new commit moved to B
    assert stored.about(narrower, A) == stored.by_finding[IDENT]
    assert stored.about(narrower, B) is None or stored.about(narrower, B).range_commits == (B, C)
    assert stored.about(FindingIdent(*IDENT.series, "d" * 40), A) is None  # not in the range
    other_case = FindingIdent("box", IDENT.env_name, IDENT.benchmark, "prefill", B)
    assert stored.about(other_case, A) is None


def read_verdicts_of(*verdicts: FindingVerdict):
    from fwdasv.analysis.findings.verdict_file import StoredVerdicts

    return StoredVerdicts({v.ident: v for v in verdicts})


def test_a_status_word_of_a_newer_fwdasv_is_kept_not_applied() -> None:
    line = json.loads(_verdict(status=Status.CONFIRMED).to_line())
    line["status"] = "escalated"
    verdict = FindingVerdict.from_line(line)
    assert verdict.status == "escalated" and not isinstance(verdict.status, Status)
    assert isinstance(FindingVerdict.from_line({**line, "status": "confirmed"}).status, Status)


@pytest.mark.parametrize(
    "broken",
    [
        '{"finding": {"machine": "box"}, "status": "confirmed"',  # cut short
        '{"finding": {"machine": "box"}, "status": "confirmed"}',  # no series
        '["not", "an", "object"]',
        '{"finding": %s, "range_commits": "abc"}',
        '{"finding": %s, "confirmation": {"percent": 2.1}}',  # figures missing
        '{"finding": %s, "explain": {"headline": "x"}}',
    ],
)
def test_a_line_that_is_no_verdict_is_one_error_naming_it(tmp_path: Path, broken: str) -> None:
    path = tmp_path / "fwdasv-verdicts.jsonl"
    append_verdict(path, _verdict(status=Status.CONFIRMED))
    text = broken % json.dumps(IDENT.to_json()) if "%s" in broken else broken
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(text + "\n")
    with pytest.raises(VerdictFileError, match=rf"^{path}:2: not a fwdasv verdict line"):
        read_verdicts(path)


def test_a_verdicts_path_that_is_no_regular_file_is_one_error_naming_it(tmp_path: Path) -> None:
    """A directory (or a FIFO, a dangling link) at the verdicts file's path was read as no
    verdicts (every confirmation gone from the listing) and crashed the append."""
    path = tmp_path / "fwdasv-verdicts.jsonl"
    path.mkdir()
    said = rf"^{path} is a directory, not the verdicts file \(a regular file\)"
    with pytest.raises(VerdictFileError, match=said):
        read_verdicts(path)
    with pytest.raises(VerdictFileError, match=said):
        append_verdict(path, _verdict(status=Status.CONFIRMED))
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "gone")
    with pytest.raises(VerdictFileError, match=rf"^{dangling} is a dangling link"):
        read_verdicts(dangling)
    assert read_verdicts(tmp_path / "absent.jsonl").by_finding == {}  # none yet: no verdicts
