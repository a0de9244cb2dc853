"""asv.conf.json's `"fwdasv"` block as one typed value: the verdict settings and the vLLM base.

asv keeps unknown top-level keys of its configuration and never reads them:

    "fwdasv": {"min_effect_pct": 0.3, "confirm": true, "vllm_base": PATH, "vllm_base_commit": REV}

`FwdasvSettings.from_config` reads the whole block (SettingsError for a malformed
one, each key checked by `fwdasv.core.verdicts.VerdictSettings`); `AsvProject.settings`
holds it, read once. `VllmBaseSettings.from_block` reads the vLLM keys alone: asv's
environment (`fwdasv.asv.envplugin`) takes them from asv's own configuration object
inside `asv run`, where a malformed verdict key is not its to refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fwdasv.core.verdicts import SETTINGS_KEY, VerdictSettings

BASE_KEY = "vllm_base"  # a vLLM wheel, or a directory holding an installed vllm/
BASE_COMMIT_KEY = "vllm_base_commit"  # the commit the base was built from


@dataclass(frozen=True)
class VllmBaseSettings:
    """vLLM commits over a compiled base (`fwdasv.asv.vllm_base`): on when `base` is set."""

    base: str | None = None
    base_commit: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.base)

    @classmethod
    def from_block(cls, block: object) -> VllmBaseSettings:
        """The vLLM keys of a `"fwdasv"` block as asv parsed it (anything else: off)."""
        if not isinstance(block, Mapping):
            return cls()
        return cls(_text(block.get(BASE_KEY)), _text(block.get(BASE_COMMIT_KEY)))

    def to_json(self) -> dict[str, str]:
        """The keys as the block holds them (the ones set)."""
        keys = ((BASE_KEY, self.base), (BASE_COMMIT_KEY, self.base_commit))
        return {key: value for key, value in keys if value}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class FwdasvSettings:
    """The whole block: how verdicts are judged, and how each commit is installed."""

    verdicts: VerdictSettings = field(default_factory=VerdictSettings)
    vllm: VllmBaseSettings = field(default_factory=VllmBaseSettings)

    @classmethod
    def from_config(cls, raw: Mapping[str, object], where: str = "asv.conf.json") -> FwdasvSettings:
        """The block of a parsed asv.conf.json (`raw`); defaults for what it leaves out."""
        verdicts = VerdictSettings.from_config(raw, where)
        return cls(verdicts, VllmBaseSettings.from_block(raw.get(SETTINGS_KEY)))

    def to_json(self) -> dict[str, object]:
        """The block as `fwdasv init` writes it."""
        return {**self.verdicts.to_json(), **self.vllm.to_json()}
