"""``fpm replay --out DIR`` (issue 12 §5, issue 13 §1, §11): records streamed while the replay runs, the folder
published atomically under the output rule (O-1 … O-6), killed or raced it never leaves a partial output."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from fpmcore.documents import output_files as outputs
from fpmcore.replay import outputs as record_files
from fpmcore.replay.outputs import read_records
from fpmcore.testing import run_fpm
from tests.support.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "examples" / "profiles" / "plain-llama8b-like.fpm-profile.json"
TABLE = ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json"
GEN = ROOT / "tools" / "bench_replay_out.py"


def gen_trace(path: Path, n: int) -> Path:
    """The benchmark's trace generator (tools/bench_replay_out.py): seeded, Poisson arrivals."""
    load_tool("bench_replay_out").write_trace(path, n)
    return path


def whole_output(out: Path) -> dict:
    """The folder is one complete output: the manifest names exactly its files, the summary names the record
    files' digests, and the record files decompress whole to the summary's counts.  Returns the summary."""
    assert outputs.is_earlier_output(out), sorted(p.name for p in out.iterdir())
    summary = json.loads((out / "replay-summary.json").read_bytes())
    names = set(summary["files"])
    assert names == set(record_files.file_names(summary["format"]))
    assert {p.name for p in out.iterdir()} == names | {"replay-summary.json", outputs.MANIFEST}
    for name, digest in summary["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    steps, reqs = (read_records(out / n) for n in record_files.file_names(summary["format"]))
    assert len(steps) == summary["steps"] and [s["step"] for s in steps] == list(range(summary["steps"]))
    assert len(reqs) == summary["requests"]
    return summary


@pytest.fixture(scope="module")
def trace2k(tmp_path_factory) -> Path:
    return gen_trace(tmp_path_factory.mktemp("trace") / "t2k.jsonl", 2000)


def test_out_streams_the_records_and_the_summary_names_their_digests(tmp_path, trace2k):
    out = tmp_path / "out"
    r = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--fpm-table", str(TABLE), "--out", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    summary = whole_output(out)
    assert summary["requests"] == summary["finished"] == 2000
    assert {k: v for k, v in summary.items() if k not in ("files", "format", "trace")} == doc["summary"]
    assert summary["trace"] == doc["trace"] and doc["trace"]["format"] == "fpmcore" and doc["trace"]["requests"] == 2000
    assert summary["format"] == "jsonl.zst"
    manifest = json.loads((out / outputs.MANIFEST).read_bytes())
    assert doc["out"] == {"folder": str(out), "files": manifest["files"]}
    assert manifest["command"] == "replay"
    # the request records on disk (completion order) are the --json ones (trace order)
    reqs = read_records(out / "replay-requests.jsonl.zst")
    assert sorted(reqs, key=lambda x: int(x["request_id"][1:])) == doc["requests"]
    # a second run replaces the earlier output whole; a folder holding anything else is refused before the work
    r2 = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--max-num-seqs", "8", "--out", str(out))
    assert r2.exit_code == 0, r2.stderr
    assert whole_output(out)["peak_running"] == 8
    (out / "notes.txt").write_text("mine")
    r3 = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--out", str(out))
    assert r3.exit_code == 2
    assert r3.stderr == (f"fpm: {out}: the output folder exists and holds files fpm did not write; "
                         "give a new or an empty folder [O-2]\n")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left


def test_parquet_holds_the_same_records(tmp_path, trace2k):
    small = tmp_path / "t.jsonl"
    small.write_text("".join(trace2k.read_text().splitlines(keepends=True)[:300]))
    zst, pq = tmp_path / "zst", tmp_path / "pq"
    argv = ("replay", str(PLAIN), "--trace", str(small), "--fpm-table", str(TABLE), "--max-num-seqs", "16")
    assert run_fpm(*argv, "--out", str(zst)).exit_code == 0
    r = run_fpm(*argv, "--out", str(pq), "--out-format", "parquet")
    assert r.exit_code == 0, r.stderr
    assert whole_output(pq)["format"] == "parquet"
    for kind in ("steps", "requests"):
        assert read_records(pq / f"replay-{kind}.parquet") == read_records(zst / f"replay-{kind}.jsonl.zst")


def test_parquet_without_pyarrow_is_refused_before_the_work(tmp_path, trace2k, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    r = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--out", str(tmp_path / "o"), "--out-format", "parquet")
    assert r.exit_code == 2
    assert "--out-format parquet needs pyarrow" in r.stderr and "[R-34]" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target,rule,message", [
    ("/proc/nope", "O-4", "cannot write in the folder /proc"),
    ("/nonexistent/out", "O-1", "the folder /nonexistent does not exist; fpm never creates missing folders"),
    ("TRACE", "O-3", "the output folder holds the input"),
    ("/dev/null", "O-2", "the output exists and is a character device, not a folder"),
])  # fmt: skip
def test_bad_out_paths_are_refused_before_the_replay(tmp_path, trace2k, target, rule, message):
    if target == "TRACE":
        target = str(trace2k)
    r = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--out", target)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"fpm: {target}: ") and message in r.stderr and r.stderr.endswith(f"[{rule}]\n")
    assert "internal error" not in r.stderr and r.stdout == ""
    assert not Path("/nonexistent").exists()


