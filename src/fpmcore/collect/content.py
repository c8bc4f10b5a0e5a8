"""The prompts a collection feeds the engine: seeded real token ids (``synthetic_content`` ``seeded_tokens``).

Every token id comes from a seeded generator, so a run, a resumed run and a
rerun with the same seed feed the engine the same prompts:

* **prefix streams**: one stream per request slot of a batch; the cached
  prefix of ``P`` tokens of slot ``j`` is the first ``P`` tokens of stream
  ``j``, so the prefixes of a run nest (the seed of a longer prefix hits the
  blocks of a shorter one), and the requests of one batch share no block: a
  runtime may admit only one request per step whose hit ends on a block
  another request of the step cached (vLLM 0.32.0's Mamba align mode does,
  ``MambaManager.get_num_blocks_to_allocate``), and the batch must start
  together;
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
        self._prefix: dict[int, list[int]] = {}
        self._prefix_rng: dict[int, random.Random] = {}

    def _draw(self, rng: random.Random, n: int) -> list[int]:
        allowed = self.allowed
        return [allowed[i] for i in (rng.randrange(len(allowed)) for _ in range(n))]

    def prefix(self, n: int, slot: int = 0) -> list[int]:
        """The first ``n`` tokens of the prefix stream of request slot ``slot``."""
        stream = self._prefix.setdefault(slot, [])
        if n > len(stream):
            key = f"fpmcore-prefix:{self.seed}" + (f":{slot}" if slot else "")
            rng = self._prefix_rng.setdefault(slot, random.Random(key))
            stream += self._draw(rng, n - len(stream))
        return stream[:n]

    def fresh(self, n: int, *key: object) -> list[int]:
        """``n`` tokens unique to ``key`` (point, repetition, slot, …)."""
        rng = random.Random(":".join(["fpmcore-fresh", str(self.seed), *map(str, key)]))
        return self._draw(rng, n)


def prompt_sha256(tokens: Sequence[int]) -> str:
    """SHA-256 of the token ids as ``uint32`` little endian."""
    return hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).hexdigest()
