"""The block-count pool of the Python reference (06 R-4 … R-10): what each request
holds per group, without block identities (prefix caching off).

Mirrors ``csrc/fpm_pool.c`` function by function.  A request's holdings are
per-group lists on the request (``lo``, ``hi``: the attention blocks
``[lo, hi)``; ``state``: ring blocks, or the running Mamba block in align mode;
``cols``, ``trans``, ``ckpt``: a Mamba group's block columns, transient and
checkpoint block).
"""

from __future__ import annotations

from typing import Any

from fpmcore.replay.align import cdiv, checkpoint_valid, pos
from fpmcore.replay.model import KIND_CHUNK, KIND_CONV, KIND_FULL, KIND_MAMBA, KIND_WINDOW, GroupSpec, ReplayConfig

#: The groups that release the blocks their attention skips: a sliding window, a convolution, a chunk.
WINDOWED = (KIND_WINDOW, KIND_CONV, KIND_CHUNK)
ATTENTION = (KIND_FULL, KIND_WINDOW, KIND_CONV, KIND_CHUNK)


def window_first(g: GroupSpec, c: int) -> int:
    """R-4: the first logical block of a windowed group still needed from computed ``c``.

    The window's (vLLM ``SlidingWindowManager.get_num_skipped_tokens``), or the
    current chunk's (``ChunkedLocalAttentionManager.get_num_skipped_tokens``:
    the chunks before the one of ``c`` are skipped).
    """
    if g.kind == KIND_CHUNK:
        return c // g.window * g.window // g.block
    return max(0, c - (g.window - 1)) // g.block


def window_admission_blocks(cfg: ReplayConfig, g: GroupSpec) -> int:
    """R-20: vLLM's admission cap of a windowed group (``SlidingWindowSpec.max_admission_blocks_per_request``).

    A chunked-local group's (``ChunkedLocalAttentionSpec.max_admission_blocks_per_request``)
    is the chunk and the in-flight tokens, without an alignment block.
    """
    if g.kind == KIND_CHUNK:
        return cdiv(min(g.window + cfg.max_num_batched_tokens, cfg.max_model_len), g.block)
    t = min(g.window - 1 + cfg.max_num_batched_tokens, cfg.max_model_len)
    return cdiv(t, g.block) + (0 if cfg.rules.window_cap_exact else 1)


def mamba_checkpoint(r: Any, g: GroupSpec, c: int, a: int, hash_block: int) -> int:
    """R-6: does this Mamba group hold a checkpoint block for ``c → a``?"""
    if g.checkpoint_blocks < 1 or g.checkpoint_alignment <= 0:
        return 0
    prefill_end = max(r.P, r.len - 1)
    if a < prefill_end or cdiv(a, g.block) - 2 < 0:
        return 0
    q = pos(a, hash_block)
    return int(checkpoint_valid(c, a, q, hash_block, g.block, g.checkpoint_alignment))


