"""`fwdasv init`: an asv project for your own repository, checked at HEAD, never overwritten.

Real git histories of a small model package (tests/toy_model.py); the target
check runs for real (a child Python importing the package from HEAD's tree).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_error_line
from toy_model import TARGET, build_repo

from fwdasv.asv.settings import FwdasvSettings
from fwdasv.asv.suitespec import CANARY_CASES, CANARY_CLASS, CANARY_TARGET, DEFAULT_CASES
from fwdasv.cli import main
from fwdasv.core.clitools import command_here


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / "mymodel"
    build_repo(path, commits=3, slow_index=2)
    return path


def init(*args: str):
    return CliRunner().invoke(main, ["init", *args])


def init_error_line(result) -> str:
    """The one error line, last on stderr (after the progress line of the check, if any)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) <= 2 and all(line.startswith("checking ") for line in lines[:-1]), lines
    return one_error_line(result.stderr, ignoring=("checking ",))


def suites_of(directory: Path) -> dict[str, dict]:
    """Each suite class's assignments in benchmarks/forward.py, read without importing it."""
    tree = ast.parse((directory / "benchmarks" / "forward.py").read_text())
    return {node.name: _assignments(node) for node in tree.body if isinstance(node, ast.ClassDef)}


def suite_of(directory: Path) -> dict:
    """The project's own suite (not the environment canary)."""
    (own,) = [v for name, v in suites_of(directory).items() if name != CANARY_CLASS]
    return own


def _assignments(cls: ast.ClassDef) -> dict:
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in cls.body
        if isinstance(node, ast.Assign)
    }
    return {"name": cls.name, "bases": [ast.unparse(b) for b in cls.bases], **values}


def test_init_writes_a_project_asv_reads_and_prints_the_next_commands(
    repo: Path, tmp_path: Path
) -> None:
    from asv.config import Config

    target_dir = tmp_path / "mymodel-asv"
    result = init(
        "--repo", str(repo), "--target", TARGET, "--case", "prefill_64=64", "--dir", str(target_dir)
    )
    assert result.exit_code == 0, result.output
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (
        f"checked at {head[:8]}: {TARGET} imports, builds on cpu (float32) and prepares prefill_64"
        in result.stdout
    )

    conf = Config.load(str(target_dir / "asv.conf.json"))  # asv keeps the unknown "fwdasv" key
    # The block's settings, and the project's machine: this box, as `hw machine` names it.
    from fwdasv.hw.machine import this_machine

    box = this_machine()
    recorded = conf.fwdasv.pop("machine")
    assert conf.fwdasv == FwdasvSettings().to_json()
    assert recorded["name"] == box["machine"]
    assert all(recorded[key] == box[key] for key in recorded if key != "name")
    assert conf.project == "mymodel"  # pyproject.toml's name
    assert conf.branches == ["main"]
    assert conf.environment_type == "fwdasv" and conf.plugins == [".fwdasv.asv.envplugin"]
    assert conf.repo == str(repo)
    assert conf.regressions_thresholds == {".*track_latency.*": 0.05}
    assert conf.launch_method == "forkserver"  # the suites import no torch
    assert "--no-index" in conf.install_command[0] and conf.build_command == []

    suite = suite_of(target_dir)
    assert suite["name"] == "Mymodel" and suite["bases"] == ["asvsuite.TorchSuite"]
    assert suite["model"] == TARGET and suite["cases"] == ("prefill_64=64",)
    assert (target_dir / "benchmarks" / "__init__.py").is_file()

    lines = result.stdout.splitlines()
    steps = [line.split("#")[0].strip() for line in lines[lines.index("next:") + 1 :]]
    assert steps[0] == f"cd {target_dir}"
    # As this shell runs them after the cd: what PATH finds, else the script beside this
    # Python by its absolute path (`.venv-demo/bin/fwdasv init` once printed bare `fwdasv`).
    fwdasv, asv = command_here("fwdasv", relative=False), command_here("asv", relative=False)
    assert fwdasv == "fwdasv" or os.path.isabs(fwdasv), fwdasv
    assert steps[1].startswith(f"{fwdasv} hw machine --name ")
    machine = steps[1].split()[-1]
    assert machine == recorded["name"]
    assert f"machine {machine}: recorded in asv.conf.json" in result.stdout
    assert steps[2:] == [
        f"{asv} run --record-samples --machine {machine} ALL",
        f"{fwdasv} publish",
        f"{fwdasv} regressions",
    ]


