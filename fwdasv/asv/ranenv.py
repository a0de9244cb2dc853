"""What a benchmark process actually ran with, recorded beside asv's results, and checked.

asv copies the machine entry (~/.asv-machine.json, per user) into every result's params;
another job on the same box can rewrite that entry, and then results say torch 2.14.1
while every bench ran 2.13.0+cpu. So each suite's `setup_cache` (in the commit's
environment) appends what it ran with (a `RanRecord`: the software, the bench's timer and
the modules of the code under test it imported, `fwdasv.engine.imports`) to
`<results_dir>/.fwdasv-ran/<host>.jsonl`: one file per host, so results repositories that
several machines push to do not conflict; a dot-directory, which asv and fwdasv's history
skip. `disagreements` reads it back against the result files: a result whose machine entry
names another torch (or vLLM) than the one recorded for its commit and environment is
reported, with the fix; `fwdasv.analysis.findings.untouched` reads a commit's diff against the
imports. Versions come from package metadata (no torch import: asv imports suites at
discovery).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from fwdasv.core.files import read_regular

RAN_DIR = ".fwdasv-ran"
# The machine entry's keys that name software, and the recorded field each must match.
COMPARED = {"torch": "torch", "vllm": "vllm"}


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _torch_cuda() -> str | None:
    """torch's CUDA build (torch.version.cuda), read from torch/version.py without importing
    torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text()
    except OSError:
        return None
    found = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return found.group(1) if found else None


@dataclass(frozen=True)
class RanEnvironment:
    """The software a benchmark process runs with (None: not installed)."""

    host: str
    python: str
    executable: str
    torch: str | None
    torch_cuda: str | None
    vllm: str | None
    fwdasv: str | None

    @classmethod
    def current(cls) -> RanEnvironment:
        return cls(
            host=platform.node(),
            python=platform.python_version(),
            executable=sys.executable,
            torch=_version("torch"),
            torch_cuda=_torch_cuda(),
            vllm=_version("vllm"),
            fwdasv=_version("fwdasv"),
        )

    def describe(self) -> str:
        parts = [f"Python {self.python}", f"torch {self.torch or 'none'}"]
        if self.torch_cuda:
            parts.append(f"CUDA {self.torch_cuda}")
        if self.vllm:
            parts.append(f"vLLM {self.vllm}")
        return ", ".join(parts)