def _peak_and_bytes(tmp_path: Path, output_len: int) -> tuple[int, int]:
    """Peak of Python allocations of a replay with --out of 128 requests decoding ``output_len`` tokens, and the
    uncompressed size of its step records."""
    import zstandard

    t = tmp_path / f"t{output_len}.jsonl"
    t.write_text("".join(json.dumps({"request_id": f"r{i}", "arrival_step": 0, "prompt_len": 64,
                                     "output_len": output_len}) + "\n" for i in range(128)))  # fmt: skip
    out = tmp_path / f"out{output_len}"
    tracemalloc.start()
    try:
        r = run_fpm("replay", str(PLAIN), "--trace", str(t), "--out", str(out))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.stderr
    with open(out / "replay-steps.jsonl.zst", "rb") as f:
        raw = len(zstandard.ZstdDecompressor().stream_reader(f).read())
    return peak, raw


def test_records_are_streamed_not_kept(tmp_path, monkeypatch):
    """Four times the steps (128 requests decoding 600 or 2,400 tokens): four times the records written, about
    the same peak of Python allocations — the step records are streamed in chunks, never all in memory."""
    from fpmcore.replay import command as replay_command

    monkeypatch.setattr(replay_command, "CHUNK_STEPS", 64)
    peak1, raw1 = _peak_and_bytes(tmp_path, 600)
    peak4, raw4 = _peak_and_bytes(tmp_path, 2400)
    assert raw4 > 4 * raw1 and raw4 > 9_000_000, (raw1, raw4)
    assert peak4 < 1.25 * peak1, (peak1, peak4)


_KILL_ARGS = ("--fpm-table", str(TABLE))


def _replay_cmd(trace: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "fpmcore", "replay", str(PLAIN), "--trace", str(trace), *_KILL_ARGS,
            "--out", str(out), *extra]  # fmt: skip


def test_killed_at_random_moments_it_leaves_the_old_output_or_the_new_one(tmp_path, trace2k):
    """kill -9 at random moments of runs that replace an earlier output: after every kill the folder is the old
    complete output or the new complete one, never a partial or mixed folder."""
    out = tmp_path / "out"
    began = time.monotonic()
    old = subprocess.run(_replay_cmd(trace2k, out, "--max-num-seqs", "8"), capture_output=True)
    assert old.returncode == 0, old.stderr.decode()
    whole = time.monotonic() - began  # the kills fall within the time a whole run takes on this machine
    outcomes = {whole_output(out)["peak_running"]: "old"}
    rng = random.Random(20261201)
    killed = finished = 0
    for i in range(10):
        seqs = str(9 + i)
        proc = subprocess.Popen(_replay_cmd(trace2k, out, "--max-num-seqs", seqs), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)  # fmt: skip
        time.sleep(rng.uniform(0.1, 1.1) * whole)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        _, err = proc.communicate()
        if proc.returncode == 0:
            finished += 1
        else:
            assert proc.returncode == -signal.SIGKILL, err.decode()
        summary = whole_output(out)
        assert summary["peak_running"] in (int(seqs), *outcomes), summary["peak_running"]
        outcomes[summary["peak_running"]] = "seen"
        assert proc.returncode != 0 or summary["peak_running"] == int(seqs)
        for stale in tmp_path.glob(".out.*.tmp"):  # a kill may leave a temporary sibling, never a partial target
            shutil.rmtree(stale)
    assert killed >= 4, (killed, finished)


