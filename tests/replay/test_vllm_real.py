"""The replay engine against the real vLLM 0.33.0 Scheduler (06 R-40).

Drives vLLM's own ``Scheduler`` through ``tools/vllm_sched.py`` in the vLLM
oracle's environment (``$FPM_ORACLE_PY``, default
``~/.cache/fpm-oracle/venv/bin/python``; the oracle harness directory is
``$FPM_ORACLE_DIR``) and compares every step.  Skips cleanly when vLLM 0.33.0
is not available.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

pytestmark = pytest.mark.real


def _oracle_ready() -> bool:
    py = os.environ.get("FPM_ORACLE_PY") or (
        sys.executable if importlib.util.find_spec("vllm") is not None
        else str(Path.home() / ".cache/fpm-oracle/venv/bin/python")
    )
    oracle_dir = Path(os.environ.get("FPM_ORACLE_DIR", str(ROOT / "tools")))
    if not Path(py).exists() or not (oracle_dir / "vllm_oracle.py").exists():
        return False
    probe = subprocess.run([py, "-c", "import vllm, sys; sys.exit(vllm.__version__ != '0.33.0')"],
                           capture_output=True, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    return probe.returncode == 0


@pytest.fixture(scope="module")
def oracle() -> None:
    if importlib.util.find_spec("vllm") is None and not _oracle_ready():
        pytest.skip("vLLM 0.33.0 (the oracle environment) is not available")
    if not _oracle_ready():
        pytest.skip("the vLLM oracle harness is not available")


def test_random_traces_match_vllm_step_by_step(oracle):
    """≥ 200 random traces inside R-40's envelope: plain, sliding-window and GLM-like hybrid models,
    prefix caching on (with shared prefixes) and off, small pools with preemptions."""
    from replay_vs_vllm import differential

    rep = differential(240, seed=11)
    assert rep["mismatches"] == []
    assert rep["compared"] + rep["outside_envelope"] + rep["vllm_refused"] == 240
    assert rep["compared"] >= 200
    assert rep["preemptions"] > 100
    assert {k for k, v in rep["by_kind"].items() if v["compared"]} == {
        "plain/off", "plain/on", "window/off", "hybrid/off", "hybrid/on"}


def test_prefix_caching_with_preemption_beyond_the_envelope(oracle):
    """Self-hits after recompute preemption (R-39: specified, not claimed verified) also match vLLM."""
    from replay_vs_vllm import differential

    rep = differential(100, seed=23, strict_envelope=False)
    assert rep["mismatches"] == []
    assert rep["compared"] == 100
