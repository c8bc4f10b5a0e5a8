"""Bad inputs of ``fpm probe --live``, each in its own ``fpm`` process on the vLLM 0.32.0 CPU engine.

A model folder that is not a model, a missing tokenizer, a ``--max-model-len``
above the model's, an engine that does not start (too little KV cache memory
for one request at ``max_model_len``) and Ctrl-C during start-up: each gives
one diagnostic line (the last line on stderr, the only one of ``fpm``), its
exit code (2, or 130 for the interrupt), no evidence folder (and no temporary
one), and no process left behind: ``fpm`` runs in a session of its own and no
process of that session outlives it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

FPM = [sys.executable, "-m", "fpmcore"]


def _session_processes(sid: int) -> list[int]:
    """The processes whose session id is ``sid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(entry))
    return found


def _fpm(args: list[str], cwd: Path, *, interrupt_after: float | None = None) -> tuple[int, list[str], int]:
    """Run ``fpm`` in a new session; (exit code, stderr lines, session id)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([*FPM, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    if interrupt_after is not None:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the progress line: the engine is starting
        assert first.startswith("starting the vLLM 0.32.0 CPU engine"), first
        time.sleep(interrupt_after)
        proc.send_signal(signal.SIGINT)
        err = first + proc.stderr.read()
        proc.wait(timeout=300)
    else:
        _out, err = proc.communicate(timeout=600)
    return proc.returncode, err.splitlines(), proc.pid


def _check(code: int, lines: list[str], sid: int, cwd: Path, want_code: int, want: str) -> None:
    ours = [line for line in lines if line.startswith("fpm")]
    assert ours == [lines[-1]], lines[-5:]  # one diagnostic line, the last
    assert want in lines[-1], lines[-1]
    assert "Traceback" not in "\n".join(lines)
    assert code == want_code
    assert not (cwd / "ev").exists()
    assert not [p.name for p in cwd.iterdir() if p.name.startswith(".ev")]  # no temporary evidence folder
    deadline = time.monotonic() + 10
    while _session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _session_processes(sid) == []  # no engine process left behind


def test_a_folder_that_is_not_a_model(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("not a model")
    code, lines, sid = _fpm(["probe", "--live", "notes", "-o", "ev"], tmp_path)
    _check(code, lines, sid, tmp_path, 2, "fpm: notes is not a model folder: it holds no config.json")


def test_a_model_without_its_tokenizer(tmp_path, model_dirs):
    shutil.copytree(model_dirs["llama"], tmp_path / "m")
    for p in (tmp_path / "m").glob("tokenizer*"):
        p.unlink()
    code, lines, sid = _fpm(["probe", "--live", "m", "-o", "ev"], tmp_path)
    _check(code, lines, sid, tmp_path, 2, "fpm: m has no tokenizer")


def test_a_context_longer_than_the_models(tmp_path, model_dirs):
    code, lines, sid = _fpm(["probe", "--live", str(model_dirs["llama"]), "-o", "ev", "--max-model-len", "8192",
                             "--kv-cache-space", "0.25"], tmp_path)  # fmt: skip
    _check(code, lines, sid, tmp_path, 2, "engine did not start")
    assert "User-specified max_model_len (8192) is greater than the derived max_model_len" in lines[-1]


def test_too_little_kv_cache_memory_for_one_request(tmp_path, model_dirs):
    # 1 MiB holds 8 blocks of 131,072 B; one request at 4,096 tokens needs 32 (plus the null block)
    code, lines, sid = _fpm(["probe", "--live", str(model_dirs["llama"]), "-o", "ev", "--max-model-len", "4096",
                             "--kv-cache-space", "0.0009765625"], tmp_path)  # fmt: skip
    _check(code, lines, sid, tmp_path, 2, "To serve at least one request with the model's max seq len (4096)")


@pytest.fixture(scope="module")
def start_up_seconds(model_dirs, tmp_path_factory) -> float:
    """How long the engine takes to start here, read from a whole probe's progress line (``…: 9.2 s``): from 1.5 s
    with the files in the page cache to 12 s without, so the interrupts below are timed from it."""
    cwd = tmp_path_factory.mktemp("start")
    code, lines, _sid = _fpm(["probe", "--live", str(model_dirs["llama"]), "-o", "ev", "--kv-cache-space", "0.25"],
                             cwd)  # fmt: skip
    assert code == 0, lines[-5:]
    done = [line for line in lines if line.startswith("starting the vLLM 0.32.0 CPU engine") and line.endswith(" s")]
    return float(done[-1].rsplit(": ", 1)[1][:-2])


@pytest.mark.parametrize("share", [0.2, 0.7], ids=["while-importing", "while-loading"])
def test_ctrl_c_during_start_up(tmp_path, model_dirs, start_up_seconds, share):
    code, lines, sid = _fpm(["probe", "--live", str(model_dirs["llama"]), "-o", "ev", "--kv-cache-space", "0.25"],
                            tmp_path, interrupt_after=share * start_up_seconds)  # fmt: skip
    _check(code, lines, sid, tmp_path, 130, "interrupted")
