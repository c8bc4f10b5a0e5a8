"""A deterministic stand-in measurement engine, behind the same hook as a runtime plugin's engine.

It schedules like vLLM's synchronous scheduler does for the requests a
collection admits (all at once, chunked prefill within the token budget, the
Mamba align split of 04 G-2 … G-6 when configured as a hybrid in align mode,
prefix-cache hits on whole hash blocks capped below the prompt length, LRU
eviction of cached blocks) and reports every step.  Step times come from a
fixed cost model plus noise drawn from the prompts' token ids, on a virtual
clock: the same prompts always take the same time, so a resumed collection
measures exactly what an uninterrupted one does.  ``FPM_STANDIN_STEP_SLEEP``
(seconds) makes each step also take real time, for the kill tests.

:class:`StandinRuntime` is a plugin that wraps ``fpm_measurement_driver``: the
call goes to the runtime plugin selected for the plan's pin (``vllm_033`` for
the recorded probe of these tests, which drives no engine) and the wrapper
answers with the stand-in's driver.  It targets no pin itself, so the
selection of the runtime plugin is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.collect.contention import Contention
from fpmcore.host.engine_drivers import (
    EngineFacts,
    EngineOptions,
    EngineRun,
    EngineStep,
    MeasurementDriver,
    ProducerFile,
    ProducerRecord,
    ServedRequest,
    ServeRequest,
    Serving,
    ServingDriver,
    StepWorkload,
)
from fpmcore.host.hooktypes import AlignStopQuery

THIS_FILE = Path(__file__).resolve()


@attrs.frozen
class StandinConfig:
    """What the stand-in engine is: its pin, blocks, vocabulary, pool and cost model."""

    runtime: str = "vllm==0.33.0"
    block_size: int = 544
    hash_block_size: int = 544
    align_mode: bool = True
    checkpoint_alignment: int | None = None
    vocab_size: int = 512
    special_ids: tuple[int, ...] = (509, 510, 511)
    cache_blocks: int = 4096
    #: seconds: fixed, per scheduled token, per token × kv token (attention), per decode request
    fixed: float = 0.004
    per_token: float = 2.0e-6
    per_token_kv: float = 4.0e-11
    per_decode: float = 5.0e-5
    noise: float = 0.05
    #: contention bursts: ``(first, end)`` ranges of the engine's step counter (every step it ran, from 0) during
    #: which a neighbour runs: the step takes ``burst_slowdown`` times longer and others use a whole CPU over it
    #: (``FPM_STANDIN_BURSTS="a:b,c:d"`` adds ranges for the subprocess tests)
    bursts: tuple[tuple[int, int], ...] = ()
    burst_slowdown: float = 1.75
    #: slowdowns the counters cannot see (a neighbour outside this machine's view): ``(first, end)`` step ranges
    #: that take ``burst_slowdown`` times longer with no contention recorded
    silent_bursts: tuple[tuple[int, int], ...] = ()
    #: the dtype the engine says it runs the model in (``serving_config["dtype"]``; ``None``: it says nothing)
    dtype: str | None = None
    #: a latency table (``fpmcore.replay.table.load_table``): served steps then take exactly the table's time for
    #: their workload (no noise), the engine a replay with that table predicts
    serve_table: Any = None
    #: each cache group's block, as a runtime reports it (empty: not reported)
    cache_block_sizes: tuple[int, ...] = ()


def _noise(tokens: Sequence[int]) -> float:
    h = hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).digest()
    return int.from_bytes(h[:8], "little") / 2**64  # [0, 1)


@attrs.define
class _Req:
    prompt: list[int]
    max_tokens: int
    computed: int = 0
    outputs: int = 0
    cached: int = 0

    @property
    def length(self) -> int:
        return len(self.prompt) + self.outputs


class StandinEngine:
    """The stand-in :class:`~fpmcore.host.engine_drivers.MeasurementEngine`."""

    def __init__(self, config: StandinConfig, model_dir: str, options: EngineOptions) -> None:
        if not Path(model_dir, "config.json").is_file():
            raise ValueError(f"{model_dir} is not a model folder")
        self.config = config
        self.options = options
        self.clock = 1000.0
        self.cache: OrderedDict[bytes, None] = OrderedDict()
        self.sleep = float(os.environ.get("FPM_STANDIN_STEP_SLEEP", "0") or 0)
        self.closed = False
        self.steps_run = 0
        extra = os.environ.get("FPM_STANDIN_BURSTS", "")
        self.bursts = config.bursts + tuple(
            (int(a), int(b)) for a, _, b in (part.partition(":") for part in extra.split(",") if part)
        )
        self.facts = EngineFacts(
            runtime=config.runtime, vocab_size=config.vocab_size, excluded_token_ids=config.special_ids,
            block_size=config.block_size, hash_block_size=config.hash_block_size,
            max_num_batched_tokens=options.max_num_batched_tokens, max_num_seqs=options.max_num_seqs,
            max_model_len=options.max_model_len, prefix_caching=options.prefix_caching,
            kv_cache_bytes=options.kv_cache_bytes or 0,
            serving_config={"enable_prefix_caching": options.prefix_caching, "block_size": config.block_size,
                            "hash_block_size": config.hash_block_size, "async_scheduling": False,
                            "mamba_cache_mode": "align" if config.align_mode else "none",
                            **({"dtype": config.dtype} if config.dtype else {})},
            cache_block_sizes=config.cache_block_sizes,
        )  # fmt: skip

    # -- the prefix cache -------------------------------------------------------------------

    def _keys(self, prompt: Sequence[int], n_blocks: int) -> list[bytes]:
        H, keys, prev = self.config.hash_block_size, [], b""
        for i in range(n_blocks):
            prev = hashlib.sha256(prev + struct.pack(f"<{H}I", *prompt[i * H : (i + 1) * H])).digest()
            keys.append(prev)
        return keys

    def _hit(self, prompt: Sequence[int]) -> int:
        if not self.options.prefix_caching:
            return 0
        H = self.config.hash_block_size
        hit = 0
        for key in self._keys(prompt, (len(prompt) - 1) // H):
            if key not in self.cache:
                break
            self.cache.move_to_end(key)
            hit += H
        return hit

    def _cache(self, prompt: Sequence[int], computed: int) -> None:
        if not self.options.prefix_caching:
            return
        for key in self._keys(prompt, computed // self.config.hash_block_size):
            self.cache[key] = None
            self.cache.move_to_end(key)
        while len(self.cache) > self.config.cache_blocks:
            self.cache.popitem(last=False)

    # -- stepping -------------------------------------------------------------------------------

    def _chunk(self, r: _Req, left: int) -> int:
        k = min(r.length - r.computed, left)
        if k <= 0 or not self.config.align_mode or r.computed >= len(r.prompt):
            return max(k, 0)
        from fpmcore.replay.align import align_stop

        return align_stop(AlignStopQuery(
            start=r.computed, num_new_tokens=k, prompt_len=len(r.prompt), num_tokens=r.length,
            block_size=self.config.block_size, hash_block_size=self.config.hash_block_size,
            max_num_batched_tokens=self.options.max_num_batched_tokens,
            checkpoint_alignment=self.config.checkpoint_alignment,
        ))  # fmt: skip

    def _time(self, scheduled: StepWorkload, tokens: Sequence[int]) -> float:
        c = self.config
        new = scheduled.sum_prefill_tokens + scheduled.num_decode_requests
        kv = scheduled.sum_prefill_kv_tokens + scheduled.sum_decode_kv_tokens
        base = c.fixed + c.per_token * new + c.per_token_kv * new * kv + c.per_decode * scheduled.num_decode_requests
        return base * (1.0 + c.noise * _noise(tokens))

    def run(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> EngineRun:
        if self.closed:
            raise RuntimeError("the engine is shut down")
        reqs = [_Req(list(p), max_tokens) for p in prompts]
        for r in reqs:
            r.computed = r.cached = self._hit(r.prompt)
        steps: list[EngineStep] = []
        while any(r.outputs < r.max_tokens for r in reqs):
            left = self.options.max_num_batched_tokens
            pre_n = pre_tok = pre_kv = dec_n = dec_kv = 0
            plan: list[tuple[_Req, int]] = []
            for r in reqs:
                if r.outputs >= r.max_tokens:
                    continue
                k = self._chunk(r, left)
                if k <= 0:
                    continue
                if r.computed < len(r.prompt):
                    pre_n, pre_tok, pre_kv = pre_n + 1, pre_tok + k, pre_kv + r.computed
                else:
                    dec_n, dec_kv = dec_n + 1, dec_kv + r.computed
                plan.append((r, k))
                left -= k
            if not plan:
                raise RuntimeError("the stand-in engine cannot schedule its requests")
            scheduled = StepWorkload(num_prefill_requests=pre_n, sum_prefill_tokens=pre_tok,
                                     sum_prefill_kv_tokens=pre_kv, num_decode_requests=dec_n,
                                     sum_decode_kv_tokens=dec_kv)  # fmt: skip
            touched = [t for r, k in plan for t in r.prompt[r.computed : r.computed + k]]
            duration = self._time(scheduled, touched + [len(steps)])
            burst = any(a <= self.steps_run < b for a, b in self.bursts)
            silent = any(a <= self.steps_run < b for a, b in self.config.silent_bursts)
            self.steps_run += 1
            if burst or silent:
                duration *= self.config.burst_slowdown
            seen = Contention(cpu_seconds=duration, wait_seconds=0.0, foreign_seconds=duration if burst else 0.0)
            start = self.clock
            self.clock += duration + 0.001
            for r, k in plan:
                r.computed += k
                if r.computed >= r.length:
                    r.outputs += 1
                self._cache(r.prompt, min(r.computed, len(r.prompt)))
            steps.append(EngineStep(start=start, end=start + duration, scheduled=scheduled, contention=seen))
            if self.sleep:
                time.sleep(self.sleep)
        return EngineRun(steps, [r.cached for r in reqs], [r.outputs for r in reqs])

    def _step_seconds(self, scheduled: StepWorkload, tokens: Sequence[int]) -> float:
        if self.config.serve_table is None:
            return self._time(scheduled, tokens)
        from fpmcore.replay.latency import step_time

        w = scheduled
        got = step_time(self.config.serve_table, w.num_prefill_requests, w.sum_prefill_tokens,
                        w.sum_prefill_kv_tokens, w.num_decode_requests, w.sum_decode_kv_tokens)  # fmt: skip
        assert isinstance(got, tuple)
        return got[0]

    def serve(self, requests: Sequence[ServeRequest]) -> Serving:
        """Open-loop serving on the virtual clock (seconds from 0), from an empty prefix cache (module docstring).

        A step starts when the previous one ended; arrivals up to a step's start are admitted before it; an idle
        engine jumps to the next arrival.  Contention bursts count the engine's steps like :meth:`run`.
        """
        if self.closed:
            raise RuntimeError("the engine is shut down")
        self.cache.clear()
        pending = sorted(requests, key=lambda r: r.arrival_time)
        reqs = {r.request_id: _Req(list(r.prompt), r.output_len) for r in pending}
        waiting: list[str] = []
        running: list[str] = []
        admitted: dict[str, float] = {}
        first: dict[str, float] = {}
        finish: dict[str, float] = {}
        steps: list[EngineStep] = []
        now, k = 0.0, 0
        while len(finish) < len(pending):
            while k < len(pending) and pending[k].arrival_time <= now:
                waiting.append(pending[k].request_id)
                admitted[pending[k].request_id] = now
                k += 1
            if not running and not waiting:
                now = pending[k].arrival_time
                continue
            left = self.options.max_num_batched_tokens
            plan: list[tuple[_Req, int]] = []
            for rid in running:
                n = self._chunk(reqs[rid], left)
                if n > 0:
                    plan.append((reqs[rid], n))
                    left -= n
            while waiting and len(running) < self.options.max_num_seqs and left > 0:
                r = reqs[waiting[0]]
                r.computed = r.cached = self._hit(r.prompt)
                n = self._chunk(r, left)
                if n <= 0:
                    break
                running.append(waiting.pop(0))
                plan.append((r, n))
                left -= n
            if not plan:
                raise RuntimeError("the stand-in engine cannot schedule its requests")
            pre = [(r, n) for r, n in plan if r.computed < len(r.prompt)]
            dec = [r for r, n in plan if r.computed >= len(r.prompt)]
            scheduled = StepWorkload(num_prefill_requests=len(pre), sum_prefill_tokens=sum(n for _, n in pre),
                                     sum_prefill_kv_tokens=sum(r.computed for r, _ in pre),
                                     num_decode_requests=len(dec), sum_decode_kv_tokens=sum(r.computed for r in dec))  # fmt: skip
            touched = [t for r, n in plan for t in r.prompt[r.computed : r.computed + n]]
            duration = self._step_seconds(scheduled, touched + [len(steps)])
            burst = any(a <= self.steps_run < b for a, b in self.bursts)
            self.steps_run += 1
            if burst:
                duration *= self.config.burst_slowdown
            seen = Contention(cpu_seconds=duration, wait_seconds=0.0, foreign_seconds=duration if burst else 0.0)
            start, now = now, now + duration
            for r, n in plan:
                r.computed += n
                if r.computed >= r.length:
                    r.outputs += 1
                self._cache(r.prompt, min(r.computed, len(r.prompt)))
            for rid in list(running):
                r = reqs[rid]
                if r.outputs and rid not in first:
                    first[rid] = now
                if r.outputs >= r.max_tokens:
                    finish[rid] = now
                    running.remove(rid)
            steps.append(EngineStep(start=start, end=now, scheduled=scheduled, contention=seen))
            if self.sleep:
                time.sleep(self.sleep)
        return Serving(
            [ServedRequest(r.request_id, r.arrival_time, admitted[r.request_id], first[r.request_id],
                           finish[r.request_id], reqs[r.request_id].outputs) for r in pending], steps,
        )  # fmt: skip

    def close(self) -> None:
        self.closed = True


def producer(config: StandinConfig) -> ProducerRecord:
    """The stand-in's producer: its own module file, a real installed file with its real SHA-256."""
    sha = hashlib.sha256(THIS_FILE.read_bytes()).hexdigest()
    return ProducerRecord(name="standin_engine_steps", runtime=config.runtime, plugin="standin",
                          timing_boundary="standin_virtual_clock_step",
                          files=[ProducerFile("tests/collect/standin.py", sha)])  # fmt: skip


