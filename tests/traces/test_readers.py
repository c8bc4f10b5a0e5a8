"""The host's trace readers on small files written here: Mooncake, BurstGPT, Azure, and the sniffing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "traces" / "public"
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_033", "glm53flash"))


def _convert(host, tmp_path, trace: Path, *options: str) -> tuple[dict, list[dict]]:
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    r = run_fpm("trace", "convert", str(trace), "-o", str(out), *options, "--json", host=host)
    assert r.exit_code == 0, r.stderr
    return r.json()["trace"], [json.loads(line) for line in out.read_text().splitlines()]


def _refused(host, trace: Path, *options: str) -> str:
    """The one stderr line of a refused ``fpm trace stats`` (exit 2, nothing on stdout)."""
    r = run_fpm("trace", "stats", str(trace), *options, host=host)
    assert (r.exit_code, r.stdout) == (2, ""), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    return r.stderr.removeprefix(f"fpm: {trace}: ").rstrip("\n")


# --------------------------------------------------------------------------- mooncake


def test_mooncake_lines_become_requests_with_their_block_ids(host, tmp_path):
    trace = tmp_path / "m.jsonl"
    trace.write_text('{"timestamp": 1000, "input_length": 1000, "output_length": 5, "hash_ids": [7, 8]}\n'
                     '{"timestamp": 1250, "input_length": 512, "output_length": 1, "hash_ids": [7], "extra": 1}\n')  # fmt: skip
    provenance, lines = _convert(host, tmp_path, trace)
    assert provenance == {"file": str(trace), "format": "mooncake", "format_plugin": "fpmcore", "sniffed": True,
                          "requests": 2, "rows_skipped": {}, "transforms": {}, "hash_block_tokens": 512}  # fmt: skip
    assert lines == [
        {"request_id": "1", "prompt_len": 1000, "output_len": 5, "arrival_time": 0.0, "hash_ids": [7, 8],
         "hash_block_tokens": 512},
        {"request_id": "2", "prompt_len": 512, "output_len": 1, "arrival_time": 0.25, "hash_ids": [7],
         "hash_block_tokens": 512},
    ]  # fmt: skip
    provenance, lines = _convert(host, tmp_path, trace, "--hash-block-tokens", "600", "--trace-format", "mooncake")
    assert provenance["sniffed"] is False and [q["hash_block_tokens"] for q in lines] == [600, 600]
    assert _refused(host, trace, "--hash-block-tokens", "256") == (
        "line 1: 2 hash_ids for input_length 1000: expected ceil(1000 / 256) = 4 (--hash-block-tokens 256) [T-2]"
    )


def test_the_real_mooncake_excerpt_stats(host):
    """40 lines of the conversation trace: the numbers a reader of the file computes by hand."""
    r = run_fpm("trace", "stats", str(DATA / "mooncake-conversation-40.jsonl"), "--json", host=host)
    assert r.exit_code == 0, r.stderr
    stats = r.json()["stats"]
    assert stats["requests"] == 40 and stats["duration_s"] == 12.0
    assert stats["mean_rate_per_s"] == pytest.approx(39 / 12)
    assert stats["prompt_len"]["p50"] == 7322 and stats["prompt_len"]["mean"] == 506280 / 40
    assert stats["prefix_reuse"] == {"block_tokens": 512, "shared_tokens": 19968, "prompt_tokens": 506280,
                                     "fraction": 19968 / 506280, "requests_with_a_hit": 39,
                                     "distinct_blocks": 975}  # fmt: skip
    coarse = run_fpm("trace", "stats", str(DATA / "mooncake-conversation-40.jsonl"), "--block-tokens", "1024",
                     "--json", host=host).json()["stats"]["prefix_reuse"]  # fmt: skip
    assert coarse["block_tokens"] == 1024 and coarse["shared_tokens"] <= 19968


@pytest.mark.parametrize(("line", "message"), [
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}',
     "line 2: missing field hash_ids (a Mooncake line has timestamp, input_length, output_length, hash_ids) [T-2]"),
    ('{"timestamp": 0, "input_length": -10, "output_length": 1, "hash_ids": []}',
     "line 2: input_length must be in 1..2**40, found -10 [T-2]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1.5, "hash_ids": [1]}',
     "line 2: output_length must be an integer, found 1.5 [T-2]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [18446744073709551616]}',
     "line 2: hash_ids[0] must be an integer in 0..2**63-1, found 18446744073709551616 [T-2]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]',
     "line 2: not a JSON object: invalid JSON: Expecting ',' delimiter [T-2]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
     "line 2: arrives 5 s before line 1: the trace must be in arrival order (sort it by time) [T-2]"),
    ('{"timestamp": NaN, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
     "line 2: not a JSON object: NaN is not allowed [T-2]"),
])  # fmt: skip
def test_a_malformed_mooncake_line_is_one_line_naming_it(host, tmp_path, line, message):
    trace = tmp_path / "m.jsonl"
    trace.write_text('{"timestamp": 5000, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n' + line + "\n")
    assert _refused(host, trace).startswith(message.removesuffix(" [T-2]"))
    assert _refused(host, trace).endswith("[T-2]")


# --------------------------------------------------------------------------- burstgpt


def _burstgpt(tmp_path: Path, rows: str) -> Path:
    trace = tmp_path / "burst.csv"
    trace.write_text(BURSTGPT_HEADER + rows)
    return trace


def test_burstgpt_skips_failures_counts_them_and_filters_by_model(host, tmp_path):
    trace = _burstgpt(tmp_path, "5,ChatGPT,472,18,490,Conversation log\n"
                                "6,GPT-4,1000,0,1000,Conversation log\n"
                                "7.5,GPT-4,300,20,320,API log\n"
                                "9,ChatGPT,10,20,30,API log\n")  # fmt: skip
    provenance, lines = _convert(host, tmp_path, trace)
    assert provenance["format"] == "burstgpt" and provenance["rows_skipped"] == {"Response tokens 0": 1}
    assert lines == [
        {"request_id": "2", "prompt_len": 472, "output_len": 18, "arrival_time": 0.0},
        {"request_id": "4", "prompt_len": 300, "output_len": 20, "arrival_time": 2.5},
        {"request_id": "5", "prompt_len": 10, "output_len": 20, "arrival_time": 4.0},
    ]
    provenance, lines = _convert(host, tmp_path, trace, "--trace-filter", "model=gpt-4")
    assert [q["request_id"] for q in lines] == ["4"]
    assert provenance["rows_skipped"] == {"Response tokens 0": 1, "filtered out by --trace-filter": 2}
    assert provenance["filters"] == ["model=gpt-4"]
    _, lines = _convert(host, tmp_path, trace, "--trace-filter", "log-type=API log", "--trace-filter", "model=ChatGPT")
    assert [q["request_id"] for q in lines] == ["5"]
    assert (
        _refused(host, trace, "--trace-filter", "user=x") == "--trace-filter user: the burstgpt format selects on "
        "model, log-type [T-3]"
    )


def test_the_burstgpt_replay_names_its_skipped_rows_and_equals_the_converted_trace(host, tmp_path):
    trace = _burstgpt(tmp_path, "".join(f"{i * 0.5},GPT-4,{100 + i},{10 + i % 3},0,API log\n" for i in range(30))
                      + "15.5,GPT-4,100,0,100,API log\n")  # fmt: skip
    r = run_fpm("replay", str(PROFILE), "--trace", str(trace), "--json", host=host)
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith(f"fpm: note: read {trace} as burstgpt (sniffed): 30 requests, rows skipped: "
                               "1 Response tokens 0\n")  # fmt: skip
    converted = tmp_path / "c.jsonl"
    assert run_fpm("trace", "convert", str(trace), "-o", str(converted), host=host).exit_code == 0
    again = run_fpm("replay", str(PROFILE), "--trace", str(converted), "--json", host=host)
    assert again.json()["summary"] == r.json()["summary"] and r.json()["summary"]["finished"] == 30


@pytest.mark.parametrize(("rows", "message"), [
    ("5,ChatGPT,-4,18,14,API log\n", "line 2: Request tokens must be in 0..2**40, found '-4'"),
    ("5,ChatGPT,4.5,18,14,API log\n", "line 2: Request tokens must be an integer, found '4.5'"),
    ("5,ChatGPT,4,99999999999999,14,API log\n", "line 2: Response tokens must be in 0..2**40, found '99999999999999'"),
    ("nan,ChatGPT,4,1,14,API log\n", "line 2: Timestamp must be a finite number of seconds >= 0, found 'nan'"),
    ("5,ChatGPT,4,1,5\n", "line 2: 5 fields, the header has 6"),
    ("5,ChatGPT,4,1,5,API log\n4,ChatGPT,4,1,5,API log\n",
     "line 3: arrives 1 s before line 2: the trace must be in arrival order (sort it by time)"),
])  # fmt: skip
def test_a_malformed_burstgpt_row_is_one_line_naming_it(host, tmp_path, rows, message):
    assert _refused(host, _burstgpt(tmp_path, rows), "--trace-format", "burstgpt") == message + " [T-2]"


def test_a_burstgpt_file_without_a_column_is_refused_naming_it(host, tmp_path):
    trace = tmp_path / "b.csv"
    trace.write_text("Timestamp,Model,Request tokens,Total tokens,Log Type\n5,GPT-4,1,2,API log\n")
    assert _refused(host, trace, "--trace-format", "burstgpt") == (
        "line 1: the header lacks the column Response tokens of a BurstGPT trace (Timestamp,Model,Request tokens,"
        "Response tokens,Log Type) [T-2]")  # fmt: skip


# --------------------------------------------------------------------------- azure


def test_azure_timestamps_keep_their_seven_digits_relative_to_the_first_row(host, tmp_path):
    trace = tmp_path / "azure.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n"
                     "2023-11-16 18:15:50.9951690,879,0\n"
                     "2023-11-17 00:00:00.0000001,2,1\n")  # fmt: skip
    provenance, lines = _convert(host, tmp_path, trace)
    assert provenance["format"] == "azure" and provenance["rows_skipped"] == {"GeneratedTokens 0": 1}
    assert [q["arrival_time"] for q in lines] == [0.0, 4.314579, pytest.approx(20653.3194101, abs=1e-9)]
    assert [(q["request_id"], q["prompt_len"], q["output_len"]) for q in lines] == [("2", 374, 44), ("3", 396, 109),
                                                                                  ("5", 2, 1)]  # fmt: skip


@pytest.mark.parametrize(("row", "message"), [
    ("2023-11-16T18:15:46,1,1", None),
    ("2023-11-16 18:15,1,1", "line 3: TIMESTAMP must be a date and time like 2023-11-16 18:15:46.6805900, found "
                             "'2023-11-16 18:15'"),
    ("2023-13-16 18:15:46.1,1,1", "line 3: TIMESTAMP must be a date and time like 2023-11-16 18:15:46.6805900, found "
                                  "'2023-13-16 18:15:46.1'"),
    ("2023-11-16 18:15:40.0,1,1", "line 3: arrives 6 s before line 2: the trace must be in arrival order (sort it "
                                  "by time)"),
    ("2023-11-16 18:15:47.0,-1,1", "line 3: ContextTokens must be in 0..2**40, found '-1'"),
])  # fmt: skip
def test_a_malformed_azure_row_is_one_line_naming_it(host, tmp_path, row, message):
    trace = tmp_path / "a.csv"
    trace.write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n{row}\n")
    if message is None:
        assert _convert(host, tmp_path, trace)[1][1]["arrival_time"] == 0.0
    else:
        assert _refused(host, trace) == message + " [T-2]"


# --------------------------------------------------------------------------- sniffing and streaming


def test_each_format_is_sniffed_and_a_gzip_file_read_through(host, tmp_path):
    gz = tmp_path / "m.jsonl.gz"
    gz.write_bytes(gzip.compress((DATA / "mooncake-conversation-40.jsonl").read_bytes()))
    provenance, lines = _convert(host, tmp_path, gz, "--limit", "3")
    assert provenance["format"] == "mooncake" and [q["prompt_len"] for q in lines] == [6758, 7322, 7236]
    sched = tmp_path / "sched.json"
    sched.write_text('{\n  "requests": {"a": {"prompt_len": 4, "max_tokens": 2}}\n}\n')
    provenance, lines = _convert(host, tmp_path, sched)
    assert provenance["format"] == "sched-json" and lines == [
        {"request_id": "a", "prompt_len": 4, "output_len": 2, "arrival_step": 0}
    ]
    native = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
    provenance, _lines = _convert(host, tmp_path, native)
    assert provenance["format"] == "fpmcore" and provenance["requests"] == 120


def test_a_file_no_format_claims_is_refused_naming_the_formats(host, tmp_path):
    trace = tmp_path / "x.csv"
    trace.write_text("when,prompt,output\n1,2,3\n")
    installed = "sched-json, mooncake, burstgpt, azure, fpmcore"
    assert _refused(host, trace) == (f"no trace format claims this file; installed: {installed} (name one with "
                                     "--trace-format) [T-1]")  # fmt: skip
    assert (
        _refused(host, trace, "--trace-format", "csv") == f"--trace-format csv: no such trace format; installed: "
        f"{installed} [T-1]"
    )
    empty = tmp_path / "empty.csv"
    empty.write_text("\n\n")
    assert _refused(host, empty) == "trace is empty [R-33]"


def test_reading_stops_at_the_end_of_the_window(host, tmp_path):
    """The reader streams: a window of the first two requests never reaches the broken fourth line."""
    trace = _burstgpt(tmp_path, "1,GPT-4,1,1,2,API log\n2,GPT-4,1,1,2,API log\n3,GPT-4,1,1,2,API log\nbroken\n")
    _, lines = _convert(host, tmp_path, trace, "--limit", "2")
    assert [q["request_id"] for q in lines] == ["2", "3"]
    assert _refused(host, trace) == "line 5: 1 fields, the header has 6 [T-2]"


def test_plugins_show_lists_the_hosts_trace_formats(host):
    shown = run_fpm("plugins", "show", "fpmcore", "--json", host=host).json()["plugin"]
    assert [f["name"] for f in shown["trace_formats"]] == ["sched-json", "mooncake", "burstgpt", "azure", "fpmcore"]
    assert run_fpm("plugins", "show", "vllm_033", "--json", host=host).json()["plugin"]["trace_formats"] == []


def test_the_replaying_guides_production_trace_example_says_what_it_prints(host, monkeypatch):
    """The code block of the guide's "Production traces" runs, and the numbers the guide gives are what it prints."""
    import re

    monkeypatch.chdir(ROOT)
    guide = (ROOT / "docs" / "guides" / "replaying.md").read_text()
    block = next(body for body in re.findall(r"```\n(.*?)```", guide, re.S) if "mooncake-conversation-40" in body)
    stats_line, replay_line = block.strip().splitlines()
    stats = run_fpm(*stats_line.split()[1:], "--json", host=host)
    assert stats.exit_code == 0, stats.stderr
    doc = stats.json()["stats"]
    assert (doc["requests"], doc["duration_s"], round(doc["prefix_reuse"]["fraction"] * 100, 1)) == (40, 12.0, 3.9)
    assert (doc["prefix_reuse"]["shared_tokens"], doc["prefix_reuse"]["prompt_tokens"]) == (19968, 506280)
    assert "40 requests over 12 s and a prefix reuse of 3.9 %" in guide and "(19,968 of 506,280" in guide
    replay = run_fpm(*replay_line.split()[1:], "--json", host=host)
    assert replay.exit_code == 0, replay.stderr
    summary = replay.json()["summary"]
    assert (summary["steps"], summary["finished"], summary["preemptions_total"]) == (1043, 40, 0)
    assert "1,043 steps, 40 finished, no preemption" in guide


