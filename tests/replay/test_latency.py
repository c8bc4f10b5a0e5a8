"""Latency vectors of 06 §10.6 (R-28 … R-31) and timing vectors §10.7 (TV-1, TV-2)."""

from __future__ import annotations

import json
import math

import pytest
from helpers import full, run, trace

from fpmcore.documents.errors import FpmError
from fpmcore.replay import load_table, table_from_rows
from fpmcore.replay.latency import step_time

PREFILL = [
    (1, 64, 0, 0.030),
    (1, 64, 2176, 0.034),
    (1, 128, 0, 0.032),
    (1, 128, 2176, 0.038),
    (2, 128, 0, 0.040),
    (2, 128, 4352, 0.048),
    (2, 256, 0, 0.044),
    (2, 256, 4352, 0.056),
]
DECODE = [(1, 4096, 0.0070), (1, 8192, 0.0074), (2, 8192, 0.0075), (2, 16384, 0.0080)]


def rows():
    out = [
        {
            "phase": "prefill",
            "batch_size": b,
            "total_prefill_tokens": t,
            "total_kv_read_tokens": k,
            "wall_time_seconds": w,
        }
        for b, t, k, w in PREFILL
    ]
    out += [
        {"phase": "decode", "batch_size": b, "total_kv_read_tokens": k, "wall_time_seconds": w} for b, k, w in DECODE
    ]
    return out


TABLE = table_from_rows(rows())
#: the same rows with a fixed step cost of 4 ms that a step with both phases pays once (RD-16)
TABLE_SHARED = table_from_rows(rows(), shared_step_seconds=0.004)

# (prefill b, t, k), (decode d, k) -> seconds, extrapolated
CASES = [
    ((1, 96, 1088), None, 0.0335, False),
    ((1, 64, 0), None, 0.030, False),
    ((2, 192, 2176), None, 0.047, False),
    ((3, 192, 0), None, 0.050, True),
    ((3, 192, 3264), None, 0.056, True),
    ((1, 32, 0), None, 0.030, True),
    ((4, 8, 0), None, 0.05225, True),
    (None, (1, 6144), 0.0072, False),
    (None, (2, 12288), 0.00775, False),
    (None, (1, 1024), 0.0070, True),
    (None, (3, 12288), 0.0080, True),
    (None, (4, 40000), 0.009508984375, True),
    ((1, 64, 0), (1, 4096), 0.037, False),
]


def _query(fn, p, d):
    pp = p or (0, 0, 0)
    dd = d or (0, 0)
    return fn(TABLE, pp[0], pp[1], pp[2], dd[0], dd[1])


@pytest.mark.parametrize("p,d,want,extra", CASES)
def test_latency_vectors(backend, p, d, want, extra):
    if backend == "c":
        from fpmcore.replay.cengine import step_time_c as fn
    else:
        fn = step_time
    got = _query(fn, p, d)
    assert isinstance(got, tuple)
    assert math.isclose(got[0], want, rel_tol=1e-12, abs_tol=0.0)
    assert got[1] is extra


def test_c_and_python_latency_bit_identical():
    from fpmcore.replay.cengine import step_time_c

    for p, d, _w, _e in CASES:
        assert _query(step_time_c, p, d) == _query(step_time, p, d)


def test_missing_phase_is_reported(backend):
    """R-27: a phase a step needs has no rows."""
    only_decode = table_from_rows([r for r in rows() if r["phase"] == "decode"])
    r = run([full(16, 1)], 1000, 64, trace(("A", 64, 2)), backend, table=only_decode, fixed_step_seconds=None)
    assert r.error is not None and r.error.rule == "R-27"
    assert r.error.message == "latency table has no prefill points"


def test_table_refusals():
    """R-27 diagnostics."""
    bad = rows()
    bad[0] = dict(bad[0], wall_time_seconds=0)
    with pytest.raises(FpmError) as e:
        table_from_rows(bad)
    assert e.value.message == (
        "latency table point has a non-positive or non-finite wall time: prefill batch_size=1 "
        "total_prefill_tokens=64 total_kv_read_tokens=0 wall_time=0"
    )
    with pytest.raises(FpmError) as e:
        table_from_rows(rows() + [rows()[-1]])
    assert (
        e.value.message
        == "duplicate latency table point: decode batch_size=2 total_prefill_tokens=0 total_kv_read_tokens=16384"
    )


def test_tv1(backend):
    r = run(
        [full(16, 1)], 10_000, 512, trace(("A", 64, 3, 0.0), timed=True), backend, table=TABLE, fixed_step_seconds=None
    )
    assert [s["duration_s"] for s in r.steps] == [0.030, 0.0070, 0.0070]
    assert [s["sum_decode_kv_tokens"] for s in r.steps] == [0, 64, 65]
    q = r.requests[0]
    assert q["first_token_time"] == 0.030
    assert math.isclose(q["finish_time"], 0.044, rel_tol=1e-12)
    assert math.isclose(q["ttft_s"], 0.030, rel_tol=1e-12)
    assert math.isclose(q["tpot_s"], 0.007, rel_tol=1e-12)
    assert math.isclose(q["e2e_s"], 0.044, rel_tol=1e-12)


