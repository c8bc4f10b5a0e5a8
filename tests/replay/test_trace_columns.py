"""The C reader of Mooncake lines and the replay from its columns, against the reference path.

A Mooncake trace is read by ``csrc/fpm_trace.c`` into columns (:mod:`fpmcore.traces.column_reader`)
and replayed from them (:mod:`fpmcore.replay.column_engine`); the reference is the Python reader
(:mod:`fpmcore.traces.mooncake`), the transforms on request objects and the engine-form requests of
:func:`fpmcore.replay.engine.iter_engine_requests`.  On generated traces, malformed lines among them,
both give the same trace and provenance or the same diagnostic, the same origins and the same replay.
"""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path
from unittest import mock

import pytest
from helpers import full, same_trace_as_reference
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fpmcore.documents.errors import FpmError
from fpmcore.replay import make_config
from fpmcore.replay.engine import ReplayRun, iter_engine_requests, origins
from fpmcore.traces import reading
from fpmcore.traces.reading import BUILTIN, read_trace
from fpmcore.traces.transforms import Transforms

pytestmark = pytest.mark.skipif(
    os.environ.get("FPM_PUREPYTHON", "") not in ("", "0"), reason="the C reader needs the C library"
)
FORMATS = [("fpmcore", f) for f in BUILTIN]
BLOCK_SIZES = (1, 3, 8, 512)


def _read(path: Path, block: int, t: Transforms, *, columns: bool):
    """``read_trace`` with the C reader (``columns``) or the reference reader alone: the trace and provenance,
    or the diagnostic."""
    with mock.patch.object(reading, "column_reader_available", lambda: columns):
        try:
            return read_trace(FORMATS, path, name="mooncake", hash_block_tokens=block, transforms=t)
        except FpmError as exc:
            return (exc.rule, exc.message, exc.where)


