"""Benchmarks of the command line (``make bench``); disabled in the default suite, where each runs once.

The cold-start figures (issue 21, goal 4: each < 200 ms on an idle machine) are whole ``fpm`` processes:
``fpm --help``, ``fpm plugins`` and a one-request ``fpm replay`` of the GLM example; what they must not
import is guarded, untimed, by ``tests/test_cold_start.py``.
"""

from __future__ import annotations

import importlib.util
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


def _on_a_terminal(*argv: str) -> None:
    """The command with its output on a pseudo-terminal (rich prints the tables there), as typed at a shell."""
    _COLD_START.one_run([FPM, *argv], tty=True)


_spec = importlib.util.spec_from_file_location(
    "bench_cold_start", Path(__file__).parents[1] / "tools" / "bench_cold_start.py"
)
assert _spec is not None and _spec.loader is not None
_COLD_START = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_COLD_START)


def test_cold_start_fpm_plugins(benchmark):
    """Goal: < 250 ms for a fresh ``fpm plugins --json`` process (interpreter start included)."""
    benchmark.pedantic(_run, args=("plugins", "--json"), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_plugins_table(benchmark):
    """Goal: < 200 ms for a fresh ``fpm plugins`` process (the table, into a pipe)."""
    benchmark.pedantic(_run, args=("plugins",), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_plugins_table_on_a_terminal(benchmark):
    """``fpm plugins`` with its table printed by rich on a terminal."""
    benchmark.pedantic(_on_a_terminal, args=("plugins",), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_help(benchmark):
    """Goal: < 200 ms for a fresh ``fpm --help`` process."""
    benchmark.pedantic(_run, args=("--help",), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_replay_one_request(benchmark):
    """Goal: < 200 ms for a fresh ``fpm replay`` of one request (profile, trace and table read, C engine)."""
    benchmark.pedantic(_run, args=ONE_REQUEST, rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_replay_one_request_on_a_terminal(benchmark):
    """The one-request ``fpm replay`` with its summary printed by rich on a terminal."""
    benchmark.pedantic(_on_a_terminal, args=ONE_REQUEST, rounds=10, iterations=1, warmup_rounds=1)


def test_profile_check(benchmark):
    benchmark.pedantic(_run, args=("profile", "check", GLM, "--json"), rounds=10, iterations=1, warmup_rounds=1)
