"""The C prefix pool's two key forms against the Python reference (R-36 … R-38).

The C pool packs a block's key (origin key, block index × groups + group)
into one word when every origin key of the replay fits beside the block
index, and otherwise keys its map by the pair's hash and compares the pair
itself.  Real traces give small origin keys (the packed form); here every
origin and own key is moved far up, which only the wide form holds, and C
must still agree with the reference record for record.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import _outcome, hash_traces, pc_configs, shared_traces

from fpmcore.replay import engine

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
