"""fpm sweep end to end: engines, backends, results file, resume after a kill, failures, best table, plot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fpmcore.sweep.results import read_rows
from fpmcore.testing import run_fpm
from tests.sweep.support import (
    ACCEPTANCE,
    GLM,
    GLM_TABLE,
    ISSUE_GRID,
    ONE_TRACE,
    PLAIN,
    ROOT,
    rows_of,
    write_grid,
)  # fmt: skip


@pytest.fixture(scope="module")
def acceptance(tmp_path_factory):
    """The acceptance sweep run once with the in-process serial engine: (grid, rows)."""
    d = tmp_path_factory.mktemp("acceptance")
    grid = write_grid(d / "grid.json", ACCEPTANCE)
    r = run_fpm("sweep", str(grid), "-o", str(d / "serial.jsonl"), "--engine", "serial", "--json")
    assert r.exit_code == 0, r.stderr
    return grid, rows_of(r)


def test_the_issue_grid_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.jsonl"
    r = run_fpm("sweep", str(ISSUE_GRID), "-o", str(out), "--json", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    rows = rows_of(r)
    assert [row["task"] for row in rows] == list(range(6))
    assert [row["settings"] for row in rows] == [
        {"max_num_seqs": s, "max_num_batched_tokens": b} for s in (8, 16, 32) for b in (4096, 8192)
    ]
    for row in rows:
        assert set(row) == {"task", "key", "profile", "trace", "table", "settings", "summary", "error"}
        assert row["error"] is None and row["table"] is None
        s = row["summary"]
        assert s["schema"] == "fpmcore.replay.summary/v1"
        assert s["finished"] == 120 and s["peak_running"] <= row["settings"]["max_num_seqs"]
        # GLM TP 4, 13,696 usable blocks; prefix caching on as the profile records it: 495 blocks per
        # full-context request in align mode (RV-14), as the import's kv_cache_max_concurrency 27.67 says
        assert (s["usable_blocks"], s["max_full_context_requests"]) == (13696, 27)
    # each row is the summary fpm replay prints for the same options
    one = run_fpm(
        "replay",
        str(ISSUE_GRID.parent / rows[3]["profile"]),  # a row names its inputs as the grid does
        "--trace",
        str(ISSUE_GRID.parent / rows[3]["trace"]),
        "--max-num-seqs",
        "16",
        "--max-num-batched-tokens",
        "8192",
        "--json",
    )
    assert one.exit_code == 0, one.stderr
    assert one.json()["summary"] == rows[3]["summary"]
    # the results file holds the same rows, one per line
    on_disk, _ = read_rows(out)
    assert sorted(on_disk.values(), key=lambda row: row["task"]) == rows
    assert r.stderr.endswith(f"6 of 6 runs in {out}; 0 with an error\n")


def test_local_pool_and_serial_engine_give_the_same_rows(acceptance, tmp_path):
    grid, serial = acceptance
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "local.jsonl"), "--workers", "2", "--json")
    assert r.exit_code == 0, r.stderr
    assert rows_of(r) == serial
    # the acceptance numbers differ between runs: the sweep is not one replay repeated
    assert len({json.dumps(row["summary"], sort_keys=True) for row in serial}) > 12
    glm = [row for row in serial if row["profile"] == str(GLM)]
    plain = [row for row in serial if row["profile"] == str(PLAIN)]
    assert all(row["summary"]["usable_blocks"] == 13696 for row in glm)
    assert all(row["summary"]["capacity_bytes"] != glm[0]["summary"]["capacity_bytes"] for row in plain)


def test_c_and_python_backends_give_the_same_rows(tmp_path):
    """The same small grid with the C engine (in process) and the Python reference (FPM_PUREPYTHON=1)."""
    grid = write_grid(tmp_path / "g.json", {
        "profiles": [str(GLM)], "traces": [str(ONE_TRACE)], "tables": [str(GLM_TABLE), None],
        "settings": {"max_num_batched_tokens": [4096, 8192], "prefix_caching": ["on", "off"]}})  # fmt: skip
    c = run_fpm("sweep", str(grid), "-o", str(tmp_path / "c.jsonl"), "--engine", "serial", "--json")
    assert c.exit_code == 0, c.stderr
    env = {**os.environ, "FPM_PUREPYTHON": "1"}
    py = subprocess.run([sys.executable, "-m", "fpmcore", "sweep", str(grid), "-o", str(tmp_path / "py.jsonl"),
                         "--workers", "2", "--json"], capture_output=True, text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert py.returncode == 0, py.stderr
    assert json.loads(py.stdout)["rows"] == rows_of(c)
    # RV-13 / RV-14: P 10,000 in 8,192 + 1,808 without prefix caching, 6,528 + 3,472 with it: 4 steps either way
    assert {row["summary"]["steps"] for row in rows_of(c) if row["settings"]["max_num_batched_tokens"] == 8192} == {4}


def _lines(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_killed_half_way_and_resumed_gives_identical_rows(acceptance, tmp_path):
    """A real SIGKILL of the fpm process group while it writes rows, then --resume."""
    grid, serial = acceptance
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "fpmcore", "sweep", str(grid), "-o", str(out), "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while _lines(out) < 12 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = _lines(out)
    assert 0 < before < 24, before
    kept, _ = read_rows(out)
    assert len(kept) == before
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--json", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert f"resuming: {before} of 24 runs have rows" in r.stderr
    assert rows_of(r) == serial
    on_disk, _ = read_rows(out)
    assert _lines(out) == 24 and sorted(on_disk.values(), key=lambda row: row["task"]) == serial


def test_a_torn_last_row_is_dropped_and_run_again(acceptance, tmp_path):
    grid, serial = acceptance
    out = tmp_path / "r.jsonl"
    from fpmcore.sweep.results import encode

    whole = b"".join(encode(row) for row in serial[:5])
    out.write_bytes(whole + encode(serial[5])[:40])  # a kill in the middle of the sixth row
    rows, keep = read_rows(out)
    assert (len(rows), keep) == (5, len(whole))
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--json", "--engine", "serial")
    assert r.exit_code == 0, r.stderr
    assert rows_of(r) == serial
    assert out.read_bytes().startswith(whole + encode(serial[5]))
    assert _lines(out) == 24


def test_a_corrupt_row_in_the_middle_is_refused(acceptance, tmp_path):
    grid, serial = acceptance
    out = tmp_path / "r.jsonl"
    out.write_bytes(b'{"key": 1}\n' + json.dumps(serial[0]).encode() + b"\n")
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume")
    assert (r.exit_code, r.stderr) == (2, f"fpm: {out}: results line 1 is not a row of fpm sweep [sweep]\n")


def test_existing_results_need_resume(acceptance, tmp_path):
    grid, _ = acceptance
    out = tmp_path / "r.jsonl"
    out.write_text("")
    r = run_fpm("sweep", str(grid), "-o", str(out))
    assert (r.exit_code, r.stderr) == (2, f"fpm: results {out} exists; --resume continues it (or remove it) [sweep]\n")


def test_a_failed_run_is_reported_with_its_settings_and_loses_no_other(tmp_path):
    """A table without decode points stops the replay (R-27); the runs with the full table still give rows."""
    rows = json.loads(GLM_TABLE.read_text())["rows"]
    prefill_only = write_grid(tmp_path / "prefill.json", {"rows": [r for r in rows if r["phase"] == "prefill"]})
    grid = write_grid(
        tmp_path / "g.json",
        {
            "profiles": [str(GLM)],
            "traces": [str(ONE_TRACE)],
            "tables": [str(prefill_only), str(GLM_TABLE)],
            "settings": {"max_num_seqs": [4, 8]},
        },
    )
    out = tmp_path / "r.jsonl"
    r = run_fpm("sweep", str(grid), "-o", str(out), "--json", "--workers", "2")
    assert r.exit_code == 1
    got = rows_of(r)
    assert [row["error"] is None for row in got] == [False, False, True, True]
    for row in got[:2]:
        assert row["error"] == {"rule": "R-27", "message": "latency table has no decode points"}
        assert row["summary"]["finished"] == 0  # the summary up to the stop is kept
        line = (
            f"fpm: run {row['task']} (profile {GLM}, trace {ONE_TRACE}, table {prefill_only}, "
            f'settings {{"max_num_seqs": {row["settings"]["max_num_seqs"]}}}) failed: '
            "latency table has no decode points [R-27]"
        )
        assert line in r.stderr.splitlines()
    assert all(row["summary"]["finished"] == 1 for row in got[2:])
    # failed runs have their rows too: --resume does not run them again
    again = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--json")
    assert rows_of(again) == got and "resuming: 4 of 4 runs" in again.stderr


def test_best_table_by_objective_under_a_constraint(acceptance, tmp_path):
    grid, serial = acceptance
    out = tmp_path / "r.jsonl"
    from fpmcore.sweep.results import encode

    out.write_bytes(b"".join(encode(row) for row in serial))
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--objective", "output_tokens_per_s",
                "--constraint", "p99_ttft_s<=2", "--top", "3")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    feasible = [
        row for row in serial if row["summary"]["ttft_s"]["p99"] is not None and row["summary"]["ttft_s"]["p99"] <= 2
    ]
    assert 0 < len(feasible) < 24
    top = max(feasible, key=lambda row: row["summary"]["output_tokens_per_s"])
    assert "best of 24 runs by max:output_tokens_per_s with p99_ttft_s<=2" in r.stdout
    first = next(line for line in r.stdout.splitlines() if line.startswith("│ 1 "))
    assert f"│ {top['task']:>4} │" in first
    assert f"{top['summary']['output_tokens_per_s']:.6g}" in first
    # minimise instead: the best is the smallest p99 TTFT
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--objective", "min:p99_ttft_s", "--top", "1")
    low = min(serial, key=lambda row: (row["summary"]["ttft_s"]["p99"], row["task"]))
    assert f"{low['summary']['ttft_s']['p99']:.6g}" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--objective", "max:goodput"], "unknown metric 'goodput'; metrics are: requests, finished, rejected, steps,"),
    (["--constraint", "p99_ttft_s=<2"], "--constraint must be METRIC<=NUMBER (or <, >=, >, ==), found 'p99_ttft_s=<2'"),
    (["--constraint", "p99_ttft_s<=nan"], "--constraint 'p99_ttft_s<=nan': the bound must be finite"),
    (["--objective", "best:x"], "--objective must be [max:|min:]METRIC, found 'best:x'"),
    (["--address", "127.0.0.1:6379"], "--address needs --engine ray"),
    (["--plot", "/nonexistent-folder/x.png"], "/nonexistent-folder/x.png: the folder /nonexistent-folder does not exist; "
                                              "fpm never creates missing folders (create it first) [O-1]"),
    (["--plot", "x.unknown"], "--plot x.unknown: unknown image format 'unknown'; use one of"),
])  # fmt: skip
def test_option_refusals_come_before_any_run(acceptance, tmp_path, args, message):
    grid, _ = acceptance
    out = tmp_path / "r.jsonl"
    r = run_fpm("sweep", str(grid), "-o", str(out), *args)
    assert r.exit_code == 2
    assert r.stderr.startswith("fpm: ") and message in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()


def test_the_results_path_follows_the_output_rule(tmp_path):
    """The results file goes through fpmcore.documents.output_files like every command's output (O-1 … O-3), before any run."""
    import shutil

    from tests.sweep.support import GLM, GLM_TRACE

    profile, trace = tmp_path / "p.fpm-profile.json", tmp_path / "t.jsonl"
    shutil.copy(GLM, profile)
    shutil.copy(GLM_TRACE, trace)
    grid = write_grid(tmp_path / "grid.json", {"profiles": [profile.name], "traces": [trace.name]})
    (tmp_path / "adir").mkdir()
    cases = [
        (tmp_path / "no" / "r.jsonl", "[O-1]"),
        (tmp_path / "adir", "the output exists and is a directory, not a regular file [O-2]"),
        (grid, "the output is the input"),
        (profile, "the output is the input"),
        (trace, "the output is the input"),
    ]
    for out, message in cases:
        before = Path(out).read_bytes() if Path(out).is_file() else None
        r = run_fpm("sweep", str(grid), "-o", str(out), "--resume")
        assert r.exit_code == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert (Path(out).read_bytes() if Path(out).is_file() else None) == before
    assert not (tmp_path / "no").exists()


