"""fpm verify end to end on the stand-in engine, on a campaign made by fpm onboard --probe recorded."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fpmcore.campaign import onboard
from fpmcore.documents.jsonio import loads
from fpmcore.replay.table import load_table
from fpmcore.testing import make_host, run_fpm
from tests.collect.conftest import PROBE, standin_host
from tests.collect.standin import StandinConfig, StandinRuntime, recorded_probe


@pytest.fixture(scope="module")
def campaign(model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "campaign"
    saved = dict(onboard.PROBE_STAGES)
    onboard.PROBE_STAGES["recorded"] = recorded_probe(PROBE)
    try:
        r = run_fpm("onboard", str(model_dir), "-o", str(out), "--probe", "recorded", "--smoke",
                    host=standin_host(StandinRuntime()))  # fmt: skip
    finally:
        onboard.PROBE_STAGES.clear()
        onboard.PROBE_STAGES.update(saved)
    assert r.exit_code == 0, r.stderr
    return out


def verify(campaign: Path, *extra: str, runtime: StandinRuntime | None = None):
    return run_fpm("verify", str(campaign), *extra, host=standin_host(runtime or StandinRuntime()))


LIGHT = ("--rate", "0.5", "--requests", "6", "--prompt", "64:400", "--output", "2:12", "--runs", "2",
         "--warmup-requests", "2")  # fmt: skip


def test_a_served_trace_equal_to_its_prediction_has_no_error(campaign):
    """The stand-in timed by the campaign's own table is the engine the replay predicts: every error is ~0."""
    runtime = StandinRuntime(StandinConfig(serve_table=load_table(campaign / "table.json")))
    r = verify(campaign, *LIGHT, "--json", runtime=runtime)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == 1 and doc["verdict"] == "pass" and doc["runtime"] == "vllm==0.33.0"
    for run in doc["runs"]:
        e = run["errors"]
        for m in ("ttft", "tpot", "e2e"):
            assert e[m]["n"] >= 5 and e[m]["median"] == pytest.approx(0, abs=1e-9), (m, e[m])
            assert e[m]["p90"] == pytest.approx(0, abs=1e-9)
            for f in ("p50", "p90", "mean"):
                assert e["distribution"][m][f] == pytest.approx(0, abs=1e-9)
        assert e["makespan"] == pytest.approx(0, abs=1e-9) and e["throughput"] == pytest.approx(0, abs=1e-9)
        for kind in run["steps"].values():
            assert kind["median_error"] == pytest.approx(0, abs=1e-9)
            assert kind["served_s"] == pytest.approx(kind["predicted_s"])
        assert not run["contended"] and run["contention"]["contended_steps"] == 0
        assert run["served"]["steps"] == run["predicted"]["steps"]
    s = doc["summary"]
    assert s["ttft"]["median"] == pytest.approx(0, abs=1e-9) and s["makespan"] == pytest.approx(0, abs=1e-9)


def _steps(runtime: StandinRuntime, doc: dict) -> tuple[int, list[int]]:
    """The warm-up's steps and each run's, from the engine's step counter and the report."""
    runs = [r["served"]["steps"] for r in doc["runs"]]
    (engine,) = runtime.engines
    return engine.steps_run - sum(runs), runs


def test_a_burst_during_a_serving_makes_its_run_contended_and_leaves_it_out_of_the_verdict(campaign):
    clean_runtime = StandinRuntime()
    clean = verify(campaign, *LIGHT, "--json", runtime=clean_runtime)
    assert clean.exit_code in (0, 1), clean.stderr
    warm, (first, second) = _steps(clean_runtime, clean.json())
    # a neighbour during all of run 1 (the stand-in's steps are a function of the prompts: the same counts again)
    runtime = StandinRuntime(StandinConfig(bursts=((warm, warm + first),)))
    r = verify(campaign, *LIGHT, "--json", runtime=runtime)
    doc = r.json()
    one, two = doc["runs"]
    assert one["contended"] and not two["contended"]
    assert one["contention"]["contended_steps"] == first and one["contention"]["contended_time_fraction"] == 1.0
    assert one["contention"]["foreign_seconds"] == pytest.approx(one["contention"]["served_seconds"])
    assert all(s["contended"] for s in one["served_steps"])
    assert two["contention"]["contended_steps"] == 0 and two["contention"]["foreign_seconds"] == 0
    # the burst slowed run 1's steps by 75 %: its makespan error moved, but the summary is run 2's alone
    assert one["errors"]["e2e"]["median"] > clean.json()["runs"][0]["errors"]["e2e"]["median"] + 0.1
    s = doc["summary"]
    assert (s["runs"], s["runs_counted"]) == (2, 1)
    assert s["e2e"]["median"] == two["errors"]["e2e"]["median"] and s["makespan"] == two["errors"]["makespan"]
    assert doc["verdict"] == clean.json()["verdict"] or doc["verdict"] in ("pass", "fail")
    assert r.exit_code == (0 if doc["verdict"] == "pass" else 1)


