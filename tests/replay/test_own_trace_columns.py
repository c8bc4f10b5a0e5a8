"""The C reader of fpmcore's own JSONL and the replay from its columns, against the reference path.

fpmcore's JSONL of timed requests is read by ``csrc/fpm_trace.c`` into columns (the ids as one text)
through :func:`fpmcore.traces.column_reader.read_columns`; the reference is the Python reader
(:func:`fpmcore.replay.trace.iter_trace_requests`) and the transforms on request objects.  On generated
traces, malformed lines and lines of the other shapes among them, both give the same trace and
provenance or the same diagnostic, and the same replay and record lines.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path
from unittest import mock

import pytest
from helpers import full, same_trace_as_reference
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from fpmcore.documents.errors import FpmError
from fpmcore.replay import make_config
from fpmcore.replay.engine import ReplayRun
from fpmcore.traces import reading
from fpmcore.traces.reading import BUILTIN, read_trace
from fpmcore.traces.transforms import Transforms

pytestmark = pytest.mark.skipif(
    os.environ.get("FPM_PUREPYTHON", "") not in ("", "0"), reason="the C reader needs the C library"
)
FORMATS = [("fpmcore", f) for f in BUILTIN]
#: Lines the C reader leaves to the reference reader (it reads or refuses them), and lines it refuses.
OTHER = ["priority", "step", "shared", "escape", "unicode", "int_id", "nan", "space_id"]
FAULTS = ["dup", "zero", "neg", "lead0", "broken", "huge", "inf", "tiny", "float_len", "unknown", "missing",
          "latin1", "bom", "blank_between", "empty_id"]  # fmt: skip
TIMES = ["0", "1", "2.5", "0.30000000000000004", "1e-3", "1.5E+2", "123456789012345678901", "7.0", "1e22",
         "0.1234567890123456789012345", "2.2250738585072014e-308"]  # fmt: skip


def _read(path: Path, t: Transforms, *, columns: bool, name: str | None = None):
    """``read_trace`` with the C reader (``columns``) or the reference reader alone: the trace and provenance,
    or the diagnostic."""
    with mock.patch.object(reading, "column_reader_available", lambda: columns):
        try:
            return read_trace(FORMATS, path, name=name, transforms=t)
        except FpmError as exc:
            return (exc.rule, exc.message, exc.where)


@st.composite
def lines(draw, index: int, faults: bool) -> str:
    """A timed line of fpmcore's JSONL (fields in any order, spacing varied), one of the shapes the C reader
    leaves to the reference reader, or with ``faults`` now and then a line the reference reader refuses."""
    fields = {"request_id": json.dumps(f"r{index}"), "arrival_time": draw(st.sampled_from(TIMES)),
              "prompt_len": str(draw(st.integers(1, 40))), "output_len": str(draw(st.integers(1, 12)))}  # fmt: skip
    kinds = ["none"] * 80 + ["crlf", "order", "spaces", "tabs"] * 5 + OTHER
    if faults:
        kinds += FAULTS
    kind = draw(st.sampled_from(kinds))
    if kind == "priority":
        fields["priority"] = "1"
    elif kind == "step":
        del fields["arrival_time"]
        fields["arrival_step"] = "2"
    elif kind == "shared":
        fields["shared_prefix_id"], fields["shared_prefix_len"] = '"s"', "1"
    elif kind == "escape":
        fields["request_id"] = json.dumps(f'r{index}\t"')
    elif kind == "unicode":
        fields["request_id"] = json.dumps(f"é{index}", ensure_ascii=False)
    elif kind == "space_id":
        fields["request_id"] = json.dumps(f"r {index}")
    elif kind == "int_id":
        fields["request_id"] = str(index)
    elif kind == "nan":
        fields["arrival_time"] = "NaN"
    elif kind == "dup":
        fields["request_id"] = '"r0"'
    elif kind == "zero":
        fields["output_len"] = "0"
    elif kind == "neg":
        fields["arrival_time"] = "-0.5"
    elif kind == "lead0":
        fields["prompt_len"] = "01"
    elif kind == "huge":
        fields["prompt_len"] = str(2**40 + draw(st.sampled_from([-1, 0, 1, 2**70])))
    elif kind == "inf":
        fields["arrival_time"] = "1e400"
    elif kind == "tiny":
        fields["arrival_time"] = "1e-400"
    elif kind == "float_len":
        fields["prompt_len"] = "5.0"
    elif kind == "unknown":
        fields["kv_handoff"] = "1"
    elif kind == "missing":
        del fields["output_len"]
    elif kind == "empty_id":
        fields["request_id"] = '""'
    items = list(fields.items())
    if kind == "order":
        items = draw(st.permutations(items))
    colon, comma = {"spaces": (" : ", " , "), "tabs": (":\t", ",\t")}.get(kind, (": ", ", "))
    text = "{" + comma.join(f'"{k}"{colon}{v}' for k, v in items) + "}"
    if kind == "spaces":
        text = "  " + text + " "
    if kind == "broken":
        text = text[: len(text) // 2]
    if kind == "crlf":
        text += "\r"
    if kind == "latin1":
        text = text.replace("}", "}\xe9")
    if kind == "bom":
        text = "\ufeff" + text
    if kind == "blank_between":
        text = "\n" + text
    return text


@st.composite
def traces(draw):
    faults = draw(st.booleans())
    n = draw(st.integers(1, 25))
    body = [draw(lines(i, faults)) for i in range(n)]
    text = "\n".join(body) + draw(st.sampled_from(["", "\n", "\n\n", "\n \n"]))
    scale = draw(st.sampled_from([None, "time_scale", "rate"]))
    t = Transforms(
        start=draw(st.sampled_from([0, 0, 0, 1, 2, 4])),
        limit=draw(st.none() | st.integers(1, 10)),
        max_prompt_len=draw(st.none() | st.integers(1, 40)),
        over_long=draw(st.sampled_from(["drop", "clip"])),
        time_scale=draw(st.floats(0.1, 10)) if scale == "time_scale" else None,
        rate=draw(st.floats(0.1, 100)) if scale == "rate" else None,
    )
    return text, t, draw(st.booleans()), draw(st.sampled_from([None, "fpmcore"]))


def _write(tmp: Path, text: str, gz: bool) -> Path:
    data = text.encode("utf-8").replace("}\xe9".encode(), b"}\xe9")
    path = tmp / ("t.jsonl.gz" if gz else "t.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces())
def test_the_c_reader_gives_the_reference_trace_or_its_diagnostic(tmp_path_factory, case):
    text, t, gz, name = case
    path = _write(tmp_path_factory.mktemp("trace"), text, gz)
    fast = _read(path, t, columns=True, name=name)
    ref = _read(path, t, columns=False, name=name)
    read = same_trace_as_reference(fast, ref)
    if read is None:
        return
    trace, ref_trace = read
    if trace.columns is not None:
        with pytest.raises(ValueError):
            trace.request_ids().index("no such id")
        again = pickle.loads(pickle.dumps(trace))  # a sweep hands the trace to its worker processes
        assert again.columns is not None and list(again.requests) == list(ref_trace.requests)
        assert list(again.request_ids()) == list(trace.request_ids())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(), st.booleans(), st.sampled_from([None, 0.3, 1.0]))
def test_a_replay_from_columns_is_the_replay_from_requests(tmp_path_factory, case, caching, step_seconds):
    text, t, gz, name = case
    path = _write(tmp_path_factory.mktemp("trace"), text, gz)
    fast = _read(path, t, columns=True, name=name)
    assume(not (isinstance(fast, tuple) and isinstance(fast[0], str)))
    trace, _prov = fast
    assume(trace.columns is not None)  # else the reference reader read it
    ref_trace = type(trace)(tuple(trace.requests), trace.arrival_field)
    extra = {} if step_seconds is None else {"fixed_step_seconds": step_seconds}
    cfg = make_config([full(4, 1)], 160, max_num_batched_tokens=24, max_num_seqs=3, max_model_len=1 << 20,
                      reserve_full_isl=False, prefix_caching=caching, max_num_queued_reqs=8, **extra)  # fmt: skip
    runs = [_replay(cfg, tr) for tr in (trace, ref_trace)]
    assert runs[0] == runs[1]


def _replay(cfg, trace):
    """The chunks, summary and stop of a replay, and the record lines of another (``--out``); or the refusal of a
    request beyond the engine's bounds."""
    try:
        run = ReplayRun(cfg, trace, steps=True, backend="c")
    except FpmError as exc:
        event("a request beyond the engine's bounds")
        return exc.rule, exc.message
    chunks = [(c.first_step, c.steps, c.requests) for c in run]
    err = run.error
    run_lines = ReplayRun(cfg, trace, steps=True, backend="c")
    lines = []
    while not run_lines.ended:
        chunk = run_lines.advance_lines(7)
        lines.append((chunk.first_step, chunk.steps, chunk.requests))
    return [*chunks, run.summary(), None if err is None else (err.rule, err.message), *lines, run_lines.summary()]


def test_a_window_stops_reading_at_its_end_as_the_reference_does(tmp_path):
    """The line after the window's last request is read and checked; a broken line past it is not read."""
    path = tmp_path / "t.jsonl"
    good = '{{"request_id": "r{}", "arrival_time": 0.5, "prompt_len": 5, "output_len": 1}}\n'
    path.write_text("".join(good.format(i) for i in range(3)) + "{broken\n")
    for limit in (1, 2, 3):
        t = Transforms(limit=limit)
        fast, ref = _read(path, t, columns=True), _read(path, t, columns=False)
        assert fast == ref if limit == 3 else (fast[1] == ref[1] and fast[0].columns is not None)
    assert _read(path, Transforms(limit=3), columns=True)[0] == "R-33"


def test_one_document_and_a_single_line_go_to_the_reference_reader(tmp_path):
    """A file that is one JSON document (a single line too) is read whole, as before."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"request_id": "a", "arrival_time": 0, "prompt_len": 5, "output_len": 1}\n')
    trace, prov = _read(path, Transforms(), columns=True)
    assert trace.columns is None and prov["requests"] == 1
