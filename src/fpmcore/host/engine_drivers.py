"""The values of the engine-driver hooks: ``fpm_measurement_driver`` (``fpm collect``) and
``fpm_serving_engine`` (``fpm verify``).

A runtime plugin whose release runs an engine here gives the host a
:class:`MeasurementDriver` (the producer record and how to start a
:class:`MeasurementEngine`, which runs prompts and reports every step as an
:class:`EngineStep` of a :class:`StepWorkload`) and a :class:`ServingDriver`
(how to start a :class:`ServingEngine`, which serves :class:`ServeRequest` s
open loop and reports a :class:`Serving`).  Like every hook value they are
``attrs`` frozen classes the host checks and never mutates; the other hook
values are in :mod:`fpmcore.host.hooktypes`.  Plugins import them from
:mod:`fpmcore.plugin_api`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from fpmcore.documents.field_helpers import as_tuple, nonblank

if TYPE_CHECKING:
    from fpmcore.collect.contention import Contention  # an annotation only: no document holds a step


# --------------------------------------------------------------------------
# measurement engines (fpm collect)
# --------------------------------------------------------------------------


def _count(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"{attribute.name} must be an integer >= 0; got {value!r}")


@attrs.frozen
class StepWorkload:
    """What one engine step computed, in the counts of a forward-pass metric (05 §2.2).

    ``sum_prefill_kv_tokens`` counts the tokens the prefill requests already
    had in the KV cache before the step (prefix hits plus earlier chunks);
    ``sum_decode_kv_tokens`` the computed tokens of the decode requests before
    the step.  The variances are the population variances of the prefill
    lengths and of the decode contexts.
    """

    num_prefill_requests: int = attrs.field(default=0, validator=_count)
    sum_prefill_tokens: int = attrs.field(default=0, validator=_count)
    var_prefill_length: float = 0.0
    sum_prefill_kv_tokens: int = attrs.field(default=0, validator=_count)
    num_decode_requests: int = attrs.field(default=0, validator=_count)
    sum_decode_kv_tokens: int = attrs.field(default=0, validator=_count)
    var_decode_kv_tokens: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The ``scheduled_requests`` object of an FPM."""
        return attrs.asdict(self)


@attrs.frozen
class EngineStep:
    """One non-empty step of a measurement engine.

    ``start`` and ``end`` are the process-local monotonic clock (seconds) around
    the whole engine step (the runtime plugin documents where exactly, in its
    :attr:`ProducerRecord.timing_boundary`); ``scheduled`` what the step
    computed; ``queued`` what waited (prefill requests waiting, decode requests
    preempted); ``contention`` what the machine did to the step
    (:mod:`fpmcore.collect.contention`: read by the runtime plugin with
    :func:`fpmcore.collect.contention.sampler` right outside ``start`` … ``end``;
    ``None`` where it cannot be read, which makes the step unusable as a
    measured sample).
    """

    start: float
    end: float
    scheduled: StepWorkload
    queued: StepWorkload = attrs.field(factory=StepWorkload)
    contention: Contention | None = None

    @property
    def wall_time(self) -> float:
        return self.end - self.start


@attrs.frozen
class EngineRun:
    """What :meth:`MeasurementEngine.run` observed for one batch of requests.

    ``steps``: every non-empty engine step from the admission of the first
    request until the last one finished, in order (each one forward);
    ``cached_tokens``: per prompt, in prompt order, the tokens its first
    admission found in the prefix cache (vLLM's ``num_cached_tokens``);
    ``output_tokens``: per prompt, the tokens it generated.
    """

    steps: tuple[EngineStep, ...] = attrs.field(converter=as_tuple)
    cached_tokens: tuple[int, ...] = attrs.field(converter=as_tuple)
    output_tokens: tuple[int, ...] = attrs.field(converter=as_tuple)


