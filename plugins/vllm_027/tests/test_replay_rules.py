"""The replay rules of vLLM 0.27.0 (``fpm_replay_rules``): where its scheduler differs from 0.33.0's."""

from __future__ import annotations

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.replay import make_config
from fpmcore.replay.model import KIND_FULL, KIND_RING, GroupSpec
from fpmcore.testing import make_host


def test_the_plugin_gives_the_rules_of_its_release_through_the_host():
    host = make_host(entry_points=("vllm_027", "vllm_033"))
    rules = host.hooks.replay_rules("vllm==0.27.0")
    assert rules.runtime == "vllm==0.27.0"
    on = {name for name in ("long_prefill_cap_always", "budget_scheduled_only",
                            "priority_self_preemption_stops", "priority_shift_if_scheduled",
                            "dense_retention", "align_last_stop_at_tokens", "no_mamba_checkpoints",
                            "no_ring_groups") if getattr(rules, name)}  # fmt: skip
    assert len(on) == 8
    # R-7, R-20, R-37, R-38's queue order: the same code as 0.33.0
    assert not rules.check_before_release and not rules.free_uncached_to_back
    assert not rules.mamba_hits_same_step and not rules.window_cap_exact
    assert sorted(rules.settings) == [
        "long_prefill_token_threshold",
        "max_num_scheduled_tokens",
        "scheduler_reserve_full_isl",
        "scheduling_policy",
        "watermark",
    ]
    assert host.hooks.replay_runtimes() == ["vllm==0.27.0", "vllm==0.33.0"]


def test_a_setting_or_group_vllm_0_27_0_lacks_is_refused():
    rules = make_host(entry_points=("vllm_027",)).hooks.replay_rules("vllm==0.27.0")
    base = dict(max_num_batched_tokens=8, max_num_seqs=2, max_model_len=64, rules=rules)
    with pytest.raises(FpmError) as e:
        make_config([GroupSpec("a", KIND_FULL, 4, 4)], 64, max_num_queued_reqs=3, **base)
    assert e.value.message == "the vllm==0.27.0 scheduler has no max_num_queued_reqs: the replay cannot model it"
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("t", KIND_RING, 4, 4, blocks_per_request=1)], 64, **base
        )
    assert e.value.message == "the vllm==0.27.0 KV cache has no ring state groups: cache group t"
