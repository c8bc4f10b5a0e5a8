"""The records as JSON lines from the C library against the reference: the record objects through orjson.

``ReplayRun.advance_lines`` (the C writer of ``csrc/fpm_records.c`` on the
C engine) must give the bytes :func:`fpmcore.documents.jsonio.dumps_output` makes of
``ReplayRun.advance``'s records, and the same summary, on random
deployments and traces (every group kind, rejections, stops, latency
tables), request ids that need escaping, and every float orjson can meet.
"""

from __future__ import annotations

import json
import math
import struct

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_differential import configs, hash_traces, pc_configs, shared_traces, traces

from fpmcore.documents.jsonio import dumps_output
from fpmcore.replay.engine import ReplayRun
from fpmcore.replay.record_lines import format_double, text_list, trace_fields
from fpmcore.replay.trace import Trace, parse_trace_lines

pytestmark = pytest.mark.skipif(
    __import__("fpmcore.replay.native").replay.native.BACKEND != "c", reason="needs the C build"
)


def _lines_of_records(cfg, tr, chunk, steps=True):
    run = ReplayRun(cfg, tr, backend="c", steps=steps)
    out_steps, out_requests = [], []
    while not run.ended:
        c = run.advance(chunk)
        out_steps += map(dumps_output, c.steps)
        out_requests += map(dumps_output, c.requests)
    return b"".join(out_steps), b"".join(out_requests), run.summary(), run.first_rejections, _err(run)


def _lines(cfg, tr, chunk, steps=True):
    run = ReplayRun(cfg, tr, backend="c", steps=steps)
    out_steps, out_requests, first = [], [], 0
    while not run.ended:
        c = run.advance_lines(chunk)
        assert c.first_step == first
        first = run.steps_done
        out_steps.append(c.steps)
        out_requests.append(c.requests)
    assert run._lines or not tr.requests  # the C writer wrote them, not the reference
    return b"".join(out_steps), b"".join(out_requests), run.summary(), run.first_rejections, _err(run)


def _err(run):
    return (run.error.rule, run.error.message) if run.error else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(configs(), pc_configs()), st.one_of(traces(), shared_traces(), hash_traces()),
       st.sampled_from([1, 7, 4096]), st.booleans())  # fmt: skip
def test_c_lines_equal_the_records_through_orjson(cfg, tr, chunk, steps):
    assert _lines(cfg, tr, chunk, steps) == _lines_of_records(cfg, tr, chunk, steps)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(configs(), pc_configs()), st.one_of(traces(), shared_traces()), st.sampled_from([1, 7]))
def test_request_records_as_objects_beside_the_lines(cfg, tr, chunk):
    """``advance_lines(requests=True)`` (``fpm replay --out --json``): the objects of ``advance`` beside the lines."""
    run, objects = ReplayRun(cfg, tr, backend="c"), []
    while not run.ended:
        objects += run.advance(chunk).requests
    run, lines, from_lines = ReplayRun(cfg, tr, backend="c"), [], []
    while not run.ended:
        c = run.advance_lines(chunk, requests=True)
        lines.append(c.requests)
        from_lines += c.request_records
    assert from_lines == objects and b"".join(lines) == b"".join(map(dumps_output, objects))


_ID_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.text(_ID_CHARS, min_size=1, max_size=6), min_size=1, max_size=6, unique=True),
       st.booleans())  # fmt: skip
@example(None, ['a"b', "c\\d", "e\nf\x00\x1f\x7f", "ü✓😀", "/"], True)
def test_request_ids_are_escaped_as_orjson_escapes_them(cfg, ids, timed):
    if cfg is None:
        from test_differential import make_config
        from test_latency import TABLE

        from fpmcore.replay.model import KIND_FULL, GroupSpec

        cfg = make_config([GroupSpec("attn", KIND_FULL, 4, 1)], 40, max_num_batched_tokens=16, max_num_seqs=2,
                          max_model_len=1 << 20, table=TABLE, max_num_queued_reqs=3)  # fmt: skip
    arrival = "arrival_time" if timed else "arrival_step"
    tr = parse_trace_lines(
        [json.dumps({"request_id": r, "prompt_len": 5 + 7 * i, "output_len": 3 + i, arrival: i}) for i, r in
         enumerate(ids)]
    )  # fmt: skip
    assert _lines(cfg, tr, 3) == _lines_of_records(cfg, tr, 3)


def test_text_list_escapes_and_offsets():
    t = text_list(["a", 'b"', "ü"])
    assert t.text == b'ab\\"\xc3\xbc' and list(t.offsets) == [0, 1, 4, 6] and t.longest == 3
    plain = text_list(["r1", "r22"])
    assert plain.text == b"r1r22" and list(plain.offsets) == [0, 2, 5] and plain.longest == 3


def test_arrival_times_not_floats_leave_the_records_to_the_reference():
    class Line:
        request_id, prompt_len, output_len, arrival_time = "a", 1, 1, 3

    assert trace_fields(Trace((Line(),), "arrival_time")) is None  # type: ignore[arg-type]


_EDGES = [0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 1e-5, 1e-7, 1.5e-7, 1e-6, 1.234e-5, 0.00001234, 1e15, 1e16, 1e16 - 2,
          9007199254740993.0, 1234567890123456.8, 1e21, 1e22, 1e100, 1.7976931348623157e308, 2.2250738585072014e-308,
          2.225073858507201e-308, 5e-324, 1e-323, 4.9406564584124654e-324 * 3, 123.456, 2.0**-1074 * 12345,
          2.0**60, 2.0**-20, 1e23, 9.999999999999999e22, 5e-5, 0.3, 2.5, 1e300 * 10, math.nan, -math.inf]  # fmt: skip


@pytest.mark.parametrize("x", _EDGES)
def test_floats_at_the_edges_as_orjson_writes_them(x):
    assert format_double(x) == orjson.dumps(x)


@settings(max_examples=5000, deadline=None)
@given(st.floats())
def test_floats_as_orjson_writes_them(x):
    assert format_double(x) == orjson.dumps(x)


@settings(max_examples=3000, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_every_bit_pattern_as_orjson_writes_it(bits):
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert format_double(x) == orjson.dumps(x)


@settings(max_examples=2000, deadline=None)
@given(st.integers(1, 2**53), st.integers(-330, 310))
def test_short_decimals_as_orjson_writes_them(m, e):
    x = float(f"{m}e{e}")
    assert format_double(x) == orjson.dumps(x)
