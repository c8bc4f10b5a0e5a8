"""Fixtures of the vllm_032 tests: the tiny models (:mod:`fpmcore_vllm032.tiny_models`), written once per session.

Tests marked ``live`` start the vLLM 0.32.0 CPU engine (``tox -e vllm032-live``),
one engine at a time; the default suite skips them (the repository
``conftest.py``).  The other tests need no engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "probes"

#: What the session's live tests found, printed at the end (traces, steps, preemptions, prefix hits, …).
LIVE_REPORT: dict[str, Any] = {}


@pytest.fixture(scope="session")
def tiny_models() -> ModuleType:
    """The plugin's tiny model writer (``fpm tiny-model``), imported when a test asks for it."""
    from fpmcore_vllm032 import tiny_models

    return tiny_models


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_models: ModuleType) -> dict[str, Path]:
    """Every tiny model kind, written once (seed 0), in folders named ``tiny-<kind>``."""
    root = tmp_path_factory.mktemp("tiny-models")
    return {
        kind: Path(tiny_models.write_model(kind, root / f"tiny-{kind}", seed=0)["dir"]) for kind in tiny_models.KINDS
    }


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def evidence_files(folder: Path) -> dict[str, Any]:
    """The JSON files of an evidence folder by relative path."""
    return {p.relative_to(folder).as_posix(): read_json(p) for p in sorted(folder.rglob("*.json"))}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if LIVE_REPORT:
        terminalreporter.write_sep("-", "vllm_032 live: the replay against the running scheduler")
        for key, value in LIVE_REPORT.items():
            terminalreporter.write_line(f"{key}: {json.dumps(value, sort_keys=True)}")


@pytest.fixture(scope="session")
def live_report() -> Iterator[dict[str, Any]]:
    yield LIVE_REPORT
