"""Step requests through a live vLLM 0.32.0 engine's own scheduler and record every step (06 R-40).

The in-process client calls ``EngineCore.step_fn()`` once per
``LLMEngine.step()`` (vllm/v1/engine/core_client.py:385-388);
``EngineCore.step`` calls ``Scheduler.schedule()`` once, runs the model and
applies ``update_from_output``, unless the scheduler holds no request, when
it returns at once without a scheduler call (vllm/v1/engine/core.py:665-666).
:class:`StepRecorder` wraps both (instance attributes, restored on exit) and
records, per step: tokens scheduled per request in batch order, the blocks
each scheduled request holds per group while the forward runs, preemptions,
finished requests, free blocks, the waiting count, the running requests and
their held blocks per group after the step, the prefix hits of the requests
admitted in the step, and the step's wall times.  An idle step (no
``schedule()`` call) is recorded as an empty step, so that step numbers count
``LLMEngine.step()`` calls as 06 R-25 counts replay steps.

:func:`run_trace` steps a step-exact trace (06 R-32) with real token ids
(:func:`make_prompts`: shared prefixes copied, every other token unique to its
request); :func:`random_trace` draws one with shared prefixes.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import attrs

from fpmcore_vllm032.engine import LiveEngine


@attrs.frozen
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
    #: The prompt as content-block ids, one per ``hash_block_tokens`` tokens (the last block possibly partial).
    hash_ids: tuple[int, ...] | None = None
    hash_block_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The trace line (06 R-32), without absent keys."""
        d: dict[str, Any] = {"request_id": self.request_id, "arrival_step": self.arrival_step,
                             "prompt_len": self.prompt_len, "output_len": self.output_len}  # fmt: skip
        if self.prefix_of is not None:
            d.update(prefix_of=self.prefix_of, prefix_of_len=self.prefix_of_len)
        if self.shared_prefix_id is not None:
            d.update(shared_prefix_id=self.shared_prefix_id, shared_prefix_len=self.shared_prefix_len)
        if self.hash_ids is not None:
            d.update(hash_ids=list(self.hash_ids), hash_block_tokens=self.hash_block_tokens)
        return d


def trace_lines(requests: Sequence[TraceRequest]) -> list[str]:
    """The replay's JSONL trace lines (06 R-32) of ``requests``."""
    return [json.dumps(r.to_json()) for r in requests]


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
                hash_ids=None if d.get("hash_ids") is None else tuple(int(i) for i in d["hash_ids"]),
                hash_block_tokens=d.get("hash_block_tokens"),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{n}: not a step-exact trace line ({exc})") from None
        if req.prefix_of is not None and req.prefix_of not in seen:
            raise ValueError(f"{path}:{n}: prefix_of {req.prefix_of!r} names no earlier request")
        seen.add(req.request_id)
        out.append(req)
    return out


def random_trace(seed: int, n: int, max_model_len: int, *, share: bool = True, prompt_max: int = 600,
                 output_max: int = 48, arrival_max: int = 8) -> list[TraceRequest]:  # fmt: skip
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
                                 prefix_of, prefix_len))  # fmt: skip
    reqs.sort(key=lambda r: (r.arrival_step, int(r.request_id[1:])))
    # prefix_of must name an earlier line: re-point a reference to a later request at nothing
    order = {r.request_id: k for k, r in enumerate(reqs)}
    return [r if r.prefix_of is None or order[r.prefix_of] < order[r.request_id]
            else TraceRequest(r.request_id, r.arrival_step, r.prompt_len, r.output_len) for r in reqs]  # fmt: skip


def make_prompts(requests: Sequence[TraceRequest], vocab: int, seed: int = 0,
                 exclude: Iterable[int] = ()) -> dict[str, list[int]]:  # fmt: skip
    """Real token ids for every request (06 R-40): prefixes copied, every other token unique to its request.

    Token ids are drawn from ``[0, vocab)`` minus ``exclude`` (the special
    tokens), seeded by ``seed`` and the request id.  A prompt given as
    content-block ids (``hash_ids``) is made of one draw per distinct (block
    size, id), block ``k`` covering tokens ``[k·H, min((k+1)·H, prompt_len))``,
    so two prompts hold the same tokens exactly where their ids agree (a partial
    last block holds its block's first tokens).
    """
    excluded = set(exclude)
    allowed = [t for t in range(vocab) if t not in excluded]
    shared: dict[str, list[int]] = {}
    blocks: dict[tuple[int, int], list[int]] = {}
    prompts: dict[str, list[int]] = {}
    for r in requests:
        if r.hash_ids is not None:
            size = int(r.hash_block_tokens or 0)
            tokens: list[int] = []
            for k, block_id in enumerate(r.hash_ids):
                if (size, block_id) not in blocks:
                    brng = random.Random(f"{seed}:block:{size}:{block_id}")
                    blocks[size, block_id] = [brng.choice(allowed) for _ in range(size)]
                tokens += blocks[size, block_id][: r.prompt_len - k * size]
            prompts[r.request_id] = tokens
            continue
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


