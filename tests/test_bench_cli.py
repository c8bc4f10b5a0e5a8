"""Benchmarks of the command line (``make bench``); disabled in the default suite, where each runs once.

The cold-start figures (issue 21, goal 4: each < 200 ms on an idle machine) are whole ``fpm`` processes:
``fpm --help``, ``fpm plugins`` and a one-request ``fpm replay`` of the GLM example; what they must not
import is guarded, untimed, by ``tests/test_cold_start.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FPM = str(Path(sys.executable).parent / "fpm")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GLM = str(EXAMPLES / "profiles" / "glm53flash-tp4.fpm-profile.json")
ONE_REQUEST = ("replay", GLM, "--trace", str(EXAMPLES / "traces" / "glm-one-request.jsonl"),
               "--fpm-table", str(EXAMPLES / "fpm_tables" / "glm53flash-tp4.json"))  # fmt: skip


#: Bytecode caching on, as in an ordinary installation (the warm-up round writes the
#: .pyc files), whatever PYTHONDONTWRITEBYTECODE the calling environment sets.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(*argv: str) -> None:
    subprocess.run([FPM, *argv], check=True, capture_output=True, env=ENV)


def test_cold_start_fpm_plugins(benchmark):
    """Goal: < 250 ms for a fresh ``fpm plugins --json`` process (interpreter start included)."""
    benchmark.pedantic(_run, args=("plugins", "--json"), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_plugins_table(benchmark):
    """Goal: < 200 ms for a fresh ``fpm plugins`` process (the rich table)."""
    benchmark.pedantic(_run, args=("plugins",), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_help(benchmark):
    """Goal: < 200 ms for a fresh ``fpm --help`` process."""
    benchmark.pedantic(_run, args=("--help",), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_replay_one_request(benchmark):
    """Goal: < 200 ms for a fresh ``fpm replay`` of one request (profile, trace and table read, C engine)."""
    benchmark.pedantic(_run, args=ONE_REQUEST, rounds=10, iterations=1, warmup_rounds=1)


def test_profile_check(benchmark):
    benchmark.pedantic(_run, args=("profile", "check", GLM, "--json"), rounds=10, iterations=1, warmup_rounds=1)
