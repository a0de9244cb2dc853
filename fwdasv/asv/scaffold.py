"""asv projects for PyTorch model repositories timed through the torch backend.

`write_torch_project` writes an asv configuration and a benchmarks/ directory
next to a model repository: asv builds one virtualenv, links it to the parent
environment (torch and fwdasv come from there, see `fwdasv.asv.envlink`), installs
the repository at each commit, and times its target with fwdasv's engine.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from fwdasv.asv.project import AsvProject
from fwdasv.core.cases import parse_case
from fwdasv.core.files import write_atomic


def torch_suite_source(
    class_name: str,
    target: str,
    cases: Sequence[str],
    *,
    iters: int = 10,
    samples: int = 10,
    warmup_s: float = 0.2,
    timer: str = "auto",
    env: dict[str, str] | None = None,
    doc: str = "",
    launches: int = 1,
) -> str:
    for text in cases:
        parse_case(text)  # refuse bad cases before asv sees them
    lines = [
        f"class {class_name}(asvsuite.TorchSuite):",
        f'    """{doc or f"Forward latency of {target}."}"""',
        "",
        f"    model = {target!r}",
        f"    iters = {iters}",
        f"    samples = {samples}",
        f"    warmup_s = {warmup_s}",
        f"    timer = {timer!r}",
        f"    env = {dict(env or {})!r}",
        f"    launches = {launches}",
        f"    cases = {tuple(cases)!r}",
        '    version = "1"',
    ]
    return "\n".join(lines) + "\n"


def write_torch_project(
    root: str | Path,
    repo: str | Path,
    project: str,
    suites: Sequence[str],
    *,
    python: str = sys.executable,
    env_dir: str | Path | None = None,
    regression_threshold: float = 0.05,
    branch: str = "main",
) -> AsvProject:
    """Write root/asv.conf.json and root/benchmarks/ for `repo`; returns the project.

    `suites` are class sources (see `torch_suite_source`). The per-commit
    virtualenv uses this interpreter's Python version and sees its packages.
    """
    root = Path(root).resolve()
    benchmarks = root / "benchmarks"
    benchmarks.mkdir(parents=True, exist_ok=True)
    write_atomic(benchmarks / "__init__.py", '"""asv suites (written by fwdasv)."""\n')
    module = textwrap.dedent(
        '''\
        """Forward latency per commit, timed by fwdasv's engine (written by fwdasv)."""

        from fwdasv import asvsuite

        '''
    )
    write_atomic(benchmarks / "forward.py", module + "\n\n".join(suites))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    config = {
        "version": 1,
        "project": project,
        "repo": str(Path(repo).resolve()),
        "branches": [branch],
        "dvcs": "git",
        "environment_type": "virtualenv",
        "pythons": [version],
        "build_command": [],
        "install_command": [
            f"{python} -m fwdasv.asvenv link {{env_dir}}",
            "in-dir={env_dir} python -m pip install --no-deps --no-build-isolation --no-index {build_dir}",
        ],
        "uninstall_command": [f"return-code=any python -m pip uninstall -y {project}"],
        "benchmark_dir": "benchmarks",
        "results_dir": "results",
        "html_dir": "html",
        "env_dir": str(Path(env_dir).resolve()) if env_dir else "env",
        "launch_method": "spawn",
        "default_benchmark_timeout": 1800,
        "regressions_thresholds": {".*track_latency.*": regression_threshold},
        "regressions_first_commits": {
            ".*track_spread_pct.*": None,
            ".*track_graph_vs_eager.*": None,
            ".*track_clock_uncertainty_us.*": None,
        },
    }
    write_atomic(root / "asv.conf.json", json.dumps(config, indent=4) + "\n")
    return AsvProject.load(root / "asv.conf.json")
