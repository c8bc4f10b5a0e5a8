"""Worked examples of the replay rules that differ between runtime releases (RD-15), on both engines.

Each example is a trace the real schedulers were seen to take differently
(``tools/replay_vs_vllm.py`` against vLLM 0.33.0 and 0.32.0); the replay
takes each release's steps with its rules.
"""

from __future__ import annotations

import json

import pytest

from fpmcore.replay import make_config, run_replay
from fpmcore.replay.model import KIND_FULL, KIND_MAMBA, GroupSpec
from fpmcore.replay.rules import ReplayRules
from fpmcore.replay.trace import parse_trace_lines


def _steps(cfg, lines, backend):
    out = run_replay(cfg, parse_trace_lines([json.dumps(x) for x in lines]), backend=backend)
    assert out.error is None
    return [[r[:2] for r in s["scheduled"]] for s in out.steps]


@pytest.mark.parametrize("backend", ["c", "python"])
def test_a_rekeyed_mamba_state_delays_the_hit_one_step_on_vllm_0_32_0(backend):
    """GDN-like, block 16, prefix caching: A (40 tokens) computes 32 in step 0, caching the state at 32
    (its prompt's last cacheable boundary); B shares A's first 40 tokens and waits (R-37).  In step 1
    A is scheduled from 32: vLLM 0.33.0 leaves the keyed state alone and B hits 32 at once; vLLM 0.32.0
    keys it again (cached in step 1), so B waits until step 2."""
    groups = [GroupSpec("mamba", KIND_MAMBA, 16, 4096, blocks_per_request=1), GroupSpec("attn", KIND_FULL, 16, 4096)]
    trace = [
        {"request_id": "A", "arrival_step": 0, "prompt_len": 40, "output_len": 3},
        {
            "request_id": "B",
            "arrival_step": 0,
            "prompt_len": 55,
            "output_len": 1,
            "prefix_of": "A",
            "prefix_of_len": 40,
        },
    ]
    steps = {}
    for name, rules in (("0.33.0", ReplayRules()), ("0.32.0", ReplayRules(mamba_boundary_recached=True))):
        cfg = make_config(
            groups,
            40 * 4096,
            max_num_batched_tokens=256,
            max_num_seqs=2,
            max_model_len=256,
            prefix_caching=True,
            fixed_step_seconds=1.0,
            rules=rules,
        )
        steps[name] = _steps(cfg, trace, backend)[:3]
    assert steps["0.33.0"] == [[["A", 32]], [["A", 8], ["B", 16]], [["A", 1], ["B", 7]]]
    assert steps["0.32.0"] == [[["A", 32]], [["A", 8]], [["A", 1], ["B", 16]]]
