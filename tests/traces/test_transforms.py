"""The transforms of fpm replay and fpm trace convert: window, over-long prompts, time scale and rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest
from fpmcore.testing import make_host, run_fpm
from fpmcore.traces.transforms import Transforms, apply, mean_rate

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_033", "glm53flash"))


def _requests(*arrivals: float, prompt: int = 100) -> list[TraceRequest]:
    return [TraceRequest(request_id=str(i), prompt_len=prompt + i, output_len=2, arrival_time=t)
            for i, t in enumerate(arrivals)]  # fmt: skip


def test_time_scale_and_rate_rescale_arrivals():
    reqs = _requests(0.0, 1.0, 3.0, 4.0)
    scaled, counts = apply(reqs, Transforms(time_scale=2.5), "t")
    assert [r.arrival_time for r in scaled] == [0.0, 2.5, 7.5, 10.0] and counts == {}
    assert mean_rate(reqs) == 0.75
    rated, _ = apply(reqs, Transforms(rate=3.0), "t")
    assert [r.arrival_time for r in rated] == [0.0, 0.25, 0.75, 1.0] and mean_rate(rated) == 3.0
    with pytest.raises(FpmError) as info:
        apply(_requests(2.0, 2.0), Transforms(rate=1.0), "t")
    assert info.value.rule == "T-3" and "arrive at one time" in info.value.message


def test_over_long_prompts_are_dropped_or_clipped_with_their_blocks_and_counted():
    reqs = [TraceRequest(request_id="a", prompt_len=1300, output_len=1, arrival_time=0.0, hash_ids=(1, 2, 3),
                         hash_block_tokens=512),
            TraceRequest(request_id="b", prompt_len=400, output_len=1, arrival_time=1.0, prefix_of="a",
                         prefix_of_len=300)]  # fmt: skip
    dropped, counts = apply(reqs, Transforms(max_prompt_len=1000), "t")
    assert [r.request_id for r in dropped] == ["b"] and dropped[0].prefix_of is None
    assert counts == {"over_long_dropped": 1, "prefix_of_removed": 1}
    clipped, counts = apply(reqs, Transforms(max_prompt_len=600, over_long="clip"), "t")
    assert (clipped[0].prompt_len, clipped[0].hash_ids) == (600, (1, 2))
    assert (clipped[1].prompt_len, clipped[1].prefix_of, clipped[1].prefix_of_len) == (400, "a", 300)
    assert counts == {"over_long_clipped": 1}


def _trace(tmp_path: Path, n: int) -> Path:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"request_id": f"r{i}", "arrival_time": 2.0 * i, "prompt_len": 100 * (i + 1),
                                         "output_len": 4}) + "\n" for i in range(n)))  # fmt: skip
    return trace


def test_the_window_starts_its_arrivals_at_zero_and_the_replay_records_what_it_replayed(host, tmp_path):
    trace = _trace(tmp_path, 10)
    r = run_fpm("replay", str(PROFILE), "--trace", str(trace), "--start", "3", "--limit", "4", "--max-prompt-len",
                "600", "--time-scale", "0.5", "--json", host=host)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["trace"] == {"file": str(trace), "format": "fpmcore", "format_plugin": "fpmcore", "sniffed": True,
                            "requests": 3, "rows_skipped": {},
                            "transforms": {"start": 3, "limit": 4, "max_prompt_len": 600, "time_scale": 0.5,
                                           "over_long": "drop"},
                            "over_long_dropped": 1}  # fmt: skip
    assert [q["request_id"] for q in doc["requests"]] == ["r3", "r4", "r5"]
    assert doc["summary"]["requests"] == 3
    assert r.stderr.startswith(f"fpm: note: read {trace} as fpmcore (sniffed): 3 requests, over long dropped 1, "
                               "transforms start=3 limit=4 max_prompt_len=600 time_scale=0.5 over_long=drop\n")  # fmt: skip
    out = tmp_path / "w.jsonl"
    assert run_fpm("trace", "convert", str(trace), "-o", str(out), "--start", "3", "--limit", "4",
                   "--max-prompt-len", "600", "--time-scale", "0.5", host=host).exit_code == 0  # fmt: skip
    assert [json.loads(line)["arrival_time"] for line in out.read_text().splitlines()] == [0.0, 1.0, 2.0]


def test_the_replay_out_folder_records_the_trace_it_read(host, tmp_path):
    trace = _trace(tmp_path, 5)
    out = tmp_path / "out"
    r = run_fpm("replay", str(PROFILE), "--trace", str(trace), "--rate", "1", "--out", str(out), "--out-format",
                "jsonl.gz", host=host)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    summary = json.loads((out / "replay-summary.json").read_text())
    assert summary["trace"]["transforms"] == {"rate": 1.0} and summary["trace"]["requests"] == 5


@pytest.mark.parametrize(("argv", "message"), [
    (["--time-scale", "2"], "--time-scale and --rate scale arrival times; this trace is step-exact (arrival_step) "
                            "[T-3]"),
    (["--start", "5"], "no request is left after the window and the filters {'start': 5} [T-3]"),
])  # fmt: skip
def test_a_transform_that_cannot_apply_is_one_line(host, tmp_path, argv, message):
    trace = tmp_path / "s.jsonl"
    trace.write_text('{"request_id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2}\n')
    r = run_fpm("replay", str(PROFILE), "--trace", str(trace), *argv, host=host)
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == f"fpm: {trace}: {message}\n"


def test_time_scale_and_rate_exclude_each_other(host, tmp_path):
    r = run_fpm("trace", "convert", "x", "-o", str(tmp_path / "o.jsonl"), "--rate", "1", "--time-scale", "2",
                host=host)  # fmt: skip
    assert r.exit_code == 2 and "not allowed with argument" in r.stderr
