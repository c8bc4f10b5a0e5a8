"""The C prefix pool's two key forms against the Python reference (R-36 … R-38).

The C pool packs a block's key (origin key, block index × groups + group)
into one word when every origin key of the replay fits beside the block
index, and otherwise keys its map by the pair's hash and compares the pair
itself.  Real traces give small origin keys (the packed form); here every
origin and own key is moved far up, which only the wide form holds, and C
must still agree with the reference record for record.
"""

from __future__ import annotations

import json
import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import _outcome, hash_traces, pc_configs, shared_traces

from fpmcore.replay import engine, make_config
from fpmcore.replay.model import KIND_FULL, KIND_MAMBA, GroupSpec
from fpmcore.replay.trace import parse_trace_lines

#: added to every origin and own key: beyond any packed key's origin bits
FAR = 1 << 61


def _far_origins(trace):
    origin, own = _ORIGINS(trace)
    return [tuple((upto, FAR + key) for upto, key in o) for o in origin], [FAR + k for k in own]


_ORIGINS = engine.origins


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pc_configs(), st.one_of(shared_traces(), hash_traces()))
def test_c_equals_python_with_wide_keys(cfg, tr):
    with mock.patch.object(engine, "origins", _far_origins):
        assert _outcome(cfg, tr, "c") == _outcome(cfg, tr, "python")


def _long_hash_trace(seed: int):
    """Requests whose content-block ids continue one of a few earlier ones: more keyed blocks than the key
    map's first buckets hold, so it grows and relinks its lists while blocks of one key are cached twice."""
    rnd = random.Random(seed)
    lines, earlier = [], []
    for i in range(60):
        p = rnd.randint(60, 300)
        need = -(-p // 8)
        ids = list(rnd.choice(earlier)[: rnd.randint(0, need)]) if earlier and rnd.random() < 0.8 else []
        ids += [rnd.randint(0, 5) if rnd.random() < 0.5 else rnd.randint(100, 10**6) for _ in range(need - len(ids))]
        earlier.append(ids[:need])
        d = {"request_id": f"r{i}", "arrival_step": i // 3, "prompt_len": p, "output_len": rnd.randint(1, 40)}
        lines.append(json.dumps({**d, "hash_ids": ids[:need], "hash_block_tokens": 8}))
    return parse_trace_lines(lines)


@pytest.mark.parametrize("far", [False, True], ids=["packed", "wide"])
@pytest.mark.parametrize("mamba", [False, True], ids=["attention", "mamba"])
def test_c_equals_python_as_the_key_map_grows(far, mamba):
    groups = [GroupSpec("attn", KIND_FULL, 2, 1)]
    if mamba:
        groups.append(
            GroupSpec("m", KIND_MAMBA, 2, 1, blocks_per_request=1, checkpoint_blocks=1, checkpoint_alignment=2)
        )
    cfg = make_config(groups, 1500, max_num_batched_tokens=96, max_num_seqs=8, max_model_len=512,
                      prefix_caching=True, fixed_step_seconds=1.0)  # fmt: skip
    tr = _long_hash_trace(7)
    with mock.patch.object(engine, "origins", _far_origins if far else _ORIGINS):
        c = _outcome(cfg, tr, "c")
        assert c == _outcome(cfg, tr, "python")
    assert c[2]["prefix_hit_tokens"] > 0
