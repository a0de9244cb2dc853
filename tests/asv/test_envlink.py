"""`fwdasv.asv.envlink`: the link that lets asv's per-commit environments see the parent
environment's packages, in PYTHONPATH's order and without its stdlib or working dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

from fwdasv.asv.envlink import PTH_NAME, parent_site_packages


def test_the_link_names_what_the_parent_imports_but_not_its_stdlib_or_working_dir(
    tmp_path: Path,
) -> None:
    extra = tmp_path / "on-pythonpath"
    extra.mkdir()
    work = tmp_path / "checkout"
    work.mkdir()
    code = "import json; from fwdasv.asv.envlink import parent_site_packages as p; print(json.dumps(p()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(extra), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout
    linked = json.loads(out)
    # PYTHONPATH's folders, in order, ahead of the site-packages behind them.
    assert [p for p in linked if p in (str(extra), str(ROOT))] == [str(extra), str(ROOT)]
    import asv_runner

    site_dir = str(Path(asv_runner.__file__).parent.parent)
    assert linked.index(str(ROOT)) < linked.index(site_dir), linked
    assert str(work) not in linked
    stdlib = os.path.dirname(os.__file__)
    assert not [p for p in linked if p == stdlib or p.startswith(stdlib + "/lib-dynload")]
    assert parent_site_packages()  # and in-process too


def test_the_stable_link_command_of_older_configurations_still_links(tmp_path: Path) -> None:
    """`python -m fwdasv.asvenv link {env_dir}`, as configurations written before name it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = tmp_path / "env" / "lib" / version / "site-packages"
    site_packages.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "fwdasv.asvenv", "link", str(tmp_path / "env")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = (site_packages / PTH_NAME).read_text().splitlines()
    import asv_runner

    assert (
        f"import site; site.addsitedir({str(Path(asv_runner.__file__).parent.parent)!r})" in lines
    )
    assert done.stdout.strip() == f"fwdasv: linked {site_packages / PTH_NAME}"