def test_one_contended_step_below_the_bound_keeps_the_run(campaign):
    clean_runtime = StandinRuntime()
    warm, (first, _) = _steps(clean_runtime, verify(campaign, *LIGHT, "--json", runtime=clean_runtime).json())
    runtime = StandinRuntime(StandinConfig(bursts=((warm + first - 1, warm + first),)))  # run 1's last step
    one = verify(campaign, *LIGHT, "--json", runtime=runtime).json()["runs"][0]
    c = one["contention"]
    assert c["contended_steps"] == 1 and 0 < c["contended_time_fraction"] < 0.05 and not one["contended"]


def test_every_run_contended_gives_the_verdict_contended_exit_1(campaign):
    runtime = StandinRuntime(StandinConfig(bursts=((0, 10**9),)))
    r = verify(campaign, *LIGHT, runtime=runtime)
    assert r.exit_code == 1, r.stderr
    assert "verdict: contended (every run was contended beyond the bound: nothing to judge)" in r.stdout
    assert r.stdout.count("contended: not counted") == 2
    j = verify(campaign, *LIGHT, "--json", runtime=StandinRuntime(StandinConfig(bursts=((0, 10**9),))))
    assert j.exit_code == 1 and j.json()["verdict"] == "contended" and j.json()["checks"] == []
    assert j.json()["summary"]["runs_counted"] == 0


def test_json_stdout_is_one_document_and_the_report_file_is_the_same(campaign, tmp_path):
    report = tmp_path / "report.json"
    plot = tmp_path / "verify.png"
    r = verify(campaign, *LIGHT, "--noise-floor", "--json", "-o", str(report), "--plot", str(plot))
    assert r.exit_code in (0, 1), r.stderr
    doc = json.loads(r.stdout)  # nothing else on stdout
    assert loads(report.read_bytes()) == doc
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(doc) == {"schema", "command", "campaign", "model_dir", "runtime", "plugin", "options",
                        "deployment_differences", "warmed_step_token_counts", "bound", "summary", "verdict", "checks",
                        "runs"}  # fmt: skip
    # every prefill of the two light traces' 12 requests is a step of its own prompt length (distinct lengths)
    lengths = {q["prompt_len"] for run in doc["runs"] for q in run["request_timings"]}
    assert doc["warmed_step_token_counts"] >= len(lengths) >= 10
    assert doc["verdict"] in ("pass", "fail") and doc["bound"]["max_contended_time_fraction"] == 0.05
    s = doc["summary"]
    for m in ("ttft", "tpot", "e2e"):
        assert set(s[m]) == {"median", "p90"} and 0 <= s[m]["median"] <= s[m]["p90"]
        assert set(s["distribution"][m]) == {"p50", "p90", "mean"}
    # the stand-in is deterministic: served twice, the same trace gives the same times (a zero noise floor)
    assert s["noise_floor"] == {"ttft": 0.0, "tpot": 0.0, "e2e": 0.0, "makespan": 0.0}
    run = doc["runs"][0]
    assert run["requests"] == 6 and len(run["request_timings"]) == 6
    t = run["request_timings"][0]
    assert set(t["served"]) == set(t["predicted"]) == {"ttft_s", "tpot_s", "e2e_s", "output_tokens"}
    assert t["served"]["output_tokens"] == t["output_len"] and 64 <= t["prompt_len"] <= 400
    assert len(run["served_steps"]) == run["served"]["steps"] == sum(k["n"] for k in run["steps"].values())
    assert set(run["steps"]) <= {"prefill", "decode", "mixed"} and "decode" in run["steps"]
    assert len(run["load_average"]["start"]) == 3 and run["again"]["contention"]["contended"] is False
    # errors are recomputed from the request timings
    served = sorted(t["served"]["ttft_s"] for t in run["request_timings"])
    pred = {t["request_id"]: t["predicted"]["ttft_s"] for t in run["request_timings"]}
    errs = sorted(abs(pred[t["request_id"]] - t["served"]["ttft_s"]) / t["served"]["ttft_s"]
                  for t in run["request_timings"])  # fmt: skip
    assert run["errors"]["ttft"]["median"] == pytest.approx((errs[2] + errs[3]) / 2) and len(served) == 6
    assert doc["checks"] and all(c["ok"] == (abs(c["value"]) <= c["limit"]) for c in doc["checks"])
    assert r.stderr.count("verify: serving") == 5  # warm-up, two runs served twice


