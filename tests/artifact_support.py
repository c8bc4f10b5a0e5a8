"""What every measurement-artifact test shares (core and plugin tests alike).

``M`` is ``tools/make_artifacts.py``, the writer of artifacts in the producers'
shape; ``host``, ``strict`` and ``producer_dir`` are fixtures a test module
imports to use::

    from tests.artifact_support import M, host, producer_dir, strict  # noqa: F401
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import fpmcore.artifacts as A
import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore.plugins import PluginHost

ROOT = Path(__file__).resolve().parents[1]


def _load_tool() -> ModuleType:
    if "make_artifacts" in sys.modules:
        return sys.modules["make_artifacts"]
    spec = importlib.util.spec_from_file_location("make_artifacts", ROOT / "tools" / "make_artifacts.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_artifacts"] = mod
    spec.loader.exec_module(mod)
    return mod


M = _load_tool()


@pytest.fixture(scope="module")
def host() -> PluginHost:
    """A host with the two model plugins and nothing else."""
    return PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41], environ={})


@pytest.fixture
def strict(monkeypatch):
    """A rule that raises is a bug: let it raise instead of becoming a diagnostic."""
    monkeypatch.setattr(A, "STRICT", True)


@pytest.fixture
def producer_dir(monkeypatch):
    """Read GLM artifacts with the producer files of the example campaign (05 §7.2)."""
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(M.PRODUCER_DIR))