def test_tv2_mixed_step(backend):
    r = run(
        [full(16, 1)],
        10_000,
        512,
        trace(("A", 64, 2, 0.0), ("B", 64, 1, 0.020), timed=True),
        backend,
        table=TABLE,
        fixed_step_seconds=None,
    )
    assert len(r.steps) == 2
    assert math.isclose(r.steps[1]["t_start"], 0.030, rel_tol=1e-12)
    assert math.isclose(r.steps[1]["duration_s"], 0.037, rel_tol=1e-12)
    assert r.steps[1]["finished"] == ["A", "B"]
    a, b = r.requests
    assert math.isclose(a["ttft_s"], 0.030, rel_tol=1e-12)
    assert math.isclose(a["tpot_s"], 0.037, rel_tol=1e-12)
    assert math.isclose(a["e2e_s"], 0.067, rel_tol=1e-12)
    assert math.isclose(b["ttft_s"], 0.047, rel_tol=1e-12)
    assert b["tpot_s"] is None
    assert math.isclose(b["e2e_s"], 0.047, rel_tol=1e-12)


def test_idle_period_is_no_step_with_table(backend):
    """R-25: with timed arrivals and a table the clock jumps to the next arrival."""
    r = run(
        [full(16, 1)],
        10_000,
        512,
        trace(("A", 64, 1, 0.0), ("B", 64, 1, 5.0), timed=True),
        backend,
        table=TABLE,
        fixed_step_seconds=None,
    )
    assert [s["t_start"] for s in r.steps] == [0.0, 5.0]
    assert [s["step"] for s in r.steps] == [0, 1]


def test_fixed_step_timed_arrivals_make_empty_steps(backend):
    """R-25: fixed step seconds: an idle period is a run of empty steps; arrival at the first k×s ≥ t."""
    r = run(
        [full(16, 1)],
        10_000,
        512,
        trace(("A", 64, 1, 0.0), ("B", 64, 1, 2.5), timed=True),
        backend,
        fixed_step_seconds=1.0,
    )
    assert [len(s["scheduled"]) for s in r.steps] == [1, 0, 0, 1]
    assert r.requests[1]["arrival_time"] == 2.5
    assert r.requests[1]["first_scheduled_time"] == 3.0


# RD-16: (prefill b, t, k), (decode d, k), shared seconds -> seconds, extrapolated
SHARED_CASES = [
    ((1, 64, 0), (1, 4096), 0.004, 0.033, False),  # 0.030 + 0.007 - 0.004
    ((1, 64, 0), (1, 4096), 0.010, 0.030, False),  # the shared cost is at most the cheaper phase: max(P, D)
    ((2, 192, 2176), (2, 12288), 0.004, 0.05075, False),  # 0.047 + 0.00775 - 0.004
    ((1, 32, 0), (1, 1024), 0.004, 0.033, True),  # floors first (0.030, 0.0070), then the shared cost
    ((1, 64, 0), None, 0.004, 0.030, False),  # one phase: its own time, the shared cost included
    (None, (1, 4096), 0.004, 0.0070, False),
]


@pytest.mark.parametrize("p,d,shared,want,extra", SHARED_CASES)
def test_a_mixed_step_pays_the_shared_step_cost_once(backend, p, d, shared, want, extra):
    """RD-16: a step with both phases is one forward; ``P + D − min(S, P, D)``, C and Python bit-identical."""
    from fpmcore.replay.cengine import step_time_c

    table = table_from_rows(rows(), shared_step_seconds=shared)
    pp, dd = p or (0, 0, 0), d or (0, 0)
    fn = step_time_c if backend == "c" else step_time
    got = fn(table, pp[0], pp[1], pp[2], dd[0], dd[1])
    assert isinstance(got, tuple)
    assert math.isclose(got[0], want, rel_tol=1e-12, abs_tol=0.0)
    assert got[1] is extra
    assert step_time_c(table, pp[0], pp[1], pp[2], dd[0], dd[1]) == step_time(table, pp[0], pp[1], pp[2], dd[0], dd[1])


def test_tv2_with_a_shared_step_cost(backend):
    """TV-2 with a 4 ms shared cost: the mixed step 1 lasts 0.033 s instead of 0.037 s."""
    r = run(
        [full(16, 1)],
        10_000,
        512,
        trace(("A", 64, 2, 0.0), ("B", 64, 1, 0.020), timed=True),
        backend,
        table=TABLE_SHARED,
        fixed_step_seconds=None,
    )
    assert math.isclose(r.steps[1]["duration_s"], 0.033, rel_tol=1e-12)
    assert math.isclose(r.requests[1]["e2e_s"], 0.043, rel_tol=1e-12)


@pytest.mark.parametrize("bad", [-0.001, float("inf"), "0.004", True])
def test_shared_step_cost_refusals(bad):
    with pytest.raises(FpmError) as e:
        table_from_rows(rows(), "t.json", bad)
    assert e.value.rule == "R-27"
    assert e.value.message.startswith("latency table shared_step_seconds must be a finite number >= 0, found ")


def test_load_table_reads_the_shared_step_cost(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"rows": rows(), "shared_step_seconds": 0.004}))
    assert load_table(path) == TABLE_SHARED
    path.write_text(json.dumps({"rows": rows()}))
    assert load_table(path) == TABLE