def test_the_plot_is_checked_against_the_inputs_and_the_results(tmp_path):
    """--plot follows the output rule like -o: never an input (O-3), never the results file."""
    import shutil

    from tests.sweep.support import GLM, GLM_TRACE

    profile, trace = tmp_path / "p.png", tmp_path / "t.jsonl"
    shutil.copy(GLM, profile)
    shutil.copy(GLM_TRACE, trace)
    grid = write_grid(tmp_path / "grid.json", {"profiles": [profile.name], "traces": [trace.name]})
    out = tmp_path / "r.png"
    cases = [
        (out, f"fpm: {out}: the plot and the results are one file; give two paths [O-3]\n"),
        (profile, f"fpm: {profile}: the output is the input {profile}; give another output path [O-3]\n"),
    ]
    for plot, message in cases:
        before = profile.read_bytes()
        r = run_fpm("sweep", str(grid), "-o", str(out), "--plot", str(plot))
        assert (r.exit_code, r.stderr) == (2, message)
        assert profile.read_bytes() == before and not out.exists()


def test_ray_missing_is_a_clear_usage_error(acceptance, tmp_path, monkeypatch):
    grid, _ = acceptance
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as when it is not installed
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--engine", "ray")
    assert (r.exit_code, r.stderr) == (
        2,
        "fpm: --engine ray needs Ray, which is not installed; install the extra: pip install 'fpmcore[ray]' [sweep]\n",
    )