@attrs.frozen
class EngineFacts:
    """What a started measurement engine says about itself, read from its own objects.

    ``runtime`` the exact pin of the running runtime (``vllm==0.32.0``);
    ``vocab_size`` and ``excluded_token_ids`` the token ids prompts may use
    (``[0, vocab_size)`` minus the special tokens); the scheduler's
    ``block_size``, ``hash_block_size``, ``max_num_batched_tokens``,
    ``max_num_seqs``, ``max_model_len`` and ``prefix_caching``;
    ``kv_cache_bytes`` the pool's usable bytes (the null block excluded, like
    a profile's ``runtime_memory.kv_cache_bytes``); ``serving_config`` what the
    artifact records of the launch (JSON-ready); ``cache_block_sizes`` each
    cache group's block in tokens, in the engine's group order (empty: not
    reported).

    ``block_size`` is the **scheduler block** (02 I-96: the one group's block,
    else the lcm of the group blocks; vLLM's ``Scheduler.block_size``), not
    the block a request grows by: a Mamba hybrid without prefix caching has
    groups of 2,048 (Mamba) and 128 (attention) tokens and a scheduler block
    of 2,048.  ``hash_block_size`` is the block prefix hashes cover (I-97;
    the scheduler block when nothing is hashed).
    """

    runtime: str = attrs.field(validator=nonblank)
    vocab_size: int
    excluded_token_ids: tuple[int, ...] = attrs.field(converter=as_tuple)
    block_size: int
    hash_block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    prefix_caching: bool
    kv_cache_bytes: int
    serving_config: Mapping[str, Any] = attrs.field(factory=dict)
    cache_block_sizes: tuple[int, ...] = attrs.field(default=(), converter=as_tuple)


@attrs.frozen
class ProducerFile:
    """One installed file a producer relies on: its path (as the runtime plugin names it) and SHA-256."""

    path: str = attrs.field(validator=nonblank)
    sha256: str = attrs.field(validator=nonblank)


@attrs.frozen
class ProducerRecord:
    """Who measures: the producer a runtime plugin drives an engine with (05 §7.1, for ``fpm collect``).

    ``name`` the producer's name (``measurement_protocol.producer.name``);
    ``runtime`` the exact runtime pin it runs on; ``plugin`` the runtime
    plugin's id; ``timing_boundary`` what the wall time of a step spans;
    ``files`` the installed files the producer relies on, each with the
    SHA-256 it must have: the runtime's own source files whose behaviour the
    producer reads (scheduler, KV cache manager, model runner, …) and the
    producer's own module.  The host compares the files recorded in an
    artifact with this record at validation (A-21) without importing the
    runtime.
    """

    name: str = attrs.field(validator=nonblank)
    runtime: str = attrs.field(validator=nonblank)
    plugin: str = attrs.field(validator=nonblank)
    timing_boundary: str = attrs.field(validator=nonblank)
    files: tuple[ProducerFile, ...] = attrs.field(converter=as_tuple)

    def files_json(self) -> list[dict[str, str]]:
        return [{"path": f.path, "sha256": f.sha256} for f in self.files]


@attrs.frozen
class EngineOptions:
    """How ``fpm collect`` asks a runtime plugin to start its engine: the deployment the plan was made for.

    ``max_model_len``, ``max_num_batched_tokens``, ``max_num_seqs``,
    ``prefix_caching``, ``kv_cache_bytes`` (usable pool bytes, the null
    block excluded) and ``kv_cache_page_bytes`` (the pool page) are the
    profile deployment's; ``dtype`` the model dtype, as fpmcore labels it
    (``float32``, ``bfloat16``, ``half``; ``None``: the model's own);
    ``seed`` the engine's sampling seed; ``launch`` runtime-specific launch
    settings the probe recorded (JSON-ready; the runtime plugin documents what
    it reads).
    """

    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    prefix_caching: bool
    kv_cache_bytes: int | None = None
    kv_cache_page_bytes: int | None = None
    dtype: str | None = None
    seed: int = 0
    launch: Mapping[str, Any] = attrs.field(factory=dict)


