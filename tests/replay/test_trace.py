"""Trace validation vectors of 06 §10.8 (R-32, R-33), SCHED.json conversion, R-12 rejection."""

from __future__ import annotations

import json

import pytest
from helpers import DATA, full, run, trace, window
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import BACKENDS
from fpmcore.documents.errors import FpmError
from fpmcore.replay import from_sched_json, parse_trace
from fpmcore.replay.trace import load_trace, to_sched_json

A_STEP = '{"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 2}'

VECTORS = [
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "kv_handoff": "prefill"}'],
    "grouped kv caches support only cold aggregated requests, not kv handoff commands: trace line 1",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": true, "output_len": 2}'],
    "trace line 1: prompt_len must be an integer, found true",
    ['{"request_id": "a", "arrival_time": -1, "prompt_len": 8, "output_len": 2}'],
    "trace line 1: arrival_time must be a finite number >= 0, found -1",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 0}'],
    "trace line 1: output_len must be >= 1, found 0",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "shared_prefix_len": 4}'],
    "trace line 1: shared_prefix_len requires shared_prefix_id",
    [
        '{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "shared_prefix_id": "x", "shared_prefix_len": 9}'
    ],
    "trace line 1: shared_prefix_len 9 exceeds prompt_len 8",
    [A_STEP, A_STEP],
    "trace line 2: duplicate request_id a",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "deadline": 1}'],
    "trace line 1: unknown field deadline",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "priority": "high"}'],
    'trace line 1: priority must be an integer, found "high"',
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "priority": true}'],
    "trace line 1: priority must be an integer, found true",
    ['{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "priority": 4611686018427387905}'],
    "trace line 1: priority must be between -2**62 and 2**62, found 4611686018427387905",
    ['{"request_id": "a", "prompt_len": 8, "output_len": 2}'],
    "trace line 1: missing field arrival_time or arrival_step",
    ['{"request_id": "a", "arrival_time": 0, "arrival_step": 0, "prompt_len": 8, "output_len": 2}'],
    "trace line 1: arrival_time and arrival_step are mutually exclusive",
    [
        '{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2}',
        '{"request_id": "b", "arrival_step": 1, "prompt_len": 8, "output_len": 2}',
    ],
    "trace line 2: arrival_step cannot be mixed with arrival_time of earlier lines",
    ['{"request_id": "a", "arrival_step": -1, "prompt_len": 8, "output_len": 2}'],
    "trace line 1: arrival_step must be >= 0, found -1",
    ['{"request_id": "b", "arrival_step": 0, "prompt_len": 8, "output_len": 2, "prefix_of": "a", "prefix_of_len": 4}'],
    "trace line 1: prefix_of a names no earlier request",
    [
        A_STEP,
        '{"request_id": "b", "arrival_step": 0, "prompt_len": 16, "output_len": 2, "prefix_of": "a", "prefix_of_len": 12}',
    ],
    "trace line 2: prefix_of_len 12 exceeds prompt_len 8 of request a",
    [
        A_STEP,
        '{"request_id": "b", "arrival_step": 0, "prompt_len": 8, "output_len": 2, "prefix_of": "a", "prefix_of_len": 4, "shared_prefix_id": "x", "shared_prefix_len": 4}',
    ],
    "trace line 2: prefix_of and shared_prefix_id are mutually exclusive",
    [],
    "trace is empty",
    [A_STEP, "", A_STEP],
    "trace line 2: empty line",
    ["[1, 2]"],
    "trace line 1: not a json object",
    ['{"request_id": "a", "arrival_step": 0, "prompt_len": 4.0, "output_len": 2}'],
    "trace line 1: prompt_len must be an integer, found 4.0",
    ['{"request_id": "", "arrival_step": 0, "prompt_len": 4, "output_len": 2}'],
    'trace line 1: request_id must be a non-empty string, found ""',
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2, "shared_prefix_id": "x", "shared_prefix_len": 2}',
        '{"request_id": "b", "arrival_step": 0, "prompt_len": 4, "output_len": 2, "shared_prefix_id": "x", "shared_prefix_len": 3}',
    ],
    "trace line 2: shared_prefix_id x has length 3, earlier lines use 2",
    ['{"request_id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2, "prefix_of": "a", "prefix_of_len": 2}'],
    "trace line 1: prefix_of a names no earlier request",
    ['{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3]}'],
    "trace line 1: hash_ids requires hash_block_tokens",
    ['{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_block_tokens": 512}'],
    "trace line 1: hash_block_tokens requires hash_ids",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3], "hash_block_tokens": 0}'
    ],
    "trace line 1: hash_block_tokens must be >= 1, found 0",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3], "hash_block_tokens": 512.0}'
    ],
    "trace line 1: hash_block_tokens must be an integer, found 512.0",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids has 2 ids, prompt_len 1100 needs 3 (one per hash_block_tokens 512 tokens, the last block "
    "possibly partial)",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3, 4], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids has 4 ids, prompt_len 1100 needs 3 (one per hash_block_tokens 512 tokens, the last block "
    "possibly partial)",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": {"0": 1}, "hash_block_tokens": 512}'
    ],
    'trace line 1: hash_ids must be a list of integers, found {"0": 1}',
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, -2, 3], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids[1] must be an integer in [0, 2**63), found -2",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 9223372036854775808], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids[2] must be an integer in [0, 2**63), found 9223372036854775808",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [true, 2, 3], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids[0] must be an integer in [0, 2**63), found true",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2.5, 3], "hash_block_tokens": 512}'
    ],
    "trace line 1: hash_ids[1] must be an integer in [0, 2**63), found 2.5",
    [
        '{"request_id": "a", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3], "hash_block_tokens": 512, "shared_prefix_id": "s", "shared_prefix_len": 4}'
    ],
    "trace line 1: hash_ids and shared_prefix_id are mutually exclusive",
    [
        A_STEP,
        '{"request_id": "b", "arrival_step": 0, "prompt_len": 1100, "output_len": 2, "hash_ids": [1, 2, 3], "hash_block_tokens": 512, "prefix_of": "a", "prefix_of_len": 4}',
    ],
    "trace line 2: hash_ids and prefix_of are mutually exclusive",
]