def test_a_trace_file_is_served_with_its_shared_prefixes(campaign, tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [{"request_id": "a", "arrival_time": 0.0, "prompt_len": 700, "output_len": 3},
             {"request_id": "b", "arrival_time": 2.0, "prompt_len": 800, "output_len": 3, "prefix_of": "a",
              "prefix_of_len": 600},
             {"request_id": "c", "arrival_time": 4.0, "prompt_len": 300, "output_len": 2}]  # fmt: skip
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    runtime = StandinRuntime(StandinConfig(serve_table=load_table(campaign / "table.json")))
    r = verify(campaign, "--trace", str(trace), "--runs", "1", "--json", runtime=runtime)
    assert r.exit_code == 0, r.stderr
    run = r.json()["runs"][0]
    assert run["errors"]["e2e"]["median"] == pytest.approx(0, abs=1e-9)
    # b's first 544-token block is a's: the hit shortens b's prefill to 256 tokens on both sides
    b = next(s for s in run["served_steps"] if s["kind"] == "prefill" and s["start_s"] >= 2.0)
    assert b["scheduled"]["sum_prefill_tokens"] == 800 - 544 and b["scheduled"]["sum_prefill_kv_tokens"] == 544


def test_a_runtime_without_a_serving_engine_is_refused_naming_the_plugins_that_have_one(campaign):
    host = make_host(entry_points=("vllm_033", "vllm_032"))
    r = run_fpm("verify", str(campaign), *LIGHT, host=host)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "fpm: runtime plugin 'vllm_033' serves no engine for vllm==0.33.0 (no fpm_serving_engine); plugins that "
        "serve one: vllm_032 (vllm==0.32.0) [V-1]"
    ]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda c, t: (["--trace", str(t / "missing.jsonl")], None), "cannot read trace"),
        (
            lambda c, t: (
                [
                    "--trace",
                    _write(
                        t / "step.jsonl", '{"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 2}\n'
                    ),
                ],
                None,
            ),
            "step-exact arrivals",
        ),
        (
            lambda c, t: (
                [
                    "--trace",
                    _write(
                        t / "long.jsonl",
                        '{"request_id": "big", "arrival_time": 0, "prompt_len": 9000000, "output_len": 2}\n',
                    ),
                ],
                None,
            ),
            "request big needs",
        ),
        (lambda c, t: (["--prompt", "9:3"], None), "--prompt: must be LO:HI"),
        (lambda c, t: (["-o", str(t / "no" / "r.json")], None), "[O-1]"),
        (lambda c, t: ([], "table.json"), "table.json is missing [V-2]"),
    ],
)
def test_bad_input_exits_2_with_one_line_before_the_engine_starts(campaign, tmp_path, make, expected):
    import shutil

    argv, remove = make(campaign, tmp_path)
    target = campaign
    if remove:
        target = tmp_path / "broken"
        shutil.copytree(campaign, target)
        (target / remove).unlink()
    runtime = StandinRuntime()
    r = verify(target, *argv, runtime=runtime)
    assert r.exit_code == 2 and r.stdout == ""
    assert expected in r.stderr.splitlines()[-1], r.stderr
    assert not runtime.engines  # refused before any serving
    j = verify(target, *argv, "--json", runtime=StandinRuntime())
    assert j.exit_code == 2 and json.loads(j.stdout)["status"] == "error"


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