def test_a_project_gets_the_environment_canary_by_default(repo: Path, tmp_path: Path) -> None:
    """Issue 19: load (or a driver) that moves every suite at once is told from the code by a
    canary measured at the same commits; `fwdasv init` projects get one unless --no-canary."""
    result = init(
        "--repo",
        str(repo),
        "--target",
        TARGET,
        "--case",
        "prefill_64=64",
        "--dir",
        str(tmp_path / "with"),
        "--no-check",
    )
    assert result.exit_code == 0, result.output
    suites = suites_of(tmp_path / "with")
    canary, own = suites[CANARY_CLASS], suite_of(tmp_path / "with")
    assert canary["model"] == CANARY_TARGET and canary["cases"] == CANARY_CASES
    # The same timer and thread settings as the project's suite: the load that reaches one
    # reaches the other (one launch: only its commit medians tell drift).
    for key in ("timer", "env", "samples"):
        assert canary[key] == own[key], key
    assert canary["launches"] == 1
    assert "the environment canary CanaryDecoder" in result.stdout
    # A `Canary*` suite is what the findings read as the machine, not a series to judge.
    from fwdasv.analysis.findings.series import CANARY_PREFIX

    assert CANARY_CLASS.startswith(CANARY_PREFIX)
    bare = init(
        "--repo",
        str(repo),
        "--target",
        TARGET,
        "--dir",
        str(tmp_path / "without"),
        "--no-check",
        "--no-canary",
    )
    assert bare.exit_code == 0, bare.output
    assert list(suites_of(tmp_path / "without")) == ["Mymodel"]


