"""The runtime pin is one value type, and one constant names the framework."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import attrs
import pytest

from fpmcore.documents.profile import FpmDeploymentProfile
from fpmcore.documents.runtime_pin import FRAMEWORK, RuntimePin

SRC = Path(__file__).resolve().parents[1] / "src" / "fpmcore"


def test_a_pin_is_written_and_read_back():
    pin = RuntimePin("0.33.0")
    assert str(pin) == "vllm==0.33.0" and pin.framework == FRAMEWORK == "vllm"
    assert RuntimePin.parse("vllm==0.33.0") == pin
    assert RuntimePin.parse(str(RuntimePin("1.2.3rc1", "other"))) == RuntimePin(version="1.2.3rc1", framework="other")
    with pytest.raises(ValueError, match="not a runtime pin"):
        RuntimePin.parse("vllm 0.33.0")


def test_a_well_formed_pin_is_an_exact_name_and_version():
    assert RuntimePin.well_formed("vllm==0.33.0") and RuntimePin.well_formed("conformance==unmodelled")
    assert not any(map(RuntimePin.well_formed, ("vllm>=0.33", "vllm==", "==0.33.0", "vllm == 0.33.0", "glm53flash")))


def test_the_version_of_a_target_that_is_no_pin_is_the_target():
    assert RuntimePin.version_of("vllm==0.27.0") == "0.27.0"
    assert RuntimePin.version_of("0.27.0") == "0.27.0"


def test_the_profile_backend_is_the_framework():
    assert attrs.fields(FpmDeploymentProfile).backend.metadata
    hints = typing.get_type_hints(FpmDeploymentProfile)
    assert typing.get_args(hints["backend"]) == (FRAMEWORK,)


def _joins(node: ast.expr, *, end: bool = False) -> bool:
    """A constant part of an f-string that starts (``end``: ends) with ``==``: it joins a formatted value."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    return node.value.endswith("==") if end else node.value.startswith("==")


def _pin_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` of each ``"=="`` a module builds or splits a pin with."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and any(
            isinstance(a, ast.FormattedValue) and _joins(b) or _joins(a, end=True) and isinstance(b, ast.FormattedValue)
            for a, b in zip(node.values, node.values[1:])
        ):
            hits.append((node.lineno, "f-string with =="))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("partition", "rpartition", "split", "rsplit")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "=="
        ):
            hits.append((node.lineno, f"{node.func.attr}('==')"))
    return sorted(hits)


def test_no_module_but_the_pin_type_joins_or_splits_a_pin():
    found = {
        str(path.relative_to(SRC)): hits
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "runtime_pin.py" and (hits := _pin_texts(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}
    code = 'x = f"vllm=={v}"\ny = s.rpartition("==")[2]\nz = f"{a}=={b}"\nw = f"METRIC<=N (or ==), found {t}"\n'
    assert _pin_texts(ast.parse(code)) == [(1, "f-string with =="), (2, "rpartition('==')"), (3, "f-string with ==")]
