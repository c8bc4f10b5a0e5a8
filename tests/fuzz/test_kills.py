"""SIGKILL of ``fpm import -o`` and ``fpm plan -o`` at random moments (issue 13, acceptance).

A killed writer leaves the earlier output whole or the new output whole,
never a partial or corrupt file (the temporary file of :mod:`fpmcore.documents.output_files`
may stay behind under its hidden name ``.<name>.<random>.tmp``).  Each trial
starts the command as its own process over an earlier, different output and
kills it after a seeded random delay spread over the command's whole run,
most of them in its last part, where it writes.

``FPM_KILL_TRIALS`` sets the kills per command (default 3; ``tox -e fuzz``
runs 40), ``FPM_FUZZ_SEED`` the seed.  The other writers have their own kill
tests: ``fpm collect`` (``tests/collect/test_kill.py``), ``fpm onboard``
(``tests/collect/test_onboard.py``), ``fpm sweep``
(``tests/sweep/test_sweep.py``) and the writers themselves
(``tests/test_outputs.py``).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
EVIDENCE = ROOT / "examples" / "probes" / "glm53flash-tp4"
TRIALS = int(os.environ.get("FPM_KILL_TRIALS", "3"))
SEED = int(os.environ.get("FPM_FUZZ_SEED", "20261201"))

COMMANDS = {
    "import": lambda out: ["import", str(EVIDENCE), "-o", str(out)],
    "plan": lambda out: ["plan", str(PROFILE), "--model", "glm53flash", "-o", str(out)],
}


def _fpm(argv: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPM_")}
    return subprocess.Popen([sys.executable, "-m", "fpmcore", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_killed_writer_leaves_the_old_or_the_new_output_whole(tmp_path, command):
    make = COMMANDS[command]
    reference = tmp_path / "reference.json"
    start = time.monotonic()
    proc = _fpm(make(reference))
    assert proc.wait(timeout=120) == 0
    took = time.monotonic() - start
    new = reference.read_bytes()
    old = b'{"an earlier output": true}\n'
    rng = random.Random(f"{SEED}-{command}")
    outcomes = {"old": 0, "new": 0}
    for trial in range(TRIALS):
        folder = tmp_path / f"t{trial}"
        folder.mkdir()
        out = folder / "out.json"
        out.write_bytes(old)
        proc = _fpm(make(out))
        time.sleep(took * (rng.uniform(0.0, 0.6) if rng.random() < 0.25 else rng.uniform(0.6, 1.1)))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        data = out.read_bytes()
        assert data in (old, new), (trial, len(data))  # whole: the earlier output or the new one
        outcomes["old" if data == old else "new"] += 1
        left = sorted(p.name for p in folder.iterdir() if p.name != "out.json")
        assert all(re.fullmatch(r"\.out\.json\.[^/]+\.tmp", name) for name in left), left
    assert sum(outcomes.values()) == TRIALS
