"""``fpm replay`` (06 R-34, R-35): the summary table, --json, --out files, diagnostics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DATA

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.replay.command import replay_command
from fpmcore.replay.outputs import read_records
from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "examples" / "profiles" / "plain-llama8b-like.fpm-profile.json"
GLM = DATA / "glm53flash-tp4.fpm-profile.json"


class _ReplayPlugin:
    """Registers the command the way the host's built-in plugin does."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="replay_test", kind="model", targets=("replay-test",), api_version=API_VERSION)

    @hookimpl
    def fpm_cli_commands(self):
        return [replay_command()]


def fpm(*argv: str, runtimes: tuple[str, ...] = ("vllm_033",)):
    """``fpm`` with the replay command and the runtime plugins ``runtimes`` (their replay rules)."""
    return run_fpm(*argv, host=make_host(_ReplayPlugin(), entry_points=runtimes))


def _trace(tmp_path: Path, *lines: dict) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def test_json_summary_requests_and_steps(tmp_path):
    t = _trace(tmp_path, {"request_id": "A", "arrival_step": 0, "prompt_len": 10_000, "output_len": 3})
    r = fpm("replay", str(GLM), "--trace", str(t), "--prefix-caching", "on", "--steps", "--json")
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == 1
    assert doc["summary"]["schema"] == "fpmcore.replay.summary/v1"
    assert doc["summary"]["steps"] == 4 and doc["summary"]["finished"] == 1
    assert doc["summary"]["kv_cache_max_concurrency"] == 13_697 / 495
    assert [s["used_blocks_scheduled"] for s in doc["steps"]] == [8, 18, 10, 10]  # RV-14
    assert doc["requests"][0]["output_tokens"] == 3
    r2 = fpm("replay", str(GLM), "--trace", str(t), "--json")
    assert "steps" not in r2.json()
    assert [x["request_id"] for x in r2.json()["requests"]] == ["A"]


def test_table_and_out_files(tmp_path):
    t = ROOT / "examples" / "traces" / "plain-preempt-steps.jsonl"
    out = tmp_path / "out"
    r = fpm(
        "replay",
        str(PLAIN),
        "--trace",
        str(t),
        "--fpm-table",
        str(ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json"),
        "--max-num-seqs",
        "4",
        "--out",
        str(out),
    )
    assert r.exit_code == 0, r.stderr
    assert "peak_used_blocks" in r.stdout and "kv_cache_max_concurrency" in r.stdout
    steps = read_records(out / "replay-steps.jsonl.zst")
    reqs = read_records(out / "replay-requests.jsonl.zst")
    summ = json.loads((out / "replay-summary.json").read_text())
    assert summ["steps"] == len(steps) and summ["requests"] == len(reqs) == 5
    assert max(s["running"] for s in steps) <= 4
    assert all(s["t_end"] >= s["t_start"] for s in steps)


def test_bad_trace_is_a_diagnostic_not_a_traceback(tmp_path):
    t = _trace(tmp_path, {"request_id": "a", "arrival_time": 0, "prompt_len": True, "output_len": 2})
    r = fpm("replay", str(PLAIN), "--trace", str(t))
    assert r.exit_code == 2
    assert "trace line 1: prompt_len must be an integer, found true [R-33]" in r.stderr
    assert "Traceback" not in r.stderr


def test_replay_that_stops_exits_1_with_the_rule(tmp_path):
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 100, "output_len": 2})
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--prefix-caching", "on", "--json")
    assert r.exit_code == 0
    bad = tmp_path / "tbl.json"
    bad.write_text(
        json.dumps([{"phase": "decode", "batch_size": 1, "total_kv_read_tokens": 8, "wall_time_seconds": 0.01}])
    )
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--fpm-table", str(bad), "--json")
    assert r.exit_code == 1
    assert r.json()["error"] == {"rule": "R-27", "message": "latency table has no prefill points"}
    assert "latency table has no prefill points [R-27]" in r.stderr


