"""A window of the Mooncake conversation trace through the running vLLM 0.32.0 engine, step by step (06 R-40).

The shipped excerpt's first twenty requests (lines 0–19), read by fpm's own
reader as ``tools/replay_vs_vllm.py --windows`` reads them (one scheduler step to
10 ms of the trace), with their prompts clipped at 1,024 tokens (the clipped
prompts keep the content-block ids of their tokens) so that the tiny Llama
runs them on this CPU: the prompts are real token ids made of one draw per
content block (:func:`fpmcore_vllm032.steps.make_prompts`), so the engine's
block hashes agree exactly where the trace's ``hash_ids`` agree.  The replay is
configured from the profile ``fpm probe --live`` and ``fpm import`` give for the
engine (:func:`fpmcore_vllm032.replay_check.replay_config`), prefix caching off
and on, in a pool of 24 blocks of 128 tokens (one and a half requests of
2,048), and every step must be identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fpmcore.testing import run_fpm
from tests.support.tools import load_tool

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[3]

EXCERPT = ROOT / "examples" / "traces" / "public" / "mooncake-conversation-40.jsonl"
ENGINE = {"dtype": "float32", "max_model_len": 2048, "num_blocks": 24, "max_num_seqs": 8,
          "max_num_batched_tokens": 1024}  # fmt: skip


def window_requests(start: int, size: int, max_prompt_len: int) -> list[Any]:
    """The window's requests as the live engine's step-exact trace lines, with their content-block ids."""
    trace_windows = load_tool("replay_vs_vllm").trace_windows

    from fpmcore_vllm032.steps import TraceRequest

    [(_label, trace)] = trace_windows(EXCERPT, [start], size, max_prompt_len=max_prompt_len)
    return [
        TraceRequest(
            r.request_id,
            int(r.arrival_step),
            r.prompt_len,
            r.output_len,
            hash_ids=r.hash_ids,
            hash_block_tokens=r.hash_block_tokens,
        )  # fmt: skip
        for r in trace.requests
    ]


@pytest.mark.parametrize("caching", ["on", "off"])
def test_a_mooncake_window_steps_like_the_live_engine(caching, model_dirs, tmp_path, live_report):
    from fpmcore.documents.profile import load_profile
    from fpmcore_vllm032.engine import EngineOptions, running_engine
    from fpmcore_vllm032.replay_check import check_trace, replay_config

    requests = window_requests(0, 20, 1024)
    assert len(requests) == 20 and all(r.hash_ids for r in requests)
    assert max(r.prompt_len + r.output_len for r in requests) <= ENGINE["max_model_len"]
    model = str(model_dirs["llama"])
    probe = run_fpm("probe", "--live", model, "-o", str(tmp_path / "evidence"), "--caching", caching,
                    "--dtype", ENGINE["dtype"], "--max-model-len", str(ENGINE["max_model_len"]),
                    "--num-gpu-blocks", str(ENGINE["num_blocks"]), "--max-num-seqs", str(ENGINE["max_num_seqs"]),
                    "--max-num-batched-tokens", str(ENGINE["max_num_batched_tokens"]), "--kv-cache-space", "0.25")  # fmt: skip
    assert probe.exit_code == 0, probe.stderr[-3000:]
    imported = run_fpm("import", str(tmp_path / "evidence"), "-o", str(tmp_path / "profile.json"))
    assert imported.exit_code == 0, imported.stdout[-3000:]
    profile = load_profile(tmp_path / "profile.json")
    options = EngineOptions(model=model, caching=caching == "on", kv_cache_bytes=1 << 28, **ENGINE)
    with running_engine(options) as engine:
        result = check_trace(engine, replay_config(profile, engine), requests)
    counts = {k: result[k] for k in ("steps", "preemptions", "admissions_with_prefix_hit", "prefix_hit_tokens",
                                     "requests", "finished")}  # fmt: skip
    live_report[f"llama, Mooncake lines 0-19, caching {caching}"] = counts
    assert result["difference"] is None, result["difference"]
    assert counts["finished"] == counts["requests"] == 20
    assert counts["preemptions"] > 0  # memory pressure reached
    if caching == "on":
        assert counts["prefix_hit_tokens"] > 0  # the shared first block (id 0)
    else:
        assert counts["prefix_hit_tokens"] == 0
