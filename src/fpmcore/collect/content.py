"""The prompts a collection feeds the engine: seeded real token ids (``synthetic_content`` ``seeded_tokens``).

Every token id comes from a seeded generator, so a run, a resumed run and a
rerun with the same seed feed the engine the same prompts:

* **prefix stream**: one stream per run; the cached prefix of ``P`` tokens is
  its first ``P`` tokens, so the prefixes of a run nest (the seed of a longer
  prefix hits the blocks of a shorter one);
* **fresh tokens**: the new tokens of request ``slot`` of repetition ``rep``
  of point ``benchmark_id``, drawn from a generator keyed by the four, so no
  two requests of a run share a block beyond the prefix.

Token ids are drawn uniformly from ``[0, vocab_size)`` minus the engine's
special tokens.  ``prompt_sha256`` is the digest of a prompt's ids as
``uint32`` little endian (``measurement_protocol.prompt_hash_encoding``).
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Iterable, Sequence

#: ``measurement_protocol.synthetic_pool_tag`` of this generator.
POOL_TAG = "fpmcore_seeded_tokens_v1"


class TokenSource:
    """Seeded token ids for one run (``seed``) and one engine vocabulary."""

    def __init__(self, seed: int, vocab_size: int, excluded: Iterable[int] = ()) -> None:
        skip = set(excluded)
        self.allowed = [t for t in range(vocab_size) if t not in skip]
        if len(self.allowed) < 2:
            raise ValueError(f"the engine's vocabulary leaves {len(self.allowed)} usable token ids")
        self.seed = seed
        self._prefix: list[int] = []
        self._prefix_rng = random.Random(f"fpmcore-prefix:{seed}")

    def _draw(self, rng: random.Random, n: int) -> list[int]:
        allowed = self.allowed
        return [allowed[i] for i in (rng.randrange(len(allowed)) for _ in range(n))]

    def prefix(self, n: int) -> list[int]:
        """The first ``n`` tokens of the run's prefix stream."""
        if n > len(self._prefix):
            self._prefix += self._draw(self._prefix_rng, n - len(self._prefix))
        return self._prefix[:n]

    def fresh(self, n: int, *key: object) -> list[int]:
        """``n`` tokens unique to ``key`` (point, repetition, slot, …)."""
        rng = random.Random(":".join(["fpmcore-fresh", str(self.seed), *map(str, key)]))
        return self._draw(rng, n)


def prompt_sha256(tokens: Sequence[int]) -> str:
    """SHA-256 of the token ids as ``uint32`` little endian."""
    return hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).hexdigest()
