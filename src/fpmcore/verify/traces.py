"""The traces ``fpm verify`` serves, and their token ids.

A run serves either a trace file (anything ``fpm replay`` reads with
``arrival_time``: seconds from the start of the trace; 06 R-32) or a seeded
Poisson trace (:func:`poisson_trace`).  Each request gets real token ids
(:func:`prompts`): the prefix it shares with an earlier request
(``prefix_of``/``prefix_of_len``) or with a named group (``shared_prefix_id``/
``shared_prefix_len``) is copied, every other token is drawn for the request
alone, from the engine's vocabulary minus its special tokens, seeded by the
run's seed and the request id.  A prompt given as content-block ids
(``hash_ids``) is made of one draw per distinct id, its first tokens where the
block is partial (:func:`hash_id_tokens`).  So the engine sees exactly the
prefix sharing the replay models, and a run is reproducible.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.host.engine_drivers import ServeRequest
from fpmcore.replay.trace import Trace, TraceRequest, parse_trace_lines


@attrs.frozen
class PoissonSpec:
    """A seeded Poisson trace: ``requests`` arrivals at ``rate`` per second (exponential gaps, the first at 0),
    prompt and output lengths uniform in the closed ranges ``prompt`` and ``output``."""

    rate: float
    requests: int
    prompt: tuple[int, int]
    output: tuple[int, int]

    def as_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "requests": self.requests, "prompt": list(self.prompt),
                "output": list(self.output)}  # fmt: skip


def poisson_trace(spec: PoissonSpec, seed: int) -> Trace:
    """The trace of ``spec`` drawn with ``seed`` (06 R-32 lines with ``arrival_time``, no shared prefixes)."""
    rng = random.Random(seed)
    t, lines = 0.0, []
    for i in range(spec.requests):
        if i:
            t += rng.expovariate(spec.rate)
        lines.append(json.dumps({"request_id": f"q{i}", "arrival_time": round(t, 6),
                                 "prompt_len": rng.randint(*spec.prompt),
                                 "output_len": rng.randint(*spec.output)}))  # fmt: skip
    return parse_trace_lines(lines, f"poisson trace (seed {seed})")


def check_servable(trace: Trace, max_model_len: int, where: str) -> None:
    """V-3: a trace in wall-clock time whose every request fits the deployment's context."""
    if trace.step_exact:
        raise FpmError("V-3", "the trace has step-exact arrivals (arrival_step); a serving runs in wall-clock time: "
                              "give arrival_time in seconds", where)  # fmt: skip
    for r in trace.requests:
        if r.prompt_len + r.output_len > max_model_len:
            raise FpmError("V-3", f"request {r.request_id} needs {r.prompt_len} + {r.output_len} tokens, more than "
                                  f"the deployment's max_model_len {max_model_len}", where)  # fmt: skip


def prompts(requests: Sequence[TraceRequest], vocab: int, excluded: Iterable[int], seed: int) -> dict[str, list[int]]:
    """Real token ids for every request (module docstring)."""
    skip = set(excluded)
    allowed = [t for t in range(vocab) if t not in skip]
    if not allowed:
        raise FpmError("V-5", f"the engine's vocabulary of {vocab} tokens has no token that is not special")
    out: dict[str, list[int]] = {}

    def draw(rng: random.Random, n: int) -> list[int]:
        return [allowed[rng.randrange(len(allowed))] for _ in range(n)]

    blocks: dict[str, list[int]] = {}  # one draw per distinct content block

    def block_tokens(key: str, n: int) -> list[int]:
        if key not in blocks:
            blocks[key] = draw(random.Random(f"{seed}:block:{key}"), n)
        return blocks[key]

    for r in requests:
        prefix: list[int] = []
        if r.hash_ids is not None:
            out[r.request_id] = hash_id_tokens(r, block_tokens)
            continue
        if r.prefix_of is not None:
            prefix = out[r.prefix_of][: int(r.prefix_of_len or 0)]
        elif r.shared_prefix_id is not None:  # one draw per group: a shorter share is a prefix of a longer one
            prefix = draw(random.Random(f"{seed}:shared:{r.shared_prefix_id}"), int(r.shared_prefix_len or 0))
        rng = random.Random(f"{seed}:{r.request_id}")
        body = draw(rng, r.prompt_len - len(prefix))
        out[r.request_id] = (prefix + body)[: r.prompt_len]
    return out