def test_without_cases_the_defaults_are_written(repo: Path, tmp_path: Path) -> None:
    result = init("--repo", str(repo), "--target", TARGET, "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert suite_of(tmp_path)["cases"] == DEFAULT_CASES
    assert "prepares decode_bs1_1k, decode_bs16_4k, prefill_1k" in result.stdout


def test_an_existing_project_is_refused_unless_force_and_results_are_kept(
    repo: Path, tmp_path: Path
) -> None:
    args = ["--repo", str(repo), "--target", TARGET, "--dir", str(tmp_path), "--no-check"]
    assert init(*args, "--case", "a=8").exit_code == 0
    config = tmp_path / "asv.conf.json"
    (tmp_path / "results" / "box").mkdir(parents=True)
    stored = tmp_path / "results" / "box" / "0123abcd-fwdasv-py3.11.json"
    stored.write_text('{"kept": true}')
    before = config.read_text(), (tmp_path / "benchmarks" / "forward.py").read_text()

    refused = init(*args, "--case", "b=16")
    assert refused.exit_code == 2
    assert init_error_line(refused) == (
        f"Error: {config} exists: {tmp_path} already holds an asv project; pass --force to "
        "replace its configuration and suite (results are kept), or choose another --dir"
    )
    assert (config.read_text(), (tmp_path / "benchmarks" / "forward.py").read_text()) == before

    forced = init(*args, "--case", "b=16", "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.startswith(f"replaced {config}")
    assert suite_of(tmp_path)["cases"] == ("b=16",)
    assert stored.read_text() == '{"kept": true}'


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--target", "mymodel.bench"],
            "Target 'mymodel.bench' is not of the form package.module:callable",
        ),
        (["--case", "decode=8*"], "decode=8*"),
        (["--case", "a=8", "--case", "a=16"], "Two cases are named 'a'"),
        (
            ["--target", "fwdasv.targets.decoder:tiny"],
            "package 'fwdasv' is not in {repo} at {head} (looked in what pip installs from its pyproject.toml)",
        ),
        (
            ["--target", "mymodel.nothere:target"],
            "module 'mymodel.nothere' cannot be imported",
        ),
        (["--target", "mymodel.bench:missing"], "mymodel.bench has no attribute 'missing'"),
        (
            ["--case", "spec=4*4@512:3"],
            "cannot prepare case spec (4*4@512:3): ValueError: spec: mymodel times decode and "
            "prefill steps only",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    repo: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "--short=8", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    argv = ["--repo", str(repo), "--dir", str(tmp_path / "p"), *args]
    if "--target" not in args:
        argv += ["--target", TARGET]
    result = init(*argv)
    assert result.exit_code == 2, result.output
    assert expected.format(repo=repo, head=head) in init_error_line(result)
    assert not (tmp_path / "p").exists()


def test_a_repository_is_required(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = init("--repo", str(plain), "--target", TARGET, "--dir", str(tmp_path / "p"))
    assert result.exit_code == 2
    assert f"--repo {plain} is not a git repository" in init_error_line(result)
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    result = init("--repo", str(plain), "--target", TARGET, "--dir", str(tmp_path / "p"))
    assert f"--repo {plain} has no commit yet" in init_error_line(result)


def test_a_detached_head_needs_a_branch(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", "--detach", "HEAD~1"], cwd=clone, check=True)
    args = ["--repo", str(clone), "--target", TARGET, "--dir", str(tmp_path / "p"), "--no-check"]
    result = init(*args)
    assert "is on a detached HEAD; pass --branch NAME" in init_error_line(result)
    refused = init(*args, "--branch", "nope")
    assert refused.exit_code == 2
    assert f"--branch nope: no such branch in {clone} (it has: main)" in init_error_line(refused)
    result = init(*args, "--branch", "main")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "p" / "asv.conf.json").read_text())["branches"] == ["main"]


def test_a_project_inside_the_repository_names_it_relatively(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    result = init(
        "--repo", str(clone), "--target", TARGET, "--dir", str(clone / "asv"), "--no-check"
    )
    assert result.exit_code == 0, result.output
    assert json.loads((clone / "asv" / "asv.conf.json").read_text())["repo"] == ".."


# --------------------------------------------------------------------------- not a package


@pytest.fixture(scope="module")
def script_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A script-style repository (tests/script_model.py): model.py at the root, no packaging."""
    from script_model import build_repo as build_script_repo

    path = tmp_path_factory.mktemp("script") / "ngmodel"
    build_script_repo(path, commits=2, slow_index=1)
    return path


def test_a_repository_without_packaging_goes_on_the_path_and_init_says_so(
    script_repo: Path, tmp_path: Path
) -> None:
    from script_model import TARGET as SCRIPT_TARGET
    from script_model import write_target

    bench = write_target(tmp_path / "ngbench")
    project = tmp_path / "p"
    result = init(
        "--repo", str(script_repo), "--target", SCRIPT_TARGET, "--target-path", str(bench),
        "--case", "prefill_16=16", "--dir", str(project),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # The check at HEAD imported the target from --target-path and `model` from HEAD's tree.
    assert f"{SCRIPT_TARGET} imports, builds on cpu (float32) and prepares prefill_16" in (
        result.stdout
    )
    assert (
        "install per commit: ngmodel has no setup.py or pyproject.toml: each commit's checkout "
        "goes on the import path (the checkout's root)"
    ) in result.stdout
    assert f"target imported from {bench} (every bench)" in result.stdout
    conf = json.loads((project / "asv.conf.json").read_text())
    assert conf["install_command"] == [
        "in-dir={env_dir} python -m fwdasv.asv.treeinstall --checkout {build_dir} "
        "--env {env_dir} --path ."
    ]
    assert suite_of(project)["target_path"] == (str(bench),)


def test_a_setup_py_that_installs_no_module_fails_the_check_with_the_fix(
    tmp_path: Path,
) -> None:
    """A script repository with a setup.py that installs no module (`model.py` at the root):
    the check imports what pip installs, as asv installs each commit, so it fails at HEAD
    naming `--import-path .`, where a check of the tree passed and every commit failed
    `No module named 'model'`. With `--import-path .` the check passes."""
    from script_model import TARGET as SCRIPT_TARGET
    from script_model import add_empty_setup, write_target
    from script_model import build_repo as build_script_repo

    repo = tmp_path / "ngmodel"
    build_script_repo(repo, commits=2, slow_index=1)
    add_empty_setup(repo)
    bench = write_target(tmp_path / "ngbench")
    args = ["--repo", str(repo), "--target", SCRIPT_TARGET, "--target-path", str(bench)]
    args += ["--case", "prefill_16=16"]
    refused = init(*args, "--dir", str(tmp_path / "p"))
    assert refused.exit_code == 2, refused.output
    line = init_error_line(refused)
    assert "'model' is in ngmodel's checkout but not in the package pip installs" in line
    assert "from its setup.py" in line and "pass --import-path . " in line
    assert not (tmp_path / "p" / "asv.conf.json").exists()
    fixed = init(*args, "--dir", str(tmp_path / "p"), "--import-path", ".")
    assert fixed.exit_code == 0, fixed.output
    assert "imports, builds on cpu (float32) and prepares prefill_16" in fixed.stdout
    assert "each commit's checkout goes on the import path (the checkout's root)" in fixed.stdout


def test_a_package_keeps_the_pip_install(repo: Path, tmp_path: Path) -> None:
    result = init("--repo", str(repo), "--target", TARGET, "--dir", str(tmp_path), "--no-check")
    assert result.exit_code == 0, result.output
    assert "install per commit: pip installs the package (pyproject.toml, no index)" in (
        result.stdout
    )
    assert "target_path" not in suite_of(tmp_path)


def test_named_import_paths_choose_the_checkout_install(repo: Path, tmp_path: Path) -> None:
    args = ["--repo", str(repo), "--target", TARGET, "--dir", str(tmp_path), "--no-check"]
    result = init(*args, "--import-path", "mymodel/..", "--force")
    assert result.exit_code == 2 and "--import-path: import path 'mymodel/..'" in init_error_line(
        result
    )
    result = init(*args, "--import-path", "mymodel")
    assert result.exit_code == 0, result.output
    assert "each commit's checkout goes on the import path (mymodel)" in result.stdout
    assert json.loads((tmp_path / "asv.conf.json").read_text())["install_command"][0].endswith(
        "--path mymodel"
    )


def test_bad_target_paths_are_one_line_and_write_nothing(script_repo: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    base = ["--repo", str(script_repo), "--target", "ngbench:target", "--dir", str(project)]
    cases = {
        str(tmp_path / "nowhere"): f"--target-path {tmp_path / 'nowhere'}: no such directory",
        str(script_repo): f"--target-path {script_repo} is inside --repo {script_repo}",
    }
    for given, expected in cases.items():
        result = init(*base, "--target-path", given, "--no-check")
        assert result.exit_code == 2 and expected in init_error_line(result), result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = init(*base, "--target-path", str(empty))
    assert result.exit_code == 2
    assert f"package 'ngbench' is not in {script_repo} at " in init_error_line(
        result
    ) and f"(looked in ./) nor in --target-path {empty}" in init_error_line(result)
    result = init(*base, "--import-path", "lib")
    assert f"--import-path lib: no such directory in {script_repo}" in init_error_line(result)
    assert not project.exists()


def test_init_reference_writes_a_cpu_suite_with_the_workload(repo: Path, tmp_path: Path) -> None:
    """`fwdasv init --reference`: the suite times on the CPU with fwdasv's fixed workload
    beside each replay (its `track_relative`); with --vllm it is refused in one line."""
    args = ["--repo", str(repo), "--target", TARGET, "--dir", str(tmp_path), "--no-check"]
    result = init(*args, "--reference", "--no-canary")
    assert result.exit_code == 0, result.output
    (suite,) = suites_of(tmp_path).values()
    assert suite["reference"] is True and suite["device"] == "cpu"
    # With the canary (the default), the canary is paced too: a paced series' drift is
    # told by the canary's own ratio.
    result = init(*args[:-2], str(tmp_path / "c"), "--no-check", "--reference")
    assert result.exit_code == 0, result.output
    assert all(s["reference"] is True for s in suites_of(tmp_path / "c").values())
    assert CANARY_CLASS in suites_of(tmp_path / "c")
    refused = init("--repo", str(repo), "--vllm", "--dir", str(tmp_path / "v"), "--reference")
    assert refused.exit_code == 2
    assert init_error_line(refused) == (
        "Error: --reference is for PyTorch models timed on the CPU, not --vllm"
    )


def test_a_suite_written_where_no_gpu_is_visible_is_paced_unless_no_reference(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a box without an NVIDIA GPU the forward times on the CPU, whose speed moves with a
    neighbour's load: `init` paces it (track_relative) by default; --no-reference does not."""
    import fwdasv.backends

    args = ["--repo", str(repo), "--target", TARGET, "--no-check"]
    monkeypatch.setattr(fwdasv.backends, "visible_gpus", lambda: 0)
    result = init(*args, "--dir", str(tmp_path / "cpu"))
    assert result.exit_code == 0, result.output
    assert all(s["reference"] is True for s in suites_of(tmp_path / "cpu").values())
    assert suite_of(tmp_path / "cpu")["device"] == "cpu"
    assert "paced: " in result.stdout and "--no-reference" in result.stdout
    result = init(*args, "--dir", str(tmp_path / "latency"), "--no-reference")
    assert result.exit_code == 0, result.output
    assert not any("reference" in s for s in suites_of(tmp_path / "latency").values())
    assert "paced: " not in result.stdout
    # A GPU is visible: CUDA graphs time the forward, nothing to pace.
    monkeypatch.setattr(fwdasv.backends, "visible_gpus", lambda: 1)
    result = init(*args, "--dir", str(tmp_path / "gpu"))
    assert result.exit_code == 0, result.output
    own = suite_of(tmp_path / "gpu")
    assert "reference" not in own and "device" not in own