def test_plot_without_matplotlib_names_the_package(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 10, "output_len": 1})
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--plot", str(tmp_path / "p.png"))
    assert r.exit_code == 2
    assert "pip install matplotlib" in r.stderr


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    t = _trace(
        tmp_path, *({"request_id": f"r{i}", "arrival_step": i, "prompt_len": 40, "output_len": 8} for i in range(6))
    )
    out = tmp_path / "pool.png"
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--plot", str(out))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "trace_name,profile",
    [
        ("glm-one-request.jsonl", "glm53flash-tp4.fpm-profile.json"),
        ("glm-mixed-120.jsonl", "glm53flash-tp4.fpm-profile.json"),
        ("plain-poisson-300.jsonl", "plain-llama8b-like.fpm-profile.json"),
    ],
)
def test_examples_run(trace_name, profile):
    """The embedded example traces replay cleanly with their tables."""
    table = "glm53flash-tp4.json" if profile.startswith("glm") else "plain-llama8b-like.json"
    r = fpm(
        "replay",
        str(ROOT / "examples" / "profiles" / profile),
        "--trace",
        str(ROOT / "examples" / "traces" / trace_name),
        "--fpm-table",
        str(ROOT / "examples" / "fpm_tables" / table),
        "--prefix-caching",
        "on",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    s = r.json()["summary"]
    assert s["finished"] == s["requests"] and s["rejected"] == 0


def test_vllm_scheduler_settings_as_engine_arguments(tmp_path):
    """Issue 12 §2: vLLM's scheduler settings are ``fpm replay`` options named as vLLM's engine arguments."""
    reqs = [{"request_id": f"r{i}", "arrival_step": 0, "prompt_len": 64, "output_len": 2, "priority": p}
            for i, p in enumerate([3, -1, 0])]  # fmt: skip
    t = _trace(tmp_path, *reqs)
    base = ("replay", str(PLAIN), "--trace", str(t), "--steps", "--json", "--max-num-seqs", "1")
    fcfs = fpm(*base).json()
    assert [s["admitted"] for s in fcfs["steps"] if s["admitted"]] == [["r0"], ["r1"], ["r2"]]
    prio = fpm(*base, "--scheduling-policy", "priority").json()
    assert [s["admitted"] for s in prio["steps"] if s["admitted"]] == [["r1"], ["r2"], ["r0"]]
    capped = fpm(*base, "--max-num-seqs", "3", "--long-prefill-token-threshold", "16").json()
    assert [n for _r, n, _c in capped["steps"][0]["scheduled"]] == [16, 16, 16]
    queued = fpm(*base, "--max-num-queued-reqs", "2").json()
    rej = [r for r in queued["requests"] if r["status"] == "rejected"]
    assert [(r["request_id"], r["reject_reason"]) for r in rej] == [
        ("r2", "max_num_queued_reqs 2 reached: 2 unfinished requests")
    ]
    active = fpm(*base, "--max-num-seqs", "3", "--max-num-active-seqs", "1").json()
    assert active["summary"]["peak_running"] == 1


@pytest.mark.parametrize("argv,message", [
    (("--max-num-seqs", "2", "--max-num-active-seqs", "3"),
     "max_num_active_seqs (3) cannot be greater than max_num_seqs (2)"),
    (("--long-prefill-token-threshold", "99999999"),
     "long_prefill_token_threshold (99999999) cannot be greater than the max_model_len (32768)"),
])  # fmt: skip
def test_settings_vllm_refuses_are_refused(tmp_path, argv, message):
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 2})
    r = fpm("replay", str(PLAIN), "--trace", str(t), *argv)
    assert r.exit_code == 2
    assert message in r.stderr and "R-3" in r.stderr


def test_bad_option_values_are_usage_errors(tmp_path):
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 2})
    for argv in (("--watermark", "1.0"), ("--scheduling-policy", "lifo"), ("--max-num-queued-reqs", "-1"),
                 ("--prefill-schedule-interval", "0")):  # fmt: skip
        assert fpm("replay", str(PLAIN), "--trace", str(t), *argv).exit_code == 2, argv


