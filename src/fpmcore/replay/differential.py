"""Step-by-step comparison of a replay with the steps a runtime's scheduler took (06 R-40).

A runtime plugin (or a harness around a runtime) records, for every engine
step, the runtime's own decisions in this shape::

    {"scheduled": [[request id, tokens], ...],   # in batch order
     "preempted": [request id, ...],
     "running": [request id, ...],                # after the step, in the scheduler's order
     "held": {request id: [blocks per group], ...},
     "waiting": int, "free_blocks": int,
     "rejected": [request id, ...]}               # optional

:func:`compare_steps` compares it with the replay's step records (06 R-34):
tokens scheduled per request in batch order, preemptions, rejections, the
running requests and their held blocks per group, the waiting count and the
free blocks, step by step, and returns the first difference.  The runtime's
trailing empty steps are not compared: vLLM reports finished requests one
step late, so its loop makes one more, empty ``schedule()`` call (RD-6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def compare_steps(ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]]) -> str | None:
    """The first difference between the replay's steps (``ours``) and the runtime's (``theirs``), or ``None``."""
    theirs = list(theirs)
    while len(theirs) > len(ours) and not theirs[-1]["scheduled"] and not theirs[-1]["running"] \
            and theirs[-1]["waiting"] == 0:  # fmt: skip
        theirs.pop()
    for k in range(max(len(ours), len(theirs))):
        if k >= len(ours) or k >= len(theirs):
            return f"step {k}: the replay has {len(ours)} steps, the runtime {len(theirs)}"
        a, b = ours[k], theirs[k]
        checks = [
            ("scheduled", [[r, n] for r, n, *_ in a["scheduled"]], [list(x) for x in b["scheduled"]]),
            ("preempted", sorted(a["preempted"]), sorted(b["preempted"])),
            ("rejected", sorted(a.get("rejected", [])), sorted(b.get("rejected", []))),
            ("running", list(a["held_blocks_end"]), list(b["running"])),
            ("held", {r: list(v) for r, v in a["held_blocks_end"].items()}, {r: list(v) for r, v in b["held"].items()}),
            ("waiting", a["waiting"], b["waiting"]),
            ("free_blocks", a["free_blocks"], b["free_blocks"]),
        ]
        for what, x, y in checks:
            if x != y:
                return f"step {k}: {what}: replay {x} != runtime {y}"
    return None