class StandinRuntime:
    """A runtime plugin whose measurement driver starts :class:`StandinEngine`."""

    def __init__(self, config: StandinConfig | None = None) -> None:
        self.config = config or StandinConfig()
        self.engines: list[StandinEngine] = []

    @hookimpl
    def fpm_plugin_info(self) -> PluginInfo:
        # no target: the runtime plugin of the pin (vllm_033 for the recorded probe) stays the selected one
        return PluginInfo(id="standin", kind="runtime", targets=(), api_version=API_VERSION,
                          summary="a deterministic stand-in measurement engine (tests)")  # fmt: skip

    @hookimpl(wrapper=True)
    def fpm_measurement_driver(self, runtime: str) -> Any:
        """Behind the same hook as a runtime plugin's engine: the selected runtime plugin (``vllm_033`` for the
        recorded probe) drives no engine, so the stand-in's driver is the answer."""
        answer = yield
        return answer if answer is not None or runtime != self.config.runtime else self.driver()

    @hookimpl(wrapper=True)
    def fpm_serving_engine(self, runtime: str) -> Any:
        """The stand-in's engine serves traces for its pin (``fpm verify``), like its measurement driver."""
        answer = yield
        if answer is not None or runtime != self.config.runtime:
            return answer
        return ServingDriver(start=self.driver().start)

    def driver(self) -> MeasurementDriver:
        def start(model_dir: str, options: EngineOptions) -> StandinEngine:
            engine = StandinEngine(self.config, model_dir, options)
            self.engines.append(engine)
            return engine

        return MeasurementDriver(producer=producer(self.config), start=start)


def fake_model_dir(path: Path, config: Any) -> Path:
    """A model folder whose ``config.json`` has the given bytes (the cell binds the run to them)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_bytes(config if isinstance(config, bytes) else str(config).encode())
    return path


def recorded_probe(source: Path, delay: float = 0.0):
    """A probe stage that writes a recorded evidence folder (``fpm onboard --probe recorded``)."""
    import shutil

    def probe(ctx: Any, model_dir: str, out_dir: Path, options: Any) -> None:
        tmp = out_dir.with_name(f".{out_dir.name}.copying")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        if delay:
            time.sleep(delay)
        tmp.rename(out_dir)

    return probe
