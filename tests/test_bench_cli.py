"""Benchmarks of the command line (``make bench``); disabled in the default suite, where each runs once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FPM = str(Path(sys.executable).parent / "fpm")
GLM = str(Path(__file__).resolve().parents[1] / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json")


#: Bytecode caching on, as in an ordinary installation (the warm-up round writes the
#: .pyc files), whatever PYTHONDONTWRITEBYTECODE the calling environment sets.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(*argv: str) -> None:
    subprocess.run([FPM, *argv], check=True, capture_output=True, env=ENV)


def test_cold_start_fpm_plugins(benchmark):
    """Goal: < 250 ms for a fresh ``fpm plugins --json`` process (interpreter start included)."""
    benchmark.pedantic(_run, args=("plugins", "--json"), rounds=10, iterations=1, warmup_rounds=1)


def test_cold_start_fpm_help(benchmark):
    benchmark.pedantic(_run, args=("--help",), rounds=10, iterations=1, warmup_rounds=1)


def test_profile_check(benchmark):
    benchmark.pedantic(_run, args=("profile", "check", GLM, "--json"), rounds=10, iterations=1, warmup_rounds=1)