@runtime_checkable
class MeasurementEngine(Protocol):
    """A started engine a producer measures with (``fpm collect``).

    The engine runs batches of requests with real token ids through the
    runtime's own scheduler and model runner and reports every step; it knows
    nothing of points, repetitions or artifacts, which are the host's
    measurement protocol (:mod:`fpmcore.collect`).
    """

    facts: EngineFacts

    def run(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> EngineRun:
        """Admit one request per prompt at once (greedy sampling, exactly ``max_tokens`` generated tokens,
        end-of-sequence ignored), step the engine until all finished, and report every step."""
        ...

    def close(self) -> None:
        """Shut the engine down and release what it holds."""
        ...


@attrs.frozen
class MeasurementDriver:
    """The answer of ``fpm_measurement_driver``: a runtime plugin's producer and how to start its engine.

    ``producer`` is known without importing the runtime (validation needs it);
    ``start(model_dir, options)`` imports and starts the runtime and returns a
    :class:`MeasurementEngine`.
    """

    producer: ProducerRecord
    start: Callable[[str, EngineOptions], MeasurementEngine] = attrs.field(validator=attrs.validators.is_callable())


# --------------------------------------------------------------------------
# serving engines (fpm verify)
# --------------------------------------------------------------------------


def _ints(items: Iterable[int]) -> tuple[int, ...]:
    return tuple(items)


@attrs.frozen
class ServeRequest:
    """One request a serving engine admits at its arrival time.

    ``arrival_time`` seconds from the start of the serving; ``prompt`` the
    real token ids; ``output_len`` the tokens to generate exactly (greedy,
    end-of-sequence ignored).
    """

    request_id: str = attrs.field(validator=nonblank)
    arrival_time: float
    prompt: tuple[int, ...] = attrs.field(converter=_ints)
    output_len: int


@attrs.frozen
class ServedRequest:
    """What a serving engine observed of one request, in seconds from the start of the serving.

    ``arrival_time`` when it was due (the :class:`ServeRequest`'s);
    ``admitted`` when the engine was given it; ``first_token`` and ``finish``
    the ends of the steps that returned its first and its last token;
    ``output_tokens`` the tokens it generated.
    """

    request_id: str
    arrival_time: float
    admitted: float
    first_token: float
    finish: float
    output_tokens: int

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival_time

    @property
    def e2e(self) -> float:
        return self.finish - self.arrival_time

    @property
    def tpot(self) -> float | None:
        """``(finish − first token) / (tokens − 1)``; ``None`` for a single token."""
        n = self.output_tokens
        return (self.finish - self.first_token) / (n - 1) if n > 1 else None


@attrs.frozen
class Serving:
    """What :meth:`ServingEngine.serve` observed: every request and every non-empty step.

    ``steps`` are :class:`EngineStep` values whose ``start`` and ``end`` are
    seconds from the start of the serving and whose ``contention`` was read
    around each step with a cheap sampler
    (``fpmcore.collect.contention.sampler(precise=False)``), ``None`` where it cannot
    be read.
    """

    requests: tuple[ServedRequest, ...] = attrs.field(converter=as_tuple)
    steps: tuple[EngineStep, ...] = attrs.field(converter=as_tuple)


@runtime_checkable
class ServingEngine(Protocol):
    """A started engine that serves a trace open loop in wall-clock time (``fpm verify``)."""

    facts: EngineFacts

    def serve(self, requests: Sequence[ServeRequest]) -> Serving:
        """Serve ``requests`` from an empty prefix cache: add each when its arrival time has passed, step the
        engine while a request is unfinished, wait for the next arrival when none is; report every request and
        every non-empty step."""
        ...

    def close(self) -> None:
        """Shut the engine down and release what it holds."""
        ...


@attrs.frozen
class ServingDriver:
    """The answer of ``fpm_serving_engine``: how to start a runtime's engine for serving.

    ``start(model_dir, options)`` imports and starts the runtime with the
    deployment's :class:`EngineOptions` and returns a :class:`ServingEngine`.
    """

    start: Callable[[str, EngineOptions], ServingEngine] = attrs.field(validator=attrs.validators.is_callable())
