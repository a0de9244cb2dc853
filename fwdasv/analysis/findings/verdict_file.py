"""The verdicts file, `<results_dir>/fwdasv-verdicts.jsonl`: its line, read and appended here only.

One JSON object per line (keys sorted), appended and never rewritten, so a results
repository shared by several machines merges it line by line:

    {"before_commit": A, "confirmation": {...}, "culprit": {...}, "explain": {...},
     "finding": {"machine", "env_name", "benchmark", "case", "after_commit"},
     "range_commits": [...], "recorded_at": ISO time, "status": "confirmed"}

`finding` identifies the finding (`FindingIdent`); `before_commit` and `range_commits`
name the range the line is about, so it also holds for a narrower range of the same
series found later (a bisect measured inside it). `confirmation` is the A/B re-measure
(`ConfirmationRecord`), `culprit` what bisect said of the range (`CulpritRecord`), `explain`
the kernel diff (`ExplainRecord`), `triage` what a person said of it (`TriageRecord`). Lines about one finding merge in file order, a later
line's keys over an earlier one's (`FindingVerdict`); a line may carry no status.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from fwdasv.analysis.rules.confirm import Confirmation
from fwdasv.analysis.rules.status import status_word
from fwdasv.core.errors import UserError

VERDICTS_FILE = "fwdasv-verdicts.jsonl"


class VerdictFileError(UserError):
    """A line of the verdicts file is not a fwdasv verdict line."""


@dataclass(frozen=True)
class FindingIdent:
    """What identifies a finding in the verdicts file: its series and first new commit."""

    machine: str
    env_name: str | None
    benchmark: str
    case: str
    after_commit: str

    @property
    def series(self) -> tuple[str, str | None, str, str]:
        return (self.machine, self.env_name, self.benchmark, self.case)

    def to_json(self) -> dict[str, str | None]:
        return {
            "machine": self.machine,
            "env_name": self.env_name,
            "benchmark": self.benchmark,
            "case": self.case,
            "after_commit": self.after_commit,
        }

    @classmethod
    def from_json(cls, raw: object) -> FindingIdent:
        if not isinstance(raw, dict):
            raise ValueError("'finding' is not an object")
        machine, benchmark, case, after = (
            _text(raw, key) for key in ("machine", "benchmark", "case", "after_commit")
        )
        env_name = raw.get("env_name")
        if env_name is not None and not isinstance(env_name, str):
            raise ValueError(f"'env_name' is {env_name!r}")
        return cls(machine, env_name, benchmark, case, after)


@dataclass(frozen=True)
class ConfirmationRecord:
    """An A/B re-measure as stored: its figures, their one-line summary, and A and B."""

    figures: Confirmation
    summary: str
    a_commit: str
    b_commit: str
    pair_reason: str = ""  # why A and B (`confirm.pair_reason`); "" in older lines

    @classmethod
    def of(
        cls, figures: Confirmation, a_commit: str, b_commit: str, pair_reason: str = ""
    ) -> ConfirmationRecord:
        return cls(figures, figures.summary(), a_commit, b_commit, pair_reason)

    @property
    def pair(self) -> str:
        return f"{self.a_commit[:8]}..{self.b_commit[:8]}"

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {
            **self.figures.to_json(),
            "summary": self.summary,
            "a_commit": self.a_commit,
            "b_commit": self.b_commit,
            "pair_reason": self.pair_reason,
            "label": self.figures.label,
        }
        return dict(sorted(document.items()))  # as the file holds it

    @classmethod
    def from_json(cls, raw: object) -> ConfirmationRecord:
        if not isinstance(raw, dict):
            raise ValueError("'confirmation' is not an object")
        summary, a_commit, b_commit = (
            _text(raw, key) for key in ("summary", "a_commit", "b_commit")
        )
        reason = raw.get("pair_reason", "")
        if not isinstance(reason, str):
            raise ValueError(f"confirmation: 'pair_reason' is {reason!r}")
        return cls(Confirmation.from_json(raw), summary, a_commit, b_commit, reason)


@dataclass(frozen=True)
class CulpritRecord:
    """What bisect said of a finding's range GOOD..BAD: the first bad commit (None when it
    named none: `answer` is then "not reproducible" or "undecided"), its subject, and one
    line of evidence (the ends' re-measure, the final pair, the cost)."""

    commit: str | None
    subject: str | None
    evidence: str
    answer: str
    good: str
    bad: str

    def to_json(self) -> dict[str, object]:
        return dict(sorted(asdict(self).items()))  # every field, plain text or None

    @classmethod
    def from_json(cls, raw: object) -> CulpritRecord:
        if not isinstance(raw, dict):
            raise ValueError("'culprit' is not an object")
        commit, subject = raw.get("commit"), raw.get("subject")
        for key, value in (("commit", commit), ("subject", subject)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"culprit: {key!r} is {value!r}")
        return cls(
            commit,
            subject,
            _text(raw, "evidence"),
            _text(raw, "answer"),
            _text(raw, "good"),
            _text(raw, "bad"),
        )


@dataclass(frozen=True)
class ExplainRecord:
    """A kernel (op) diff as stored: its headline and table, the top contributors, where the
    profiles are; `commits` (GOOD, BAD) when the diff is of other commits than A and B;
    `rows`: the rows that stand out as a page shows them (`fwdasv.analysis.explain.explain.
    record_rows`: label, op, source, file, line, changed_here, ...); `change_link`: the
    commit's diff, where the project has a commit URL."""

    headline: str
    table: str
    top5: tuple[str, ...]
    explained_top5_pct: float
    total_delta_us: float
    profile_dir: str
    commits: tuple[str, str] | None = None
    rows: tuple[Mapping[str, object], ...] = ()
    change_link: str | None = None

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {
            "headline": self.headline,
            "table": self.table,
            "top5": list(self.top5),
            "explained_top5_pct": self.explained_top5_pct,
            "total_delta_us": self.total_delta_us,
            "profile_dir": self.profile_dir,
        }
        if self.commits is not None:
            document["commits"] = list(self.commits)
        if self.rows:
            document["rows"] = [dict(row) for row in self.rows]
        if self.change_link is not None:
            document["change_link"] = self.change_link
        return dict(sorted(document.items()))

    @classmethod
    def from_json(cls, raw: object) -> ExplainRecord:
        if not isinstance(raw, dict):
            raise ValueError("'explain' is not an object")
        top5 = raw.get("top5")
        if not isinstance(top5, list) or not all(isinstance(name, str) for name in top5):
            raise ValueError(f"explain: 'top5' is {top5!r}")
        commits = raw.get("commits")
        if commits is not None and not (
            isinstance(commits, list)
            and len(commits) == 2
            and all(isinstance(c, str) for c in commits)
        ):
            raise ValueError(f"explain: 'commits' is {commits!r}")
        return cls(
            headline=_text(raw, "headline"),
            table=_text(raw, "table"),
            top5=tuple(top5),
            explained_top5_pct=_number(raw, "explained_top5_pct"),
            total_delta_us=_number(raw, "total_delta_us"),
            profile_dir=_text(raw, "profile_dir"),
            commits=None if commits is None else (commits[0], commits[1]),
            rows=tuple(row for row in raw.get("rows") or () if isinstance(row, dict)),
            change_link=link if isinstance(link := raw.get("change_link"), str) else None,
        )


@dataclass(frozen=True)
class TriageRecord:
    """What a person said of a finding (`fwdasv triage`): its state (`TriageState`), a
    note and an issue link; for `fixed-by`, the fix's commit and the re-measure that
    showed the old level back at it."""

    state: str
    note: str | None = None
    issue: str | None = None
    fixed_by: str | None = None
    fix_check: str | None = None

    def to_json(self) -> dict[str, object]:
        return dict(sorted(asdict(self).items()))

    @classmethod
    def from_json(cls, raw: object) -> TriageRecord:
        if not isinstance(raw, dict):
            raise ValueError("'triage' is not an object")
        texts = {}
        for key in ("note", "issue", "fixed_by", "fix_check"):
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"triage: {key!r} is {value!r}")
            texts[key] = value
        return cls(_text(raw, "state"), **texts)