@st.composite
def lines(draw, block: int, faults: bool) -> str:
    """A Mooncake line of the release's shape (spacing varied), a blank one, one of another shape (the C reader
    leaves it to the reference reader), or with ``faults`` now and then a line the reference reader refuses."""
    prompt = draw(st.integers(1, 6 * block))
    n = -(-prompt // block)
    ids = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    ts = draw(st.integers(0, 3000))
    out = draw(st.integers(1, 40))
    sp = draw(st.sampled_from(["", " "]))
    fields = [("timestamp", str(ts)), ("input_length", str(prompt)), ("output_length", str(out)),
              ("hash_ids", "[" + f",{sp}".join(map(str, ids)) + "]")]  # fmt: skip
    kinds = ["none"] * 30 + ["blank", "crlf", "float", "extra", "order", "space2"]
    if faults:
        kinds += ["count", "zero", "lead0", "broken", "huge", "latin1", "bigid"]
    fault = draw(st.sampled_from(kinds))
    if fault == "count":
        fields[3] = ("hash_ids", "[" + ", ".join(map(str, [*ids, 1])) + "]")
    elif fault == "zero":
        fields[2] = ("output_length", "0")
    elif fault == "float":
        fields[0] = ("timestamp", f"{ts}.5")
    elif fault == "extra":
        fields.append(("session", '"a"'))
    elif fault == "lead0":
        fields[1] = ("input_length", "0" + str(prompt))
    elif fault == "order":
        fields = [fields[1], fields[0], *fields[2:]]
    elif fault == "huge":
        fields[1] = ("input_length", str(2**40 + 1))
    elif fault == "bigid":
        fields[3] = ("hash_ids", "[" + ", ".join(["1" * 19] * n) + "]")
    text = "{" + f",{sp}".join(f'"{k}":{sp}{v}' for k, v in fields) + "}"
    if fault == "space2":
        text = text.replace(":", ":  ", 1)
    if fault == "broken":
        text = text[: len(text) // 2]
    if fault == "blank":
        text = draw(st.sampled_from(["", "  ", "\t"]))
    if fault == "crlf":
        text += "\r"
    if fault == "latin1":
        text = text.replace("}", "}\xe9")
    return text


@st.composite
def traces(draw):
    block = draw(st.sampled_from(BLOCK_SIZES))
    body = draw(st.lists(lines(block, draw(st.booleans())), min_size=1, max_size=25))
    monotone = draw(st.sampled_from([True, True, True, False]))
    if monotone:  # mostly timestamps that never go back, so that most traces are read whole
        body = _sorted_times(body)
    text = "\n".join(body) + draw(st.sampled_from(["", "\n", "\n\n"]))
    limit = draw(st.none() | st.integers(1, 10))
    over = draw(st.none() | st.integers(1, 4 * block))
    scale = draw(st.sampled_from([None, "time_scale", "rate"]))
    t = Transforms(
        start=draw(st.sampled_from([0, 0, 0, 1, 2, 4])),
        limit=limit,
        max_prompt_len=over,
        over_long=draw(st.sampled_from(["drop", "clip"])),
        time_scale=draw(st.floats(0.1, 10)) if scale == "time_scale" else None,
        rate=draw(st.floats(0.1, 100)) if scale == "rate" else None,
    )
    return text, block, t, draw(st.booleans())


def _sorted_times(body: list[str]) -> list[str]:
    import re

    stamp = re.compile(r'("timestamp": ?)(\d+)((?:\.5)?[,}])')
    it = iter(sorted(int(m.group(2)) for m in map(stamp.search, body) if m))
    return [stamp.sub(lambda m: f"{m.group(1)}{next(it)}{m.group(3)}", b, count=1) for b in body]


def _write(tmp: Path, text: str, gz: bool) -> Path:
    data = text.encode("utf-8", "surrogateescape").replace("\xe9".encode(), b"\xe9")
    path = tmp / ("t.jsonl.gz" if gz else "t.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces())
def test_the_c_reader_gives_the_reference_trace_or_its_diagnostic(tmp_path_factory, case):
    text, block, t, gz = case
    path = _write(tmp_path_factory.mktemp("trace"), text, gz)
    fast = _read(path, block, t, columns=True)
    ref = _read(path, block, t, columns=False)
    read = same_trace_as_reference(fast, ref)
    if read is None:
        return
    trace, ref_trace = read
    if trace.columns is not None:
        again = pickle.loads(pickle.dumps(trace))  # a sweep hands the trace to its worker processes
        assert again.columns is not None and list(again.requests) == list(ref_trace.requests)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(), st.booleans(), st.sampled_from([None, 0.3, 1.0]))
def test_a_replay_from_columns_is_the_replay_from_requests(tmp_path_factory, case, caching, step_seconds):
    text, block, t, gz = case
    path = _write(tmp_path_factory.mktemp("trace"), text, gz)
    fast = _read(path, block, t, columns=True)
    assume(not (isinstance(fast, tuple) and isinstance(fast[0], str)))
    trace, _prov = fast
    assume(trace.columns is not None)  # else the reference reader read it
    ref_trace = type(trace)(tuple(trace.requests), trace.arrival_field)
    extra = {} if step_seconds is None else {"fixed_step_seconds": step_seconds}
    cfg = make_config([full(4, 1)], 160, max_num_batched_tokens=24, max_num_seqs=3, max_model_len=1 << 20,
                      reserve_full_isl=False, prefix_caching=caching, **extra)  # fmt: skip
    _same_origins(trace, ref_trace)
    runs = []
    for tr in (trace, ref_trace):
        run = ReplayRun(cfg, tr, steps=True, backend="c")
        chunks = [(c.first_step, c.steps, c.requests) for c in run]
        err = run.error
        runs.append([*chunks, run.summary(), None if err is None else (err.rule, err.message)])
    assert runs[0] == runs[1]
    # the engine-form requests the columns stand for are the reference's
    assert len(tuple(iter_engine_requests(cfg, trace))) == len(trace.requests)


def _same_origins(trace, ref_trace) -> None:
    """``fpm_hash_origins`` on the columns gives :func:`origins`' breakpoints and keys."""
    from fpmcore.replay._native import ffi, lib
    from fpmcore.replay.column_engine import column_origins

    cols = trace.columns
    n = len(cols)
    upto, key, nkeys = column_origins(ffi, lib, cols, n)
    want, own = origins(ref_trace)
    assert own == list(range(n))
    got = [tuple((upto[j], key[j]) for j in range(cols.hash_off[i], cols.hash_off[i + 1])) for i in range(n)]
    assert got == want
    assert nkeys == len({k for bps in want for _u, k in bps})


def test_a_window_stops_reading_at_its_end_as_the_reference_does(tmp_path):
    """The line after the window's last request is read and checked; a broken line past it is not read."""
    good = '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
    path = tmp_path / "t.jsonl"
    path.write_text(good * 3 + "{broken\n")
    for limit in (1, 2, 3):
        t = Transforms(limit=limit)
        fast, ref = _read(path, 512, t, columns=True), _read(path, 512, t, columns=False)
        assert fast == ref if limit == 3 else (fast[1] == ref[1] and fast[0].columns is not None)
    assert _read(path, 512, Transforms(limit=3), columns=True)[0] == "T-2"


def test_the_c_reader_bounds_are_the_format_bounds():
    from fpmcore.replay._native import lib
    from fpmcore.traces.format import MAX_TOKENS

    assert lib.FPM_TRACE_MAX_TOKENS == MAX_TOKENS


def test_many_chains_keep_their_keys(tmp_path):
    """6,000 requests of generated conversations, each adding a content block (one chain each): the C chain map is
    made at the size the estimate of the distinct chains asks for (csrc/tests/test_trace.c grows it from a small
    one too), and every breakpoint and key is the reference's."""
    import random

    rng = random.Random(7)
    lines, open_, next_id = [], [], 1
    for i in range(6000):
        if open_ and rng.random() < 0.5:
            ids = open_[rng.randrange(len(open_))]
        else:
            ids = [rng.randrange(3)]  # three system prompts shared by all
            open_.append(ids)
        ids += [next_id] if rng.random() < 0.7 else [rng.randrange(1, max(next_id, 2))]  # now and then a repeated id
        next_id += 1
        prompt = (len(ids) - 1) * 512 + rng.randint(1, 512)
        lines.append(f'{{"timestamp": {i}, "input_length": {prompt}, "output_length": 4, "hash_ids": {ids}}}\n')
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(lines))
    trace, ref_trace = (_read(path, 512, Transforms(), columns=c)[0] for c in (True, False))
    assert trace.columns is not None and len(trace.requests) == 6000
    chains = len({k for bps in origins(ref_trace)[0] for _u, k in bps})
    assert 4096 < chains < 8192
    _same_origins(trace, ref_trace)
