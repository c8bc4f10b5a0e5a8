"""The Mamba2 hybrids on the live vLLM 0.32.0 CPU engine (marked live: ``tox -e vllm032-live``).

``fpm tiny-model granite-hybrid`` (GraniteMoeHybrid: three Mamba2
layers, one attention layer, float32), ``nemotron-h`` (NemotronH: three Mamba2,
one attention and two MLP layers), ``falcon-h1`` (FalconH1: attention and
Mamba2 side by side in each of four layers) and ``zamba2`` (four Mamba2 layers,
two followed by one shared attention block):

* with prefix caching on, ``fpm probe --live`` and ``fpm onboard`` refuse it
  in one line before an engine starts (README D-L12): exit 2, nothing
  written, no process left;
* the engine itself shows why: a 128-token prompt runs and a 129-token one
  raises ``IndexError`` at ``mamba_mixer2.py:880``, which the plugin explains
  with the layer and the limit;
* with prefix caching off, ``fpm probe --live`` → ``fpm import`` → ``fpm
  onboard --smoke`` runs through on each family: the groups' blocks differ
  (Mamba 2,048, attention 128, scheduler and hash block 2,048, README D-L13),
  the plan records them, the collection's engine shows the same, the run
  validates and publishes.

One engine at a time, one OpenMP thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.documents.jsonio import load_path
from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live

OPTIONS = ["--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25"]
LIMIT = "[mamba2-prefix-caching]"


#: kind -> (architecture, the profile's groups as (kind, block) without prefix caching at max_model_len 2048)
#: GraniteMoeHybrid and NemotronH: three Mamba2 layers and one attention layer, one layer per group;
#: FalconH1: four layers of attention and Mamba2 side by side, one group of each (README §7).
FAMILIES = {
    "granite-hybrid": ("GraniteMoeHybridForCausalLM", [("state", 2048)] * 3 + [("attention", 128)]),
    "nemotron-h": ("NemotronHForCausalLM", [("state", 2048)] * 3 + [("attention", 128)]),
    "falcon-h1": ("FalconH1ForCausalLM", [("attention", 128), ("state", 2048)]),
    # the shared attention block runs after two of the four Mamba2 layers: one attention group, two state groups
    "zamba2": ("Zamba2ForCausalLM", [("attention", 128), ("state", 2048), ("state", 2048)]),
}


@pytest.fixture(scope="module")
def granite(model_dirs) -> Path:
    return model_dirs["granite-hybrid"]


def _fpm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "fpmcore", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600, start_new_session=True)  # fmt: skip


@pytest.mark.parametrize("kind", sorted(FAMILIES))
@pytest.mark.parametrize("command", ["probe", "onboard"])
def test_prefix_caching_is_refused_before_the_engine_starts(command, kind, model_dirs, tmp_path):
    model = model_dirs[kind]
    args = ["probe", "--live", str(model), "-o", "out"] if command == "probe" else [
        "onboard", str(model), "-o", "out", "--smoke"]  # fmt: skip
    done = _fpm(*args, *OPTIONS, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line: no engine start, no progress line
    assert f"cannot run the Mamba2 layers of {FAMILIES[kind][0]} with prefix caching" in line
    assert line.endswith(f"use --caching off {LIMIT}")
    assert list(tmp_path.iterdir()) == []


def test_the_engine_fails_where_the_limit_says(granite):
    """The limit's condition on the engine: a prompt of one block runs, one token more crosses a checkpoint."""
    from vllm import SamplingParams

    from fpmcore_vllm032.engine import EngineOptions, start_engine
    from fpmcore_vllm032.limits import explain_failure

    engine = start_engine(EngineOptions(model=str(granite), dtype="float32", max_model_len=2048,
                                        kv_cache_bytes=1 << 28, caching=True))  # fmt: skip
    try:
        block = engine.scheduler.block_size
        assert (block, engine.scheduler.hash_block_size) == (128, 128)
        params = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0.0)
        engine.llm.generate([{"prompt_token_ids": [3 + i % 400 for i in range(block)]}], params, use_tqdm=False)
        with pytest.raises(IndexError) as failed:
            engine.llm.generate([{"prompt_token_ids": [5 + i % 400 for i in range(block + 1)]}], params,
                                use_tqdm=False)  # fmt: skip
    finally:
        engine.shutdown()
    text = explain_failure(failed.value)
    assert text.startswith("IndexError: index 1 is out of bounds for dimension 0 with size 1 (raised at "
                           "vllm/model_executor/layers/mamba/mamba_mixer2.py:880 in conv_ssm_forward, layer ")  # fmt: skip
    assert f"a known limit {LIMIT}" in text


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_probe_import_onboard_without_prefix_caching(kind, model_dirs, tmp_path):
    model = model_dirs[kind]
    groups = FAMILIES[kind][1]
    blocks = [block for _, block in groups]
    host = make_host(entry_points=("vllm_032",))
    r = run_fpm("probe", "--live", str(model), "-o", str(tmp_path / "ev"), "--caching", "off", *OPTIONS, host=host)
    assert r.exit_code == 0, r.stderr
    r = run_fpm("import", str(tmp_path / "ev"), "-o", str(tmp_path / "profile.json"), "--json", host=host)
    assert r.exit_code == 0, r.stdout[-3000:]
    result = r.json()["results"][0]
    assert (result["status"], result["evidence"], result["diagnostics"]) == ("complete", "tensor", [])
    profile = load_path(tmp_path / "profile.json")["deployments"][0]["resources"]
    assert [(g["kind"], g["block_size_tokens"]) for g in profile["cache_groups"]] == groups

    camp = tmp_path / "campaign"
    r = run_fpm("onboard", str(model), "-o", str(camp), "--smoke", "--caching", "off", *OPTIONS,
                "--repetitions", "3", "--warmup", "1", host=host)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    plan = load_path(camp / "plan.json")
    assert (plan["limits"]["block_size"], plan["limits"]["hash_block_size"]) == (128, 2048)
    assert (plan["engine"]["cache_block_sizes"], plan["engine"]["scheduler_block_size"]) == (blocks, 2048)
    assert [(p["phase"], p["batch_size"]) for p in plan["smoke"]] == [("prefill", 1), ("decode", 1), ("decode", 2)]
    assert load_path(camp / "validation.json")["status"] == "accepted"
    run = load_path(camp / "run" / "collect.json")
    assert run["serving_config"]["cache_block_sizes"] == blocks
    assert (run["limits"]["block_size"], run["serving_config"]["hash_block_size"]) == (2048, 2048)
    assert len(load_path(camp / "table.json")["rows"]) == 3
