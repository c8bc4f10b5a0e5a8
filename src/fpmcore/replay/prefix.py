"""The prefix-caching pool of the Python reference (06 R-6, R-36 … R-38).

With ``prefix_caching`` the pool keeps vLLM 0.33.0's block identities: a free
queue of block ids (``BlockPool.free_block_queue``), reference counts, the
content key each cached block carries and the key → blocks map
(``BlockHashToBlockMap``; a lookup uses the block cached first); per request
the block table of every group: full attention, windowed attention and
convolution (vLLM's ``SlidingWindowManager``: blocks that leave the window
become null, only the run a later hit needs is kept cached), Mamba in align
mode and ring groups.  Mirrors ``csrc/fpm_prefix.c`` (and the lookup,
``csrc/fpm_prefix_lookup.c``) function by function, except where the C engine
decides a model's alike Mamba groups once for all of them (their lockstep,
``fpm_prefix.c``), which gives the same blocks in the same order.

Content keys (R-36): block ``j`` of group ``g`` of request ``r`` has key
``(origin(r, (j + 1)·B), j·G + g)``; for a Mamba group the same key names the
state after ``(j + 1)·B`` tokens.  ``origin`` follows the request's
``(upto, key)`` breakpoints (:class:`~fpmcore.replay.model.ReplayRequest`).
"""

from __future__ import annotations

from typing import Any

from fpmcore.replay.align import cdiv
from fpmcore.replay.model import KIND_CHUNK, KIND_FULL, KIND_MAMBA, ReplayConfig, ReplayRequest
from fpmcore.replay.pool import ATTENTION, WINDOWED, mamba_checkpoint, window_admission_blocks, window_first

Key = tuple[int, int]


class PcHold:
    """A request's block tables (vLLM ``req_to_blocks`` of every group)."""

    __slots__ = ("lo", "mam", "mcols", "ncached", "ring", "tab")

    def __init__(self, ngroups: int) -> None:
        self.tab: list[list[int]] = [[] for _ in range(ngroups)]  # attention: block ids, 0 = null
        self.lo = [0] * ngroups  # attention: tab[g][:lo] are null
        self.mam: list[list[tuple[int, int]]] = [[] for _ in range(ngroups)]  # Mamba (column, block), ascending
        self.mcols = [0] * ngroups  # Mamba block-table length (columns covered)
        self.ring = [0] * ngroups  # ring block id, 0 = none
        self.ncached = [0] * ngroups  # cache_blocks progress (vLLM num_cached_block)


class BlockStore:
    """Free queue, reference counts, cached keys (vLLM 0.33.0 ``BlockPool``)."""

    def __init__(self, usable: int, uncached_to_back: bool) -> None:
        self.U = usable
        self.uncached_to_back = uncached_to_back
        # doubly linked free queue with sentinel 0: 1 … U in order
        self.nxt = list(range(1, usable + 2))
        self.prv = list(range(-1, usable))
        self.nxt[usable] = 0
        self.nxt[0] = 1 if usable else 0
        self.prv[0] = usable
        if usable:
            self.prv[1] = 0
        self.qlen = usable
        self.ref = [0] * (usable + 1)
        self.key: list[Key | None] = [None] * (usable + 1)
        self.cache: dict[Key, list[int]] = {}
        self.stamp: dict[Key, int] = {}  # key -> step (+1) in which a Mamba state was cached under it
        self.step = 0

    def _unlink(self, b: int) -> None:
        p, n = self.prv[b], self.nxt[b]
        self.nxt[p] = n
        self.prv[n] = p
        self.qlen -= 1

    def _insert_after(self, p: int, b: int) -> None:
        n = self.nxt[p]
        self.nxt[p] = b
        self.prv[b] = p
        self.nxt[b] = n
        self.prv[n] = b
        self.qlen += 1

    def _evict(self, b: int) -> None:
        k = self.key[b]
        if k is not None:
            lst = self.cache[k]
            lst.remove(b)
            if not lst:
                del self.cache[k]
                self.stamp.pop(k, None)
            self.key[b] = None

    def take_front(self) -> int:
        """``get_new_blocks`` of one block: the front of the queue, its key evicted."""
        b = self.nxt[0]
        self._unlink(b)
        self._evict(b)
        self.ref[b] = 1
        return b

    def get_new(self, n: int) -> list[int]:
        return [self.take_front() for _ in range(n)]

    def free_batch(self, blocks: list[int]) -> None:
        """``free_blocks``: cached blocks to the back in order, the others to the front (R-38)."""
        first: list[int] = []
        last: list[int] = []
        for b in blocks:
            if b == 0:
                continue
            self.ref[b] -= 1
            if self.ref[b] == 0:
                (last if self.key[b] is not None or self.uncached_to_back else first).append(b)
        p = 0
        for b in first:
            self._insert_after(p, b)
            p = b
        for b in last:
            self._insert_after(self.prv[0], b)

    def touch(self, b: int) -> None:
        if b == 0:
            return
        if self.ref[b] == 0:
            self._unlink(b)
        self.ref[b] += 1

    def set_key(self, b: int, k: Key, mamba: bool) -> None:
        if b == 0:
            return
        self._evict(b)
        self.key[b] = k
        lst = self.cache.setdefault(k, [])
        if not lst:
            self.stamp.pop(k, None)
        lst.append(b)
        if mamba:
            self.stamp[k] = self.step

    def lookup(self, k: Key) -> int:
        lst = self.cache.get(k)
        return lst[0] if lst else 0

    def queue(self) -> list[int]:
        """The free queue, front first (tests)."""
        out = []
        b = self.nxt[0]
        while b:
            out.append(b)
            b = self.nxt[b]
        return out


