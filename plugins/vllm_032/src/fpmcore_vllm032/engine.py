"""A vLLM 0.32.0 CPU engine in this process: start it, reach its objects, shut it down.

The engine runs in the calling process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``:
an in-process client, README §5): the engine core, the scheduler, the
uniprocess executor, the CPU worker and its model runner are all reachable
from the ``vllm.LLM`` object, by the attribute paths of :class:`LiveEngine`.
:func:`start_engine` starts one from :class:`EngineOptions`, with a progress
line around the start; :func:`shutdown_engine` shuts it down and says what is
left (child processes, non-daemon threads: nothing, on 0.32.0).

:func:`engine_summary` reads the engine's own numbers (``num_blocks``, the
groups, block and page sizes, ``kv_cache_max_concurrency``, the storages and
views), which the live probe reports next to its evidence and the live tests
compare with the imported profile.

vLLM and torch are imported inside the functions, after
:func:`prepare_environment`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import attrs

from fpmcore_vllm_support.observe import tensors_of

#: The vLLM version this engine driver reaches into.
VERSION = "0.32.0"
#: One GiB: the default KV cache memory of a probe (``--kv-cache-space 1``).
GIB = 1 << 30

#: Environment of an in-process CPU engine, set before vLLM (and torch) is imported.
ENVIRONMENT = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # vLLM logs to stdout by default (vllm/envs.py:854); stdout is kept for the command's own output
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",
}
#: Set only when the caller has not: one OpenMP thread (a shared machine), vLLM's errors only.
DEFAULTS = {"OMP_NUM_THREADS": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

#: ``progress(message)``: a context manager that shows ``message`` while its block runs.
Progress = Callable[[str], AbstractContextManager[None]]


def prepare_environment() -> None:
    """Set :data:`ENVIRONMENT` (and :data:`DEFAULTS` where unset) before vLLM is imported.

    ``VLLM_CPU_KVCACHE_SPACE`` is removed: vLLM 0.32.0 reads it as whole GiB
    and lets it override ``kv_cache_memory_bytes`` (vllm/platforms/cpu.py:323-326),
    which is how the KV space is passed here (:meth:`EngineOptions.llm_kwargs`), to the byte.
    """
    os.environ.update(ENVIRONMENT)
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)


# --------------------------------------------------------------------------
# options and the live objects
# --------------------------------------------------------------------------


@attrs.frozen
class EngineOptions:
    """How the engine is started (``fpm probe --live``'s options).

    ``None`` leaves a setting to vLLM (the CPU platform's default for the model).
    ``kv_cache_bytes`` is what the CPU worker hands to cache planning
    (``kv_cache_memory_bytes``, vllm/v1/worker/cpu_worker.py:204-262);
    ``num_blocks`` forces the pool's block count
    (``num_gpu_blocks_override``: memory pressure, preemptions).
    """

    model: str
    caching: bool = True
    max_model_len: int | None = None
    dtype: str | None = None
    kv_cache_bytes: int = GIB
    num_blocks: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = True
    seed: int = 0

    def llm_kwargs(self) -> dict[str, Any]:
        """The ``vllm.LLM`` arguments."""
        kw: dict[str, Any] = {
            "model": self.model,
            "enable_prefix_caching": self.caching,
            "seed": self.seed,
            "enforce_eager": self.enforce_eager,
            "kv_cache_memory_bytes": int(self.kv_cache_bytes),
            "disable_log_stats": True,
            "use_tqdm_on_load": False,
        }
        optional = {"dtype": self.dtype, "max_model_len": self.max_model_len, "num_gpu_blocks_override": self.num_blocks,
                    "max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens}  # fmt: skip
        kw.update((k, v) for k, v in optional.items() if v is not None)
        return kw


@attrs.define(eq=False)
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
    raw_kv_caches: dict[str, Any] = attrs.Factory(dict)

    @property
    def engine_core(self) -> Any:
        return self.llm.llm_engine.engine_core.engine_core

    @property
    def vllm_config(self) -> Any:
        """The engine core's configuration (block size, capacity resolved)."""
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
        its state views (conv, ssm).  ``model_runner.kv_caches`` holds the raw
        allocations instead (README D-L5).
        """
        ctx = self.model_runner.compilation_config.static_forward_context
        return {name: ctx[name].kv_cache for group in self.worker_kv_cache_config.kv_cache_groups
                for name in group.layer_names}  # fmt: skip

    def attention_groups(self) -> list[Any]:
        return [g for per_group in self.model_runner.attn_groups for g in per_group]

    def available_cache_bytes(self) -> int:
        """What the CPU worker handed to cache planning (``EngineCore.available_gpu_memory_for_kv_cache``)."""
        return int(self.engine_core.available_gpu_memory_for_kv_cache)

    def summary(self) -> dict[str, Any]:
        """What the engine computed and allocated, read from its objects (:func:`engine_summary`)."""
        return engine_summary(self)

    def shutdown(self) -> dict[str, Any]:
        """Shut the engine down; what is left (child processes, non-daemon engine threads)."""
        return shutdown_engine(self.llm)


# --------------------------------------------------------------------------
# start-up and shutdown
# --------------------------------------------------------------------------


@contextlib.contextmanager
def stderr_progress(message: str) -> Iterator[None]:
    """A progress line on stderr while a block runs (a live timer on a terminal)."""
    start = time.monotonic()
    stop = threading.Event()
    tty = sys.stderr.isatty()

    def tick() -> None:
        while not stop.wait(0.5):
            sys.stderr.write(f"\r{message} {time.monotonic() - start:5.1f} s")
            sys.stderr.flush()

    thread = threading.Thread(target=tick, name="engine-start-progress", daemon=True) if tty else None
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
        print(f"{message}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def _capture_raw_kv_caches(sink: dict[str, Any]) -> Callable[[], None]:
    """Wrap ``GPUModelRunner.initialize_kv_cache_tensors`` to keep the dict it returns; returns the restore function."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.initialize_kv_cache_tensors

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        caches = original(self, *args, **kwargs)
        sink.clear()
        sink.update(caches)
        return caches

    GPUModelRunner.initialize_kv_cache_tensors = wrapper  # type: ignore[method-assign]

    def restore() -> None:
        GPUModelRunner.initialize_kv_cache_tensors = original  # type: ignore[method-assign]

    return restore


def cleanup_distributed() -> None:
    """Destroy what a started (or half-started) engine left in vLLM's distributed state; never raises."""
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    except Exception as exc:  # noqa: BLE001 - the engine is down already; say so, do not mask the cause
        print(f"fpmcore-vllm032: cleanup of vLLM's distributed state failed: {exc}", file=sys.stderr)


def start_engine(options: EngineOptions, progress: Progress = stderr_progress) -> LiveEngine:
    """Start an in-process engine for ``options.model`` inside ``progress``; its live objects.

    A start-up that fails or is interrupted (``KeyboardInterrupt``) leaves
    nothing behind: vLLM's distributed state is cleaned up before the
    exception goes on.
    """
    prepare_environment()
    with progress(f"starting the vLLM {VERSION} CPU engine for {Path(options.model).name}"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecations inside vLLM's and torch's imports
        import vllm

        if vllm.__version__ != VERSION:
            raise RuntimeError(f"this engine driver needs vLLM {VERSION}; this interpreter has vLLM {vllm.__version__}")
        from vllm import LLM

        raw: dict[str, Any] = {}
        restore = _capture_raw_kv_caches(raw)
        t0 = time.monotonic()
        try:
            llm = LLM(**options.llm_kwargs())
        except BaseException:
            cleanup_distributed()
            raise
        finally:
            restore()
        elapsed = time.monotonic() - t0
    return LiveEngine(options=options, llm=llm, start_seconds=elapsed, raw_kv_caches=raw)


def shutdown_engine(llm: Any) -> dict[str, Any]:
    """Shut the engine core and the distributed state down; report what is left behind."""
    llm.llm_engine.engine_core.shutdown()
    cleanup_distributed()
    children = [p.pid for p in multiprocessing.active_children()]
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    return {"children": children, "non_daemon_threads": threads}


@contextlib.contextmanager
def running_engine(options: EngineOptions, progress: Progress = stderr_progress) -> Iterator[LiveEngine]:
    """``with running_engine(options) as engine:`` an engine that is shut down when the block ends, however it ends."""
    engine = start_engine(options, progress)
    try:
        yield engine
    finally:
        engine.shutdown()


# --------------------------------------------------------------------------
# the engine's numbers
# --------------------------------------------------------------------------


def spec_numbers(spec: Any) -> dict[str, Any]:
    """A cache spec's class, block, page and the fields a replay or a reader compares."""
    out: dict[str, Any] = {
        "class": type(spec).__name__,
        "block_size": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "prefix_cacheable": bool(spec.prefix_cacheable),
    }
    for key in ("sliding_window", "mamba_cache_mode", "num_speculative_blocks", "num_prefill_checkpoint_blocks",
                "prefill_checkpoint_alignment", "page_size_padded", "num_kv_heads", "head_size"):  # fmt: skip
        if hasattr(spec, key):
            value = getattr(spec, key)
            out[key] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    if hasattr(spec, "shapes"):
        out["shapes"] = [list(s) for s in spec.shapes]
        out["dtypes"] = [str(d) for d in spec.dtypes]
    elif hasattr(spec, "dtype"):
        out["dtype"] = str(spec.dtype)
    return out


def _views(engine: LiveEngine) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The distinct storages behind the layer views (each once) and each layer's views."""
    storages: dict[int, dict[str, Any]] = {}
    views: dict[str, list[dict[str, Any]]] = {}
    for name, value in engine.layer_kv_caches().items():
        for t in tensors_of(value):
            st = t.untyped_storage()
            entry = storages.setdefault(st.data_ptr(), {"id": f"s{len(storages)}", "device": str(t.device),
                                                        "size_bytes": int(st.nbytes()), "layers": []})  # fmt: skip
            if name not in entry["layers"]:
                entry["layers"].append(name)
            es = t.element_size()
            views.setdefault(name, []).append({
                "storage": entry["id"], "offset_bytes": int(t.storage_offset()) * es, "shape": list(t.shape),
                "stride_bytes": [int(s) * es for s in t.stride()], "dtype": str(t.dtype),
            })  # fmt: skip
    return list(storages.values()), views


def engine_summary(engine: LiveEngine) -> dict[str, Any]:
    """``num_blocks``, groups, pages, concurrency, tensors: the engine's own numbers."""
    vc = engine.vllm_config
    cc, sc = vc.cache_config, vc.scheduler_config
    kcc = engine.kv_cache_config
    storages, views = _views(engine)
    pool = engine.block_pool
    raw = {name: {"shape": list(t.shape), "dtype": str(t.dtype), "offset_bytes": int(t.storage_offset()) * t.element_size()}
           for name, t in engine.raw_kv_caches.items()}  # fmt: skip
    return {
        "model": engine.options.model,
        "vllm_version": __import__("vllm").__version__,
        "options": attrs.asdict(engine.options),
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
        "groups": [{"layers": list(g.layer_names), **spec_numbers(g.kv_cache_spec)} for g in kcc.kv_cache_groups],
        "kv_cache_tensors": [{"size": t.size, "layers": list(t.layers), "layer_stride": t.layer_stride,
                              "block_stride": t.block_stride, "offset": t.offset} for t in kcc.kv_cache_tensors],
        "cache_config": {
            "block_size": cc.block_size, "mamba_block_size": cc.mamba_block_size,
            "mamba_cache_mode": str(cc.mamba_cache_mode), "num_gpu_blocks": cc.num_gpu_blocks,
            "kv_cache_max_concurrency": cc.kv_cache_max_concurrency, "kv_cache_size_tokens": cc.kv_cache_size_tokens,
            "enable_prefix_caching": bool(cc.enable_prefix_caching),
        },
        "scheduler_config": scheduler_settings(sc),
        "max_model_len": vc.model_config.max_model_len,
        "dtype": str(vc.model_config.dtype),
        "storages": storages,
        "layer_views": views,
        "raw_allocations": raw,
        "attention_groups": [{"group": ag.kv_cache_group_id, "backend": ag.backend.get_name(),
                              "layers": list(ag.layer_names), "kernel_block_size": ag.kernel_block_size,
                              "kernel_block_stride": int(ag.kernel_block_stride)}
                             for ag in engine.attention_groups()],
        "kernel_block_sizes": list(getattr(engine.model_runner, "_kernel_block_sizes", None) or []),
    }  # fmt: skip


def scheduler_settings(sc: Any) -> dict[str, Any]:
    """The ``SchedulerConfig`` values the replay and its envelope read (vllm/config/scheduler.py)."""
    policy = getattr(sc, "policy", None)
    return {
        "max_num_batched_tokens": sc.max_num_batched_tokens,
        "max_num_seqs": sc.max_num_seqs,
        "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
        "async_scheduling": bool(sc.async_scheduling),
        "long_prefill_token_threshold": sc.long_prefill_token_threshold,
        "policy": str(getattr(policy, "value", policy)),
        "watermark": getattr(sc, "watermark", None),
        "scheduler_reserve_full_isl": getattr(sc, "scheduler_reserve_full_isl", None),
        "prefill_schedule_interval": getattr(sc, "prefill_schedule_interval", None),
    }


def jsonable(value: Any) -> Any:
    """``value`` with mappings and sequences made JSON-ready (other objects as their text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)
