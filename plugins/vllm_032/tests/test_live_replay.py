"""fpmcore's replay against the running vLLM 0.32.0 scheduler, step by step (06 R-40): the acceptance run.

For every family of the README's §9 that the CPU engine runs: the plain, sliding-window (Llama and Gemma 2),
chunked-local (Llama 4), Gated DeltaNet and short-convolution models with prefix caching on and off, the
Mamba2 models (hybrid and attention-free) without prefix caching (the only way the CPU engine runs them,
README D-L12), and the MLA model without (the engine turns it off, D-L16), the
profile is what ``fpm probe --live`` and ``fpm import`` give (in this
process, through the command line), and the replay is configured from it
(:func:`fpmcore_vllm032.replay_check.replay_config`: the scheduler settings the
profile does not hold are the engine's; a setting outside the envelope both
schedulers share is refused).  Then :data:`TRACES` random traces with shared
prefixes run through an engine started with the same options, under memory
pressure (a pool forced to a few blocks, so that requests are preempted), and
every step must be identical: tokens scheduled per request in batch order,
preemptions, running requests and their held blocks per group, waiting count,
free blocks.  ``FPM_LIVE_TRACES`` changes the number of traces (default 50).
The counts are printed at the end of the session.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from fpmcore.testing import run_fpm
from plugins.vllm_032.tests.cpu_state import cpu_keeps_ssm_state_in_float32

pytestmark = pytest.mark.live

TRACES = int(os.environ.get("FPM_LIVE_TRACES", "50"))

#: (kind, caching) -> the engine's options and the traces' shape
PLAIN = {"dtype": "float32", "max_model_len": 1024, "num_blocks": 12, "max_num_seqs": 6,
         "max_num_batched_tokens": 512, "requests": 16, "prompt_max": 600, "output_max": 48}  # fmt: skip
HYBRID = {"dtype": "bfloat16", "max_model_len": 1024, "num_blocks": 16, "max_num_seqs": 6,
          "max_num_batched_tokens": 768, "requests": 6, "prompt_max": 600, "output_max": 40}  # fmt: skip
#: The hybrid's bfloat16 prefill is slow on this CPU (README D-L8): six requests a trace.  Without prefix
#: caching a hybrid request reserves 3 x 1 + 3 blocks at 1,024 tokens, with it 3 x 2 + 3 (03 C-1): 10 and
#: 16 blocks hold 1.6 and 1.8 such requests.  Prefix hits need shared prefixes of a 384-token block.
#: The sliding-window model (window 64, two full and two windowed layers): a request of 1,024 tokens needs
#: 8 + 9 = 17 usable blocks, so 24 blocks hold one and a bit; its windowed blocks leave the window as the
#: request grows, and with prefix caching on a hit is limited by the window (R-3, R-38).
WINDOW = {"dtype": "float32", "max_model_len": 1024, "num_blocks": 24, "max_num_seqs": 8,
          "max_num_batched_tokens": 256, "requests": 12, "prompt_max": 600, "output_max": 48}  # fmt: skip
#: The Mamba2 hybrids run only without prefix caching (README D-L12); their Mamba groups' block is then
#: max_model_len (1,024) and the attention group's 128 (D-L13): a GraniteMoeHybrid or NemotronH request of 1,024
#: tokens holds 3 x 1 + 8 blocks, so 16 blocks hold 1.4 of them.
GRANITE = {"dtype": "float32", "max_model_len": 1024, "num_blocks": 16, "max_num_seqs": 6,
           "max_num_batched_tokens": 512, "requests": 12, "prompt_max": 600, "output_max": 48}  # fmt: skip
#: Multi-head latent attention runs on the CPU engine with 16-token blocks and without prefix caching or chunked
#: prefill (platforms/cpu.py:273-280, :516-530): a request of 1,024 tokens needs 64 blocks, so 96 hold 1.5 of them.
MLA = {**PLAIN, "num_blocks": 96, "max_num_batched_tokens": 2048}
CONFIGS = {
    ("llama", "on"): PLAIN,
    ("llama", "off"): PLAIN,
    ("qwen3-next", "on"): HYBRID,
    ("qwen3-next", "off"): {**HYBRID, "num_blocks": 10, "prompt_max": 500},
    ("llama-swa", "on"): WINDOW,
    ("llama-swa", "off"): WINDOW,
    ("gemma2", "on"): WINDOW,  # the same window of 64 and the same groups, windowed layers first
    ("gemma2", "off"): WINDOW,
    ("granite-hybrid", "off"): GRANITE,
    ("nemotron-h", "off"): GRANITE,
    # one attention group of four layers: a request of 1,024 tokens holds 8 + 1 blocks, 16 blocks 1.8 of them
    ("falcon-h1", "off"): GRANITE,
    # one attention group of two layers and two state groups: 8 + 2 blocks a request of 1,024 tokens
    ("zamba2", "off"): GRANITE,
    ("deepseek-v2", "off"): MLA,
    # three chunked-local groups (chunk 256, two blocks) and a full one: a request of 1,024 tokens holds 8 blocks
    # of the full group and at most cdiv(256 + 256, 128) = 4 of each chunked one, so 24 blocks hold one and a bit;
    # the blocks before a request's current chunk are released as it grows, and a hit restarts at its chunk
    ("llama4", "on"): WINDOW,
    ("llama4", "off"): WINDOW,
    # three short-convolution state groups and a full one (float32); the states' blocks are the attention
    # block with prefix caching and max_model_len without (README D-L1b)
    ("lfm2", "on"): GRANITE,
    ("lfm2", "off"): GRANITE,
    # attention-free: one state group of four Mamba2 layers, one block a request whatever its length, so the
    # pool (3 usable blocks) holds three requests and never preempts one: the others wait
    ("mamba2", "off"): {**GRANITE, "num_blocks": 4},
}
#: The configurations whose requests never grow once admitted: a full pool keeps requests waiting, it preempts none.
NO_GROWTH = {("mamba2", "off")}


def engine_config(key: tuple[str, str]) -> dict[str, Any]:
    """The options and trace shape of ``key`` on this machine's CPU.

    On a CPU with AVX-512 BF16 vLLM 0.32.0 keeps the GDN temporal state in float32 (README D-L14) and the
    attention block becomes 640 tokens (test_live_probe.gdn_hybrid_numbers): prompts of up to 600 tokens and 40
    outputs would never grow past a request's first attention block, so nothing would be preempted; prompts of
    up to 900 do.
    """
    c = CONFIGS[key]
    if key[0] == "qwen3-next" and cpu_keeps_ssm_state_in_float32():
        c = {**c, "prompt_max": 900}
    return c


ENGINE_KEYS = ("dtype", "max_model_len", "num_blocks", "max_num_seqs", "max_num_batched_tokens")


def _probe_args(c: dict[str, Any]) -> list[str]:
    return ["--dtype", c["dtype"], "--max-model-len", str(c["max_model_len"]), "--num-gpu-blocks", str(c["num_blocks"]),
            "--max-num-seqs", str(c["max_num_seqs"]), "--max-num-batched-tokens", str(c["max_num_batched_tokens"]),
            "--kv-cache-space", "0.25"]  # fmt: skip


@pytest.mark.parametrize("key", sorted(CONFIGS), ids=lambda k: f"{k[0]}-caching-{k[1]}")
def test_the_replay_of_the_imported_profile_steps_like_the_engine(key, model_dirs, tmp_path, live_report):
    from fpmcore.documents.profile import load_profile
    from fpmcore_vllm032.engine import EngineOptions, running_engine
    from fpmcore_vllm032.replay_check import check_trace, replay_config
    from fpmcore_vllm032.steps import random_trace

    kind, caching = key
    c = engine_config(key)
    model = str(model_dirs[kind])
    probe = run_fpm("probe", "--live", model, "-o", str(tmp_path / "evidence"), "--caching", caching, "--json",
                    *_probe_args(c))  # fmt: skip
    assert probe.exit_code == 0, probe.stderr[-3000:]
    imported = run_fpm("import", str(tmp_path / "evidence"), "-o", str(tmp_path / "profile.json"))
    assert imported.exit_code == 0, imported.stdout[-3000:]
    profile = load_profile(tmp_path / "profile.json")
    probed = probe.json()["phases"]["prefill"]

    options = EngineOptions(model=model, caching=caching == "on", kv_cache_bytes=1 << 28,
                            **{k: c[k] for k in ENGINE_KEYS})  # fmt: skip
    totals = {"traces": 0, "steps": 0, "preemptions": 0, "admissions_with_prefix_hit": 0, "prefix_hit_tokens": 0,
              "requests": 0, "finished": 0, "waited_for_blocks": 0}  # fmt: skip
    differences: list[str] = []
    with running_engine(options) as engine:
        summary = engine.summary()
        assert (summary["num_blocks"], summary["groups"]) == (probed["num_blocks"], probed["groups"])
        config = replay_config(profile, engine)
        for seed in range(TRACES):
            engine.llm.reset_prefix_cache()
            requests = random_trace(seed, c["requests"], c["max_model_len"], prompt_max=c["prompt_max"],
                                    output_max=c["output_max"])  # fmt: skip
            result = check_trace(engine, config, requests)
            if result["difference"] is not None:
                differences.append(f"trace {seed}: {result['difference']}")
            totals["traces"] += 1
            # steps that left a request waiting with no free block (a full pool)
            totals["waited_for_blocks"] += sum(
                1 for s in result["run"]["steps"] if s["waiting"] and not s["free_blocks"]
            )
            for k in (
                "steps",
                "preemptions",
                "admissions_with_prefix_hit",
                "prefix_hit_tokens",
                "requests",
                "finished",
            ):
                totals[k] += result[k]
    live_report[f"{kind}, caching {caching}"] = totals
    assert differences == []
    assert totals["traces"] == TRACES and totals["finished"] == totals["requests"]
    if key in NO_GROWTH:
        assert totals["preemptions"] == 0 and totals["waited_for_blocks"] > 0  # memory pressure reached
    else:
        assert totals["preemptions"] > 0  # memory pressure reached
    if caching == "on":
        assert totals["admissions_with_prefix_hit"] > 0
    else:
        assert totals["prefix_hit_tokens"] == 0


def test_a_setting_outside_the_shared_envelope_is_refused(model_dirs, tmp_path):
    """A profile of another runtime, or a 0.32.0 engine outside the envelope, is never replayed silently."""
    import attrs

    from fpmcore.documents.errors import FpmError
    from fpmcore.documents.profile import load_profile
    from fpmcore_vllm032.engine import EngineOptions, running_engine
    from fpmcore_vllm032.replay_check import replay_config

    model = str(model_dirs["llama"])
    assert run_fpm("probe", "--live", model, "-o", str(tmp_path / "ev"), "--max-model-len", "1024",
                   "--kv-cache-space", "0.25").exit_code == 0  # fmt: skip
    assert run_fpm("import", str(tmp_path / "ev"), "-o", str(tmp_path / "p.json")).exit_code == 0
    profile = load_profile(tmp_path / "p.json")
    with running_engine(EngineOptions(model=model, max_model_len=1024, kv_cache_bytes=1 << 28)) as engine:
        replay_config(profile, engine)  # inside: accepted
        other = attrs.evolve(profile, deployments=[attrs.evolve(profile.deployments[0], backend_version="0.33.0")])
        with pytest.raises(FpmError, match="the profile's runtime is vLLM 0.33.0; the engine runs vLLM 0.32.0"):
            replay_config(other, engine)
        engine.vllm_config.scheduler_config.prefill_schedule_interval = 4
        try:
            with pytest.raises(FpmError, match=r"prefill_schedule_interval 4: .*\(D-S1\)"):
                replay_config(profile, engine)
        finally:
            engine.vllm_config.scheduler_config.prefill_schedule_interval = 1
