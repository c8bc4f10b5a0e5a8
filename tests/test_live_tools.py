"""The live-engine tools without an engine: their command lines refuse bad input before importing torch or vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tools" / "tiny_models.py"
LIVE = ROOT / "tools" / "live_engine.py"


def _run(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_tiny_models_help_needs_no_torch():
    proc = _run(TINY, "--help")
    assert proc.returncode == 0
    for kind in ("llama", "llama-swa", "qwen3-next"):
        assert kind in proc.stdout


def test_tiny_models_refuses_an_unknown_kind():
    proc = _run(TINY, "gpt2", "-o", "x")
    assert proc.returncode == 2
    assert "invalid choice: 'gpt2'" in proc.stderr


def test_tiny_models_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    proc = _run(TINY, "llama", "-o", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"tiny_models.py: error: {tmp_path} exists and is not an empty directory"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_tiny_models_names_a_missing_package(tmp_path):
    # a torch that is not installed: the import fails as it would in a venv without it
    fake = tmp_path / "site"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    proc = _run(TINY, "llama", "-o", str(tmp_path / "out"), env={"PYTHONPATH": str(fake)})
    assert proc.returncode == 2
    assert proc.stderr.startswith("tiny_models: error: torch is not installed")
    assert not (tmp_path / "out").exists()


def test_live_engine_refuses_a_folder_that_is_not_a_model(tmp_path):
    proc = _run(LIVE, str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"live_engine.py: error: {tmp_path} is not a model directory (no config.json)"


def test_live_engine_refuses_a_trace_without_arrival_steps(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"request_id": "a", "arrival_time": 0.0, "prompt_len": 4, "output_len": 2}) + "\n")
    proc = _run(LIVE, str(tmp_path), "--trace", str(trace))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"live_engine.py: error: {trace}:1: not a step-exact trace line")


def test_live_engine_prompts_copy_prefixes_and_differ_elsewhere():
    le = load_tool("live_engine")
    reqs = [
        le.TraceRequest("a", 0, 300, 4),
        le.TraceRequest("b", 1, 200, 4, prefix_of="a", prefix_of_len=150),
        le.TraceRequest("c", 1, 100, 4, prefix_of="b", prefix_of_len=100),
    ]
    p = le.make_prompts(reqs, vocab=512, seed=0, exclude={509, 510, 511})
    assert [len(p[r]) for r in "abc"] == [300, 200, 100]
    assert p["b"][:150] == p["a"][:150] and p["b"][150] != p["a"][150] or p["b"][150:] != p["a"][150:200]
    assert p["c"] == p["a"][:100]
    assert all(t < 509 for t in p["a"] + p["b"])
    assert le.make_prompts(reqs, vocab=512, seed=0, exclude={509, 510, 511}) == p
    # random traces name only earlier requests as their prefix source
    trace = le.random_trace(5, 40, 1024)
    seen: set[str] = set()
    for r in trace:
        assert r.prefix_of is None or r.prefix_of in seen
        seen.add(r.request_id)


def test_live_engine_prompts_of_content_block_ids_agree_exactly_where_the_ids_agree(tmp_path):
    """A prompt given as ``hash_ids`` is one draw per distinct block id, a partial last block its block's
    first tokens (the Mooncake trace's meaning); the trace line keeps the ids, and reads back."""
    le = load_tool("live_engine")
    reqs = [
        le.TraceRequest("a", 0, 40, 4, hash_ids=(0, 1, 2), hash_block_tokens=16),
        le.TraceRequest("b", 0, 36, 4, hash_ids=(0, 1, 7), hash_block_tokens=16),
        le.TraceRequest("c", 2, 20, 4, hash_ids=(0, 2), hash_block_tokens=16),
    ]
    p = le.make_prompts(reqs, vocab=512, seed=0, exclude={511})
    assert [len(p[r]) for r in "abc"] == [40, 36, 20]
    assert p["b"][:32] == p["a"][:32] and p["b"][32:] != p["a"][32:36]
    assert p["c"][:16] == p["a"][:16]
    assert p["c"][16:] == p["a"][32:36]  # block 2 holds the same tokens wherever it stands
    assert 511 not in p["a"] + p["b"] + p["c"]
    lines = [json.dumps(r.to_json()) for r in reqs]
    assert json.loads(lines[1])["hash_ids"] == [0, 1, 7] and json.loads(lines[1])["hash_block_tokens"] == 16
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    assert le.read_trace(tmp_path / "t.jsonl") == reqs