@dataclass(frozen=True)
class FindingVerdict:
    """One line of the verdicts file, or the merge of the lines about one finding.

    `status` is a `Status` word (a word of a newer fwdasv stays the string it is);
    None where no line said one.
    """

    ident: FindingIdent
    recorded_at: str
    before_commit: str | None
    range_commits: tuple[str, ...]
    status: str | None = None
    confirmation: ConfirmationRecord | None = None
    explain: ExplainRecord | None = None
    culprit: CulpritRecord | None = None
    triage: TriageRecord | None = None

    def to_json(self) -> dict[str, object]:
        """The verdict as `fwdasv regressions --format json` shows it (the line without
        `finding`), keys sorted as in the file."""
        document: dict[str, object] = {
            "before_commit": self.before_commit,
            "range_commits": list(self.range_commits),
            "recorded_at": self.recorded_at,
        }
        if self.status is not None:
            document["status"] = self.status
        if self.confirmation is not None:
            document["confirmation"] = self.confirmation.to_json()
        if self.explain is not None:
            document["explain"] = self.explain.to_json()
        if self.culprit is not None:
            document["culprit"] = self.culprit.to_json()
        if self.triage is not None:
            document["triage"] = self.triage.to_json()
        return dict(sorted(document.items()))

    def to_line(self) -> str:
        """The line appended to the file (no newline)."""
        document = {"finding": self.ident.to_json(), **self.to_json()}
        return json.dumps(document, sort_keys=True, allow_nan=False)

    @classmethod
    def from_line(cls, raw: object) -> FindingVerdict:
        """One parsed line; ValueError naming what is wrong with it."""
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        recorded_at = raw.get("recorded_at", "")
        before = raw.get("before_commit")
        commits = raw.get("range_commits") or []
        status = raw.get("status")
        if not isinstance(recorded_at, str):
            raise ValueError(f"'recorded_at' is {recorded_at!r}")
        if before is not None and not isinstance(before, str):
            raise ValueError(f"'before_commit' is {before!r}")
        if not isinstance(commits, list) or not all(isinstance(c, str) for c in commits):
            raise ValueError(f"'range_commits' is {commits!r}")
        if status is not None and not isinstance(status, str):
            raise ValueError(f"'status' is {status!r}")
        confirmation, explain = raw.get("confirmation"), raw.get("explain")
        culprit, triage = raw.get("culprit"), raw.get("triage")
        return cls(
            ident=FindingIdent.from_json(raw.get("finding")),
            recorded_at=recorded_at,
            before_commit=before,
            range_commits=tuple(commits),
            status=_status_word(status),
            confirmation=None
            if confirmation is None
            else ConfirmationRecord.from_json(confirmation),
            explain=None if explain is None else ExplainRecord.from_json(explain),
            culprit=None if culprit is None else CulpritRecord.from_json(culprit),
            triage=None if triage is None else TriageRecord.from_json(triage),
        )

    def then(self, later: FindingVerdict) -> FindingVerdict:
        """This verdict with a later line about the same finding applied over it."""
        return replace(
            later,
            status=later.status if later.status is not None else self.status,
            confirmation=later.confirmation or self.confirmation,
            explain=later.explain or self.explain,
            culprit=later.culprit or self.culprit,
            triage=later.triage or self.triage,
        )


