"""Fixtures of the import tests: the GLM-5.3-Flash TP 4 evidence of 02 §11 and a plugin host."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


glm_fixture = _load("fpm_import_glm_fixture", "glm_fixture.py")
attn_fixture = _load("fpm_import_attn_fixture", "attn_fixture.py")


@pytest.fixture
def evidence():
    """A fresh, editable GLM evidence set (02 §11)."""
    return glm_fixture.Evidence()


@pytest.fixture(scope="session")
def host():
    """A plugin host with exactly the two runtime plugins."""
    from fpmcore.testing import make_host

    return make_host(entry_points=("vllm_027", "vllm_033"))


@pytest.fixture(scope="session")
def services(host):
    from fpmcore.importer import HostServices

    return HostServices(host)


@pytest.fixture
def run_import(tmp_path, services):
    """``run_import(evidence, **kwargs)``: write the evidence and import it."""
    from fpmcore.importer import import_evidence

    counter = {"n": 0}

    def _run(ev, **kwargs):
        counter["n"] += 1
        folder = ev.write(tmp_path / f"ev{counter['n']}")
        return import_evidence(folder, kwargs.pop("services", services), **kwargs)

    return _run
