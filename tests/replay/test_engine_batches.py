"""Requests put in engine form a batch of columns at a time (engine.engine_batches) and the collector paused
around a whole replay (engine.collector_paused)."""

from __future__ import annotations

import gc

import pytest
from helpers import full, run, trace, window

from fpmcore.documents.errors import FpmError
from fpmcore.replay import ReplayRun, engine, make_config, run_replay
from fpmcore.replay.engine import engine_requests


def _mixed():
    """Seven requests: a shared prefix (R-36 origins), a rejection (prompt over max_model_len), timed arrivals."""
    prefix = {"shared_prefix_id": "sys", "shared_prefix_len": 8}
    return trace(("A", 12, 5, 0.0, prefix), ("B", 12, 3, 0.5, prefix), ("C", 40, 2, 0.5), ("D", 4, 1, 2.5),
                 ("E", 9, 4, 3.0, prefix), ("F", 6, 6, 3.0), ("G", 5, 2, 7.25), timed=True)  # fmt: skip


def _cfg(prefix_caching: bool):
    return make_config([full(4, 4), window(4, 4, 8)], 96, max_num_batched_tokens=16, max_num_seqs=3,
                       max_model_len=32, reserve_full_isl=False, fixed_step_seconds=1.0,
                       prefix_caching=prefix_caching)  # fmt: skip


@pytest.mark.parametrize("prefix_caching", [False, True])
@pytest.mark.parametrize("batch", [1, 3, 7])
def test_batches_of_any_size_give_the_same_replay(backend, monkeypatch, batch, prefix_caching):
    """Cut into batches of 1, 3 (the last one short) or all 7 requests, the engine form and every record are those
    of the whole trace in one batch; C hit tokens show that the origins crossed the batches."""
    cfg, tr = _cfg(prefix_caching), _mixed()
    whole = run_replay(cfg, tr, backend=backend)
    form = engine_requests(cfg, tr)
    monkeypatch.setattr(engine, "ENGINE_BATCH", batch)
    assert engine_requests(cfg, tr) == form
    cut = run_replay(cfg, tr, backend=backend)
    assert (cut.summary, list(cut.requests), list(cut.steps)) == (whole.summary, list(whole.requests),
                                                                  list(whole.steps))  # fmt: skip
    rr = ReplayRun(cfg, tr, backend=backend)
    chunks = list(rr)
    assert [s for c in chunks for s in c.steps] == list(whole.steps) and rr.summary() == whole.summary
    assert whole.summary["rejected"] == 1 and whole.summary["finished"] == 6
    assert (whole.summary["prefix_hit_tokens"] > 0) == prefix_caching


def test_an_engine_bound_is_named_at_its_line_in_a_later_batch(backend, monkeypatch):
    """R-32 in the third batch of two: the first request over the bound (line 5, not line 6) is named."""
    monkeypatch.setattr(engine, "ENGINE_BATCH", 2)
    tr = trace(("a", 4, 1), ("b", 4, 1), ("c", 4, 1), ("d", 4, 1), ("e", 2**41, 1), ("f", 2**42, 1))
    with pytest.raises(FpmError) as e:
        run([full(4, 4)], 64, 8, tr, backend)
    assert (e.value.rule, e.value.message) == ("R-32", "trace line 5: prompt_len 2199023255552 exceeds the replay "
                                               "limit 1099511627776")  # fmt: skip


def test_the_collector_is_paused_during_a_replay_and_restored_after(backend, monkeypatch):
    """On during the call only if it was on before; restored when the replay raises too."""
    seen = []
    real = engine.engine_batches

    def spy(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(engine, "engine_batches", spy)
    assert gc.isenabled()
    r = run([full(4, 4)], 64, 8, trace(("a", 4, 2)), backend)
    assert r.summary["finished"] == 1 and seen == [False] and gc.isenabled()
    with pytest.raises(FpmError):
        run([full(4, 4)], 64, 8, trace(("a", 2**41, 1)), backend)
    assert gc.isenabled()
    gc.disable()
    try:
        run([full(4, 4)], 64, 8, trace(("a", 4, 2)), backend)
        assert not gc.isenabled()
    finally:
        gc.enable()
