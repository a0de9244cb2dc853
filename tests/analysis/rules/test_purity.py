"""rules/ is the pure room: its modules import only the standard library, numpy, fwdasv.core
and each other (no asv, no files of the project, no processes)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import fwdasv.analysis.rules

RULES = Path(fwdasv.analysis.rules.__file__).parent
ALLOWED_PREFIXES = ("numpy", "fwdasv.core", "fwdasv.analysis.rules")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom):
            names.add("fwdasv.analysis.rules")  # relative: inside the room
    return names


def is_allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return True
    return any(module == p or module.startswith(p + ".") for p in ALLOWED_PREFIXES)


def test_rules_import_only_stdlib_numpy_and_core() -> None:
    modules = sorted(RULES.glob("*.py"))
    assert len(modules) >= 10, f"rules/ holds {len(modules)} modules: {modules}"
    offending = {
        path.name: sorted(m for m in imported_modules(path) if not is_allowed(m))
        for path in modules
    }
    offending = {name: mods for name, mods in offending.items() if mods}
    assert offending == {}, f"rules/ modules importing beyond stdlib, numpy and core/: {offending}"


def test_the_purity_check_catches_an_asv_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import json\nfrom fwdasv.asv.history import load\n\ndef f():\n    import asv\n")
    assert sorted(m for m in imported_modules(bad) if not is_allowed(m)) == [
        "asv",
        "fwdasv.asv.history",
    ]