def test_concurrent_runs_into_one_folder_leave_one_complete_output(tmp_path, trace2k):
    out = tmp_path / "out"
    procs = [subprocess.Popen(_replay_cmd(trace2k, out, "--max-num-seqs", str(s)), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for s in (6, 7, 8)]  # fmt: skip
    codes = []
    for p in procs:
        _, err = p.communicate()
        codes.append(p.returncode)
        assert p.returncode in (0, 2), err.decode()
        if p.returncode == 2:  # it found the folder taken at the moment it published: O-2, nothing replaced
            assert "[O-2]" in err.decode()
    assert 0 in codes
    assert whole_output(out)["peak_running"] in (6, 7, 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_write_error_keeps_the_earlier_output(tmp_path, trace2k, monkeypatch):
    """No space mid-way (O-5): exit 2, the earlier output unchanged, no temporary folder left."""
    out = tmp_path / "out"
    first = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--max-num-seqs", "8", "--out", str(out))
    assert first.exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = {"n": 0}
    real = record_files._Jsonl.write_lines

    def failing(self, lines):
        calls["n"] += 1
        if calls["n"] == 2:  # the request records of the first chunk
            raise OSError(28, os.strerror(28))
        real(self, lines)

    monkeypatch.setattr(record_files._Jsonl, "write_lines", failing)
    r = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--out", str(out))
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1] == (
        f"fpm: {out}: cannot write the output: No space left on device; nothing was replaced [O-5]"
    )
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_run_removes_the_temporaries_of_killed_writers_only(tmp_path, trace2k):
    """A killed writer's ``.out.<pid>.<hex>.tmp`` (its process gone) and an older one without a process id are
    removed by the next run; a live writer's, another output's and a link of the same pattern are left."""
    out = tmp_path / "out"
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        killed = tmp_path / f".out.{_dead_pid()}.0123456789ab.tmp"
        legacy = tmp_path / ".out.0123456789ab.tmp"
        running = tmp_path / f".out.{live.pid}.0123456789ab.tmp"
        other = tmp_path / f".other.{_dead_pid()}.0123456789ab.tmp"
        for folder in (killed, legacy, running, other):
            folder.mkdir()
            (folder / "replay-steps.jsonl.zst").write_bytes(b"partial")
        os.utime(legacy, (0, 0))
        link = tmp_path / f".out.{_dead_pid()}.ba9876543210.tmp"
        link.symlink_to(other)
        r = run_fpm("replay", str(PLAIN), "--trace", str(trace2k), "--fpm-table", str(TABLE), "--out", str(out))
        assert r.exit_code == 0, r.stderr
        whole_output(out)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", running.name, other.name, link.name])
    finally:
        live.communicate()


def test_a_kill_9_leaves_a_temporary_the_next_run_removes(tmp_path, trace2k):
    out = tmp_path / "out"
    for _ in range(20):  # until a kill lands while the records are written (the replay takes a moment)
        proc = subprocess.Popen(_replay_cmd(trace2k, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not list(tmp_path.glob(".out.*.tmp")):
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.returncode == -signal.SIGKILL and list(tmp_path.glob(".out.*.tmp")):
            break
        shutil.rmtree(out, ignore_errors=True)
    (stale,) = tmp_path.glob(".out.*.tmp")
    assert stale.name.startswith(f".out.{proc.pid}.")
    done = subprocess.run(_replay_cmd(trace2k, out), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    whole_output(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