ROOT = Path(__file__).resolve().parents[2]


def test_kills_during_verify_leave_the_old_report_or_a_new_one_whole(campaign, tmp_path):
    """fpm verify -o REPORT killed (SIGKILL) at random moments: the report is always the old one or a new one,
    whole, and no other visible file appears beside it."""
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "tests.collect.fpm_standin", "verify", str(campaign), *LIGHT, "-o", str(report)]
    env = {**os.environ, "FPM_STANDIN_STEP_SLEEP": "0.002"}
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True)
    duration = time.monotonic() - started  # of an uninterrupted fpm verify: the kills fall within it
    assert done.returncode in (0, 1), done.stderr.decode()
    old = report.read_bytes()
    assert loads(old)["verdict"] in ("pass", "fail")
    rng = random.Random(31)
    kills = finished = attempts = 0
    while kills < 10:
        attempts += 1
        assert attempts < 40
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # every third run is left to finish, so new reports replace old ones between the kills on any machine
        timeout = None if attempts % 3 == 0 else rng.uniform(0.1, 0.95) * duration
        try:
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode in (0, 1), err.decode()
            finished += 1
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
        data = report.read_bytes()
        doc = loads(data, str(report))  # strict JSON: whole
        assert doc["schema"] == 1 and len(doc["runs"]) == 2 and doc["verdict"] in ("pass", "fail")
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["report.json"]
    assert finished >= 1  # some runs finished and wrote their report over the old one between the kills


def test_shape_warmup_brings_each_predicted_token_count_once_in_one_step():
    from fpmcore.verify.traces import shape_warmup_traces, step_token_counts

    steps = [
        {"sum_prefill_tokens": 300, "num_decode_requests": 0},
        {"sum_prefill_tokens": 0, "num_decode_requests": 3},
        {"sum_prefill_tokens": 297, "num_decode_requests": 3},
        {"sum_prefill_tokens": 1400, "num_decode_requests": 0},
    ]
    assert step_token_counts(steps) == {300, 3, 1400}
    got = [
        [(r.prompt_len, r.output_len, r.arrival_time) for r in t.requests]
        for t in shape_warmup_traces({300, 3, 1400}, 1024)
    ]
    # ascending; a count above the longest prompt (max_model_len − 1 = 1023) is split, all arriving at once
    assert got == [[(3, 1, 0.0)], [(300, 1, 0.0)], [(1023, 1, 0.0), (377, 1, 0.0)]]


def test_a_mooncake_trace_is_served_as_fpm_replay_reads_it(campaign, tmp_path):
    """``--trace`` takes any installed format (sniffed, or ``--trace-format``): a Mooncake file's block ids
    are served as token ids shared where the ids agree, so the second prompt hits the first's cached blocks."""
    trace = tmp_path / "mooncake.jsonl"
    lines = [{"timestamp": 0, "input_length": 900, "output_length": 3, "hash_ids": [5, 6, 7, 8]},
             {"timestamp": 2000, "input_length": 1000, "output_length": 3, "hash_ids": [5, 6, 7, 9]},
             {"timestamp": 4000, "input_length": 300, "output_length": 2, "hash_ids": [10, 11]}]  # fmt: skip
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    runtime = StandinRuntime(StandinConfig(serve_table=load_table(campaign / "table.json")))
    r = verify(campaign, "--trace", str(trace), "--hash-block-tokens", "256", "--runs", "1", "--json", runtime=runtime)
    assert r.exit_code == 0, r.stderr
    run = r.json()["runs"][0]
    assert run["errors"]["e2e"]["median"] == pytest.approx(0, abs=1e-9)
    second = next(s for s in run["served_steps"] if s["kind"] == "prefill" and s["start_s"] >= 2.0)
    # three shared ids of 256 tokens: the engine's first 544-token block is cached on both sides
    assert (second["scheduled"]["sum_prefill_kv_tokens"], second["scheduled"]["sum_prefill_tokens"]) == (544, 456)
    named = verify(campaign, "--trace", str(trace), "--trace-format", "azure", "--runs", "1", runtime=runtime)
    assert named.exit_code == 2 and "TIMESTAMP" in named.stderr, named.stderr