class PrefixCachingPool:
    """The engine side of the prefix-caching pool: lookups, allocation, caching and release (``pc_*`` in C)."""

    def __init__(self, cfg: ReplayConfig, requests: tuple[ReplayRequest, ...], usable: int, sched_block: int,
                 hash_block: int) -> None:  # fmt: skip
        self.cfg = cfg
        self.groups = cfg.groups
        self.G = len(cfg.groups)
        self.requests = requests
        self.B = sched_block
        self.H = hash_block
        self.pool = BlockStore(usable, cfg.rules.free_uncached_to_back)
        # the last lookup
        self.hit_h = 0
        self.hit_lo = [0] * self.G
        self.hit_tab: list[dict[int, int]] = [{} for _ in range(self.G)]
        self.hit_n = [0] * self.G
        self.hit_m = [0] * self.G

    def free_count(self) -> int:
        return self.pool.qlen

    def new_step(self, k: int) -> None:
        self.pool.step = k + 1

    # ---- keys ----------------------------------------------------------------

    def _origin(self, r: Any, q: int) -> int:
        """R-36: the origin key of ``r``'s tokens ``[0, q)``."""
        rq = self.requests[r.idx]
        for upto, key in rq.origin:
            if q <= upto:
                return int(key)
        return rq.own_key if rq.own_key >= 0 else (1 << 40) + int(r.idx)

    def _key(self, r: Any, gi: int, j: int) -> Key:
        return (self._origin(r, (j + 1) * self.B), j * self.G + gi)

    def _cached(self, r: Any, gi: int, j: int) -> int:
        return self.pool.lookup(self._key(r, gi, j))

    # ---- lookup (R-37) -------------------------------------------------------

    def _chunk_hit(self, r: Any, gi: int, cap: int) -> int:
        """The longest hit of a chunked-local group at most ``cap`` (vLLM
        ``ChunkedLocalAttentionManager.find_longest_cache_hit``): the chunks before the one of
        ``cap`` count as hit without a lookup, then the cached blocks of that chunk from its start."""
        g = self.groups[gi]
        i, end = window_first(g, cap), cap // g.block
        while i < end and self._cached(r, gi, i):
            i += 1
        return i * g.block

    def _window_hit(self, r: Any, gi: int, cap: int) -> int:
        """The longest hit of a windowed group at most ``cap`` (vLLM ``SlidingWindowManager.find_longest_cache_hit``)."""
        g = self.groups[gi]
        need = cdiv(g.window - 1, g.block)
        count = 0
        for i in range(cap // g.block - 1, -1, -1):
            if self._cached(r, gi, i):
                count += 1
                if count >= need:
                    return (i + count) * g.block
            else:
                count = 0
        return count * g.block

    def _mamba_hit(self, r: Any, cap: int) -> int:
        """The longest hit at most ``cap`` for which every Mamba group holds a state."""
        mam = [gi for gi, g in enumerate(self.groups) if g.kind == KIND_MAMBA]
        for i in range(cap // self.B - 1, -1, -1):
            if all(self._cached(r, gi, i) for gi in mam):
                return (i + 1) * self.B
        return 0

    def lookup(self, r: Any) -> tuple[int, bool]:
        """R-37: the hit ``h`` of a waiting head and the same-step flag; sets ``r.junction``.

        vLLM's ``HybridKVCacheCoordinator.find_longest_cache_hit``: full attention
        first, then every other group kind until no group shortens the hit.
        """
        B = self.B
        maxb = (r.len - 1) // B
        kinds = [g.kind for g in self.groups]
        has_full = KIND_FULL in kinds
        first_mamba = kinds.index(KIND_MAMBA) if KIND_MAMBA in kinds else -1
        has_other = first_mamba >= 0 or any(k in WINDOWED for k in kinds)
        self.hit_tab = [{} for _ in range(self.G)]
        cap = maxb * B
        longest = -1
        # cap is still vLLM's first candidate, the length less one, which a chunk reads unaligned
        first_candidate = True
        if has_full:
            j = 0
            full = [gi for gi in range(self.G) if kinds[gi] == KIND_FULL]
            while j < maxb:
                found = [self._cached(r, gi, j) for gi in full]
                for gi, b in zip(full, found):
                    self.hit_tab[gi][j] = b
                if not all(found):
                    break
                j += 1
            cap = j * B
            longest = cap
            first_candidate = False
        if has_other:
            changed = True
            while changed:
                changed = False
                for gi in range(self.G):
                    if kinds[gi] == KIND_CHUNK:
                        hg = self._chunk_hit(r, gi, r.len - 1 if first_candidate else cap)
                    elif kinds[gi] in WINDOWED:
                        hg = self._window_hit(r, gi, cap)
                    elif gi == first_mamba:
                        hg = self._mamba_hit(r, cap)
                    else:
                        continue
                    if longest < 0:
                        longest = hg
                    if hg < cap:
                        cap = hg
                        changed = True
                        first_candidate = False
        h = cap
        self.hit_h = h
        for gi, g in enumerate(self.groups):
            self.hit_lo[gi] = self.hit_n[gi] = self.hit_m[gi] = 0
            if g.kind == KIND_FULL:
                self.hit_n[gi] = h // B
            elif g.kind in WINDOWED:
                self.hit_lo[gi] = window_first(g, h)
                self.hit_n[gi] = h // B
                for j in range(self.hit_lo[gi], h // B):
                    self.hit_tab[gi][j] = self._cached(r, gi, j)
            elif g.kind == KIND_MAMBA and h > 0:
                self.hit_m[gi] = self._cached(r, gi, h // B - 1)
        r.junction = longest if (self.G >= 2 and longest > h) else 0
        same_step = False
        if h > 0 and not self.cfg.rules.mamba_hits_same_step:
            for gi, g in enumerate(self.groups):
                if g.kind == KIND_MAMBA and self.pool.stamp.get(self._key(r, gi, h // B - 1)) == self.pool.step:
                    same_step = True
        return h, same_step

    def _evictable(self, blocks: list[int]) -> int:
        return sum(1 for b in blocks if b and self.pool.ref[b] == 0)

    def _hit_blocks(self, gi: int) -> list[int]:
        return [self.hit_tab[gi][j] for j in range(self.hit_lo[gi], self.hit_n[gi])]

    # ---- allocation ----------------------------------------------------------

    def _checkpoint(self, r: Any, gi: int, c: int, a: int, cols: list[int], mcols: int) -> int:
        """vLLM ``_needs_internal_checkpoint`` with the block-table condition."""
        g = self.groups[gi]
        if not mamba_checkpoint(r, g, c, a, self.H):
            return 0
        idx = cdiv(a, g.block) - 2
        if idx >= mcols or idx not in cols:
            return 1
        return 0

    def _bound(self, c: int, gi: int, mcols: int) -> int:
        """Mamba columns below this are released at an allocation attempt from ``c`` (R-7 step 1)."""
        if c - 1 <= 0:
            return 0
        return min((c - 1) // self.groups[gi].block, mcols)

    def need(self, r: Any, c: int, a: int, hits: bool) -> tuple[int, int]:
        """(blocks to take from the free queue, blocks held after) for ``c → a``; ``hits``: a waiting head."""
        s: PcHold | None = r.pc
        need = held = 0
        for gi, g in enumerate(self.groups):
            if g.kind in ATTENTION:
                if hits:
                    t, lo = self.hit_n[gi], self.hit_lo[gi]
                    need += self._evictable(self._hit_blocks(gi))
                else:
                    t = len(s.tab[gi]) if s else 0
                    lo = s.lo[gi] if s else 0
                    if g.kind in WINDOWED:
                        lo = max(lo, min(window_first(g, c), t))
                need += max(cdiv(a, g.block) - t, 0)
                held += max(cdiv(a, g.block), t) - lo
            elif g.kind == KIND_MAMBA:
                if hits:
                    cols = [c // g.block - 1] if self.hit_m[gi] else []
                    mcols = c // g.block if self.hit_m[gi] else 0
                    if self.hit_m[gi] and self.pool.ref[self.hit_m[gi]] == 0:
                        need += 1
                elif s is not None:
                    bound = self._bound(c, gi, s.mcols[gi])
                    cols = [col for col, _b in s.mam[gi] if col >= bound]
                    mcols = s.mcols[gi]
                else:
                    cols, mcols = [], 0
                d = cdiv(a, g.block) - mcols
                ck = self._checkpoint(r, gi, c, a, cols, mcols)
                n = min(d, 1 + ck) if d > 0 else 0
                need += n
                held += len(cols) + n
            else:
                if s is None or s.ring[gi] == 0:
                    need += 1
                held += 1
        return need, held

    def input_need(self, r: Any, h: int) -> int:
        """R-20 in blocks, with the hits of the last lookup: evictable hit blocks count as needed."""
        n_tok = min(r.len, self.cfg.max_model_len)
        total = 0
        for gi, g in enumerate(self.groups):
            if g.kind in ATTENTION:
                ev = self._evictable(self._hit_blocks(gi))
                blocks = cdiv(n_tok, g.block)
                if g.kind in WINDOWED:
                    blocks = min(blocks, window_admission_blocks(self.cfg, g))
                total += max(blocks - h // g.block, 0) + ev
            elif g.kind == KIND_MAMBA:
                hb = self.hit_m[gi]
                cols = [h // g.block - 1] if hb else []
                ck = self._checkpoint(r, gi, h, n_tok, cols, h // g.block if hb else 0)
                ev = 1 if hb and self.pool.ref[hb] == 0 else 0
                total += max(min(cdiv(n_tok, g.block) - h // g.block, 1 + ck), 0) + ev
            else:
                total += 1
        return total

    def release_skipped(self, r: Any, c: int) -> None:
        """R-7 step 1: window blocks below ``first(c)`` and Mamba states no longer needed, one batch per group."""
        s: PcHold | None = r.pc
        if s is None:
            return
        for gi, g in enumerate(self.groups):
            if g.kind in WINDOWED:
                end = min(window_first(g, c), len(s.tab[gi]))
                if end <= s.lo[gi]:
                    continue
                batch = [s.tab[gi][j] for j in range(end - 1, s.lo[gi] - 1, -1)]
                for j in range(s.lo[gi], end):
                    s.tab[gi][j] = 0
                s.lo[gi] = end
                self.pool.free_batch(batch)
            elif g.kind == KIND_MAMBA:
                bound = self._bound(c, gi, s.mcols[gi])
                drop = [b for col, b in reversed(s.mam[gi]) if col < bound]
                if drop:
                    s.mam[gi] = [e for e in s.mam[gi] if e[0] >= bound]
                    self.pool.free_batch(drop)

    def _window_retained(self, r: Any, gi: int, j: int) -> bool:
        """Is block ``j`` of a windowed group kept in the cache?  vLLM ``reachable_block_mask`` with
        ``prefix_cache_retention_interval`` 0: the run a hit needs below ``r``'s replay boundary and its junction."""
        g = self.groups[gi]
        if self.cfg.rules.dense_retention or g.kind == KIND_CHUNK:
            return True  # a chunk's blocks: vLLM's base mask, every block
        need = cdiv(g.window - 1, g.block)
        ends = [(r.P - 1) // self.B * self.B // g.block]
        if r.junction > 0:
            ends.append(r.junction // self.B * self.B // g.block)
        return any(e - need <= j < e for e in ends)

    def _cache_blocks(self, r: Any, num_tokens: int) -> None:
        """vLLM ``cache_blocks`` of every group after a successful allocation (R-36)."""
        s: PcHold = r.pc
        pool = self.pool
        for gi, g in enumerate(self.groups):
            if g.kind not in ATTENTION and g.kind != KIND_MAMBA:
                continue
            nfull = num_tokens // g.block
            start = s.ncached[gi]
            if start >= nfull:
                continue
            if g.kind in ATTENTION:
                for j in range(max(start, s.lo[gi]), nfull):
                    if g.kind == KIND_FULL or self._window_retained(r, gi, j):
                        pool.set_key(s.tab[gi][j], self._key(r, gi, j), False)
            else:
                cols = set()
                for q in (r.P - 1, r.junction):
                    if q > 0:
                        col = (q // self.B * self.B) // g.block - 1
                        if col >= 0:
                            cols.add(col)
                dense = self.cfg.rules.dense_retention
                for col, b in s.mam[gi]:
                    if start <= col < nfull and (dense or col in cols):
                        pool.set_key(b, self._key(r, gi, col), True)
            s.ncached[gi] = nfull

    def commit(self, r: Any, c: int, a: int, hits: bool) -> None:
        """R-7 step 4 with prefix caching."""
        if r.pc is None:
            r.pc = PcHold(self.G)
        s: PcHold = r.pc
        pool = self.pool
        if hits:  # vLLM allocate_new_computed_blocks: every group's hits are touched first
            for gi, g in enumerate(self.groups):
                if g.kind in ATTENTION:
                    lo = self.hit_lo[gi]
                    tab = [0] * lo
                    for b in self._hit_blocks(gi):
                        pool.touch(b)
                        tab.append(b)
                    s.tab[gi] = tab
                    s.lo[gi] = lo
                    s.ncached[gi] = self.hit_n[gi]
                elif g.kind == KIND_MAMBA and self.hit_m[gi]:
                    pool.touch(self.hit_m[gi])
                    s.mam[gi] = [(c // g.block - 1, self.hit_m[gi])]
                    s.mcols[gi] = s.ncached[gi] = c // g.block
        for gi, g in enumerate(self.groups):
            if g.kind in ATTENTION:
                n = cdiv(a, g.block) - len(s.tab[gi])
                if n > 0:
                    s.tab[gi].extend(pool.get_new(n))
            elif g.kind == KIND_MAMBA:
                req = cdiv(a, g.block)
                d = req - s.mcols[gi]
                ck = self._checkpoint(r, gi, c, a, [col for col, _b in s.mam[gi]], s.mcols[gi])
                if d > 0:
                    new = pool.get_new(1 + ck)
                    if ck:
                        s.mam[gi].append((req - 2, new[0]))
                    s.mam[gi].append((req - 1, new[-1]))
                    s.mcols[gi] = req
            elif s.ring[gi] == 0:
                s.ring[gi] = pool.take_front()
        self._cache_blocks(r, min(a, r.len))
        if self.cfg.rules.mamba_boundary_recached:
            self._recache_boundary_state(r, c)

    def _recache_boundary_state(self, r: Any, c: int) -> None:
        """vLLM 0.32.0 ``_cache_partial_tail_block``: a request scheduled from its prompt's last cacheable
        boundary keys its Mamba state there once more, which counts as cached in this step (R-37)."""
        if c <= 0 or c != (r.P - 1) // self.B * self.B:
            return
        s: PcHold = r.pc
        for gi, g in enumerate(self.groups):
            if g.kind != KIND_MAMBA:
                continue
            col = c // g.block - 1
            for cc, b in s.mam[gi]:
                if cc == col:
                    k = self._key(r, gi, col)
                    if self.pool.key[b] == k:
                        self.pool.stamp[k] = self.pool.step
                    else:
                        self.pool.set_key(b, k, True)

    def release_all(self, r: Any) -> None:
        """R-8: one batch per group, highest block first."""
        s: PcHold | None = r.pc
        if s is None:
            return
        for gi, g in enumerate(self.groups):
            if g.kind in ATTENTION:
                batch = [s.tab[gi][j] for j in range(len(s.tab[gi]) - 1, s.lo[gi] - 1, -1)]
            elif g.kind == KIND_MAMBA:
                batch = [b for _c, b in reversed(s.mam[gi])]
            else:
                batch = [s.ring[gi]] if s.ring[gi] else []
            if batch:
                self.pool.free_batch(batch)
        r.pc = None
        r.junction = 0

    def held(self, r: Any, gi: int) -> int:
        s: PcHold | None = r.pc
        if s is None:
            return 0
        g = self.groups[gi]
        if g.kind in ATTENTION:
            return len(s.tab[gi]) - s.lo[gi]
        if g.kind == KIND_MAMBA:
            return len(s.mam[gi])
        return 1 if s.ring[gi] else 0
