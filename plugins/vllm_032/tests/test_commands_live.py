"""``fpm tiny-model`` and ``fpm live-steps`` on the vLLM 0.32.0 CPU engine (``tox -e vllm032-live``).

``fpm tiny-model`` writes the files :func:`fpmcore_vllm032.tiny_models.write_model` writes; ``fpm live-steps``
starts the engine on the tiny Llama, steps two random traces through its scheduler under memory pressure,
compares every step with the replay of the profile it probes and imports, writes the steps and shuts the
engine down with nothing left.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_032",))


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory, host) -> Path:
    """The tiny Llama as ``fpm tiny-model llama --json`` writes it (seed 0)."""
    out = tmp_path_factory.mktemp("models") / "tiny-llama"
    res = run_fpm("tiny-model", "llama", "-o", str(out), "--json", host=host)
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["schema"] == 1 and summary["kind"] == "llama" and summary["seed"] == 0
    assert summary["dir"] == str(out) and set(summary["files"]) == {p.name for p in out.iterdir()}
    return out


def test_tiny_model_writes_the_files_of_the_model_writer(tiny_llama, tmp_path, host):
    from fpmcore_vllm032.tiny_models import write_model

    again = write_model("llama", tmp_path / "again", seed=0)
    assert {p.name: p.read_bytes() for p in tiny_llama.iterdir()} == {
        name: (tmp_path / "again" / name).read_bytes() for name in again["files"]
    }
    # without --json: what was written on stderr (after transformers' progress bar), nothing on stdout
    res = run_fpm("tiny-model", "llama", "-o", str(tmp_path / "seven"), "--seed", "7", host=host)
    assert res.exit_code == 0 and res.stdout == ""
    last = res.stderr.splitlines()[-1]
    assert last.startswith("llama (seed 7): LlamaForCausalLM: 4 full-attention layers, ")
    assert last.endswith(f" parameters -> {tmp_path / 'seven'}")


def test_live_steps_compares_every_step_with_the_replay(tiny_llama, tmp_path, host):
    steps = tmp_path / "steps.jsonl"
    res = run_fpm("live-steps", str(tiny_llama), "--max-model-len", "1024", "--kv-cache-space", "0.25",
                  "--num-blocks", "12", "--max-num-seqs", "6", "--max-num-batched-tokens", "512",
                  "--random-trace", "0", "--traces", "2", "--requests", "16", "--compare-replay",
                  "--steps-out", str(steps), "--json", host=host)  # fmt: skip
    assert res.exit_code == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["schema"] == 1 and report["import"]["status"] == "complete"
    assert report["engine"]["num_blocks"] == 12
    assert [t["difference"] for t in report["traces"]] == [None, None]
    assert all(t["finished"] == t["requests"] == 16 for t in report["traces"])
    assert any(t["min_free_blocks"] == 0 for t in report["traces"])  # memory pressure reached
    assert report["shutdown"] == {"children": [], "non_daemon_threads": []}
    lines = [json.loads(line) for line in steps.read_text().splitlines()]
    assert [sum(1 for s in lines if s["trace"] == k) for k in (0, 1)] == [t["steps"] for t in report["traces"]]
    assert "stepping trace 2/2: 16 requests" in res.stderr


def test_live_steps_refuses_an_engine_that_does_not_start(tiny_llama, host):
    """A context longer than the model's (4096) is vLLM's refusal at start-up: one line, exit 2."""
    res = run_fpm("live-steps", str(tiny_llama), "--max-model-len", "8192", host=host)
    assert res.exit_code == 2
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("fpm: the engine failed to start: ") and line.endswith("[live-steps]")
    assert "Traceback" not in res.stderr