def test_a_gzip_trace_cut_short_is_one_line(host, tmp_path):
    whole = gzip.compress((DATA / "mooncake-conversation-40.jsonl").read_bytes())
    trace = tmp_path / "cut.jsonl.gz"
    trace.write_bytes(whole[:1500])
    assert _refused(host, trace) == ("cannot read trace: Compressed file ended before the end-of-stream marker was "
                                     "reached [R-33]")  # fmt: skip


def test_a_mooncake_replay_equals_the_replay_of_its_conversion(host, tmp_path):
    """The issue's acceptance on the 40-line excerpt: the unconverted Mooncake file and its ``fpm trace convert``
    replay alike, block-hash sharing included (the plain example profile: 16-token blocks, prefix caching on)."""
    trace = DATA / "mooncake-conversation-40.jsonl"
    plain = ROOT / "examples" / "profiles" / "plain-llama8b-like.fpm-profile.json"
    raw = run_fpm("replay", str(plain), "--trace", str(trace), "--time-scale", "0.1", "--json", host=host)
    assert raw.exit_code == 0, raw.stderr
    converted = tmp_path / "c.jsonl"
    assert run_fpm("trace", "convert", str(trace), "-o", str(converted), "--time-scale", "0.1",
                   host=host).exit_code == 0  # fmt: skip
    again = run_fpm("replay", str(plain), "--trace", str(converted), "--json", host=host)
    assert again.exit_code == 0, again.stderr
    summary = raw.json()["summary"]
    assert again.json()["summary"] == summary
    # 38 finished (2 prompts exceed the profile's max_model_len), 18,944 prompt tokens hit the cache through the ids
    assert (summary["finished"], summary["prefix_hit_tokens"]) == (38, 18944)


