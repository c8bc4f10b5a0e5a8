"""Pure-Python reference of the replay engine (06 R-4 … R-31).

It mirrors ``csrc/fpm_replay.c`` function by function and is the oracle of
the differential tests (C and Python must give identical records);
``FPMCORE_PUREPYTHON=1`` selects it at run time.  Unlike the C engine it can
take the model's align-stop rule as a callable (the ``fpm_align_stop`` hook,
06 R-§4); the built-in :func:`align_stop` is vLLM 0.33.0's
``_mamba_block_aligned_split`` (04 G-2 … G-6) and is what the C engine runs.

Modelled: block and byte mode pools (R-2), full, windowed, convolution, ring
and Mamba groups (R-4 … R-6) with allocate-or-nothing (R-7), release (R-8),
the oversized-chunk stop (R-9); the scheduler loop (R-11 … R-26); the FPM
latency model (R-27 … R-31).  With ``prefix_caching`` the Mamba groups run
in align mode (R-6), the align split applies and the pool keeps vLLM's block
identities (:mod:`fpmcore.replay.prefix`): content keys, hits, the same-step
rule, the free-queue order and eviction (R-36 … R-38).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from fpmcore.hooktypes import AlignStopQuery
from fpmcore.replay.model import (
    ARRIVE_STEP,
    ERR_NO_PHASE,
    ERR_OVERSIZED,
    ERR_STALL,
    EV_ADMITTED,
    EV_FINISHED,
    EV_PREEMPTED,
    EV_REJECTED,
    KIND_CONV,
    KIND_FULL,
    KIND_MAMBA,
    KIND_WINDOW,
    REJ_FINAL_FORWARD,
    REJ_INPUT_SEQUENCE,
    REJ_PROMPT,
    ST_FINISHED,
    ST_REJECTED,
    GroupSpec,
    LatencyTable,
    RawError,
    RawRequest,
    RawResult,
    RawStep,
    ReplayConfig,
    ReplayRequest,
)
from fpmcore.replay.prefix import PcReq, PrefixPool

AlignStopFn = Callable[[AlignStopQuery], int]
NAN = math.nan


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pos(x: int, u: int) -> int:
    """04 G-3: ``((x − 1) // u) × u`` floored at 0."""
    return max(((x - 1) // u) * u, 0)


def checkpoint_valid(start: int, end: int, ckpt: int, hash_block: int, block: int, align: int) -> bool:
    """vLLM 0.33.0 ``is_mamba_prefill_checkpoint_valid`` (04 G-4 conditions 3–7)."""
    if align <= 0:
        return False
    return (
        start % hash_block == 0
        and cdiv(end, block) - 2 > (start - 1) // block
        and start + hash_block <= ckpt
        and start < ckpt < end
        and (ckpt - start) % align == 0
    )


def align_stop(q: AlignStopQuery) -> int:
    """04 G-2 … G-6: the tokens of a proposed chunk that vLLM 0.33.0 schedules."""
    start, k, b = q.start, q.num_new_tokens, q.block_size
    prefill_end = max(q.prompt_len, q.num_tokens - 1)
    if start >= prefill_end:
        return k
    last_cache = pos(q.num_tokens, b)
    end = start + k
    ckpt_pos = pos(prefill_end, b)
    internal = (
        q.checkpoint_alignment is not None
        and end >= prefill_end
        and checkpoint_valid(start, end, ckpt_pos, q.hash_block_size, b, q.checkpoint_alignment)
    )
    if internal:
        last_cache = 0
    if end < prefill_end:
        aligned = end // b * b
        if aligned > start or b <= q.max_num_batched_tokens:
            end = aligned
    stops = [
        (start // b + 1) * b if start % b != 0 and not internal else 0,
        last_cache,
    ]
    j = q.junction
    if start < j < end:
        stops.append(j if q.junction_checkpoint and j <= q.prompt_len else start + (j - start) // b * b)
    inside = [s for s in stops if start < s < end]
    if inside:
        end = min(inside)
    return max(end - start, 0)


# --------------------------------------------------------------------------
# latency model (R-28 … R-31)
# --------------------------------------------------------------------------


class _Lin:
    """Collects the extrapolation flag of R-31 over ``lin`` calls."""

    def __init__(self) -> None:
        self.extrapolated = False

    def lin(self, x: float, knots: list[tuple[float, float]]) -> float:
        """R-28: linear interpolation inside, extrapolation outside."""
        m = len(knots)
        if m == 1:
            return knots[0][1]
        if x < knots[0][0] or x > knots[-1][0]:
            self.extrapolated = True
        if x <= knots[0][0]:
            i = 0
        elif x >= knots[-1][0]:
            i = m - 2
        else:
            i = 0
            while not (knots[i][0] <= x <= knots[i + 1][0]):
                i += 1
        xa, ya = knots[i]
        xb, yb = knots[i + 1]
        return ya + (yb - ya) * (x - xa) / (xb - xa)


def prefill_time(table: LatencyTable, b: int, t: int, k: int, lc: _Lin) -> float:
    """R-29 ``P(b, t, k)`` before the floor."""
    nbar = t / b
    pbar = k / b
    slices: list[tuple[float, float]] = []
    rows = table.prefill
    i = 0
    while i < len(rows):
        beta = rows[i][0]
        tt = beta * nbar
        kk = beta * pbar
        tknots: list[tuple[float, float]] = []
        while i < len(rows) and rows[i][0] == beta:
            tj = rows[i][1]
            kknots: list[tuple[float, float]] = []
            while i < len(rows) and rows[i][0] == beta and rows[i][1] == tj:
                kknots.append((float(rows[i][2]), rows[i][3]))
                i += 1
            tknots.append((float(tj), lc.lin(kk, kknots)))
        slices.append((float(beta), lc.lin(tt, tknots)))
    return lc.lin(float(b), slices)


def decode_time(table: LatencyTable, d: int, k: int, lc: _Lin) -> float:
    """R-30 ``D(d, k)`` before the floor."""
    cbar = k / d
    rows = table.decode
    slices: list[tuple[float, float]] = []
    i = 0
    while i < len(rows):
        beta = rows[i][0]
        kk = beta * cbar
        knots: list[tuple[float, float]] = []
        while i < len(rows) and rows[i][0] == beta:
            knots.append((float(rows[i][1]), rows[i][2]))
            i += 1
        slices.append((float(beta), lc.lin(kk, knots)))
    return lc.lin(float(d), slices)


def step_time(
    table: LatencyTable, nprefill: int, ptok: int, pkv: int, ndecode: int, dkv: int
) -> tuple[float, bool] | int:
    """R-31: the step duration and its flag, or the missing phase (0 prefill, 1 decode) as an int."""
    lc = _Lin()
    total = 0.0
    if nprefill > 0:
        if not table.prefill:
            return 0
        v = prefill_time(table, nprefill, ptok, pkv, lc)
        floor = min(r[3] for r in table.prefill)
        if v < floor:
            v = floor
            lc.extrapolated = True
        total += v
    if ndecode > 0:
        if not table.decode:
            return 1
        v = decode_time(table, ndecode, dkv, lc)
        floor = min(r[2] for r in table.decode)
        if v < floor:
            v = floor
            lc.extrapolated = True
        total += v
    return total, lc.extrapolated


# --------------------------------------------------------------------------
# pool (R-4 … R-9)
# --------------------------------------------------------------------------


class _Req:
    __slots__ = (
        "idx", "P", "O", "g", "c", "status", "preemptions", "lo", "hi", "state", "cols",
        "trans", "ckpt", "first_sched", "first_token", "finish", "arrival_time",
        "hit", "admitted_once", "rej",
    )

    def __init__(self, idx: int, r: ReplayRequest, ngroups: int) -> None:
        self.idx = idx
        self.P = r.prompt_len
        self.O = r.output_len
        self.g = 0
        self.c = 0
        self.status = 0
        self.preemptions = 0
        self.lo = [0] * ngroups  # first held block (windowed groups)
        self.hi = [0] * ngroups  # block table length (attention groups)
        self.state = [0] * ngroups  # held state blocks (ring / Mamba none) or running block (align)
        self.cols = [0] * ngroups  # align mode: block columns covered
        self.trans = [0] * ngroups  # align mode: transient block
        self.ckpt = [0] * ngroups  # align mode: checkpoint block
        self.first_sched = NAN
        self.first_token = NAN
        self.finish = NAN
        self.arrival_time = NAN
        self.hit = 0
        self.admitted_once = False
        self.rej = (0, 0, 0)

    @property
    def len(self) -> int:
        return self.P + self.g


class ReferenceEngine:
    """One replay run (06 §2–§5)."""

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
        self.align_fn = align_stop_fn or align_stop
        self.G = len(cfg.groups)
        self.block_mode = cfg.block_mode
        self.usable = cfg.usable_blocks
        self.cap = cfg.capacity_bytes
        self.align_mode = cfg.prefix_caching
        mambas = [g for g in cfg.groups if g.kind == KIND_MAMBA]
        self.has_mamba = bool(mambas)
        self.split = cfg.prefix_caching and self.has_mamba
        self.ckpt_all = bool(mambas) and all(g.checkpoint_blocks >= 1 for g in mambas)
        self.first_align = mambas[0].checkpoint_alignment if mambas else 0
        attn = [g for g in cfg.groups if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV)]
        self.sched_block = attn[0].block if attn else (mambas[0].block if mambas else 1)
        self.hash_block = cfg.hash_block_size or self.sched_block
        self.used_blocks = 0
        self.used_bytes = 0
        self.reqs = [_Req(i, r, self.G) for i, r in enumerate(requests)]
        self.pc = cfg.prefix_caching
        if self.pc:
            self.pool = PrefixPool(cfg, self.usable, self.sched_block, self.hash_block)
            self.pcr = [PcReq(self.G) for _ in requests]

    # ---- holdings ----------------------------------------------------------

    def _mamba_ckpt(self, r: _Req, g: GroupSpec, c: int, a: int) -> int:
        """R-6: does this Mamba group hold a checkpoint block for ``c → a``?"""
        if g.checkpoint_blocks < 1 or g.checkpoint_alignment <= 0:
            return 0
        prefill_end = max(r.P, r.len - 1)
        if a < prefill_end or cdiv(a, g.block) - 2 < 0:
            return 0
        q = pos(a, self.hash_block)
        return int(checkpoint_valid(c, a, q, self.hash_block, g.block, g.checkpoint_alignment))

    def _project(self, r: _Req, c: int, a: int) -> tuple[int, int, list[int]]:
        """R-4 … R-6: (new blocks, new bytes, held blocks per group) of ``c → a`` after R-7 step 1."""
        new_blocks = 0
        new_bytes = 0
        held: list[int] = []
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                hi = cdiv(a, g.block)
                n = max(hi - r.hi[gi], 0)
                h = max(hi, r.hi[gi])
            elif g.kind in (KIND_WINDOW, KIND_CONV):
                first = max(0, c - (g.window - 1)) // g.block
                hi = cdiv(a, g.block)
                lo = max(first, r.lo[gi]) if r.hi[gi] > 0 else first
                n = max(hi - max(r.hi[gi], lo), 0)
                h = max(hi, r.hi[gi]) - lo
            elif g.kind == KIND_MAMBA and self.align_mode:
                d = cdiv(a, g.block) - r.cols[gi]
                ck = self._mamba_ckpt(r, g, c, a)
                n = min(d, 1 + ck) if d > 0 else 0
                trans = 1 if (d > 0 and r.state[gi] > 0) else 0
                h = 1 + trans + ck
            else:
                n = g.blocks_per_request if r.state[gi] == 0 else 0
                h = g.blocks_per_request
            new_blocks += n
            new_bytes += n * g.page
            held.append(h)
        return new_blocks, new_bytes, held

    def _held_counts(self, r: _Req) -> tuple[int, ...]:
        if self.pc:
            return self._pc_held(r)
        out = []
        for gi, g in enumerate(self.cfg.groups):
            if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV):
                out.append(r.hi[gi] - r.lo[gi])
            elif g.kind == KIND_MAMBA and self.align_mode:
                out.append(r.state[gi] + r.trans[gi] + r.ckpt[gi])
            else:
                out.append(r.state[gi])
        return tuple(out)

    def _free(self, g: GroupSpec, n: int) -> None:
        self.used_blocks -= n
        self.used_bytes -= n * g.page

    def _release_skipped(self, r: _Req) -> None:
        """R-7 step 1: window blocks below ``first(c)`` and align-mode extras."""
        for gi, g in enumerate(self.cfg.groups):
            if g.kind in (KIND_WINDOW, KIND_CONV):
                if r.hi[gi] > 0:
                    first = max(0, r.c - (g.window - 1)) // g.block
                    if first > r.lo[gi]:
                        drop = min(first, r.hi[gi]) - r.lo[gi]
                        if drop > 0:
                            self._free(g, drop)
                            r.lo[gi] += drop
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = r.trans[gi] + r.ckpt[gi]
                if n:
                    self._free(g, n)
                    r.trans[gi] = 0
                    r.ckpt[gi] = 0

    def release(self, r: _Req) -> None:
        """R-8: drop every block of ``r`` (idempotent)."""
        if self.pc:
            self._pc_release(r)
            return
        for gi, g in enumerate(self.cfg.groups):
            n = self._held_counts(r)[gi]
            if n:
                self._free(g, n)
            r.lo[gi] = r.hi[gi] = r.state[gi] = r.cols[gi] = r.trans[gi] = r.ckpt[gi] = 0

    def _commit(self, r: _Req, c: int, a: int) -> None:
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                hi = cdiv(a, g.block)
                if hi > r.hi[gi]:
                    self.used_blocks += hi - r.hi[gi]
                    self.used_bytes += (hi - r.hi[gi]) * g.page
                    r.hi[gi] = hi
            elif g.kind in (KIND_WINDOW, KIND_CONV):
                first = max(0, c - (g.window - 1)) // g.block
                hi = cdiv(a, g.block)
                if r.hi[gi] == 0:
                    r.lo[gi] = first
                    r.hi[gi] = first
                if hi > r.hi[gi]:
                    self.used_blocks += hi - r.hi[gi]
                    self.used_bytes += (hi - r.hi[gi]) * g.page
                    r.hi[gi] = hi
            elif g.kind == KIND_MAMBA and self.align_mode:
                d = cdiv(a, g.block) - r.cols[gi]
                ck = self._mamba_ckpt(r, g, c, a)
                if d > 0:
                    if r.state[gi] > 0:
                        r.trans[gi] = 1
                    else:
                        r.state[gi] = 1
                        self.used_blocks += 1
                        self.used_bytes += g.page
                    if r.trans[gi]:
                        self.used_blocks += 1
                        self.used_bytes += g.page
                    r.cols[gi] = cdiv(a, g.block)
                if ck:
                    r.ckpt[gi] = 1
                    self.used_blocks += 1
                    self.used_bytes += g.page
            else:
                if r.state[gi] == 0:
                    r.state[gi] = g.blocks_per_request
                    self.used_blocks += g.blocks_per_request
                    self.used_bytes += g.blocks_per_request * g.page

    def _projected_bytes(self, r: _Req, c: int, a: int) -> int:
        """R-9: bytes of ``r``'s complete holding for ``c → a``."""
        _, _, held = self._project(r, c, a)
        return sum(h * g.page for h, g in zip(held, self.cfg.groups))

    def _fresh_bytes(self, r: _Req, c: int, a: int) -> int:
        """Bytes of a holding for ``c → a`` from an empty holding (R-21)."""
        total = 0
        for g in self.cfg.groups:
            if g.kind == KIND_FULL:
                n = cdiv(a, g.block)
            elif g.kind in (KIND_WINDOW, KIND_CONV):
                n = cdiv(a, g.block) - max(0, c - (g.window - 1)) // g.block
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = 1
            else:
                n = g.blocks_per_request
            total += n * g.page
        return total

    def _input_need(self, r: _Req, h: int) -> tuple[int, int]:
        """R-20: (blocks, bytes) the whole input sequence needs from ``h`` (empty holding)."""
        cfg = self.cfg
        n_tok = min(r.len, cfg.max_model_len)
        blocks = 0
        nbytes = 0
        for g in cfg.groups:
            if g.kind == KIND_FULL:
                n = cdiv(n_tok, g.block) - h // g.block
            elif g.kind in (KIND_WINDOW, KIND_CONV):
                n = min(
                    cdiv(n_tok, g.block),
                    cdiv(min(g.window - 1 + cfg.max_num_batched_tokens, cfg.max_model_len), g.block) + 1,
                )
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = min(cdiv(n_tok, g.block) - h // g.block, 1 + self._mamba_ckpt(r, g, h, n_tok))
            else:
                n = g.blocks_per_request
            n = max(n, 0)
            blocks += n
            nbytes += n * g.page
        return blocks, nbytes

    def used(self) -> tuple[int, int]:
        """(used blocks, used bytes) of the pool (R-34)."""
        if self.pc:
            u = self.usable - self.pool.qlen
            return u, u * self.cfg.page
        return self.used_blocks, self.used_bytes

    def try_allocate(
        self, r: _Req, c: int, a: int, watermark: int, hits: dict[int, list[int]] | None = None
    ) -> bool:
        """R-7: release first, project, check, commit all groups or nothing."""
        if self.pc:
            self._pc_release_skipped(r)
            need, _ = self._pc_need(r, c, a, hits)
            if need > self.pool.qlen - watermark:
                return False
            self._pc_commit(r, c, a, hits)
            return True
        self._release_skipped(r)
        new_blocks, new_bytes, _ = self._project(r, c, a)
        if self.block_mode:
            if new_blocks > self.usable - self.used_blocks - watermark:
                return False
        elif new_bytes > self.cap - self.used_bytes:
            return False
        self._commit(r, c, a)
        return True

    def _oversized(
        self, r: _Req, c: int, n: int, hits: dict[int, list[int]] | None = None
    ) -> RawError | None:
        if self.pc:
            nb = self._pc_need(r, c, c + n, hits)[1] * self.cfg.page
        else:
            nb = self._projected_bytes(r, c, c + n)
        if nb > self.cap:
            return RawError(ERR_OVERSIZED, (nb, n, c, self.cap, self.cfg.fixed_request_bytes))
        return None

    def _split(self, r: _Req, start: int, n: int) -> int:
        if not self.split:
            return n
        q = AlignStopQuery(
            start=start,
            num_new_tokens=n,
            prompt_len=r.P,
            num_tokens=r.len,
            block_size=self.sched_block,
            hash_block_size=self.hash_block,
            max_num_batched_tokens=self.cfg.max_num_batched_tokens,
            checkpoint_alignment=self.first_align if (self.ckpt_all and self.first_align > 0) else None,
            junction=self.pcr[r.idx].junction if self.pc else 0,
        )
        return int(self.align_fn(q))


    # ---- prefix-caching pool (R-6, R-36 … R-38) -----------------------------------

    def _origin(self, r: _Req, q: int) -> int:
        """R-36: the origin key of ``r``'s tokens ``[0, q)``."""
        for upto, key in self.reqs_in[r.idx].origin:
            if q <= upto:
                return key
        own = self.reqs_in[r.idx].own_key
        return own if own >= 0 else (1 << 40) + r.idx

    def _pc_key(self, r: _Req, gi: int, j: int) -> tuple[int, int, int]:
        return (gi, self._origin(r, (j + 1) * self.sched_block), j)

    def _pc_ckpt(self, r: _Req, gi: int, c: int, a: int, entries: list[tuple[int, int]], mcols: int) -> int:
        """vLLM ``_needs_internal_checkpoint`` with the block-table condition."""
        g = self.cfg.groups[gi]
        if not self._mamba_ckpt(r, g, c, a):
            return 0
        idx = cdiv(a, g.block) - 2
        if idx >= mcols or all(col != idx for col, _b in entries):
            return 1
        return 0

    def _pc_bound(self, c: int, gi: int, mcols: int) -> int:
        """Columns below this are released at an allocation attempt from ``c`` (R-7 step 1)."""
        if c - 1 <= 0:
            return 0
        return min((c - 1) // self.cfg.groups[gi].block, mcols)

    def _pc_need(self, r: _Req, c: int, a: int, hits: dict[int, list[int]] | None) -> tuple[int, int]:
        """(blocks to take from the free queue, blocks held after) for ``c → a``."""
        pr = self.pcr[r.idx]
        pool = self.pool
        need = 0
        held = 0
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                if hits is not None:
                    hb = hits.get(gi, [])
                    t = len(hb)
                    need += sum(1 for b in hb if pool.ref[b] == 0)
                else:
                    t = len(pr.att[gi])
                need += max(cdiv(a, g.block) - t, 0)
                held += max(cdiv(a, g.block), t)
            elif g.kind == KIND_MAMBA:
                if hits is not None:
                    hb = hits.get(gi, [])
                    entries = [(c // g.block - 1, hb[0])] if hb else []
                    mcols = c // g.block if hb else 0
                    need += sum(1 for b in hb if pool.ref[b] == 0)
                else:
                    bound = self._pc_bound(c, gi, pr.mcols[gi])
                    entries = [e for e in pr.mam[gi] if e[0] >= bound]
                    mcols = pr.mcols[gi]
                d = cdiv(a, g.block) - mcols
                ck = self._pc_ckpt(r, gi, c, a, entries, mcols)
                n = min(d, 1 + ck) if d > 0 else 0
                need += n
                held += len(entries) + n
            else:
                if pr.ring[gi] == 0:
                    need += 1
                held += 1
        return need, held

    def _pc_release_skipped(self, r: _Req) -> None:
        pr = self.pcr[r.idx]
        for gi in self.pool.mamba_groups:
            bound = self._pc_bound(r.c, gi, pr.mcols[gi])
            drop = [b for col, b in reversed(pr.mam[gi]) if col < bound]
            if drop:
                pr.mam[gi] = [e for e in pr.mam[gi] if e[0] >= bound]
                self.pool.free_batch(drop)

    def _pc_commit(self, r: _Req, c: int, a: int, hits: dict[int, list[int]] | None) -> None:
        pr = self.pcr[r.idx]
        pool = self.pool
        if hits is not None:  # vLLM allocate_new_computed_blocks: touch every group's hits first
            for gi, g in enumerate(self.cfg.groups):
                hb = hits.get(gi, [])
                pool.touch(hb)
                if g.kind == KIND_FULL:
                    pr.att[gi] = list(hb)
                    pr.ncached[gi] = len(hb)
                elif g.kind == KIND_MAMBA:
                    pr.mam[gi] = [(c // g.block - 1, hb[0])] if hb else []
                    pr.mcols[gi] = c // g.block if hb else 0
                    pr.ncached[gi] = pr.mcols[gi]
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                n = cdiv(a, g.block) - len(pr.att[gi])
                if n > 0:
                    pr.att[gi].extend(pool.get_new(n))
            elif g.kind == KIND_MAMBA:
                req = cdiv(a, g.block)
                d = req - pr.mcols[gi]
                ck = self._pc_ckpt(r, gi, c, a, pr.mam[gi], pr.mcols[gi])
                if d > 0:
                    new = pool.get_new(1 + ck)
                    if ck:
                        pr.mam[gi].append((req - 2, new[0]))
                    pr.mam[gi].append((req - 1, new[-1]))
                    pr.mcols[gi] = req
            elif pr.ring[gi] == 0:
                pr.ring[gi] = pool.get_new(1)[0]
        self._pc_cache_blocks(r, min(a, r.len))

    def _pc_cache_blocks(self, r: _Req, num_tokens: int) -> None:
        """vLLM ``cache_blocks`` of every group after a successful allocation (R-36)."""
        pr = self.pcr[r.idx]
        pool = self.pool
        for gi, g in enumerate(self.cfg.groups):
            if g.kind not in (KIND_FULL, KIND_MAMBA):
                continue
            nfull = num_tokens // g.block
            start = pr.ncached[gi]
            if start >= nfull:
                continue
            if g.kind == KIND_FULL:
                for j in range(start, nfull):
                    pool.set_key(pr.att[gi][j], self._pc_key(r, gi, j))
            else:
                cols = set()
                for q in (r.P - 1, pr.junction):
                    if q > 0:
                        col = (q // self.sched_block * self.sched_block) // g.block - 1
                        if col >= 0:
                            cols.add(col)
                for col, b in pr.mam[gi]:
                    if start <= col < nfull and col in cols:
                        k = self._pc_key(r, gi, col)
                        pool.set_key(b, k)
                        pool.step_cached.add(k)
            pr.ncached[gi] = nfull

    def _pc_release(self, r: _Req) -> None:
        """R-8: one batch per group, highest column first."""
        pr = self.pcr[r.idx]
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                batch = list(reversed(pr.att[gi]))
            elif g.kind == KIND_MAMBA:
                batch = [b for _c, b in reversed(pr.mam[gi])]
            else:
                batch = [pr.ring[gi]] if pr.ring[gi] else []
            if batch:
                self.pool.free_batch(batch)
        self.pcr[r.idx] = PcReq(self.G)

    def _pc_held(self, r: _Req) -> tuple[int, ...]:
        pr = self.pcr[r.idx]
        out = []
        for gi, g in enumerate(self.cfg.groups):
            if g.kind == KIND_FULL:
                out.append(len(pr.att[gi]))
            elif g.kind == KIND_MAMBA:
                out.append(len(pr.mam[gi]))
            else:
                out.append(1 if pr.ring[gi] else 0)
        return tuple(out)

    def _pc_lookup(self, r: _Req) -> tuple[int, int, dict[int, list[int]], bool]:
        """R-37: (hit h, junction, hit blocks per group, same-step flag) of a waiting head."""
        pool = self.pool
        B = self.sched_block
        maxb = (r.len - 1) // B
        att = pool.att_groups
        mam = pool.mamba_groups
        hits: dict[int, list[int]] = {gi: [] for gi in att}
        if att:
            j = 0
            while j < maxb:
                found = [pool.lookup(self._pc_key(r, gi, j)) for gi in att]
                if not all(found):
                    break
                for gi, b in zip(att, found):
                    hits[gi].append(b)
                j += 1
            h_att = j * B
        else:
            h_att = maxb * B
        h = h_att
        if mam:
            h = 0
            for i in range(h_att // B - 1, -1, -1):
                found = [pool.lookup(self._pc_key(r, gi, i)) for gi in mam]
                if all(found):
                    h = (i + 1) * B
                    for gi, b in zip(mam, found):
                        hits[gi] = [b]
                    break
        for gi in att:
            del hits[gi][h // B:]
        junction = h_att if (att and mam and h < h_att) else 0
        same_step = h > 0 and any(self._pc_key(r, gi, h // B - 1) in pool.step_cached for gi in mam)
        return h, junction, hits, same_step

    def _pc_input_need(self, r: _Req, h: int, hits: dict[int, list[int]]) -> int:
        """R-20 in blocks with prefix caching: evictable hit blocks count as needed."""
        n_tok = min(r.len, self.cfg.max_model_len)
        pool = self.pool
        total = 0
        for gi, g in enumerate(self.cfg.groups):
            hb = hits.get(gi, [])
            ev = sum(1 for b in hb if pool.ref[b] == 0)
            if g.kind == KIND_FULL:
                total += max(cdiv(n_tok, g.block) - h // g.block, 0) + ev
            elif g.kind == KIND_MAMBA:
                entries = [(h // g.block - 1, hb[0])] if hb else []
                ck = self._pc_ckpt(r, gi, h, n_tok, entries, h // g.block if hb else 0)
                total += max(min(cdiv(n_tok, g.block) - h // g.block, 1 + ck), 0) + ev
            else:
                total += 1
        return total

    # ---- the loop ---------------------------------------------------------------

    def run(self) -> RawResult:
        cfg = self.cfg
        L = cfg.max_model_len
        order = sorted(
            range(len(self.reqs)),
            key=(lambda i: (self.reqs_in[i].arrival_step, i))
            if self.mode == ARRIVE_STEP
            else (lambda i: (self.reqs_in[i].arrival_time, i)),
        )
        pending = deque(order)
        waiting: deque[_Req] = deque()
        running: list[_Req] = []
        steps: list[RawStep] = []
        error: RawError | None = None
        k = 0
        t = 0.0
        fixed = cfg.fixed_step_seconds
        wm_blocks = cfg.watermark_blocks
        while pending or waiting or running:
            if self.mode != ARRIVE_STEP and not waiting and not running:
                t = max(t, self.reqs_in[pending[0]].arrival_time)
            t_start = k * fixed if fixed is not None else t
            events: list[tuple[int, int]] = []
            # 1. arrivals
            while pending:
                ri = self.reqs_in[pending[0]]
                if self.mode == ARRIVE_STEP:
                    if ri.arrival_step > k:
                        break
                elif ri.arrival_time > t_start:
                    break
                r = self.reqs[pending.popleft()]
                r.arrival_time = t_start if self.mode == ARRIVE_STEP else ri.arrival_time
                if r.P >= L:
                    r.status = ST_REJECTED
                    r.rej = (REJ_PROMPT, r.P, L)
                    events.append((EV_REJECTED, r.idx))
                else:
                    waiting.append(r)
            budget = cfg.max_num_batched_tokens
            preempted = False
            if self.pc:
                self.pool.step_cached.clear()
            scheduled: list[tuple[_Req, int, int]] = []
            # 3. running phase
            i = 0
            while i < len(running) and budget > 0:
                r = running[i]
                n = min(r.len - r.c, budget)
                n = self._split(r, r.c, n)
                if n == 0:
                    i += 1
                    continue
                error = self._oversized(r, r.c, n)
                if error:
                    break
                ok = False
                while True:
                    if self.try_allocate(r, r.c, r.c + n, 0):
                        ok = True
                        break
                    victim = running.pop()
                    self.release(victim)
                    victim.c = 0
                    victim.preemptions += 1
                    victim.status = 0
                    waiting.appendleft(victim)
                    events.append((EV_PREEMPTED, victim.idx))
                    preempted = True
                    if victim is r:
                        break
                if not ok:
                    break
                scheduled.append((r, n, r.c))
                budget -= n
                i += 1
            # 4. waiting phase (R-18 … R-22)
            if error is None and not preempted:
                while budget > 0 and waiting and len(running) < cfg.max_num_seqs:
                    r = waiting[0]
                    h, hits, same_step = 0, None, False
                    if self.pc:
                        h, junction, hits, same_step = self._pc_lookup(r)
                        self.pcr[r.idx].junction = junction
                    # requests that can never fit
                    nb = self._fresh_bytes(r, r.len - 1, r.len)
                    rej = None
                    if nb > self.cap:
                        rej = (REJ_FINAL_FORWARD, nb, self.cap)
                    elif cfg.reserve_full_isl:
                        _, ib = self._input_need(r, 0)
                        if ib > self.cap:
                            rej = (REJ_INPUT_SEQUENCE, ib, self.cap)
                    if rej is not None:
                        waiting.popleft()
                        r.status = ST_REJECTED
                        r.rej = rej
                        events.append((EV_REJECTED, r.idx))
                        continue
                    n = r.len - h
                    if not cfg.enable_chunked_prefill and n > budget:
                        break
                    n = min(n, budget)
                    n = self._split(r, h, n)
                    if n == 0:
                        break
                    error = self._oversized(r, h, n, hits)
                    if error:
                        break
                    wm = wm_blocks if running else 0
                    if same_step:
                        break
                    if self.pc and cfg.reserve_full_isl:
                        if self._pc_input_need(r, h, hits) + wm > self.pool.qlen:
                            break
                    elif cfg.reserve_full_isl:
                        ib_blocks, ib_bytes = self._input_need(r, h)
                        if self.block_mode:
                            if ib_blocks + wm > self.usable - self.used_blocks:
                                break
                        elif ib_bytes > self.cap - self.used_bytes:
                            break
                    if not self.try_allocate(r, h, h + n, wm, hits):
                        break
                    waiting.popleft()
                    running.append(r)
                    r.status = 0
                    r.c = h
                    if not r.admitted_once:
                        r.admitted_once = True
                        r.hit = h
                    events.append((EV_ADMITTED, r.idx))
                    scheduled.append((r, n, r.c))
                    budget -= n
            if error is not None:
                break
            used_blocks_sched, used_bytes_sched = self.used()
            # 5./6. step time
            np_ = pt = pkv = nd = dkv = 0
            for r, n, cb in scheduled:
                if n == 1 and cb == r.len - 1 and r.g >= 1:
                    nd += 1
                    dkv += cb
                else:
                    np_ += 1
                    pt += n
                    pkv += cb
            if fixed is not None:
                dur, extra = fixed, False
            elif not scheduled:
                dur, extra = 0.0, False
            else:
                res = step_time(cfg.table, np_, pt, pkv, nd, dkv)
                if isinstance(res, int):
                    error = RawError(ERR_NO_PHASE, (res,))
                    break
                dur, extra = res
            t_end = t_start + dur
            stalled = not scheduled and not preempted and (running or waiting)
            # 7. advance, sample, finish
            for r, n, _cb in scheduled:
                if math.isnan(r.first_sched):
                    r.first_sched = t_start
                r.c += n
                if r.c == r.len:
                    r.g += 1
                    if math.isnan(r.first_token):
                        r.first_token = t_end
                    if r.g >= r.O or r.len >= L:
                        r.finish = t_end
                        r.status = ST_FINISHED
                        running.remove(r)
                        self.release(r)
                        events.append((EV_FINISHED, r.idx))
            steps.append(
                RawStep(
                    step=k,
                    t_start=t_start,
                    t_end=t_end,
                    duration_s=dur,
                    extrapolated=extra,
                    scheduled=tuple((r.idx, n, cb) for r, n, cb in scheduled),
                    num_prefill_requests=np_,
                    sum_prefill_tokens=pt,
                    sum_prefill_kv_tokens=pkv,
                    num_decode_requests=nd,
                    sum_decode_kv_tokens=dkv,
                    events=tuple(events),
                    running=len(running),
                    waiting=len(waiting),
                    used_bytes_scheduled=used_bytes_sched,
                    used_bytes_end=self.used()[1],
                    used_blocks_scheduled=used_blocks_sched,
                    used_blocks_end=self.used()[0],
                    held=tuple((r.idx, self._held_counts(r)) for r in running),
                )
            )
            k += 1
            t = t_end
            if stalled:
                if not pending:
                    error = RawError(ERR_STALL, (k - 1, t_start, len(running), len(waiting)))
                    break
                if self.mode != ARRIVE_STEP:
                    t = max(t, self.reqs_in[pending[0]].arrival_time)
        out = []
        for r in self.reqs:
            rej = r.rej
            out.append(
                RawRequest(
                    status=r.status,
                    reject_reason=rej[0],
                    reject_a=rej[1],
                    reject_b=rej[2],
                    arrival_time=r.arrival_time,
                    first_scheduled_time=r.first_sched,
                    first_token_time=r.first_token,
                    finish_time=r.finish,
                    output_tokens=r.g,
                    preemptions=r.preemptions,
                    prefix_hit_tokens=r.hit,
                )
            )
        return RawResult(steps=tuple(steps), requests=tuple(out), error=error)


def run_reference(
    cfg: ReplayConfig,
    requests: tuple[ReplayRequest, ...],
    arrival_mode: int,
    align_stop_fn: AlignStopFn | None = None,
) -> RawResult:
    """Run a whole trace with the reference engine."""
    return ReferenceEngine(cfg, requests, arrival_mode, align_stop_fn).run()
