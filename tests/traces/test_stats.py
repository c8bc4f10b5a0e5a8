"""``fpm trace stats``: the numbers of small traces computed by hand, and the plot."""

from __future__ import annotations

import json
from pathlib import Path

from fpmcore.replay.trace import TraceRequest
from fpmcore.testing import make_host, run_fpm
from fpmcore.traces.stats import percentiles, prefix_reuse


def _req(rid: str, prompt: int, ids: tuple[int, ...]) -> TraceRequest:
    return TraceRequest(request_id=rid, prompt_len=prompt, output_len=1, arrival_time=0.0, hash_ids=ids,
                        hash_block_tokens=512)  # fmt: skip


def test_prefix_reuse_counts_the_leading_blocks_an_earlier_request_had():
    reqs = [_req("a", 1300, (1, 2, 3)), _req("b", 1536, (1, 2, 4)), _req("c", 600, (1, 5)), _req("d", 10, (9,))]
    assert prefix_reuse(reqs, 512) == {"block_tokens": 512, "shared_tokens": 1024 + 512, "prompt_tokens": 3446,
                                       "fraction": 1536 / 3446, "requests_with_a_hit": 2,
                                       "distinct_blocks": 6}  # fmt: skip
    coarse = prefix_reuse(reqs, 1024)
    assert (coarse["shared_tokens"], coarse["requests_with_a_hit"]) == (1024, 1)
    partial = prefix_reuse([_req("a", 700, (1, 2)), _req("b", 600, (1, 2))], 512)
    assert partial["shared_tokens"] == 600  # a hit on the partial last block counts its tokens, not the block's
    assert prefix_reuse([TraceRequest(request_id="x", prompt_len=4, output_len=1, arrival_time=0.0)], 512) is None


def test_percentiles_are_nearest_rank():
    assert percentiles(list(range(1, 101))) == {"min": 1, "mean": 50.5, "p50": 50, "p90": 90, "p99": 99, "max": 100}
    assert percentiles([7]) == {"min": 7, "mean": 7.0, "p50": 7, "p90": 7, "p99": 7, "max": 7}


def test_fpm_trace_stats_prints_a_table_and_draws_the_plot(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"request_id": str(i), "arrival_time": i * 0.5, "prompt_len": 10 + i,
                                         "output_len": 3}) + "\n" for i in range(41)))  # fmt: skip
    host = make_host()
    plot = tmp_path / "t.png"
    r = run_fpm("trace", "stats", str(trace), "--plot", str(plot), host=host)
    assert r.exit_code == 0, r.stderr
    assert "mean_rate_per_s" in r.stdout and "p50 30" in r.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = run_fpm("trace", "stats", str(trace), "--json", host=host).json()
    assert doc["stats"]["duration_s"] == 20.0 and doc["stats"]["mean_rate_per_s"] == 2.0
    assert doc["stats"]["rate_over_time"]["per_s"] == [2.0] * 19 + [3.0] and doc["stats"]["prefix_reuse"] is None
    refused = run_fpm("trace", "stats", str(trace), "--plot", str(trace), host=host)
    assert refused.exit_code == 2 and refused.stderr.rstrip().endswith("[O-3]")


def test_a_step_exact_trace_has_a_duration_in_steps(tmp_path):
    trace = Path(tmp_path) / "s.jsonl"
    trace.write_text('{"request_id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2}\n'
                     '{"request_id": "b", "arrival_step": 7, "prompt_len": 8, "output_len": 2}\n')  # fmt: skip
    doc = run_fpm("trace", "stats", str(trace), "--json", host=make_host()).json()
    assert doc["stats"]["duration_steps"] == 7 and "duration_s" not in doc["stats"]
