"""What a bench's or torchrun group's output says went wrong, read line by line.

`ErrorScanner.feed` takes each output line; it keeps the first exception line of a
worker's traceback (`Name: message`; another rank's line interleaved into it is passed
over; torch.distributed prefixes an initialised rank's lines with
`[rankN]:`, so an error is kept as that rank's) and the rank torchrun names in its
"Root Cause (first observed failure)" block (`RankFailure`). torchrun's own
`ChildFailedError` / `SignalException` tracebacks report a failure, never cause one, and
are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class RankFailure:
    """torchrun's "Root Cause (first observed failure)": the rank that failed first."""

    rank: int
    exitcode: int
    signal: str | None = None

    def describe(self) -> str:
        if self.exitcode < 0:
            name = self.signal or f"signal {-self.exitcode}"
            return f"rank {self.rank} was killed by {name}"
        return f"rank {self.rank} exited with status {self.exitcode}"


_RANK_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:\s?")
# Tracebacks of torchrun itself, reporting (not causing) a worker's failure.
_LAUNCHER_ERRORS = ("ChildFailedError", "SignalException")
# A traceback's last line: the exception's (dotted) name, then ": message" or nothing. Ranks
# share one pipe, so another rank's line can land inside a traceback: such a line (words
# and spaces before any colon) does not end it.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")


_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)(?:.*\((SIG[A-Z0-9]+)\))?")


class ErrorScanner:
    """The first exception line of a worker's traceback in the output, and the rank
    torchrun names as the root cause (its "Root Cause (first observed failure)" block).

    torch.distributed prefixes an initialised rank's traceback with `[rankN]:`; such
    an error is kept as that rank's, so a rank that died without a traceback is not
    given the error its peer raised on losing it (`rank_error`).
    """

    def __init__(self) -> None:
        self.first: str | None = None
        self.first_rank: int | None = None
        self.by_rank: dict[int, str] = {}
        self._in_traceback = False
        self._traceback_rank: int | None = None
        self.root_cause: RankFailure | None = None
        self._in_root_cause = False
        self._root_rank: int | None = None

    def feed(self, line: str) -> None:
        self._feed_root_cause(line)
        prefix = _RANK_PREFIX.match(line)
        text = line[prefix.end() :] if prefix else line
        rank = int(prefix.group(1)) if prefix else None
        if text.startswith("Traceback (most recent call last)"):
            self._in_traceback = True
            self._traceback_rank = rank
        elif self._in_traceback and _EXCEPTION_LINE.match(text):
            self._in_traceback = False
            if any(name in text for name in _LAUNCHER_ERRORS):
                return
            rank = self._traceback_rank if rank is None else rank
            if self.first is None:
                self.first, self.first_rank = text.strip(), rank
            if rank is not None:
                self.by_rank.setdefault(rank, text.strip())

    def error_of(self, failure: RankFailure | None) -> str | None:
        """The error to show beside `failure`: that rank's own, or the first one
        when the output does not say which rank raised it."""
        if failure is not None and self.by_rank:
            return self.by_rank.get(failure.rank)
        return self.first

    @property
    def first_labelled(self) -> str | None:
        """The first error, with its rank when the output names it."""
        if self.first is None or self.first_rank is None:
            return self.first
        return f"(rank {self.first_rank}) {self.first}"

    def _feed_root_cause(self, line: str) -> None:
        if self.root_cause is not None:
            return
        if line.startswith("Root Cause"):
            self._in_root_cause = True
            return
        if not self._in_root_cause:
            return
        rank = _ROOT_RANK.match(line)
        if rank:
            self._root_rank = int(rank.group(1))
            return
        exit_match = _ROOT_EXIT.match(line)
        if exit_match and self._root_rank is not None:
            self.root_cause = RankFailure(
                self._root_rank, int(exit_match.group(1)), exit_match.group(2)
            )
