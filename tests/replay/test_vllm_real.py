"""The replay engine against the real vLLM 0.33.0 Scheduler (06 R-40).

Drives vLLM's own ``Scheduler`` (with vLLM's front-end admission) through
``tools/vllm_sched.py`` in an interpreter that has vLLM 0.33.0
(``$FPM_ORACLE_PY``, default: this interpreter in ``tox -e vllm033-real``)
and compares every step of random traces: plain, sliding-window (prefix
caching on and off), GDN/Mamba hybrid (align mode, with and without a
checkpoint block) and GLM-like models, with shared prefixes, preemption and
eviction, and vLLM's scheduler settings drawn at random; and traces whose
prompts are content-block ids (``hash_ids``: token blocks that agree exactly
where the ids agree) with prefix caching on.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.real_scheduler import RANDOM_KINDS, mooncake_excerpt_windows, replay_differential

pytestmark = pytest.mark.real


def _oracle_python() -> str:
    return os.environ.get("FPM_ORACLE_PY") or (
        sys.executable if importlib.util.find_spec("vllm") is not None
        else str(Path.home() / ".cache/fpm-oracle/venv/bin/python")
    )  # fmt: skip


@pytest.fixture(scope="module")
def oracle() -> None:
    py = _oracle_python()
    if not Path(py).exists():
        pytest.skip("needs the real vLLM (tox -e vllm033-real)")
    probe = subprocess.run(
        [py, "-c", "import vllm, sys; sys.exit(vllm.__version__ != '0.33.0')"],
        capture_output=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("needs the real vLLM 0.33.0 (tox -e vllm033-real)")


SETTINGS = {
    "max_num_scheduled_tokens",
    "max_num_active_seqs",
    "long_prefill_token_threshold",
    "long_prefill_token_threshold_adaptive",
    "prefill_schedule_interval",
    "policy=priority",
    "max_num_queued_reqs",
    "max_num_queued_tokens",
    "watermark",
    "no scheduler_reserve_full_isl",
}


@pytest.mark.parametrize("backend", ["c", "python"])
def test_random_traces_match_vllm_step_by_step(oracle, backend):
    """≥ 300 random traces (C engine; 160 for the slower reference), every one identical to vLLM step by step."""
    n, nh = (320, 80) if backend == "c" else (160, 40)
    rep = replay_differential(n, seed=11 if backend == "c" else 12, backend=backend, hash_traces=nh, refused=10)
    assert set(rep["by_kind"]) == RANDOM_KINDS | {f"{k}/on/hash" for k in ("plain", "window", "gdn", "glm")}
    for kind, k in rep["by_kind"].items():
        assert k["matched"] == k["compared"] >= (nh // 4 - 2 if kind.endswith("/hash") else n // 8 - 1), kind
        if not kind.endswith("/hash"):
            assert k["preemptions"] > 0, kind
        if "/on" in kind:
            assert k["prefix_hit_requests"] > 0, kind  # shared prefixes are hit, also after eviction
    assert set(rep["settings"]) == SETTINGS
    assert rep["rejected"] > 0  # max_num_queued_reqs / max_num_queued_tokens rejections, as vLLM's front end


def test_windows_of_the_mooncake_excerpt_match_vllm_step_by_step(oracle):
    """Two windows of the shipped Mooncake conversation excerpt, read by fpm's own reader (prompts clipped at
    16,384 tokens with their block ids, one step to 10 ms of the trace), on the plain and GLM-like models with
    prefix caching off and on and pools that hold one long request: every step identical to vLLM's."""
    mooncake_excerpt_windows(33)
