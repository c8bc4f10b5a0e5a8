"""The replay with vLLM 0.33.0's rules against vLLM 0.33.0's own ``Scheduler`` (06 R-40), on CPU.

``tools/replay_vs_vllm.py`` drives the real scheduler (``tools/vllm_sched.py``
in this interpreter, which has the 0.33.0 wheel: ``tox -e vllm033-real``) and
the replay with the rules this plugin gives (``fpm_replay_rules``) over random
plain, sliding-window, GDN/Mamba and GLM-like models, prefix caching on and
off, with every scheduler setting the replay models drawn at random; every step must
be identical.  The full run (300 traces) is in the plugin's README.
"""

from __future__ import annotations

import pytest

from tests.support.real_scheduler import replay_differential

pytestmark = pytest.mark.real

vllm = pytest.importorskip("vllm")
if vllm.__version__ != "0.33.0":
    pytest.skip(f"needs vLLM 0.33.0; vLLM {vllm.__version__} is installed", allow_module_level=True)


def test_forty_random_traces_match_vllm_0_33_0_step_by_step():
    rep = replay_differential(40, seed=2033, release="0.33.0")
    assert rep["preemptions"] > 0 and rep["prefix_hit_requests"] > 0
    assert rep["rejected"] > 0  # max_num_queued_reqs / max_num_queued_tokens, as vLLM's front end


def test_sixteen_hash_id_traces_match_vllm_0_33_0_step_by_step():
    """Prompts given as content-block ids (``hash_ids``, token blocks that agree exactly where the ids
    agree, at a block size of the trace's own), prefix caching on: every step identical."""
    rep = replay_differential(0, seed=20331, release="0.33.0", hash_traces=16)
    assert rep["prefix_hit_requests"] > 0
