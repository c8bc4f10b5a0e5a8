"""The scheduler envelope vLLM 0.32.0 shares with the replay's 0.33.0 scheduler (README §3-§4)."""

from __future__ import annotations

import pytest

from fpmcore_vllm032.envelope import outside_envelope

#: The CPU engine's scheduler settings (README §5: FCFS, synchronous, chunked prefill, interval 1).
CPU = {"max_num_batched_tokens": 4096, "max_num_seqs": 256, "enable_chunked_prefill": True, "async_scheduling": False,
       "long_prefill_token_threshold": 0, "policy": "fcfs", "watermark": 0.0, "scheduler_reserve_full_isl": True,
       "prefill_schedule_interval": 1}  # fmt: skip


def test_the_cpu_engine_is_inside():
    assert outside_envelope(CPU) == []
    # the hybrid with caching on: hash block = Mamba block = 384 (D-M2 not reached)
    assert outside_envelope(CPU, hash_block_size=384, mamba_block_sizes=(384, 384, 384)) == []


@pytest.mark.parametrize(("change", "kw", "names"), [
    ({"prefill_schedule_interval": 4}, {}, "D-S1"),
    ({"async_scheduling": True}, {}, "D-S8"),
    ({}, {"speculative": True}, "D-S2"),
    ({}, {"kv_transfer": True}, "D-S6"),
    ({}, {"lora": True}, "D-S5"),
    ({}, {"multimodal": True}, "D-S3"),
    ({}, {"hash_block_size": 128, "mamba_block_sizes": (384,)}, "D-M2"),
])  # fmt: skip
def test_each_difference_is_named(change, kw, names):
    reasons = outside_envelope({**CPU, **change}, **kw)
    assert len(reasons) == 1 and names in reasons[0]


def test_several_settings_give_several_reasons():
    reasons = outside_envelope({**CPU, "async_scheduling": True, "prefill_schedule_interval": 2}, lora=True)
    assert [r.split("(")[-1] for r in reasons] == ["D-S1)", "D-S8)", "D-S5)"]
    # the priority policy is modelled (D-S4: ReplayRules.priority_self_preemption_stops)
    assert outside_envelope({**CPU, "policy": "priority"}) == []


def test_the_replay_rules_of_0_32_0_refuse_what_its_scheduler_does_differently(tmp_path):
    """A replay of the live llama profile with vLLM 0.32.0's rules: the setting of D-S1 is refused (R-3); the
    priority policy replays with 0.32.0's scan (D-S4), given by the plugin's ``fpm_replay_rules``."""
    from pathlib import Path

    from fpmcore.documents.errors import FpmError
    from fpmcore.importer import HostServices, import_evidence
    from fpmcore.replay import config_from_profile, run_replay
    from fpmcore.replay.trace import parse_trace_lines
    from fpmcore.testing import make_host
    from fpmcore_vllm032.envelope import REPLAY_RULES

    folder = Path(__file__).resolve().parents[3] / "examples" / "probes" / "live" / "tiny-llama"
    (result,) = import_evidence(folder, HostServices(make_host(entry_points=("vllm_032",)))).results
    profile = result.profile
    cfg = config_from_profile(profile, prefix_caching=True, rules=REPLAY_RULES, max_num_seqs=4)
    out = run_replay(
        cfg, parse_trace_lines(['{"request_id": "a", "arrival_step": 0, "prompt_len": 300, "output_len": 3}'])
    )
    assert out.error is None and [s["scheduled"][0][1] for s in out.steps] == [300, 1, 1]
    with pytest.raises(FpmError, match="the vllm==0.32.0 scheduler has no prefill_schedule_interval: the replay"):
        config_from_profile(profile, prefix_caching=True, rules=REPLAY_RULES, prefill_schedule_interval=4)
    config_from_profile(profile, prefix_caching=True, rules=REPLAY_RULES, scheduling_policy="priority")
    assert make_host(entry_points=("vllm_032",)).hooks.replay_rules("vllm==0.32.0") is REPLAY_RULES
    assert REPLAY_RULES.priority_self_preemption_stops and REPLAY_RULES.mamba_boundary_recached
    config_from_profile(profile, prefix_caching=True, rules=REPLAY_RULES, long_prefill_token_threshold=64)