class BlockCountPool:
    """Used blocks and bytes of the pool, and the holdings of every request."""

    def __init__(self, cfg: ReplayConfig, align_mode: bool, hash_block: int) -> None:
        self.cfg = cfg
        self.groups = cfg.groups
        self.align_mode = align_mode
        self.hash_block = hash_block
        self.used_blocks = 0
        self.used_bytes = 0

    @staticmethod
    def attach(r: Any, ngroups: int) -> None:
        """Give request ``r`` empty holdings."""
        r.lo = [0] * ngroups
        r.hi = [0] * ngroups
        r.state = [0] * ngroups
        r.cols = [0] * ngroups
        r.trans = [0] * ngroups
        r.ckpt = [0] * ngroups

    def project(self, r: Any, c: int, a: int) -> tuple[int, int, int]:
        """R-4 … R-6 after R-7 step 1: (new blocks, new bytes, held bytes) of ``c → a``."""
        new_blocks = new_bytes = held_bytes = 0
        for gi, g in enumerate(self.groups):
            if g.kind == KIND_FULL:
                hi = cdiv(a, g.block)
                n = max(hi - r.hi[gi], 0)
                held = max(hi, r.hi[gi])
            elif g.kind in WINDOWED:
                first = window_first(g, c)
                hi = cdiv(a, g.block)
                lo = max(first, r.lo[gi]) if r.hi[gi] > 0 else first
                n = max(hi - max(r.hi[gi], lo), 0)
                held = max(hi, r.hi[gi]) - lo
            elif g.kind == KIND_MAMBA and self.align_mode:
                d = cdiv(a, g.block) - r.cols[gi]
                ck = mamba_checkpoint(r, g, c, a, self.hash_block)
                n = min(d, 1 + ck) if d > 0 else 0
                held = 1 + (1 if (d > 0 and r.state[gi] > 0) else 0) + ck
            else:
                n = g.blocks_per_request if r.state[gi] == 0 else 0
                held = g.blocks_per_request
            new_blocks += n
            new_bytes += n * g.page
            held_bytes += held * g.page
        return new_blocks, new_bytes, held_bytes

    def held(self, r: Any, gi: int) -> int:
        g = self.groups[gi]
        if g.kind in ATTENTION:
            return int(r.hi[gi] - r.lo[gi])
        if g.kind == KIND_MAMBA and self.align_mode:
            return int(r.state[gi] + r.trans[gi] + r.ckpt[gi])
        return int(r.state[gi])

    def _give_back(self, g: GroupSpec, n: int) -> None:
        self.used_blocks -= n
        self.used_bytes -= n * g.page

    def _take(self, g: GroupSpec, n: int) -> None:
        self.used_blocks += n
        self.used_bytes += n * g.page

    def release_skipped(self, r: Any, c: int) -> None:
        """R-7 step 1: window blocks below ``first(c)`` and align-mode extras."""
        for gi, g in enumerate(self.groups):
            if g.kind in WINDOWED:
                if r.hi[gi] > 0:
                    first = window_first(g, c)
                    if first > r.lo[gi]:
                        drop = min(first, r.hi[gi]) - r.lo[gi]
                        if drop > 0:
                            self._give_back(g, drop)
                            r.lo[gi] += drop
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = r.trans[gi] + r.ckpt[gi]
                if n:
                    self._give_back(g, n)
                    r.trans[gi] = 0
                    r.ckpt[gi] = 0

    def commit(self, r: Any, c: int, a: int) -> None:
        """R-7 step 4: take the projected blocks of ``c → a``."""
        for gi, g in enumerate(self.groups):
            if g.kind == KIND_FULL:
                hi = cdiv(a, g.block)
                if hi > r.hi[gi]:
                    self._take(g, hi - r.hi[gi])
                    r.hi[gi] = hi
            elif g.kind in WINDOWED:
                first = window_first(g, c)
                hi = cdiv(a, g.block)
                if r.hi[gi] == 0:
                    r.lo[gi] = r.hi[gi] = first
                if hi > r.hi[gi]:
                    self._take(g, hi - r.hi[gi])
                    r.hi[gi] = hi
            elif g.kind == KIND_MAMBA and self.align_mode:
                d = cdiv(a, g.block) - r.cols[gi]
                ck = mamba_checkpoint(r, g, c, a, self.hash_block)
                if d > 0:
                    if r.state[gi] > 0:
                        r.trans[gi] = 1
                    else:
                        r.state[gi] = 1
                    self._take(g, 1)
                    r.cols[gi] = cdiv(a, g.block)
                if ck:
                    r.ckpt[gi] = 1
                    self._take(g, 1)
            elif r.state[gi] == 0:
                r.state[gi] = g.blocks_per_request
                self._take(g, g.blocks_per_request)

    def release_all(self, r: Any) -> None:
        """R-8: drop every block of ``r``."""
        for gi, g in enumerate(self.groups):
            n = self.held(r, gi)
            if n:
                self._give_back(g, n)
            r.lo[gi] = r.hi[gi] = r.state[gi] = r.cols[gi] = r.trans[gi] = r.ckpt[gi] = 0

    def fresh_bytes(self, c: int, a: int) -> int:
        """R-21: bytes of ``c → a`` from an empty holding."""
        total = 0
        for g in self.groups:
            if g.kind == KIND_FULL:
                n = cdiv(a, g.block)
            elif g.kind in WINDOWED:
                n = cdiv(a, g.block) - window_first(g, c)
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = 1
            else:
                n = g.blocks_per_request
            total += n * g.page
        return total

    def input_need(self, r: Any, h: int) -> tuple[int, int]:
        """R-20: (blocks, bytes) of the whole input sequence from ``h`` (an empty holding)."""
        cfg = self.cfg
        n_tok = min(r.len, cfg.max_model_len)
        blocks = nbytes = 0
        for g in self.groups:
            if g.kind == KIND_FULL:
                n = cdiv(n_tok, g.block) - h // g.block
            elif g.kind in WINDOWED:
                n = min(cdiv(n_tok, g.block), window_admission_blocks(cfg, g)) - h // g.block
            elif g.kind == KIND_MAMBA and self.align_mode:
                n = min(cdiv(n_tok, g.block) - h // g.block, 1 + mamba_checkpoint(r, g, h, n_tok, self.hash_block))
            else:
                n = g.blocks_per_request
            n = max(n, 0)
            blocks += n
            nbytes += n * g.page
        return blocks, nbytes
