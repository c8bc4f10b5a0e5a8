"""``fpm verify`` on the vLLM 0.32.0 CPU engine: the serving engine (``fpm_serving_engine``).

:func:`start` starts the engine exactly as the measurement driver does
(:func:`fpmcore_vllm032.measure.start`: the installed files checked, the
plan's deployment) and wraps it in a :class:`VllmServingEngine`, whose
:meth:`~VllmServingEngine.serve` serves a list of requests open loop in
wall-clock time:

* the prefix cache is reset first (``LLM.reset_prefix_cache``), so every
  serving starts from an empty cache, like the replay;
* each request is added (``LLMEngine.add_request`` with its token ids,
  greedy, ``ignore_eos``, exactly ``output_len`` tokens) once its arrival
  time has passed on the monotonic clock, counted from the start of the
  serving; ``LLMEngine.step()`` runs whenever a request is unfinished, and
  the loop sleeps until the next arrival when none is;
* a request's first-token and finish times are the ends of the steps that
  returned its first token and its finished output;
* a step's wall time spans ``LLMEngine.step()`` and the admission of the
  requests added right before it, as the measurement driver's first step of
  a run does (:data:`fpmcore_vllm032.measure.TIMING_BOUNDARY`);
* each step's workload is read from the ``SchedulerOutput`` of its
  ``Scheduler.schedule()`` call (a wrapper, restored after the serving:
  :func:`fpmcore_vllm032.measure.workload`), its wall time around
  ``LLMEngine.step()``, and what the machine did to it with the cheap sampler
  ``fpmcore.collect.contention.sampler(precise=False)`` (this process's thread
  counters and ``/proc/stat``: a reading per step that does not slow the
  served engine; the CPU canary runs while the engine is about to idle, or
  once per half second between steps when it does not idle); a step that
  scheduled nothing is not reported.

vLLM is imported only when an engine starts or serves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fpmcore.plugin_api import (
    EngineOptions,
    EngineStep,
    ServedRequest,
    ServeRequest,
    Serving,
    ServingDriver,
    cpu_sampler,
)
from fpmcore_vllm032.measure import VllmMeasurementEngine, scheduled_workload


class VllmServingEngine:
    """A started vLLM 0.32.0 CPU engine as a :class:`~fpmcore.host.engine_drivers.ServingEngine`."""

    def __init__(self, engine: VllmMeasurementEngine) -> None:
        self.engine = engine
        self.facts = engine.facts
        self.sampler = cpu_sampler(precise=False)

    def serve(self, requests: Sequence[ServeRequest]) -> Serving:
        """Serve ``requests`` open loop (module docstring)."""
        live = self.engine.live
        live.llm.reset_prefix_cache()
        sched = live.scheduler
        original = sched.schedule
        last: list[Any] = []

        def schedule(*args: Any, **kwargs: Any) -> Any:  # the step's workload, read from the scheduler's output
            out = original(*args, **kwargs)
            last.append(scheduled_workload(out, sched))
            return out

        sched.schedule = schedule
        try:
            return self._serve(requests, last)
        finally:
            sched.schedule = original

    def _serve(self, requests: Sequence[ServeRequest], last: list[Any]) -> Serving:
        from vllm import SamplingParams

        engine = self.engine.live.llm.llm_engine
        clock = self.sampler
        pending = sorted(requests, key=lambda r: r.arrival_time)
        if clock is not None:
            clock.idle()  # the canary's first best, before the serving starts
        admitted: dict[str, float] = {}
        first: dict[str, float] = {}
        finish: dict[str, float] = {}
        tokens: dict[str, int] = {}
        steps: list[EngineStep] = []
        t0 = time.monotonic()
        k = 0
        while len(finish) < len(pending):
            a0 = time.monotonic()  # the next step's start when it admits requests first
            now = a0 - t0
            admitting = False
            while k < len(pending) and pending[k].arrival_time <= now:
                admitting = True
                r = pending[k]
                engine.add_request(r.request_id, {"prompt_token_ids": list(r.prompt)},
                                   SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0))  # fmt: skip
                admitted[r.request_id] = now
                k += 1
            if not engine.has_unfinished_requests():
                if k < len(pending):
                    if clock is not None:  # the machine's speed, while nothing waits for the engine
                        clock.idle()
                    time.sleep(max(0.0, pending[k].arrival_time - (time.monotonic() - t0)))
                    continue
                raise RuntimeError("the engine has no unfinished request, but not every request finished")
            last.clear()
            before = clock.start() if clock is not None else None
            s0 = a0 if admitting else time.monotonic()
            outs = engine.step()
            s1 = time.monotonic()
            seen = clock.stop(before) if clock is not None and before is not None else None
            end = s1 - t0
            if last and (last[0].num_prefill_requests or last[0].num_decode_requests):
                steps.append(EngineStep(start=s0 - t0, end=end, scheduled=last[0], contention=seen))
            for o in outs:
                n = len(o.outputs[0].token_ids) if o.outputs else 0
                if n and o.request_id not in first:
                    first[o.request_id] = end
                if o.finished:
                    finish[o.request_id] = end
                    tokens[o.request_id] = n
        served = [ServedRequest(r.request_id, r.arrival_time, admitted[r.request_id], first[r.request_id],
                                finish[r.request_id], tokens[r.request_id]) for r in pending]  # fmt: skip
        return Serving(served, steps)

    def close(self) -> None:
        self.engine.close()


def start(model_dir: str, options: EngineOptions) -> VllmServingEngine:
    """Start the engine for the plan's deployment (:func:`fpmcore_vllm032.measure.start`) and serve with it."""
    from fpmcore_vllm032.measure import start as start_measurement

    return VllmServingEngine(start_measurement(model_dir, options))


def driver() -> ServingDriver:
    """The answer to ``fpm_serving_engine``."""
    return ServingDriver(start=start)