def test_step_limit_is_a_diagnostic(tmp_path):
    """A replay that reaches --max-steps stops with a diagnostic naming the limit and how to raise it."""
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 8, "output_len": 100})
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--max-steps", "10")
    assert r.exit_code == 1
    assert "replay stopped at step 10: it reached its limit of 10 steps; raise it with --max-steps" in r.stderr
    assert fpm("replay", str(PLAIN), "--trace", str(t), "--max-steps", "100").exit_code == 0


def test_prefix_caching_defaults_to_the_profile_and_an_override_says_so(tmp_path):
    """Issue 13 §2: the GLM profile records enable_prefix_caching true, so the replay reports the import's
    concurrency 13,697 / 495 = 27.6707 (align mode); --prefix-caching off is noted and gives 13,697 / 487."""
    t = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
    table = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"
    base = ("replay", str(GLM), "--trace", str(t), "--fpm-table", str(table), "--json")
    default = fpm(*base)
    assert default.exit_code == 0 and default.stderr == ""
    assert default.json()["summary"]["kv_cache_max_concurrency"] == 13_697 / 495
    assert fpm(*base, "--prefix-caching", "on").json() == default.json()
    off = fpm(*base, "--prefix-caching", "off")
    assert off.json()["summary"]["kv_cache_max_concurrency"] == 13_697 / 487
    assert off.stderr == (
        "fpm: note: --prefix-caching off differs from the profile, which recorded enable_prefix_caching true\n"
    )
    human = fpm(*base[:-1])
    assert "27.6707" in human.stdout and "28.1253" not in human.stdout


