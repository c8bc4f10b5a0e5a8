"""The newcomer's path of ``docs/guides/first-hour.md``, run end to end: its shell blocks, in order, as written.

The first block (clone, ``make demo``) is the environment this suite runs in: instead of running it, the test
builds what the demo leaves behind (the profile of the Makefile's ``GLM_PROFILE``, imported the way the demo
imports it) in a fresh folder with ``examples/`` beside it and ``.venv/bin/fpm`` calling this interpreter.
Every other block runs in ``bash -e`` there, and the files the guide promises are checked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from fpmcore.documents.jsonio import loads

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "first-hour.md"


def _blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S)


def _demo_profile() -> str:
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^DEMO := (\S+)$", makefile, re.M).group(1)  # type: ignore[union-attr]
    return re.search(r"^GLM_PROFILE := (\S+)$", makefile, re.M).group(1).replace("$(DEMO)", demo)  # type: ignore[union-attr]


def test_the_first_hour_runs_as_written(tmp_path):
    blocks = _blocks()
    assert len(blocks) == 3 and "make demo" in blocks[0] and "git clone" in blocks[0]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    shim = venv_bin / "fpm"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m fpmcore "$@"\n')
    shim.chmod(0o755)
    profile = tmp_path / _demo_profile()
    profile.parent.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPM_")}
    made = subprocess.run([str(shim), "import", "examples/probes/glm53flash-tp4", "-o", str(profile)], cwd=tmp_path,
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    for block in blocks[1:]:
        done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (block, done.stderr[-3000:])
        assert "Traceback" not in done.stderr
    # what the guide says the replay left: the plot and the records of every step and request, and the summary
    png = (tmp_path / "my-trace.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    out = tmp_path / "my-replay"
    assert {p.name for p in out.iterdir()} >= {"replay-steps.jsonl.zst", "replay-requests.jsonl.zst",
                                               "replay-summary.json"}  # fmt: skip
    summary = loads((out / "replay-summary.json").read_bytes())
    trace_lines = (tmp_path / "my-trace.jsonl").read_text().splitlines()
    assert summary["requests"] == summary["finished"] == len(trace_lines) == 5
    assert "not published from a measured run" in done.stderr  # the note the guide tells of
