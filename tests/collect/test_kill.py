"""Kill fpm collect at 20 random moments, resume each time: the run validates and its table equals the
uninterrupted run's rows (the stand-in engine's times are a function of the prompts, so "within the recorded
timings" is exact here).

``fpm collect`` runs as a subprocess (``tests.collect.fpm_standin``) with a little real time per engine step and
is killed with SIGKILL after a random delay; after every kill each visible file of the run folder must be whole
(strict JSON), and no finished point record may change or disappear afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from fpmcore.documents.jsonio import loads
from fpmcore.publish.publication import publish_run
from fpmcore.testing import run_fpm
from fpmcore.validate.reader import validate_run
from tests.collect.conftest import plan_of, standin_host
from tests.collect.standin import StandinRuntime

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20


def whole_files(run: Path) -> dict[str, bytes]:
    """Every visible file of the run folder parses strictly; the point records by name."""
    records = {}
    for path in sorted(run.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        data = path.read_bytes()
        if path.suffix == ".jsonl":
            for line in data.splitlines():
                loads(line, str(path))
            assert not data or data.endswith(b"\n"), path
        else:
            loads(data, str(path))
        if path.parent.name == "points":
            records[path.name] = data
    return records


def _table_rows(host, run: Path, plan: dict) -> list[dict]:
    doc, results = publish_run(host, run, plan)
    assert doc is not None, [r.diagnostics for r in results]
    return doc["rows"]


def test_twenty_kills_and_resumes_give_the_uninterrupted_table(small_plan, model_dir, tmp_path):
    host = standin_host(StandinRuntime())
    plan = plan_of(small_plan)
    reference = tmp_path / "uninterrupted"
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(reference), host=host)
    assert r.exit_code == 0, r.stderr

    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "tests.collect.fpm_standin", "collect", str(small_plan), "--model-dir",
           str(model_dir), "-o", str(run)]  # fmt: skip
    env = {**os.environ, "FPM_STANDIN_STEP_SLEEP": "0.004"}
    rng = random.Random(20261201)
    kills, seen, attempts = 0, {}, 0
    while kills < KILLS:
        attempts += 1
        assert attempts < 80, f"only {kills} kills in {attempts} attempts"
        proc = subprocess.Popen(cmd + (["--resume"] if attempts > 1 else []), cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            _, err = proc.communicate(timeout=rng.uniform(0.15, 0.9))
            assert proc.returncode == 0, err.decode()
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
        records = whole_files(run) if run.exists() else {}
        for name, data in seen.items():
            assert records.get(name) == data, f"finished point {name} was repeated or lost"
        seen.update(records)
    final = subprocess.run(cmd + ["--resume"], cwd=ROOT, env={**env, "FPM_STANDIN_STEP_SLEEP": "0"},
                           capture_output=True)  # fmt: skip
    assert final.returncode == 0, final.stderr.decode()
    assert len(whole_files(run)) == 3 * 77 and kills == KILLS  # three passes

    (result,) = validate_run(host, run, plan)
    assert (result.contract, result.status) == ("fpmcore_engine_steps", "accepted")
    assert _table_rows(host, run, plan) == _table_rows(host, reference, plan)
