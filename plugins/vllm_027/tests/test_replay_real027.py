"""The replay with vLLM 0.27.0's rules against vLLM 0.27.0's own ``Scheduler`` (06 R-40), on CPU.

``tools/replay_vs_vllm.py`` drives the real scheduler (``tools/vllm_sched.py``
in this interpreter, which has the 0.27.0 wheel: ``tox -e vllm027-real``) and
the replay with the rules this plugin gives (``fpm_replay_rules``) over random
plain, sliding-window, GDN/Mamba and GLM-like models, prefix caching on and
off, with every scheduler setting 0.27.0 has drawn at random; every step must
be identical.  The full run (300 traces) is in the plugin's README.

Two windows of the shipped Mooncake conversation excerpt run the same way on the plain and
GLM-like models, prefix caching off and on (``replay_vs_vllm.py --windows``); the counts of
these and of four windows of the whole trace are in ``docs/guides/replaying.md``.
"""

from __future__ import annotations

import pytest

from tests.support.real_scheduler import mooncake_excerpt_windows, replay_differential

pytestmark = pytest.mark.real

vllm = pytest.importorskip("vllm")
if vllm.__version__ != "0.27.0":
    pytest.skip(f"needs vLLM 0.27.0; vLLM {vllm.__version__} is installed", allow_module_level=True)


def test_forty_random_traces_match_vllm_0_27_0_step_by_step():
    rep = replay_differential(40, seed=2027, release="0.27.0")
    assert rep["preemptions"] > 0 and rep["prefix_hit_requests"] > 0
    # only the settings 0.27.0 has are drawn
    assert set(rep["settings"]) <= {
        "max_num_scheduled_tokens",
        "long_prefill_token_threshold",
        "policy=priority",
        "watermark",
        "no scheduler_reserve_full_isl",
    }


def test_sixteen_hash_id_traces_match_vllm_0_27_0_step_by_step():
    """Prompts given as content-block ids (``hash_ids``, token blocks that agree exactly where the ids
    agree, at a block size of the trace's own), prefix caching on: every step identical."""
    rep = replay_differential(0, seed=20271, release="0.27.0", hash_traces=16)
    assert rep["prefix_hit_requests"] > 0


def test_windows_of_the_mooncake_excerpt_match_vllm_0_27_0_step_by_step():
    """Two windows of the shipped Mooncake conversation excerpt (lines 0–19 and 20–39), read by fpm's own
    reader (prompts clipped at 16,384 tokens with their block ids, one step to 10 ms of the trace), on the
    plain and GLM-like models with prefix caching off and on and pools that hold one long request: every
    step identical to vLLM 0.27.0's."""
    rep = mooncake_excerpt_windows(27, release="0.27.0")
    assert rep["by_kind"]["glm/off/window"]["preemptions"] > 0  # the pools hold one long request
    assert rep["by_kind"]["plain/on/window"]["preemptions"] > 0
    assert rep["by_kind"]["glm/on/window"]["prefix_hit_tokens"] > 0