@pytest.mark.parametrize("line", [
    '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
    '{"timestamp":27000,"input_length":1100,"output_length":7,"hash_ids":[3,999999999999999999,5]}',
    '{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []}',
    '{"timestamp": 01, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
    '{"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
    '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1000000000000000000]}',
    '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1,,2]}',
    '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1], "timestamp": 2}',
    '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]} ',
])  # fmt: skip
def test_a_mooncake_line_of_the_releases_shape_reads_as_the_json_reader_reads_it(line):
    """The release's own line shape is read without the JSON reader; any other line goes through it."""
    from fpmcore.documents.jsonio import JsonError, loads
    from fpmcore.traces.mooncake import _plain

    plain = _plain(line)
    try:
        strict = loads(line)
    except JsonError:
        strict = None
    if plain is not None:
        assert plain == strict and [type(v) for v in plain.values()] == [type(v) for v in strict.values()]
        assert all(type(h) is int for h in plain["hash_ids"])


def test_the_real_mooncake_excerpt_is_read_without_the_json_reader_as_with_it():
    from fpmcore.documents.jsonio import loads
    from fpmcore.traces.mooncake import _plain

    lines = (DATA / "mooncake-conversation-40.jsonl").read_text().splitlines()
    assert all(_plain(line) == loads(line) for line in lines) and all(_plain(line) is not None for line in lines)