def test_without_a_table_the_fixed_step_time_is_noted(tmp_path):
    t = _trace(tmp_path, {"request_id": "a", "arrival_step": 0, "prompt_len": 10, "output_len": 3})
    r = fpm("replay", str(PLAIN), "--trace", str(t), "--json")
    assert r.exit_code == 0
    assert r.stderr == (
        "fpm: note: no --fpm-table: every step takes 1 s, so the times and latencies are in steps, not seconds\n"
    )
    assert r.json()["latency"] == {"table": None, "fixed_step_seconds": 1.0}
    assert r.json()["summary"]["ttft_s"]["mean"] == 1.0
    table = str(ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json")
    r2 = fpm("replay", str(PLAIN), "--trace", str(t), "--fpm-table", table, "--json")
    assert r2.stderr == "" and r2.json()["latency"] == {"table": table, "fixed_step_seconds": None}


def test_rejections_have_their_reason_and_are_counted_by_reason(tmp_path):
    """Issue 13 §3: a request longer than max_model_len (32,768) is rejected with its reason in its record, the
    summary counts rejections by reason, and stderr names the first of each kind."""
    t = _trace(
        tmp_path,
        {"request_id": "long", "arrival_step": 0, "prompt_len": 40_000, "output_len": 3},
        {"request_id": "long2", "arrival_step": 0, "prompt_len": 32_768, "output_len": 3},
        *({"request_id": f"r{i}", "arrival_step": 0, "prompt_len": 64, "output_len": 2} for i in range(3)),
    )
    r = fpm(
        "replay",
        str(PLAIN),
        "--trace",
        str(t),
        "--fpm-table",
        str(ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json"),
        "--max-num-queued-reqs",
        "2",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    reasons = {x["request_id"]: x["reject_reason"] for x in doc["requests"] if x["status"] == "rejected"}
    assert reasons == {"long": "prompt_len 40000 >= max_model_len 32768",
                       "long2": "prompt_len 32768 >= max_model_len 32768",
                       "r2": "max_num_queued_reqs 2 reached: 2 unfinished requests"}  # fmt: skip
    assert doc["summary"]["rejected"] == 3
    assert doc["summary"]["rejected_by_reason"] == {
        "prompt_too_long": 2, "never_fits_final_forward": 0, "never_fits_input_sequence": 0,
        "max_num_queued_reqs": 1, "max_num_queued_tokens": 0}  # fmt: skip
    assert r.stderr.splitlines() == [
        "fpm: note: 2 requests rejected (prompt_too_long), the first: prompt_len 40000 >= max_model_len 32768",
        "fpm: note: 1 request rejected (max_num_queued_reqs), the first: max_num_queued_reqs 2 reached: 2 unfinished "
        "requests",
    ]
    human = fpm("replay", str(PLAIN), "--trace", str(t), "--max-num-queued-reqs", "2")
    assert "prompt_too_long 2  max_num_queued_reqs 1" in human.stdout


def test_the_progress_bar_moves_on_a_terminal(tmp_path):
    """On a terminal the bar is redrawn while the replay runs (steps and requests completed change); piped, it
    is off."""
    import os
    import pty
    import subprocess
    import sys

    t = tmp_path / "t.jsonl"
    t.write_text("".join(json.dumps({"request_id": f"r{i}", "arrival_step": i // 2, "prompt_len": 256,
                                     "output_len": 300}) + "\n" for i in range(3000)))  # fmt: skip
    cmd = [sys.executable, "-m", "fpmcore", "replay", str(PLAIN), "--trace", str(t), "--out", str(tmp_path / "o")]
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "150", "TERM": "xterm"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait() == 0
    os.close(master)
    import re

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))  # colours, cursor
    frames = re.findall(r"(\d+)/3000 requests · ([\d,]+) steps", text)
    assert len(set(frames)) >= 3, text[-2000:]
    done = [int(a) for a, _ in frames]
    assert done == sorted(done) and done[0] < 3000
    piped = subprocess.run(cmd[:-1] + [str(tmp_path / "o2")], capture_output=True)
    assert piped.returncode == 0 and b"requests \xc2\xb7" not in piped.stderr


def test_a_profile_whose_runtime_has_no_replay_semantics_is_refused(tmp_path):
    """R-1: the rules come from the runtime plugin of the profile's backend_version, never assumed."""
    t = _trace(tmp_path, {"request_id": "A", "arrival_step": 0, "prompt_len": 100, "output_len": 3})
    r = fpm("replay", str(PLAIN), "--trace", str(t), runtimes=("vllm_027",))
    assert r.exit_code == 2
    assert r.stderr == (
        "fpm: no installed runtime plugin gives replay semantics for vllm==0.33.0; "
        "runtimes with replay semantics: vllm==0.27.0 [R-1]\n"
    )
    r = fpm("replay", str(PLAIN), "--trace", str(t), runtimes=())
    assert r.exit_code == 2
    assert r.stderr.endswith("runtimes with replay semantics: none [R-1]\n")


def test_the_rules_of_the_profile_runtime_refuse_a_setting_its_scheduler_lacks(tmp_path):
    """A vLLM 0.27.0 profile replays with 0.27.0's rules: its scheduler has no max_num_active_seqs (R-3)."""
    doc = json.loads(PLAIN.read_text())
    for dep in doc["deployments"]:
        dep["backend_version"] = "0.27.0"
    profile = tmp_path / "p027.json"
    profile.write_text(json.dumps(doc))
    t = _trace(tmp_path, {"request_id": "A", "arrival_step": 0, "prompt_len": 100, "output_len": 3})
    r = fpm(
        "replay",
        str(profile),
        "--trace",
        str(t),
        "--max-num-active-seqs",
        "2",
        "--json",
        runtimes=("vllm_027", "vllm_033"),
    )
    assert r.exit_code == 2
    assert r.stderr == (
        "fpm: the vllm==0.27.0 scheduler has no max_num_active_seqs: the replay cannot model it [R-3]\n"
    )


def test_the_long_prefill_cap_follows_the_profile_runtime(tmp_path):
    """A request alone, 100 prompt tokens, cap 16: vLLM 0.33.0 lifts the cap (1 prefill step, then 2
    decodes), vLLM 0.27.0 caps every chunk (7 prefill steps, then 2 decodes)."""
    doc = json.loads(PLAIN.read_text())
    for dep in doc["deployments"]:
        dep["backend_version"] = "0.27.0"
    p027 = tmp_path / "p027.json"
    p027.write_text(json.dumps(doc))
    t = _trace(tmp_path, {"request_id": "A", "arrival_step": 0, "prompt_len": 100, "output_len": 3})
    steps = {}
    for name, profile in (("0.33.0", PLAIN), ("0.27.0", p027)):
        r = fpm(
            "replay",
            str(profile),
            "--trace",
            str(t),
            "--long-prefill-token-threshold",
            "16",
            "--json",
            runtimes=("vllm_027", "vllm_033"),
        )
        assert r.exit_code == 0, r.stderr
        steps[name] = json.loads(r.stdout)["summary"]["steps"]
    assert steps == {"0.33.0": 3, "0.27.0": 9}


def _published(tmp_path: Path, source: dict) -> Path:
    """The example table of the plain profile as fpm publish writes it, with ``source``."""
    rows = json.loads((ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    p = tmp_path / "table.json"
    p.write_text(json.dumps({"schema": "fpmcore.fpm-table/v1", "source": source, "rows": rows}))
    return p


def test_a_table_of_another_model_is_refused_and_of_another_profile_noted(tmp_path):
    from fpmcore.documents.profile import load_profile, profile_digest

    profile = load_profile(PLAIN)
    mine, other = profile_digest(profile), "ab" * 32
    trace = _trace(tmp_path, {"request_id": "a", "arrival_time": 0, "prompt_len": 64, "output_len": 4})
    table = _published(tmp_path, {"model": "zai-org/GLM-5.3-Flash", "profile_sha256": other})
    r = fpm("replay", str(PLAIN), "--trace", str(trace), "--fpm-table", str(table))
    assert (r.exit_code, r.stderr) == (2, (
        f"fpm: {table}: the latency table was published for the model zai-org/GLM-5.3-Flash, the profile is of "
        f"{profile.model}; give a table measured for {profile.model} [R-27]\n"))  # fmt: skip
    table = _published(tmp_path, {"model": profile.model, "profile_sha256": other})
    r = fpm("replay", str(PLAIN), "--trace", str(trace), "--fpm-table", str(table), "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == (
        f"fpm: note: the latency table {table} was measured with another profile of {profile.model} "
        f"(profile_sha256 abababababab…, this profile {mine[:12]}…): its timings are used as they are\n"
    )
    assert r.json()["summary"]["finished"] == 1
    table = _published(tmp_path, {"model": profile.model, "profile_sha256": mine})
    r = fpm("replay", str(PLAIN), "--trace", str(trace), "--fpm-table", str(table), "--json")
    assert (r.exit_code, r.stderr) == (0, "")


def test_a_table_not_published_from_a_run_and_extrapolated_steps_are_explained():
    """The example table has no ``source`` (its description says its times come from a formula): the human
    summary's notes say so and what ``extrapolated_steps`` counts; ``--json`` carries the count only."""
    t = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
    table = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"
    human = fpm("replay", str(GLM), "--trace", str(t), "--fpm-table", str(table))
    assert human.exit_code == 0
    notes = [line for line in human.stderr.splitlines() if line.startswith("fpm: note: ")]
    assert notes[0].startswith(f"fpm: note: {table} was not published from a measured run (it has no source): "
                               "Illustrative FPM latency table")  # fmt: skip
    assert "not from a measurement" in notes[0]
    doc = fpm("replay", str(GLM), "--trace", str(t), "--fpm-table", str(table), "--json").json()
    n, steps = doc["summary"]["extrapolated_steps"], doc["summary"]["steps"]
    assert 0 < n < steps
    assert notes[1] == (f"fpm: note: {n:,} of {steps:,} steps ({n / steps:.0%}) lie outside the latency table's "
                        "knots; their times are extrapolated linearly from the nearest knots (floored at the smallest "
                        "row): a table whose grid covers the deployment's batch sizes, chunks and contexts has none "
                        "(docs: The latency model)")  # fmt: skip
