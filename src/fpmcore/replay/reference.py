"""The Python reference of the replay engine (06 R-11 … R-31).

It mirrors ``csrc/fpm_replay.c`` phase by phase, under the same names, and is
the oracle of the differential tests (C and the reference must give
identical records); ``FPM_PUREPYTHON=1`` selects it at run time.  Unlike the
C engine it can take the model's align-stop rule as a callable (the
``fpm_align_stop`` hook, 06 R-§4); the built-in rule is
:func:`fpmcore.replay.align.align_stop`.

One step (R-13) is :meth:`ReferenceEngine.step`:

* ``enqueue_arrivals`` — R-25, R-12 and vLLM's front-end queue limits;
* ``begin_step`` — the step's budget, long-prefill cap and prefill cadence;
* ``schedule_running`` — R-14, R-15 (FCFS or priority preemption);
* ``schedule_waiting`` — R-18 … R-22;
* ``step_duration`` — R-24, R-31;
* ``finish_step`` — R-23;
* ``record_step`` — R-34 and the R-35 totals.

The pools are :class:`fpmcore.replay.pool.BlockCountPool` (prefix caching
off) and :class:`fpmcore.replay.prefix.PrefixCachingPool`.  The reference
executes every step; the C engine jumps over idle periods and decode-only
stretches when no step record is asked for, and must agree with it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from fpmcore.host.stage_hooktypes import AlignStopQuery
from fpmcore.replay.align import align_stop
from fpmcore.replay.latency import step_time
from fpmcore.replay.model import (
    ARRIVE_STEP,
    ERR_NO_PHASE,
    ERR_OVERSIZED,
    ERR_STALL,
    ERR_STEP_LIMIT,
    EV_ADMITTED,
    EV_FINISHED,
    EV_PREEMPTED,
    EV_REJECTED,
    KIND_CHUNK,
    KIND_CONV,
    KIND_FULL,
    KIND_MAMBA,
    KIND_WINDOW,
    REJ_FINAL_FORWARD,
    REJ_INPUT_SEQUENCE,
    REJ_PROMPT,
    REJ_QUEUED_REQS,
    REJ_QUEUED_TOKENS,
    ST_FINISHED,
    ST_REJECTED,
    RawChunk,
    RawError,
    RawRequest,
    RawResult,
    RawStep,
    RawTotals,
    ReplayConfig,
    ReplayRequest,
    columns_of,
)
from fpmcore.replay.pool import BlockCountPool
from fpmcore.replay.prefix import PrefixCachingPool

AlignStopFn = Callable[[AlignStopQuery], int]
NAN = math.nan


class Request:
    """One request of the replay (R-11) with its holdings."""

    def __init__(self, idx: int, r: ReplayRequest, ngroups: int) -> None:
        self.idx = idx
        self.P = r.prompt_len
        self.O = r.output_len
        self.priority = r.priority
        self.g = 0
        self.c = 0
        self.status = 0
        self.preemptions = 0
        self.first_sched = NAN
        self.first_token = NAN
        self.finish = NAN
        self.arrival_time = NAN
        self.arrival_seq = 0
        self.hit = 0
        self.admitted_once = False
        self.prefill_chunk = False
        self.junction = 0
        self.rej = (0, 0, 0)
        self.pc: Any = None
        BlockCountPool.attach(self, ngroups)

    @property
    def len(self) -> int:
        return self.P + self.g

    def record(self) -> RawRequest:
        return RawRequest(
            status=self.status, reject_reason=self.rej[0], reject_a=self.rej[1], reject_b=self.rej[2],
            arrival_time=self.arrival_time, first_scheduled_time=self.first_sched, first_token_time=self.first_token,
            finish_time=self.finish, output_tokens=self.g, preemptions=self.preemptions, prefix_hit_tokens=self.hit,
            request=self.idx,
        )  # fmt: skip


class ReferenceEngine:
    """One replay, advanced step by step (06 §2–§5)."""

    def __init__(
        self,
        cfg: ReplayConfig,
        requests: tuple[ReplayRequest, ...],
        arrival_mode: int,
        align_stop_fn: AlignStopFn | None = None,
    ) -> None:
        self.cfg = cfg
        self.reqs_in = requests
        self.mode = arrival_mode
        at_tokens = cfg.rules.align_last_stop_at_tokens
        self.align_fn = align_stop_fn or (lambda q: align_stop(q, at_tokens))
        self.G = len(cfg.groups)
        self.block_mode = cfg.block_mode
        self.usable = cfg.usable_blocks
        self.cap = cfg.capacity_bytes
        mambas = [g for g in cfg.groups if g.kind == KIND_MAMBA]
        self.pc = cfg.prefix_caching
        self.split_on = cfg.prefix_caching and bool(mambas)
        self.ckpt_all = bool(mambas) and all(g.checkpoint_blocks >= 1 for g in mambas)
        self.first_align = mambas[0].checkpoint_alignment if mambas else 0
        attn = [g for g in cfg.groups if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV, KIND_CHUNK)]
        self.sched_block = attn[0].block if attn else (mambas[0].block if mambas else 1)
        self.hash_block = cfg.hash_block_size or self.sched_block
        self.token_budget = cfg.token_budget
        limit = cfg.max_num_scheduled_tokens or cfg.max_num_batched_tokens
        if cfg.long_prefill_token_threshold > 0:
            limit = min(limit, cfg.long_prefill_token_threshold)
        self.split_limit = limit
        self.active_limit = cfg.max_num_active_seqs or cfg.max_num_seqs
        self.interval = max(cfg.prefill_schedule_interval, 1)
        self.priority = cfg.scheduling_policy == "priority"
        self.pool = BlockCountPool(cfg, self.pc, self.hash_block)
        self.prefix = (
            PrefixCachingPool(cfg, requests, self.usable, self.sched_block, self.hash_block) if self.pc else None
        )
        self.reqs = [Request(i, r, self.G) for i, r in enumerate(requests)]
        order = sorted(
            range(len(self.reqs)),
            key=(lambda i: (requests[i].arrival_step, i)) if arrival_mode == ARRIVE_STEP
            else (lambda i: (requests[i].arrival_time, i)),
        )  # fmt: skip
        self.pending: deque[int] = deque(order)
        self.waiting: deque[Request] = deque()  # FCFS
        self.heap: list[tuple[int, int, Request]] = []  # priority: (priority, arrival_seq, request)
        self.running: list[Request] = []
        self.k = 0
        self.t = 0.0
        self.fixed = cfg.fixed_step_seconds
        self.executed = 0
        self.last_prefill_step = -self.interval
        self.capacity_bound = False
        self.unfinished = 0
        self.queued_tokens = 0
        self.seq = 0
        self.error: RawError | None = None
        self.ended = not requests
        self.nsteps = 0
        self.tot = [0.0, 0.0, 0, 0, 0, 0, 0]  # first_t_start, last_t_end, preemptions, peaks ×3, extrapolated

    # ---- the waiting queue ---------------------------------------------------

    def waiting_len(self) -> int:
        return len(self.heap) if self.priority else len(self.waiting)

    def waiting_push_back(self, r: Request) -> None:
        if self.priority:
            heappush(self.heap, (r.priority, r.arrival_seq, r))
        else:
            self.waiting.append(r)

    def waiting_push_front(self, r: Request) -> None:
        if self.priority:
            heappush(self.heap, (r.priority, r.arrival_seq, r))
        else:
            self.waiting.appendleft(r)

    def waiting_head(self) -> Request:
        return self.heap[0][2] if self.priority else self.waiting[0]

    def waiting_pop(self) -> None:
        if self.priority:
            heappop(self.heap)
        else:
            self.waiting.popleft()

    # ---- pool dispatch -----------------------------------------------------------

    def used(self) -> tuple[int, int]:
        """(used blocks, used bytes) of the pool (R-34)."""
        if self.prefix is not None:
            u = self.usable - self.prefix.free_count()
            return u, u * self.cfg.page
        return self.pool.used_blocks, self.pool.used_bytes

    def held_counts(self, r: Request) -> tuple[int, ...]:
        owner = self.prefix if self.prefix is not None else self.pool
        return tuple(owner.held(r, gi) for gi in range(self.G))

    def projected_bytes(self, r: Request, c: int, a: int, hits: bool) -> int:
        """R-9: bytes of ``r``'s complete holding for ``c → a``."""
        if self.prefix is not None:
            return self.prefix.need(r, c, a, hits)[1] * self.cfg.page
        return self.pool.project(r, c, a)[2]

    def try_allocate(self, r: Request, c: int, a: int, watermark: int, hits: bool) -> bool:
        """R-7: release first, project, check, commit all groups or nothing."""
        before = self.cfg.rules.check_before_release
        if self.prefix is not None:
            if not before:
                self.prefix.release_skipped(r, c)
            need, _ = self.prefix.need(r, c, a, hits)
            if need > self.prefix.free_count() - watermark:
                return False
            if before:
                self.prefix.release_skipped(r, c)
            self.prefix.commit(r, c, a, hits)
            return True
        pool = self.pool
        if not before:
            pool.release_skipped(r, c)
        new_blocks, new_bytes, _ = pool.project(r, c, a)
        if self.block_mode:
            if new_blocks > self.usable - pool.used_blocks - watermark:
                return False
        elif new_bytes > self.cap - pool.used_bytes:
            return False
        if before:
            pool.release_skipped(r, c)
        pool.commit(r, c, a)
        return True

    def release_all(self, r: Request) -> None:
        """R-8: drop every block of ``r`` (idempotent)."""
        if self.prefix is not None:
            self.prefix.release_all(r)
        else:
            self.pool.release_all(r)

    def split(self, r: Request, start: int, n: int) -> int:
        """04 G-2 … G-6 with the deployment's Mamba groups (R-§4)."""
        if not self.split_on:
            return n
        q = AlignStopQuery(
            start=start, num_new_tokens=n, prompt_len=r.P, num_tokens=r.len, block_size=self.sched_block,
            hash_block_size=self.hash_block, max_num_batched_tokens=self.split_limit,
            checkpoint_alignment=self.first_align if (self.ckpt_all and self.first_align > 0) else None,
            junction=r.junction,
        )  # fmt: skip
        return int(self.align_fn(q))

    # ---- events ------------------------------------------------------------------

    def event(self, kind: int, r: Request) -> None:
        self.events.append((kind, r.idx))

    def complete(self, r: Request) -> None:
        """A request completes: it leaves the front end's counts (max_num_queued_*)."""
        self.done.append(r)
        self.unfinished -= 1
        if r.g == 0:
            self.queued_tokens -= r.P

    def reject(self, r: Request, reason: int, a: int, b: int) -> None:
        r.status = ST_REJECTED
        r.rej = (reason, a, b)
        self.event(EV_REJECTED, r)

    # ---- the phases ---------------------------------------------------------------

    def enqueue_arrivals(self) -> None:
        """R-25, R-12, and vLLM's front-end admission (``max_num_queued_reqs``, ``max_num_queued_tokens``)."""
        cfg = self.cfg
        while self.pending:
            ri = self.reqs_in[self.pending[0]]
            if self.mode == ARRIVE_STEP:
                if ri.arrival_step > self.k:
                    break
            elif ri.arrival_time > self.t_start:
                break
            r = self.reqs[self.pending.popleft()]
            self.seq += 1
            r.arrival_time = self.t_start if self.mode == ARRIVE_STEP else ri.arrival_time
            if cfg.max_num_queued_reqs is not None and self.unfinished + 1 > cfg.max_num_queued_reqs:
                self.reject(r, REJ_QUEUED_REQS, self.unfinished, cfg.max_num_queued_reqs)
            elif cfg.max_num_queued_tokens is not None and self.queued_tokens >= cfg.max_num_queued_tokens:
                self.reject(r, REJ_QUEUED_TOKENS, self.queued_tokens, cfg.max_num_queued_tokens)
            elif r.P >= cfg.max_model_len:
                self.reject(r, REJ_PROMPT, r.P, cfg.max_model_len)
            else:
                r.arrival_seq = self.seq
                self.unfinished += 1
                self.queued_tokens += r.P
                self.waiting_push_back(r)
                continue
            self.done.append(r)

    def begin_step(self) -> None:
        """R-13.2: the step's budget, long-prefill cap and prefill cadence."""
        cfg = self.cfg
        self.budget = self.token_budget
        self.preempted = self.prefill_scheduled = self.prefill_admitted = False
        self.scheduled: list[list[Any]] = []  # [request, tokens, computed_before]
        eligible = len(self.running) + self.waiting_len()
        contended = eligible > 1 or cfg.rules.long_prefill_cap_always
        self.threshold = cfg.long_prefill_token_threshold if contended else 0
        if self.threshold > 0 and cfg.long_prefill_token_threshold_adaptive and eligible > 0:
            self.threshold = max(self.threshold, cfg.max_num_batched_tokens // eligible)
        self.defer = (
            self.interval > 1
            and not self.capacity_bound
            and (self.executed + 1) - self.last_prefill_step < self.interval
            and any(not r.prefill_chunk for r in self.running)
        )
        if self.prefix is not None:
            self.prefix.new_step(self.k)

    def schedule(self, r: Request, n: int, c: int) -> None:
        self.scheduled.append([r, n, c])
        self.budget -= n

    def oversized(self, bytes_: int, n: int, c: int) -> None:
        self.error = RawError(ERR_OVERSIZED, (bytes_, n, c, self.cap, self.cfg.fixed_request_bytes))

    def victim(self) -> int:
        """R-15: the position in ``running`` of the preemption victim."""
        if not self.priority:
            return len(self.running) - 1
        return max(range(len(self.running)), key=lambda i: (self.running[i].priority, self.running[i].arrival_seq))

    def preempt(self, pos: int) -> Request:
        """R-15: preempt ``running[pos]`` (recompute) and push it back to waiting."""
        v = self.running.pop(pos)
        self.release_all(v)
        v.c = 0
        v.preemptions += 1
        self.waiting_push_front(v)
        self.event(EV_PREEMPTED, v)
        self.preempted = True
        return v

    def unschedule(self, v: Request) -> bool:
        """Drop a request preempted in this step from the step's entries (priority policy); was it scheduled?"""
        for s, entry in enumerate(self.scheduled):
            if entry[0] is v:
                self.budget += entry[1]
                del self.scheduled[s]
                return True
        return False

    def schedule_running(self) -> None:
        """R-14, R-15."""
        i = 0
        while i < len(self.running) and self.budget > 0:
            r = self.running[i]
            if self.defer and r.prefill_chunk:
                i += 1
                continue
            c = r.c
            n = r.len - c
            if 0 < self.threshold < n:
                n = self.threshold
            n = min(n, self.budget)
            n = self.split(r, c, n)
            if n == 0:
                i += 1
                continue
            hb = self.projected_bytes(r, c, c + n, False)
            if hb > self.cap:
                self.oversized(hb, n, c)
                return
            ok = self_preempted = False
            while True:
                if self.try_allocate(r, c, c + n, 0, False):
                    ok = True
                    break
                pos = self.victim()
                was_scheduled = self.unschedule(self.running[pos])
                if pos < i and (was_scheduled or not self.cfg.rules.priority_shift_if_scheduled):
                    i -= 1
                v = self.preempt(pos)
                if v is r:
                    self_preempted = True
                    break
            if not ok:
                if self_preempted and self.priority and not self.cfg.rules.priority_self_preemption_stops:
                    continue
                return
            self.prefill_scheduled |= r.prefill_chunk
            self.schedule(r, n, c)
            i += 1

    def schedule_waiting(self) -> None:
        """R-18 … R-22."""
        cfg = self.cfg
        while self.budget > 0 and self.waiting_len() and len(self.running) < self.active_limit:
            r = self.waiting_head()
            h, same_step = 0, False
            if self.prefix is not None:
                h, same_step = self.prefix.lookup(r)
            # requests that can never fit
            nb = self.pool.fresh_bytes(r.len - 1, r.len)
            rej = None
            if nb > self.cap:
                rej = (REJ_FINAL_FORWARD, nb)
            elif cfg.reserve_full_isl:
                ib = self.pool.input_need(r, 0)[1]
                if ib > self.cap:
                    rej = (REJ_INPUT_SEQUENCE, ib)
            if rej is not None:
                self.waiting_pop()
                self.reject(r, rej[0], rej[1], self.cap)
                self.complete(r)
                continue
            if self.defer and h < r.len - 1:
                break
            n = r.len - h
            if 0 < self.threshold < n:
                n = self.threshold
            if not cfg.enable_chunked_prefill and n > self.budget:
                break
            n = min(n, self.budget)
            n = self.split(r, h, n)
            if n == 0:
                break
            hb = self.projected_bytes(r, h, h + n, True)
            if hb > self.cap:
                self.oversized(hb, n, h)
                return
            wm = cfg.watermark_blocks if self.running else 0
            if same_step:
                break
            if self.prefix is not None and cfg.reserve_full_isl:
                if self.prefix.input_need(r, h) + wm > self.prefix.free_count():
                    break
            elif cfg.reserve_full_isl:
                ib_blocks, ib_bytes = self.pool.input_need(r, h)
                if self.block_mode:
                    if ib_blocks + wm > self.usable - self.pool.used_blocks:
                        break
                elif ib_bytes > self.cap - self.pool.used_bytes:
                    break
            if not self.try_allocate(r, h, h + n, wm if self.block_mode else 0, True):
                break
            self.waiting_pop()
            self.running.append(r)
            r.c = h
            if not r.admitted_once:
                r.admitted_once = True
                r.hit = h
                r.first_sched = self.t_start
            self.prefill_admitted |= h < r.len - 1
            self.event(EV_ADMITTED, r)
            self.schedule(r, n, h)
        if not self.defer:
            self.capacity_bound = self.waiting_len() > 0

    def step_duration(self) -> bool:
        """R-24, R-26, R-31: the step's FPM coordinates and duration; False when the table lacks a phase."""
        np_ = pt = pkv = nd = dkv = 0
        for r, n, cb in self.scheduled:
            if n == 1 and cb == r.len - 1 and r.g >= 1:
                nd += 1
                dkv += cb
            else:
                np_ += 1
                pt += n
                pkv += cb
        self.coords = (np_, pt, pkv, nd, dkv)
        if self.fixed is not None:
            self.duration, self.extrapolated = self.fixed, False
        elif not self.scheduled:
            self.duration, self.extrapolated = 0.0, False
        else:
            assert self.cfg.table is not None
            res = step_time(self.cfg.table, np_, pt, pkv, nd, dkv)
            if isinstance(res, int):
                self.error = RawError(ERR_NO_PHASE, (res,))
                return False
            self.duration, self.extrapolated = res
        self.t_end = self.t_start + self.duration
        return True

    def finish_step(self) -> None:
        """R-23: advance computed tokens, sample, finish and release."""
        L = self.cfg.max_model_len
        for r, n, cb in self.scheduled:
            length = r.len
            r.prefill_chunk = cb + n < length
            r.c += n
            if r.c == length:
                r.g += 1
                if r.g == 1:
                    r.first_token = self.t_end
                    self.queued_tokens -= r.P
                if r.g >= r.O or length + 1 >= L:
                    r.finish = self.t_end
                    r.status = ST_FINISHED
                    self.release_all(r)
                    self.event(EV_FINISHED, r)
                    self.done.append(r)
                    self.unfinished -= 1
        self.running = [r for r in self.running if r.status != ST_FINISHED]

    def record_step(self, used_sched: tuple[int, int], with_step: bool) -> RawStep | None:
        """R-34 (when ``with_step``) and the R-35 totals of the step just run."""
        ub, uy = self.used()
        np_, pt, pkv, nd, dkv = self.coords
        tot = self.tot
        if self.nsteps == 0:
            tot[0] = self.t_start
        tot[1] = self.t_end
        tot[2] += sum(1 for kind, _ in self.events if kind == EV_PREEMPTED)
        finished = sum(1 for kind, _ in self.events if kind == EV_FINISHED)
        tot[3] = max(tot[3], len(self.running) + finished)
        tot[4] = max(tot[4], used_sched[1])
        tot[5] = max(tot[5], used_sched[0])
        tot[6] += 1 if self.extrapolated else 0
        self.nsteps += 1
        if not with_step:
            return None
        return RawStep(
            step=self.k, t_start=self.t_start, t_end=self.t_end, duration_s=self.duration,
            extrapolated=self.extrapolated, scheduled=tuple((r.idx, n, cb) for r, n, cb in self.scheduled),
            num_prefill_requests=np_, sum_prefill_tokens=pt, sum_prefill_kv_tokens=pkv, num_decode_requests=nd,
            sum_decode_kv_tokens=dkv, events=tuple(self.events), running=len(self.running),
            waiting=self.waiting_len(), used_bytes_scheduled=used_sched[1], used_bytes_end=uy,
            used_blocks_scheduled=used_sched[0], used_blocks_end=ub,
            held=tuple((r.idx, self.held_counts(r)) for r in self.running),
        )  # fmt: skip

    # ---- one step ----------------------------------------------------------------

    def step(self, with_step: bool = True) -> RawStep | None:
        """R-13: one scheduler call; its record (``None`` when not asked for, or when the replay stopped in it)."""
        self.events: list[tuple[int, int]] = []
        self.done: list[Request] = []
        if self.mode != ARRIVE_STEP and not self.waiting_len() and not self.running:
            self.t = max(self.t, self.reqs_in[self.pending[0]].arrival_time)
        self.t_start = self.k * self.fixed if self.fixed is not None else self.t
        if self.nsteps >= self.cfg.max_steps:
            self.error = RawError(ERR_STEP_LIMIT, (self.cfg.max_steps, self.k))
            self.ended = True
            return None
        self.enqueue_arrivals()
        self.begin_step()
        self.schedule_running()
        if self.error is None and not self.preempted:
            self.schedule_waiting()
        if self.error is None:
            used_sched = self.used()
            if self.scheduled:
                self.executed += 1
            if self.interval > 1 and (self.prefill_scheduled or self.prefill_admitted):
                self.last_prefill_step = self.executed
            if self.step_duration():
                stalled = not self.scheduled and not self.preempted and (self.running or self.waiting_len())
                self.finish_step()
                rec = self.record_step(used_sched, with_step)
                self.k += 1
                self.t = self.t_end
                if stalled:
                    if not self.pending:
                        self.error = RawError(ERR_STALL, (self.k - 1, self.t_start, len(self.running),
                                                          self.waiting_len()))  # fmt: skip
                    elif self.mode != ARRIVE_STEP:
                        self.t = max(self.t, self.reqs_in[self.pending[0]].arrival_time)
                if self.error is not None or not (self.pending or self.waiting_len() or self.running):
                    self.ended = True
                return rec
        self.ended = True
        return None

    def totals(self) -> RawTotals:
        t = self.tot
        return RawTotals(
            first_t_start=t[0],
            last_t_end=t[1],
            preemptions=int(t[2]),
            peak_running=int(t[3]),
            peak_used_bytes=int(t[4]),
            peak_used_blocks=int(t[5]),
            extrapolated_steps=int(t[6]),
        )

    def advance(self, max_steps: int, with_steps: bool = True) -> RawChunk:
        """Run up to ``max_steps`` more steps (fewer when the replay ends): the chunk's records."""
        steps: list[RawStep] = []
        done: list[RawRequest] = []
        n = 0
        while not self.ended and n < max_steps:
            rec = self.step(with_steps)
            done.extend(r.record() for r in self.done)
            if rec is not None:
                steps.append(rec)
            n += 1
        return RawChunk(
            steps=columns_of(steps, self.G) if with_steps else None, done=tuple(done), steps_total=self.nsteps,
            completed_total=sum(1 for r in self.reqs if r.status), ended=self.ended, error=self.error,
            totals=self.totals(),
        )  # fmt: skip

    def run(self) -> RawResult:
        """The whole trace with every step record."""
        steps: list[RawStep] = []
        while not self.ended:
            rec = self.step(True)
            if rec is not None:
                steps.append(rec)
        return RawResult(steps=tuple(steps), requests=tuple(r.record() for r in self.reqs), error=self.error,
                         totals=self.totals())  # fmt: skip


def run_reference(
    cfg: ReplayConfig,
    requests: tuple[ReplayRequest, ...],
    arrival_mode: int,
    align_stop_fn: AlignStopFn | None = None,
) -> RawResult:
    """Run a whole trace with the reference engine."""
    return ReferenceEngine(cfg, requests, arrival_mode, align_stop_fn).run()