@pytest.mark.parametrize("lines,msg", list(zip(VECTORS[::2], VECTORS[1::2])), ids=[m[:40] for m in VECTORS[1::2]])
def test_trace_diagnostics(lines, msg):
    text = "".join(line + "\n" for line in lines)
    with pytest.raises(FpmError) as e:
        parse_trace(text)
    assert e.value.rule == "R-33"
    assert e.value.message == msg


def test_priority_is_a_trace_field():
    """vLLM's request priority (issue 12 §2): any integer, kept through the SCHED.json form."""
    t = parse_trace('{"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 2, "priority": -3}')
    assert t.requests[0].priority == -3
    assert from_sched_json(to_sched_json(t)).requests[0].priority == -3
    assert parse_trace(A_STEP).requests[0].priority is None


def test_final_newline_optional_and_fields_kept():
    t = parse_trace(A_STEP)
    assert t.step_exact and t.requests[0].prompt_len == 8
    t2 = parse_trace(
        A_STEP + "\n" + '{"request_id": "b", "arrival_step": 2, "prompt_len": 9, "output_len": 1, '
        '"prefix_of": "a", "prefix_of_len": 4}\n'
    )
    assert t2.requests[1].prefix_of == "a" and t2.requests[1].prefix_of_len == 4
    assert parse_trace(t2.dumps()) == t2
    # blank lines at the end, as editors leave them, are no request; between two requests they are refused
    assert parse_trace(A_STEP + "\n\n") == parse_trace(A_STEP + "\n \n\t\n") == t
    with pytest.raises(FpmError, match="trace line 2: empty line"):
        parse_trace(t2.dumps().replace("\n", "\n\n", 1))
    with pytest.raises(FpmError, match="trace is empty"):
        parse_trace("\n\n")


def test_prompt_at_max_model_len_rejected_at_arrival(backend):
    """R-12: not a trace error, a rejection with its reason."""
    r = run([full(4, 4)], 1000, 64, trace(("a", 16, 2), ("b", 8, 2)), backend, max_model_len=16)
    assert r.error is None
    a, b = r.requests
    assert a["status"] == "rejected" and a["reject_reason"] == "prompt_len 16 >= max_model_len 16"
    assert a["ttft_s"] is None and a["output_tokens"] == 0
    assert b["status"] == "finished"
    assert r.steps[0]["rejected"] == ["a"]
    assert r.summary["rejected"] == 1


