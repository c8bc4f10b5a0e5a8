"""The prefix-caching pool of the Python reference (06 R-6, R-36 … R-38).

With ``prefix_caching`` the pool keeps vLLM 0.33.0's block identities: a free
queue of block ids (``BlockPool.free_block_queue``), reference counts, the
content key each cached block carries and the key → blocks map
(``BlockHashToBlockMap``; a lookup uses the block cached first).  Groups are
full attention, Mamba in align mode and ring state groups (R-3 refuses the
rest).  Mirrors ``csrc/fpm_replay.c`` (the ``pc_*`` functions).

Content keys (R-36): block ``j`` of group ``g`` of request ``r`` has key
``(g, origin(r, (j + 1)·B), j)``; for a Mamba group the same key names the
state after ``(j + 1)·B`` tokens.  ``origin`` follows the request's
``(upto, key)`` breakpoints (:class:`~fpmcore.replay.model.ReplayRequest`).
"""

from __future__ import annotations

from fpmcore.replay.model import KIND_FULL, KIND_MAMBA, ReplayConfig


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class PcReq:
    """Per-request holdings of the prefix-caching pool."""

    __slots__ = ("att", "mam", "mcols", "ring", "ncached", "junction")

    def __init__(self, ngroups: int) -> None:
        self.att: list[list[int]] = [[] for _ in range(ngroups)]  # full attention block tables
        self.mam: list[list[tuple[int, int]]] = [[] for _ in range(ngroups)]  # Mamba (column, block), ascending
        self.mcols = [0] * ngroups  # Mamba block-table length (columns covered)
        self.ring = [0] * ngroups  # ring block id, 0 = none
        self.ncached = [0] * ngroups  # cache_blocks progress (vLLM num_cached_block)
        self.junction = 0


class PrefixPool:
    """Free queue, reference counts, cached keys (vLLM 0.33.0 ``BlockPool``)."""

    def __init__(self, cfg: ReplayConfig, usable: int, block: int, hash_block: int) -> None:
        self.groups = cfg.groups
        self.U = usable
        self.B = block
        self.H = hash_block
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
        self.key: list[tuple[int, int, int] | None] = [None] * (usable + 1)
        self.cache: dict[tuple[int, int, int], list[int]] = {}
        self.step_cached: set[tuple[int, int, int]] = set()
        self.att_groups = [i for i, g in enumerate(cfg.groups) if g.kind == KIND_FULL]
        self.mamba_groups = [i for i, g in enumerate(cfg.groups) if g.kind == KIND_MAMBA]

    # ---- free queue ------------------------------------------------------------
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
            self.key[b] = None

    def get_new(self, n: int) -> list[int]:
        """``get_new_blocks``: take ``n`` blocks from the front, evicting their keys."""
        out = []
        for _ in range(n):
            b = self.nxt[0]
            self._unlink(b)
            self._evict(b)
            self.ref[b] = 1
            out.append(b)
        return out

    def free_batch(self, blocks: list[int]) -> None:
        """``free_blocks``: cached blocks to the back in order, the others to the front (R-38)."""
        first: list[int] = []
        last: list[int] = []
        for b in blocks:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                (last if self.key[b] is not None else first).append(b)
        p = 0
        for b in first:
            self._insert_after(p, b)
            p = b
        for b in last:
            self._insert_after(self.prv[0], b)

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                self._unlink(b)
            self.ref[b] += 1

    def set_key(self, b: int, k: tuple[int, int, int]) -> None:
        self._evict(b)
        self.key[b] = k
        self.cache.setdefault(k, []).append(b)

    def lookup(self, k: tuple[int, int, int]) -> int:
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