@dataclass(frozen=True)
class RanRecord:
    """One benchmark process's environment, for a commit, an asv environment and a suite.

    One JSON line: {"commit": ..., "env_name": ..., "suite": "forward.Mymodel", "at":
    1764694000.0, "host": ..., "python": "3.11.9", "executable": ..., "torch":
    "2.13.0+cpu", "torch_cuda": null, "vllm": null, "fwdasv": "0.1.0"}
    """

    commit: str
    env_name: str
    suite: str
    at: float
    environment: RanEnvironment
    # What the suite's bench did (None: not recorded, or the bench did not say): its timer
    # ("host" on a CPU), and the modules of the code under test it imported.
    timer: str | None = None
    imported: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        ran: dict[str, object] = {"timer": self.timer} if self.timer is not None else {}
        if self.imported is not None:
            ran["imported"] = list(self.imported)
        return {
            "commit": self.commit,
            "env_name": self.env_name,
            "suite": self.suite,
            "at": self.at,
            **asdict(self.environment),
            **ran,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> RanRecord:
        fields = {name: raw.get(name) for name in RanEnvironment.__dataclass_fields__}
        timer, imported = raw.get("timer"), raw.get("imported")
        if imported is not None and not (
            isinstance(imported, list) and all(isinstance(n, str) for n in imported)
        ):
            raise ValueError(f"'imported' must be a list of module names, got {imported!r}")
        return cls(
            commit=str(raw["commit"]),
            env_name=str(raw["env_name"]),
            suite=str(raw.get("suite", "")),
            at=float(raw["at"]),  # type: ignore[arg-type]
            environment=RanEnvironment(**fields),  # type: ignore[arg-type]
            timer=timer if isinstance(timer, str) else None,
            imported=None if imported is None else tuple(imported),
        )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "host"


def results_dir_of(conf_dir: str | os.PathLike[str]) -> Path | None:
    """The results_dir of the asv configuration in `conf_dir` (asv.conf.json or .jsonc)."""
    for name in ("asv.conf.json", "asv.conf.jsonc"):
        path = Path(conf_dir) / name
        if path.is_file():
            try:
                import json5

                raw = json5.loads(path.read_text())
            except Exception:
                return None
            return (path.parent / str(raw.get("results_dir", "results"))).resolve()
    return None


def record(
    suite: str,
    environ: Mapping[str, str] | None = None,
    *,
    timer: str | None = None,
    imported: Sequence[str] | None = None,
) -> RanRecord | None:
    """Append this process's environment for asv's current commit (and what its bench timed
    with and imported); None outside `asv run` (no ASV_COMMIT, ASV_ENV_NAME or
    configuration to find the results in)."""
    environ = os.environ if environ is None else environ
    commit, env_name = environ.get("ASV_COMMIT"), environ.get("ASV_ENV_NAME")
    conf_dir = environ.get("ASV_CONF_DIR")
    if not (commit and env_name and conf_dir):
        return None
    results_dir = results_dir_of(conf_dir)
    if results_dir is None:
        return None
    ran = RanRecord(
        commit,
        env_name,
        suite,
        time.time(),
        RanEnvironment.current(),
        timer=timer,
        imported=None if imported is None else tuple(imported),
    )
    folder = results_dir / RAN_DIR
    folder.mkdir(parents=True, exist_ok=True)
    # One short line, appended (O_APPEND): concurrent processes never interleave it.
    line = json.dumps(ran.to_json(), sort_keys=True) + "\n"
    with open(folder / f"{_slug(ran.environment.host)}.jsonl", "a") as stream:
        stream.write(line)
    return ran


def load_records(results_dir: str | os.PathLike[str]) -> list[RanRecord]:
    """Every record under results_dir (unreadable lines skipped: they are only a check)."""
    found = []
    for path in sorted((Path(results_dir) / RAN_DIR).glob("*.jsonl")):
        try:
            lines = read_regular(path).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                found.append(RanRecord.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue
    return found


@dataclass(frozen=True)
class Disagreement:
    """A result stored under a machine entry that names other software than what ran."""

    machine: str
    commit: str
    key: str  # the machine entry's key: torch, vllm
    stored: str
    ran: str | None

    def line(self) -> str:
        return (
            f"{self.commit[:8]} on {self.machine}: the machine entry says {self.key} "
            f"{self.stored}, the benchmark ran {self.key} {self.ran or 'none'}"
        )


def _matching(
    records: Sequence[RanRecord], commit: str, env_name: str, host: str | None, until: float
) -> RanRecord | None:
    """The latest record of this commit and environment written before the result file."""
    candidates = [
        r
        for r in records
        if r.commit == commit
        and r.env_name == env_name
        and r.at <= until
        and (host is None or r.environment.host == host)
    ]
    return max(candidates, key=lambda r: r.at) if candidates else None


def disagreements(
    results_dir: str | os.PathLike[str], machines: Iterable[str] | None = None
) -> list[Disagreement]:
    """Results whose stored machine entry (asv's params) names another torch or vLLM than
    the benchmark process recorded; results without a record are not judged."""
    results_dir = Path(results_dir)
    records = load_records(results_dir)
    if not records:
        return []
    if machines is None:
        machines = sorted(p.name for p in results_dir.iterdir() if (p / "machine.json").is_file())
    found = []
    for machine in machines:
        for path in sorted((results_dir / machine).glob("*.json")):
            if path.name == "machine.json":
                continue
            try:
                data = json.loads(read_regular(path))
                commit, env_name = data["commit_hash"], data["env_name"]
                params = data.get("params") or {}
                mtime = path.stat().st_mtime
            except (OSError, ValueError, KeyError, TypeError):
                continue
            host = params.get("host") if isinstance(params.get("host"), str) else None
            ran = _matching(records, commit, env_name, host, mtime + 1.0)
            if ran is None:
                continue
            for key, field in COMPARED.items():
                stored = params.get(key)
                value = getattr(ran.environment, field)
                if isinstance(stored, str) and stored != (value or "none"):
                    found.append(Disagreement(machine, commit, key, stored, value))
    return found


def warning_lines(
    found: Sequence[Disagreement], machine_file: str = "~/.asv-machine.json"
) -> list[str]:
    """What a command prints for `found`: per machine, how many, one example, the fix."""
    lines = []
    by_machine: dict[str, list[Disagreement]] = {}
    for item in found:
        by_machine.setdefault(item.machine, []).append(item)
    for machine, items in by_machine.items():
        first = items[0]
        lines.append(
            f"Warning: {len(items)} result(s) of machine {machine!r} are labelled with "
            f"another environment than the one that ran ({first.line()}): its entry in "
            f"{machine_file} was rewritten, e.g. by another project on this box. The "
            f"results are kept; name this environment's machine apart "
            f"(`fwdasv hw machine` suggests a name per environment) and run asv with it"
        )
    return lines
