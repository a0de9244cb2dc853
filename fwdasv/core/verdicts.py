"""Verdict settings: the `"fwdasv"` block of an asv configuration, and its defaults.

asv keeps unknown top-level keys of asv.conf.json and never reads them, so the block
rides along with the project: `"fwdasv": {"min_effect_pct": 0.3, "confirm": true}`.
`fwdasv init` writes it; regressions, confirm, publish, nightly, compare and bisect read
it (`AsvProject.verdict_settings`). It lives in core because both the asv layer (which
writes it) and the analysis (which reads it) need it.

`min_effect_pct` is the smallest change worth reporting, wherever a change is judged:
the default of `--min-effect` (percent) in the findings, and of `--factor` (a ratio of
medians, `factor_of(pct)` = 1 + pct / 100: 0.3% is 1.003) in compare, and the floor
below which bisect's probe floor (half the step being bisected) never goes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fwdasv.core.errors import UserError

SETTINGS_KEY = "fwdasv"
# Read by fwdasv.asv.vllm_base (the install mode), not verdicts: known here so neither is refused.
INSTALL_KEYS = ("vllm_base", "vllm_base_commit")
# Read by fwdasv.asv.project_machine (the project's machine): known here so it is not refused.
PROJECT_KEYS = ("machine",)
# The smallest step reported, whatever its significance: a 0.5% step must pass it
# nearly always, or half of the 0.5% steps would be lost to their own estimation
# error (fwdasv.analysis.rules.detect); below it a step is real but too small to chase on
# GPUs whose machine-to-machine offsets are 1.5%.
MIN_EFFECT_PCT = 0.3


def factor_of(pct: float) -> float:
    """A change in percent as the ratio of medians that `--factor` takes (0.3 -> 1.003)."""
    return 1 + pct / 100


class SettingsError(UserError):
    """The configuration's `"fwdasv"` block is malformed (the key and the fix in the message)."""


@dataclass(frozen=True)
class VerdictSettings:
    """`min_effect_pct`: the smallest step of a series' median, in percent, that is
    reported however significant (the default of `--min-effect`); `confirm`:
    whether `fwdasv nightly` re-measures a detected step before its gate counts
    it (the default of its `--confirm/--no-confirm`)."""

    min_effect_pct: float = MIN_EFFECT_PCT
    confirm: bool = True

    @property
    def min_effect_factor(self) -> float:
        """`min_effect_pct` as a ratio of medians: compare's default `--factor`."""
        return factor_of(self.min_effect_pct)

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], where: str = "asv.conf.json") -> VerdictSettings:
        """The settings of a parsed asv.conf.json (`raw`); defaults for what it leaves out."""
        block = raw.get(SETTINGS_KEY)
        if block is None:
            return cls()
        where = f"{where}: {SETTINGS_KEY!r}"
        example = json.dumps(cls().to_json())
        if not isinstance(block, dict):
            raise SettingsError(f"{where} must be an object such as {example}")
        unknown = sorted(set(block) - {"min_effect_pct", "confirm", *INSTALL_KEYS, *PROJECT_KEYS})
        if unknown:
            raise SettingsError(
                f"{where}: unknown key(s) {', '.join(unknown)} (known: {example}, and "
                f"{', '.join(INSTALL_KEYS)} for vLLM over a compiled base, machine as `fwdasv init` "
                "records it)"
            )
        for key in INSTALL_KEYS:
            if key in block and not (isinstance(block[key], str) and block[key]):
                raise SettingsError(
                    f"{where}.{key} must be a path or commit (text), not {block[key]!r}"
                )
        effect = block.get("min_effect_pct", MIN_EFFECT_PCT)
        if isinstance(effect, bool) or not isinstance(effect, int | float) or not effect >= 0:
            raise SettingsError(f"{where}.min_effect_pct must be a number >= 0, not {effect!r}")
        confirm = block.get("confirm", True)
        if not isinstance(confirm, bool):
            raise SettingsError(f"{where}.confirm must be true or false, not {confirm!r}")
        return cls(float(effect), confirm)

    def to_json(self) -> dict[str, float | bool]:
        return {"min_effect_pct": self.min_effect_pct, "confirm": self.confirm}
