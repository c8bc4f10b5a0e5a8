"""Long replays cost time proportional to events, not steps, where the records allow (issue 13 §12).

Without step records the C engine jumps over idle periods and decode-only
stretches; the totals and request records are those of stepping through them
(tests/replay/test_differential.py checks that against the Python reference on
random traces).  Where the records need every step, the step limit stops a
replay with a diagnostic that names the limit and how to raise it.
"""

from __future__ import annotations

from helpers import full, trace, window

from fpmcore.replay import ReplayRun, make_config, run_replay


def _cfg(**kw):
    kw.setdefault("max_model_len", 2**40)
    return make_config([full(16, 1), window(16, 1, 64, name="swa")], 2**34, max_num_batched_tokens=64,
                       max_num_seqs=4, **kw)  # fmt: skip


def test_an_output_of_four_billion_tokens_is_summarized_at_once():
    """One request, 8 prompt tokens, an output of 4·10⁹ tokens: 4·10⁹ steps, jumped over in the summary."""
    out = 4_000_000_000
    r = run_replay(_cfg(max_steps=10**10), trace(("a", 8, out)), backend="c")
    s = r.summary
    assert r.error is None and s["finished"] == 1 and s["steps"] == out
    assert s["makespan_s"] == float(out) and r.requests[0]["output_tokens"] == out
    # the last decode computes token 8 + out - 2: the full group holds cdiv(8 + out - 1, 16) blocks,
    # the window group the 5 blocks of its last 64 tokens
    assert s["peak_used_blocks"] == -(-(8 + out - 1) // 16) + 5
    assert r.requests[0]["tpot_s"] == 1.0 and r.requests[0]["ttft_s"] == 1.0


def test_the_step_limit_stops_it_with_a_diagnostic():
    r = run_replay(_cfg(), trace(("a", 8, 4_000_000_000)), backend="c")
    assert r.error is not None and r.error.rule == "R-25"
    assert r.error.message == (
        "replay stopped at step 1000000000: it reached its limit of 1000000000 steps; raise it with --max-steps"
    )
    assert r.summary["steps"] == 1_000_000_000 and r.summary["finished"] == 0


def test_an_idle_period_of_forty_million_steps_is_jumped():
    """Step-exact arrivals 4·10⁷ steps apart: every step counts, none is replayed one by one."""
    tr = trace(("a", 8, 3, 0), ("b", 8, 2, 40_000_000))
    s = run_replay(_cfg(), tr, backend="c").summary
    assert s["steps"] == 40_000_002 and s["finished"] == 2 and s["makespan_s"] == 40_000_002.0
    run = ReplayRun(_cfg(), tr, backend="c", steps=False)
    chunks = list(run)
    assert run.steps_done == 40_000_002 and sum(len(c.requests) for c in chunks) == 2
    assert run.summary() == s
