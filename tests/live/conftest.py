"""Fixtures of the live tests: the tools under test, tiny models made once per session.

The tests here are marked ``live``: they start the vLLM 0.32.0 CPU engine
(``tox -e vllm032-live``), one engine at a time, and the default suite skips
them (the repository ``conftest.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as a module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_models() -> ModuleType:
    return load_tool("tiny_models")


@pytest.fixture(scope="session")
def live_engine() -> ModuleType:
    return load_tool("live_engine")


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_models: ModuleType) -> dict[str, Path]:
    """Every tiny model kind, written once (seed 0)."""
    root = tmp_path_factory.mktemp("tiny-models")
    return {kind: Path(tiny_models.write_model(kind, root / kind, seed=0)["dir"]) for kind in tiny_models.KINDS}
