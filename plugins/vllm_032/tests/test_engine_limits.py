"""What the vLLM 0.32.0 CPU engine cannot run, named before it starts (README D-L8, D-L12; ``fpm_engine_limits``).

The model configurations are those of the live examples (``examples/probes/live``):
``tiny-granite-hybrid`` (GraniteMoeHybrid: three Mamba2 layers, one
attention layer, float32) and ``tiny-qwen3-next`` (three Gated DeltaNet
layers, one attention layer, float32 weights, linear head dims 128).  On the
live engine the granite model with prefix caching on raised
``IndexError: index 1 is out of bounds for dimension 0 with size 1`` at
``mamba_mixer2.py:880`` for a 129-token prompt (128 ran); the commands now
refuse it in one line before an engine starts, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fpmcore.host.stage_hooktypes import EngineRequest
from fpmcore.testing import make_host, run_fpm
from fpmcore_vllm032 import limits

ROOT = Path(__file__).resolve().parents[3]
LIVE = ROOT / "examples" / "probes" / "live"
RUNTIME = "vllm==0.32.0"


def _config(name: str) -> dict[str, Any]:
    return json.loads((LIVE / name / "model-config.json").read_text())  # type: ignore[no-any-return]


GRANITE, QWEN3_NEXT = _config("tiny-granite-hybrid"), _config("tiny-qwen3-next")


@pytest.fixture(scope="module")
def runtime():
    return make_host(entry_points=("vllm_032",)).hooks.runtime(RUNTIME)


def _rules(runtime, config: dict[str, Any], caching: bool = True, dtype: str | None = None) -> list[str]:
    return [limit.rule for limit in runtime.engine_limits(request=EngineRequest(config, caching, dtype))]


def test_mamba2_layers_with_prefix_caching(runtime):
    assert GRANITE["architectures"] == ["GraniteMoeHybridForCausalLM"]
    assert _rules(runtime, GRANITE) == ["mamba2-prefix-caching"]
    assert _rules(runtime, GRANITE, caching=False) == []
    (limit,) = runtime.engine_limits(request=EngineRequest(GRANITE, prefix_caching=True))
    assert limit.fix == "--caching off"
    assert "mamba_mixer2.py:880" in limit.message and "GraniteMoeHybridForCausalLM" in limit.message


@pytest.mark.parametrize(("config", "meets"), [
    ({"architectures": ["GraniteMoeHybridForCausalLM"], "layer_types": ["mamba", "attention"]}, True),
    ({"architectures": ["GraniteMoeHybridForCausalLM"], "layer_types": ["full_attention", "full_attention"]}, False),
    ({"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M-M*"}, True),
    ({"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "*-*-"}, False),
    # transformers 5 writes NemotronH's pattern as layers_block_type, a Mamba layer as linear_attention
    ({"architectures": ["NemotronHForCausalLM"], "layers_block_type": ["linear_attention", "mlp", "full_attention"]},
     True),
    ({"architectures": ["NemotronHForCausalLM"], "layers_block_type": ["full_attention", "mlp"]}, False),
    ({"architectures": ["Mamba2ForCausalLM"]}, True),
    ({"architectures": ["Zamba2ForCausalLM"]}, True),
    ({"architectures": ["FalconH1ForCausalLM"]}, True),
    ({"architectures": ["LlamaForCausalLM"]}, False),
    ({"architectures": ["Lfm2ForCausalLM"], "layer_types": ["conv", "full_attention"]}, False),  # short convolutions
    ({}, False),
])  # fmt: skip
def test_which_models_build_mamba2_layers(runtime, config, meets):
    assert _rules(runtime, config) == (["mamba2-prefix-caching"] if meets else [])


#: A Jamba configuration as fpm tiny-model writes it (three Mamba1 layers, attention in layer 3).
JAMBA = {"architectures": ["JambaForCausalLM"], "attn_layer_period": 4, "attn_layer_offset": 3, "mamba_d_state": 16,
         "mamba_expand": 2, "dtype": "float32"}  # fmt: skip


@pytest.mark.parametrize("arch", ["JambaForCausalLM", "MambaForCausalLM", "FalconMambaForCausalLM"])
def test_mamba1_layers_are_refused_with_and_without_prefix_caching(runtime, arch):
    config = {**JAMBA, "architectures": [arch]}
    assert _rules(runtime, config) == ["mamba1-cpu"]
    assert _rules(runtime, config, caching=False) == ["mamba1-cpu"]
    (limit,) = runtime.engine_limits(request=EngineRequest(config, prefix_caching=False))
    assert limit.fix == ""
    assert arch in limit.message and "_C.selective_scan_fwd" in limit.message and "_custom_ops.py:1975" in limit.message


#: A DeepSeek-V2 configuration as fpm tiny-model writes it: the 576-wide latent of DeepSeek-V2/V3.
DEEPSEEK_V2 = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "kv_lora_rank": 512,
               "qk_rope_head_dim": 64, "qk_nope_head_dim": 64, "v_head_dim": 64, "dtype": "float32"}  # fmt: skip


def test_mla_needs_the_576_wide_latent(runtime):
    assert _rules(runtime, DEEPSEEK_V2) == []
    assert _rules(runtime, DEEPSEEK_V2, caching=False) == []
    # the first tiny model tried: 128 + 32 raised "Head dimension 160 is not supported by MLA" on the engine
    narrow = {**DEEPSEEK_V2, "kv_lora_rank": 128, "qk_rope_head_dim": 32}
    assert _rules(runtime, narrow) == ["mla-head-dim"]
    (limit,) = runtime.engine_limits(request=EngineRequest(narrow, prefix_caching=False))
    assert limit.fix == ""
    assert "128 + 32 = 160" in limit.message and "DeepseekV2ForCausalLM" in limit.message
    assert _rules(runtime, {**narrow, "model_type": "llama"}) == []  # not an MLA model type: no latent
    assert _rules(runtime, {**DEEPSEEK_V2, "kv_lora_rank": None}) == []  # no kv_lora_rank: vLLM runs MHA


def test_gated_deltanet_needs_bfloat16_and_head_dim_128(runtime):
    assert _rules(runtime, QWEN3_NEXT) == []  # float32 weights: vLLM loads them in bfloat16 on x86
    assert _rules(runtime, QWEN3_NEXT, dtype="bfloat16") == []
    assert _rules(runtime, QWEN3_NEXT, dtype="float32") == ["gdn-bfloat16"]
    assert _rules(runtime, {**QWEN3_NEXT, "dtype": "float16"}) == ["gdn-bfloat16"]
    narrow = {**QWEN3_NEXT, "linear_key_head_dim": 64}
    assert _rules(runtime, narrow, dtype="float32") == ["gdn-bfloat16", "gdn-head-dim"]
    (limit,) = runtime.engine_limits(request=EngineRequest(narrow, True, "bfloat16"))
    assert (limit.rule, limit.fix) == ("gdn-head-dim", "")
    assert "head dim 128 only" in limit.message and "64, 128" in limit.message


def _raise_in(path: str, line_text: str, prefix: str | None) -> BaseException:
    """An exception raised by code whose file is ``path`` inside a method of an object with ``prefix``."""
    source = "class Layer:\n    def forward(self):\n" + f"        {line_text}\n"
    scope: dict[str, Any] = {}
    exec(compile(source, path, "exec"), scope)  # noqa: S102 - a frame with vLLM's file name
    layer = scope["Layer"]()
    layer.prefix = prefix
    try:
        layer.forward()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


def test_a_failure_at_run_time_says_what_where_and_what_is_known():
    path = "/x/site-packages/vllm/model_executor/layers/mamba/mamba_mixer2.py"
    exc = _raise_in(path, "raise IndexError('index 1 is out of bounds for dimension 0 with size 1')",
                    "model.layers.0.mixer")  # fmt: skip
    text = limits.explain_failure(exc, EngineRequest(GRANITE, prefix_caching=True))
    assert text.startswith(
        "IndexError: index 1 is out of bounds for dimension 0 with size 1 (raised at "
        "vllm/model_executor/layers/mamba/mamba_mixer2.py:3 in forward, layer model.layers.0.mixer); "
        "a known limit [mamba2-prefix-caching]: the vLLM 0.32.0 CPU engine cannot run the Mamba2 layers"
    )
    assert text.endswith("; way out: --caching off")
    scan = _raise_in("/x/site-packages/vllm/_custom_ops.py",
                     "raise AttributeError(\"'_OpNamespace' '_C' object has no attribute 'selective_scan_fwd'\")", None)  # fmt: skip
    assert limits.explain_failure(scan, EngineRequest(JAMBA, prefix_caching=False)).startswith(
        "AttributeError: '_OpNamespace' '_C' object has no attribute 'selective_scan_fwd' (raised at "
        "vllm/_custom_ops.py:3 in forward); a known limit [mamba1-cpu]: the vLLM 0.32.0 CPU engine cannot run the "
        "Mamba1 layers of JambaForCausalLM"
    )
    other = _raise_in("/x/site-packages/vllm/v1/worker/gpu_model_runner.py", "raise ValueError('boom')", None)
    assert limits.explain_failure(other) == (
        "ValueError: boom (raised at vllm/v1/worker/gpu_model_runner.py:3 in forward)"
    )


# ---------------------------------------------------------------------------
# the commands refuse before an engine starts
# ---------------------------------------------------------------------------


@pytest.fixture
def granite(tmp_path) -> Path:
    model = tmp_path / "granite"
    model.mkdir()
    (model / "config.json").write_bytes((LIVE / "tiny-granite-hybrid" / "model-config.json").read_bytes())
    (model / "tokenizer.json").write_text("{}")
    return model


@pytest.fixture
def installed(monkeypatch):
    """vLLM 0.32.0 reported as installed; importing it would fail (the default suite has none)."""
    import fpmcore.probe.live

    monkeypatch.setattr(fpmcore.probe.live, "installed_runtime", lambda framework="vllm": "0.32.0")


REFUSAL = "the vLLM 0.32.0 CPU engine cannot run the Mamba2 layers of GraniteMoeHybridForCausalLM with prefix caching"


def test_probe_live_refuses_before_the_engine_starts(granite, installed, tmp_path):
    host = make_host(entry_points=("vllm_032",))
    result = run_fpm("probe", "--live", str(granite), "-o", str(tmp_path / "ev"), host=host)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"fpm: {REFUSAL}")
    assert line.endswith("; use --caching off [mamba2-prefix-caching]")
    assert not (tmp_path / "ev").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["granite"]


def test_probe_live_refuses_a_mamba1_model_whatever_the_caching(installed, tmp_path):
    model = tmp_path / "jamba"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(JAMBA))
    (model / "tokenizer.json").write_text("{}")
    host = make_host(entry_points=("vllm_032",))
    result = run_fpm("probe", "--live", str(model), "-o", str(tmp_path / "ev"), "--caching", "off", host=host)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("fpm: the vLLM 0.32.0 CPU engine cannot run the Mamba1 layers of JambaForCausalLM")
    assert line.endswith("; no option runs it on this runtime [mamba1-cpu]")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jamba"]


def test_onboard_refuses_before_anything_is_written(granite, installed, tmp_path):
    host = make_host(entry_points=("vllm_032",))
    result = run_fpm("onboard", str(granite), "-o", str(tmp_path / "camp"), "--smoke", host=host)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert REFUSAL in line and "use --caching off [mamba2-prefix-caching]" in line
    assert not (tmp_path / "camp").exists()


def test_collect_refuses_a_plan_made_with_prefix_caching(granite, tmp_path):
    """A plan whose deployment has prefix caching on: refused before the driver starts an engine, no run folder."""
    host = make_host(entry_points=("vllm_032",))
    assert (
        run_fpm("import", str(LIVE / "tiny-granite-hybrid"), "-o", str(tmp_path / "p.json"), host=host).exit_code == 0
    )
    assert run_fpm("plan", str(tmp_path / "p.json"), "-o", str(tmp_path / "plan.json"), host=host).exit_code == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["engine"]["prefix_caching"] = True
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = run_fpm("collect", str(tmp_path / "plan.json"), "--model-dir", str(granite), "-o", str(tmp_path / "run"),
                     "--smoke", host=host)  # fmt: skip
    assert result.exit_code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert REFUSAL in line
    assert line.endswith("the plan's deployment needs --caching off: probe the model with --caching off, then import "
                         "and plan it again [mamba2-prefix-caching]")  # fmt: skip
    assert not (tmp_path / "run").exists()
