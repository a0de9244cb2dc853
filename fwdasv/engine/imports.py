"""Which modules of the code under test a bench process imported: what a commit must change
to reach the forward it timed.

`project_modules(target)` lists, by name, every imported module whose file lies outside the
Python standard library, fwdasv, and the site-packages that hold torch and the other
packages the environment links (in asv's environment the project is installed apart from
them, or its checkout is on the import path; a `--target-path` directory is kept too). The
engine writes the list into each case's `engine` block; the suites record it beside asv's
results (`fwdasv.asv.ranenv`), and `fwdasv.analysis.findings.untouched` reads a commit's diff
against it. None when the target's own module is not among them (the project shares a
directory with torch): then nothing can be told, and no verdict uses it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable

import fwdasv

# What virtualenv seeds into every environment beside the project: never the project's.
SEEDED = frozenset({"_distutils_hack", "_virtualenv", "pip", "pkg_resources", "setuptools"})


def _real(path: str) -> str:
    return os.path.realpath(path)


def _excluded_roots() -> tuple[str, ...]:
    """Directories whose modules are not the project's."""
    paths = sysconfig.get_paths()
    # The standard library of the base interpreter: in a virtualenv `platstdlib` names the
    # environment's own lib/pythonX.Y, which holds its site-packages (the project).
    base = {"platbase": sys.base_exec_prefix, "base": sys.base_prefix}
    stdlib = sysconfig.get_paths(vars=base)
    roots = {stdlib["stdlib"], stdlib["platstdlib"], os.path.dirname(fwdasv.__file__)}
    own = {_real(paths["purelib"]), _real(paths["platlib"])}
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if isinstance(torch_file, str):
        roots.add(os.path.dirname(os.path.dirname(torch_file)))
    # Linked site-packages (the parent environment's), not this environment's own.
    roots.update(
        entry
        for entry in sys.path
        if os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages")
        and _real(entry) not in own
    )
    return tuple(sorted({_real(r) + os.sep for r in roots if r}))


def project_modules(
    target: str, modules: Iterable[tuple[str, object]] | None = None
) -> tuple[str, ...] | None:
    """The imported modules of the code under test, sorted; None when `target`'s module
    (`package.module` of `package.module:callable`) is not among them."""
    excluded = _excluded_roots()
    found = set()
    for name, module in list(sys.modules.items()) if modules is None else modules:
        filename = getattr(module, "__file__", None)
        # torch.ops and torch.classes carry made-up names, not paths.
        if not isinstance(filename, str) or not os.path.isabs(filename) or name == "__main__":
            continue
        if name.partition(".")[0] in SEEDED:
            continue
        if not (_real(filename) + os.sep).startswith(excluded):
            found.add(name)
    return tuple(sorted(found)) if target.partition(":")[0] in found else None