def hash_id_tokens(r: TraceRequest, block_tokens: Callable[[str, int], list[int]]) -> list[int]:
    """The prompt of a request given as content-block ids: block ``k`` is the first
    ``min(H, prompt_len − k·H)`` of the ``H`` tokens ``block_tokens(key, H)`` gives for its id, the key
    naming the id and ``H`` (``hash_block_tokens``).

    The blocks of two prompts hold the same tokens exactly where their ids agree, so a replay's hash
    chain sees the sharing of :func:`fpmcore.replay.engine.hash_breakpoints` (barring the vanishing
    chance that two draws agree).  The same id in another position holds the same tokens too, which a
    chained hash does not reuse either.
    """
    assert r.hash_ids is not None and r.hash_block_tokens is not None
    H = r.hash_block_tokens
    out: list[int] = []
    for k, block_id in enumerate(r.hash_ids):
        out += block_tokens(f"{H}:{block_id}", H)[: r.prompt_len - k * H]
    return out


def serve_requests(trace: Trace, tokens: Mapping[str, list[int]], *, prefix: str = "") -> list[ServeRequest]:
    """The trace's requests as the serving engine takes them, in arrival order (ids prefixed with ``prefix``)."""
    reqs = sorted(trace.requests, key=lambda r: float(r.arrival_time or 0.0))
    return [ServeRequest(prefix + r.request_id, float(r.arrival_time or 0.0), tokens[r.request_id], r.output_len)
            for r in reqs]  # fmt: skip


def warmup_trace(trace: Trace, n: int) -> Trace:
    """The first ``n`` requests of ``trace`` by arrival, without shared prefixes (served first, not measured)."""
    first = sorted(trace.requests, key=lambda r: float(r.arrival_time or 0.0))[:n]
    return Trace(tuple(TraceRequest(f"w{i}", r.prompt_len, r.output_len, arrival_time=r.arrival_time)
                       for i, r in enumerate(first)), "arrival_time")  # fmt: skip


def step_token_counts(steps: Iterable[Mapping[str, Any]]) -> set[int]:
    """The token counts of replayed steps (R-34 records): the prefill tokens plus one per decoding request."""
    return {int(s["sum_prefill_tokens"]) + int(s["num_decode_requests"]) for s in steps}


def shape_warmup_traces(counts: Iterable[int], max_model_len: int) -> list[Trace]:
    """One single-step trace per token count (ascending): requests of that many prompt tokens in all (each
    below ``max_model_len``), one output token each, all arriving at once.

    Served before the measured runs, each brings the engine a step of that many tokens once.  On a CPU
    engine a token count seen for the first time costs building its kernels (oneDNN primitives are made
    per shape and cached): served prefills of the tiny llama of lengths it had not seen took 6.6 ms per
    100 tokens, the same lengths served again 4.4–4.8 ms.  A long-running deployment, and every point of
    the latency table (measured after its own warm-ups), has paid that once; a verification that did not
    warm the counts its trace schedules would compare the table with a cold engine."""
    out = []
    longest = max(1, max_model_len - 1)
    for m in sorted(set(counts)):
        if m < 1:
            continue
        parts = [longest] * (m // longest) + ([m % longest] if m % longest else [])
        out.append(Trace(tuple(TraceRequest(f"s{m}.{i}", n, 1, arrival_time=0.0) for i, n in enumerate(parts)),
                         "arrival_time"))  # fmt: skip
    return out
