"""What a node's verdict line becomes on the head: explain's profiles named where the head
wrote them, every other field as the node recorded it; which findings a fleet's triage
sends to the GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import confirmation_record, copy_project, finding_of

from fwdasv.analysis.findings.verdict_file import ExplainRecord
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import Status
from fwdasv.fleet.remote import head_verdict, to_triage

NODE = "/tmp/fwdasv-fleet/mymodel/vm-1xh200-5318de"


def _line(profile_dir: str) -> str:
    return json.dumps(
        {
            "finding": {
                "machine": "vm-1xh200-5318de",
                "env_name": "fwdasv-py3.11",
                "benchmark": "forward.Toy.track_relative",
                "case": "prefill_128",
                "after_commit": "b" * 40,
            },
            "recorded_at": "2026-12-05T03:00:00+00:00",
            "before_commit": "a" * 40,
            "range_commits": ["b" * 40],
            "status": "confirmed",
            "explain": {
                "headline": "slower: +73.74 us per forward stands out",
                "table": "| op |",
                "top5": ["aten::tanh"],
                "explained_top5_pct": 100.0,
                "total_delta_us": 73.74,
                "profile_dir": profile_dir,
            },
        }
    )


def test_explains_profiles_are_named_on_the_head_the_rest_as_the_node_said(
    tmp_path: Path,
) -> None:
    node_line = _line(f"{NODE}/.fwdasv-explain/aaaaaaaa-bbbbbbbb-forward.Toy-prefill_128")
    verdict = head_verdict(node_line, NODE, tmp_path)
    assert verdict.explain is not None
    assert verdict.explain.profile_dir == str(
        tmp_path / ".fwdasv-explain" / "aaaaaaaa-bbbbbbbb-forward.Toy-prefill_128"
    )
    as_sent = json.loads(node_line)
    del as_sent["explain"]["profile_dir"]
    kept = json.loads(verdict.to_line())
    del kept["explain"]["profile_dir"]
    assert kept == as_sent
    # A folder outside the node's project (explain --profile-dir) is left as it was.
    elsewhere = head_verdict(_line(f"{NODE}-other/profiles"), NODE, tmp_path)
    assert (
        elsewhere.explain is not None and elsewhere.explain.profile_dir == f"{NODE}-other/profiles"
    )


@pytest.mark.slow
def test_a_finding_confirmed_without_a_diff_is_sent_to_explain_until_one_is_recorded(
    stepped, tmp_path: Path
) -> None:
    """fleet-confirm explains nothing: fleet-triage (explain on) takes its confirmed
    findings to explain them, `--no-explain` leaves them, and a recorded diff ends it."""
    from fwdasv.analysis.findings import findings

    project = copy_project(stepped, tmp_path)
    drawn = finding_of(project, stepped.benchmark)
    confirmation = confirmation_record([1.021, 1.0205, 1.0215], drawn)
    record_verdict(project, drawn, status=Status.CONFIRMED, confirmation=confirmation)

    def sent(explain: bool) -> set[str]:
        return {
            f.key.benchmark
            for f in to_triage(findings.find(project), explain=explain, bisect=False)
        }

    assert sent(explain=True) == {stepped.benchmark, stepped.plain}  # plain: to confirm
    assert sent(explain=False) == {stepped.plain}
    diff = ExplainRecord("slower", "| op |", ("aten::mm",), 100.0, 5.0, str(tmp_path / "p"))
    record_verdict(project, drawn, status=Status.CONFIRMED, explain=diff)
    assert sent(explain=True) == {stepped.plain}
