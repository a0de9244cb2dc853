"""`fwdasv.backends.REGISTRY`: each backend said once, and no name compared elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fwdasv
from fwdasv.backends import BACKENDS, REGISTRY, backend_spec, get_backend
from fwdasv.core.errors import UserError


def test_every_registered_backend_launches_through_its_module() -> None:
    for name, spec in REGISTRY.items():
        module = get_backend(name)
        assert callable(module.argv) and callable(module.unavailable), name
        assert spec.telemetry in ("engine", "sampled"), spec
        assert spec.installs in ("build", "python-over-base"), spec
    assert BACKENDS == ("torch", "vllm")
    with pytest.raises(UserError, match="Unknown backend 'jax'; use one of torch, vllm"):
        backend_spec("jax")


def test_no_module_compares_a_backend_name() -> None:
    """A third backend gets what its registry entry says, not what a `!= "vllm"` implies."""
    compared = []
    for path in Path(fwdasv.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Constant) and side.value in BACKENDS
                for side in (node.left, *node.comparators)
            ):
                compared.append(f"{path}:{node.lineno}")
    assert compared == []