def now_utc() -> str:
    """A line's `recorded_at`: seconds, UTC, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class StoredVerdicts:
    """The verdicts file as read: the merged verdict of each finding."""

    by_finding: Mapping[FindingIdent, FindingVerdict]

    def about(
        self, ident: FindingIdent, before_commit: str, *, faster: bool = False
    ) -> FindingVerdict | None:
        """The verdict of this finding, else the newest about a wider range of its series
        that holds it: a bisect (or a later run) measures commits inside a finding's
        range and its first new commit moves inside it; the confirmation of the wider
        range still holds for the narrower one. A speed-up (`faster`) takes its own
        verdict only (speed-ups are not bisected), and a slowdown no speed-up's re-measure."""
        exact = self.by_finding.get(ident)
        if exact is not None or faster:
            return exact
        best = None
        for stored in self.by_finding.values():
            if (
                stored.ident.series != ident.series
                or ident.after_commit not in stored.range_commits
                or (stored.confirmation is not None and stored.confirmation.figures.faster)
            ):
                continue
            if before_commit != stored.before_commit and before_commit not in stored.range_commits:
                continue
            if best is None or stored.recorded_at >= best.recorded_at:
                best = stored
        return best


def check_verdicts_path(path: Path) -> None:
    """VerdictFileError, one line, when something other than a regular file (or a link to
    one) is at the verdicts file's path: read as no verdicts, it would drop every
    confirmation from the listings and gate them again; appended to, it fails after a
    re-measure, whose figures are then lost. Nothing there is fine (no verdict yet)."""
    if path.is_file() or not os.path.lexists(path):
        return
    if path.is_dir():
        what = "a directory"
    elif path.is_symlink() and not path.exists():
        what = "a dangling link"
    else:
        what = "not a regular file"
    raise VerdictFileError(
        f"{path} is {what}, not the verdicts file (a regular file) that fwdasv reads and "
        "appends to; move it aside or remove it"
    )


def read_verdicts(path: Path) -> StoredVerdicts:
    """Every finding's merged verdict (none when there is no file yet); a line that is not a
    verdict line, or a path that is no regular file (`check_verdicts_path`), is an error
    naming it."""
    merged: dict[FindingIdent, FindingVerdict] = {}
    check_verdicts_path(path)
    if not path.exists():
        return StoredVerdicts(merged)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise VerdictFileError(f"{path}: cannot be read ({error}); fix or move it aside") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            verdict = FindingVerdict.from_line(json.loads(line))
        except ValueError:
            raise VerdictFileError(
                f"{path}:{number}: not a fwdasv verdict line; fix or remove that line "
                "(the file is appended to, one JSON object per line)"
            ) from None
        previous = merged.get(verdict.ident)
        merged[verdict.ident] = verdict if previous is None else previous.then(verdict)
    return StoredVerdicts(merged)


def append_verdict(path: Path, verdict: FindingVerdict) -> None:
    """Append one line; a line already there is never lost (the file is never rewritten).
    Only to a regular file (`check_verdicts_path`)."""
    check_verdicts_path(path)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(verdict.to_line() + "\n")


def _text(raw: Mapping[str, object], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key!r} is {value!r}, expected a string")
    return value


def _number(raw: Mapping[str, object], key: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key!r} is {value!r}, expected a number")
    return float(value)


def _status_word(word: str | None) -> str | None:
    try:
        return None if word is None else status_word(word)
    except ValueError:
        return word  # a word of a newer fwdasv: kept, never applied
