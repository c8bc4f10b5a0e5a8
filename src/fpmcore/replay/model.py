"""Value types of the replay engine (06 R-1, R-27, R-32).

Both backends (the C library through :mod:`fpmcore.replay.engine` and the
pure-Python reference :mod:`fpmcore.replay.reference`) take the same
:class:`ReplayConfig` and :class:`ReplayRequest` tuple and return the same
:class:`RawResult`; :mod:`fpmcore.replay.records` turns it into the R-34/R-35
records.  Everything here is already validated: the checks with diagnostics
live in :mod:`fpmcore.replay.config`, :mod:`fpmcore.replay.trace` and
:mod:`fpmcore.replay.table`.
"""

from __future__ import annotations

from typing import Any

import attrs

# Group kinds as the C library numbers them (csrc/fpm_replay.h).
KIND_FULL = 0  #: attention without a window
KIND_WINDOW = 1  #: attention with a sliding window
KIND_CONV = 2  #: convolution (always windowed)
KIND_RING = 3  #: state group without checkpoint fields (ring buffer)
KIND_MAMBA = 4  #: state group with checkpoint fields (Mamba / KDA)

# Arrival modes.
ARRIVE_STEP = 0  #: step-exact arrivals (``arrival_step``, or timed with fixed step seconds)
ARRIVE_TIME = 1  #: timed arrivals with a latency table (idle periods are no steps)

# Error codes of a replay that stops.
ERR_OVERSIZED = 1
ERR_STALL = 2
ERR_NO_PHASE = 3

# Reject reasons.
REJ_PROMPT = 1
REJ_FINAL_FORWARD = 2
REJ_INPUT_SEQUENCE = 3

# Request status in the raw result.
ST_FINISHED = 1
ST_REJECTED = 2

# Event kinds of a step.
EV_ADMITTED = 0
EV_PREEMPTED = 1
EV_FINISHED = 2
EV_REJECTED = 3


@attrs.frozen
class GroupSpec:
    """One cache group as the engine sees it (06 R-1, R-4)."""

    name: str
    kind: int
    block: int
    page: int
    window: int = 0
    blocks_per_request: int = 0
    checkpoint_blocks: int = 0
    checkpoint_alignment: int = 0


@attrs.frozen
class LatencyTable:
    """A validated FPM table (R-27), sorted for lookup.

    ``prefill`` rows ``(batch_size, total_prefill_tokens, total_kv_read_tokens,
    wall_time_seconds)`` and ``decode`` rows ``(batch_size,
    total_kv_read_tokens, wall_time_seconds)``, each sorted by its
    coordinates.
    """

    prefill: tuple[tuple[int, int, int, float], ...]
    decode: tuple[tuple[int, int, float], ...]


@attrs.frozen
class ReplayConfig:
    """The replay configuration of R-1, already checked by R-3."""

    groups: tuple[GroupSpec, ...]
    capacity_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    enable_chunked_prefill: bool = True
    reserve_full_isl: bool = True
    watermark: float = 0.0
    prefix_caching: bool = False
    hash_block_size: int = 0
    fixed_step_seconds: float | None = 1.0
    table: LatencyTable | None = None

    @property
    def block_mode(self) -> bool:
        """R-2: every group page equals one common page."""
        return len({g.page for g in self.groups}) == 1

    @property
    def page(self) -> int:
        return self.groups[0].page

    @property
    def usable_blocks(self) -> int:
        """Pool blocks in block mode (0 in byte mode)."""
        return self.capacity_bytes // self.page if self.block_mode else 0

    @property
    def watermark_blocks(self) -> int:
        """R-7: ``floor(watermark × (usable_blocks + 1))``, as vLLM's ``int(w × num_blocks)``."""
        return int(self.watermark * (self.usable_blocks + 1)) if self.block_mode else 0

    @property
    def fixed_request_bytes(self) -> int:
        """R-5: bytes of the state groups, charged once per request."""
        return sum(
            g.blocks_per_request * g.page for g in self.groups if g.kind in (KIND_RING, KIND_MAMBA)
        )


@attrs.frozen
class ReplayRequest:
    """One trace request in engine form (R-32).

    ``arrival_step`` is the step it enters at (step-exact arrivals and timed
    arrivals with fixed step seconds); ``arrival_time`` is used with a
    latency table and timed arrivals.  ``origin`` and ``own_key`` describe
    the request's content (R-36; read only with prefix caching): tokens
    ``[0, q)`` carry the key of the first ``(upto, key)`` pair with
    ``q ≤ upto``, else ``own_key`` (:func:`fpmcore.replay.engine.origins`).
    """

    request_id: str
    prompt_len: int
    output_len: int
    arrival_step: int = 0
    arrival_time: float = 0.0
    origin: tuple[tuple[int, int], ...] = ()
    own_key: int = -1


@attrs.frozen
class RawStep:
    """One step as the engine reports it (R-34 before formatting)."""

    step: int
    t_start: float
    t_end: float
    duration_s: float
    extrapolated: bool
    scheduled: tuple[tuple[int, int, int], ...]  # (request index, tokens, computed_before)
    num_prefill_requests: int
    sum_prefill_tokens: int
    sum_prefill_kv_tokens: int
    num_decode_requests: int
    sum_decode_kv_tokens: int
    events: tuple[tuple[int, int], ...]  # (EV_*, request index) in order
    running: int
    waiting: int
    used_bytes_scheduled: int
    used_bytes_end: int
    used_blocks_scheduled: int
    used_blocks_end: int
    held: tuple[tuple[int, tuple[int, ...]], ...]  # (request index, blocks per group)


@attrs.frozen
class RawRequest:
    """One request's outcome (R-35 before formatting); times are NaN when unset."""

    status: int
    reject_reason: int
    reject_a: int
    reject_b: int
    arrival_time: float
    first_scheduled_time: float
    first_token_time: float
    finish_time: float
    output_tokens: int
    preemptions: int
    prefix_hit_tokens: int


@attrs.frozen
class RawError:
    """A replay that stopped (R-9, R-26, R-27): the code and its numbers."""

    code: int
    values: tuple[Any, ...]


@attrs.frozen
class RawResult:
    """What a backend returns: every step, every request, and the stop error if any."""

    steps: tuple[RawStep, ...]
    requests: tuple[RawRequest, ...]
    error: RawError | None = None