def test_plot_of_the_objective_against_each_swept_setting(acceptance, tmp_path):
    grid, serial = acceptance
    out = tmp_path / "r.jsonl"
    from fpmcore.sweep.results import encode

    out.write_bytes(b"".join(encode(row) for row in serial))
    png = tmp_path / "sweep.png"
    r = run_fpm("sweep", str(grid), "-o", str(out), "--resume", "--plot", str(png), "--constraint", "p99_ttft_s<=2")
    assert r.exit_code == 0, r.stderr
    assert f"plot written to {png}" in r.stderr
    import matplotlib.image

    img = matplotlib.image.imread(png)
    # four swept axes (profile, trace, max_num_seqs, max_num_batched_tokens): 3 columns x 2 rows of panels
    assert img.shape[:2] == (820, 1440)  # 100 dpi: 4.8 in a column, 3.8 in a row, 0.6 in of legend


def test_json_prints_only_the_rows_document(acceptance, tmp_path):
    grid, serial = acceptance
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--engine", "serial", "--json")
    doc = json.loads(r.stdout)
    assert list(doc) == ["schema", "rows"] and doc == {"schema": 1, "rows": serial}
    assert r.stdout.count("\n") == 1


def test_the_sweep_plot_keeps_traces_of_different_rates_apart(tmp_path, monkeypatch):
    """Generated traces at two rates: each is its own series (colour and best line, named in the legend), never
    mixed into one cloud of points; the title says so."""
    from tests.replay.test_replay_plot import _drawn_figures

    drawn = _drawn_figures(monkeypatch)
    generated = {"generate": "poisson", "rate": [0.5, 2.0], "requests": 20, "seed": 3, "prompt_len": 500,
                 "output_len": 20}  # fmt: skip
    grid = write_grid(tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [generated], "tables": [str(GLM_TABLE)],
                                            "settings": {"max_num_seqs": [1, 8]}})  # fmt: skip
    png = tmp_path / "s.png"
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--plot", str(png), "--engine", "serial")
    assert r.exit_code == 0 and png.stat().st_size > 0, r.stderr
    (fig,) = drawn
    assert "one colour per trace" in fig.get_suptitle()
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    rates = [n for n in names if n.startswith("trace poisson(")]
    assert len(rates) == 2 and {"rate=0.5" in rates[0], "rate=2" in rates[1]} == {True}, names
    (panel,) = [ax for ax in fig.axes if ax.get_xlabel() == "max_num_seqs"]
    colours = {tuple(c.get_facecolors()[0]) for c in panel.collections if len(c.get_offsets())}
    assert len(colours) == 2  # one per trace