def test_request_that_can_never_fit_is_rejected(backend):
    """R-21: the final forward or, with the gate, the input exceeds the pool."""
    r = run([full(4, 4)], 16, 64, trace(("a", 20, 2), ("b", 8, 1)), backend)
    a = r.requests[0]
    assert a["status"] == "rejected"
    assert a["reject_reason"] == "request a can never fit the cache pool: its final forward needs 20 bytes, capacity 16"
    r = run(
        [window(4, 4, 4)], 12, 8, trace(("a", 17, 1), ("b", 8, 1)), backend, reserve_full_isl=True, max_model_len=64
    )
    assert r.requests[0]["reject_reason"] == (
        "request a can never fit the cache pool: its input sequence needs 16 bytes, capacity 12"
    )
    assert r.requests[1]["status"] == "finished"


def test_sched_json_conversion_roundtrip(tmp_path):
    obj = json.loads((DATA / "sched_plain_preempt.json").read_text())
    t = from_sched_json(obj)
    assert [r.request_id for r in t.requests] == ["r0", "r1", "r2", "r3", "r4"]
    r4 = t.requests[4]
    assert (r4.prompt_len, r4.output_len, r4.arrival_step, r4.prefix_of, r4.prefix_of_len) == (700, 50, 2, "r0", 256)
    back = to_sched_json(t)
    assert back["requests"]["r4"]["prefix_from"] == "r0"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(obj, indent=1))
    assert load_trace(p) == t


@pytest.mark.parametrize(
    ("doc", "msg"),
    [
        ({"requests": {"a": [4096, 16]}}, "SCHED.json: request 'a' must be an object (prompt_len, max_tokens, …), "
                                          "found list [4096, 16]"),
        ({"requests": {"a": 5}}, "SCHED.json: request 'a' must be an object (prompt_len, max_tokens, …), found int 5"),
    ],
    ids=["list", "number"],
)  # fmt: skip
def test_a_sched_json_request_that_is_no_object_is_refused(tmp_path, doc, msg):
    p = tmp_path / "SCHED.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(FpmError) as err:
        load_trace(p)
    assert (err.value.rule, err.value.message) == ("R-32", msg)


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.lists(st.integers(0, 3), min_size=1, max_size=3),
)
_keys = st.sampled_from(
    [
        "request_id",
        "arrival_time",
        "arrival_step",
        "prompt_len",
        "output_len",
        "shared_prefix_id",
        "shared_prefix_len",
        "prefix_of",
        "prefix_of_len",
        "hash_ids",
        "hash_block_tokens",
        "kv_handoff",
        "other",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_keys, _values, max_size=8), min_size=1, max_size=4))
def test_random_lines_give_diagnostics_never_a_crash(objs):
    """R-33: any line is either accepted or refused with an FpmError; an accepted trace replays in C."""
    text = "".join(json.dumps(o) + "\n" for o in objs)
    try:
        t = parse_trace(text)
    except FpmError as exc:
        assert exc.rule == "R-33" and exc.message.startswith(("trace line", "grouped kv caches", "trace is empty"))
        return
    for backend in BACKENDS:
        r = run([full(4, 4)], 64, 8, t, backend, prefix_caching=True, reserve_full_isl=True, max_model_len=64)
        assert r.error is None or r.error.rule in ("R-9", "R-26")


def test_engine_limits_are_diagnostics(backend):
    """Lengths and arrival steps beyond the engine's integers are refused before C (R-32)."""
    with pytest.raises(FpmError) as e:
        run([full(4, 4)], 64, 8, trace(("a", 2**41, 1)), backend)
    assert e.value.message == "trace line 1: prompt_len 2199023255552 exceeds the replay limit 1099511627776"
    with pytest.raises(FpmError) as e:
        run([full(4, 4)], 64, 8, trace(("a", 4, 1, 1e12), timed=True), backend)
    assert e.value.message == (
        "trace line 1: arrival at step 1,000,000,000,000 is beyond the last arrival step a trace "
        "may have, 50,000,000 (a limit of arrivals, apart from --max-steps, which bounds the "
        "steps run)"
    )