class StepRecorder:
    """Wraps ``EngineCore.step_fn`` and ``Scheduler.schedule`` of a live engine and records every step.

    The record of a step is taken after ``step_fn`` returns, so after the
    step's output has been processed (06 R-40); the blocks the scheduled
    requests hold during the forward (``blocks``) right after ``schedule()``.
    ``external`` maps the engine's internal request ids (``"r0-<8 hex>"``,
    vllm/v1/engine/input_processor.py:363-371) to the caller's.
    """

    def __init__(self, engine: LiveEngine) -> None:
        self.engine = engine
        self.core = engine.engine_core
        self.sched = engine.scheduler
        self.records: list[dict[str, Any]] = []
        self.external: dict[str, str] = {}
        self._last_output: Any = None
        self._blocks: dict[str, list[list[int]]] = {}
        self._schedule_seconds = 0.0
        self._orig_step_fn = self.core.step_fn
        self._orig_schedule = self.sched.schedule

    def __enter__(self) -> Self:
        def schedule(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = self._orig_schedule(*args, **kwargs)
            self._schedule_seconds = time.perf_counter() - t0
            self._last_output = out
            self._blocks = {self._name(rid): self._block_ids(rid) for rid in out.num_scheduled_tokens}
            return out

        def step_fn() -> Any:
            self._last_output = None
            self._blocks = {}
            self._schedule_seconds = 0.0
            t0 = time.perf_counter()
            result = self._orig_step_fn()
            self._record(result, time.perf_counter() - t0)
            return result

        self.sched.schedule = schedule
        self.core.step_fn = step_fn
        return self

    def __exit__(self, *exc: object) -> None:
        self.core.step_fn = self._orig_step_fn
        self.sched.schedule = self._orig_schedule

    def _name(self, rid: str) -> str:
        return self.external.get(rid, rid)

    def _block_ids(self, rid: str) -> list[list[int]]:
        return [[b.block_id for b in (m.req_to_blocks.get(rid) or []) if not b.is_null]
                for m in self.engine.coordinator.single_type_managers]  # fmt: skip

    def _held(self, rid: str) -> list[int]:
        return [len(ids) for ids in self._block_ids(rid)]

    def _record(self, result: Any, elapsed: float) -> None:
        out = self._last_output
        outputs = result[0] if isinstance(result, tuple) else result
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
            for rid, nct in zip(cr.req_ids, cr.num_computed_tokens, strict=False):
                computed[rid] = nct
                if rid in cr.resumed_req_ids:
                    hits[self._name(rid)] = nct
            scheduled = [[self._name(rid), n, computed.get(rid)] for rid, n in out.num_scheduled_tokens.items()]
        running = [r.request_id for r in self.sched.running]
        self.records.append({
            "step": len(self.records),
            "scheduled": [[r, n] for r, n, _c in scheduled],
            "computed_before": [c for _r, _n, c in scheduled],
            "blocks": self._blocks,
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
        })  # fmt: skip


def vocabulary(engine: LiveEngine) -> tuple[int, set[int]]:
    """The model's vocabulary size and the special token ids prompts leave out."""
    tokenizer = engine.llm.get_tokenizer()
    vocab = int(engine.vllm_config.model_config.get_vocab_size())
    return vocab, set(getattr(tokenizer, "all_special_ids", []) or [])


def run_trace(engine: LiveEngine, requests: Sequence[TraceRequest], *, max_steps: int = 20_000,
              seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """Step ``requests`` through ``LLMEngine.step()``; the step records and per-request results.

    For every step ``k``: the requests whose ``arrival_step`` is ``k`` are
    added, then ``LLMEngine.step()`` runs once (06 R-40).  Every request asks
    for exactly ``output_len`` tokens (``ignore_eos``, greedy sampling).
    """
    from vllm import SamplingParams

    llm_engine = engine.llm.llm_engine
    vocab, special = vocabulary(engine)
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
                    r.request_id, {"prompt_token_ids": prompts[r.request_id]},
                    SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0),
                )  # fmt: skip
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
    while (steps and not steps[-1]["scheduled"] and not steps[-1]["running"] and steps[-1]["waiting"] == 0
           and not steps[-1]["finished"] and len(steps) > last_arrival + 1):  # fmt: skip
        steps.pop()
    results = {}
    for r in requests:
        o = outputs.get(r.request_id)
        results[r.request_id] = (
            None
            if o is None
            else {
                "output_tokens": len(o.outputs[0].token_ids),
                "num_cached_tokens": getattr(o, "num_cached_tokens", None),
            }
        )
    return {"steps": steps, "requests": results, "wall_seconds": wall, "trace": [r.to_json() for r in requests]}


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
            for (p, d, t), v in sorted(shapes.items(), key=lambda kv: -len(kv[1]))]  # fmt: skip
