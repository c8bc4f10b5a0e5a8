"""The replay against recorded runs of the real vLLM 0.33.0 Scheduler (06 R-40, R-36 … R-38).

``data/sched_*.txt`` are the oracle's outputs for ``data/sched_*.json``
(``vllm_oracle.py sched``; copied into the project so that the default suite
runs without vLLM).  Every step is compared: tokens per request in batch
order, preemptions, free blocks, waiting count, running requests and their
held blocks per group.
"""

from __future__ import annotations

import ast
import json
import re

import pytest
from helpers import DATA, full, mamba

from fpmcore.replay import from_sched_json, make_config, run_replay
from fpmcore.replay.model import KIND_RING, GroupSpec

STEP = re.compile(r"^step\s+(\d+) \| (.*?) \(total \d+\)(.*?) \| free=(\d+) waiting=(\d+) \| ?(.*)$")


def parse_oracle(text: str) -> dict[bool, list[dict]]:
    """Per caching mode, the step records the oracle printed."""
    out: dict[bool, list[dict]] = {}
    mode = None
    for line in text.splitlines():
        if line.startswith("== vLLM"):
            mode = "ON" in line
            out[mode] = []
            continue
        m = STEP.match(line)
        if not m:
            continue
        sched = [[k, int(v)] for k, v in (x.split(":") for x in m.group(2).split())]
        pre = re.search(r"PREEMPTED=(\[.*?\])", m.group(3))
        held = {}
        for rid, blocks in re.findall(r"(\S+)=(\[\[.*?\]\])", m.group(6)):
            held[rid] = [h for h, _t in ast.literal_eval(blocks)]
        out[mode].append(
            {
                "step": int(m.group(1)),
                "scheduled": sched,
                "preempted": sorted(ast.literal_eval(pre.group(1))) if pre else [],
                "free_blocks": int(m.group(4)),
                "waiting": int(m.group(5)),
                "held": held,
            }
        )
    return out


def compare(ours: list[dict], theirs: list[dict]) -> None:
    while len(theirs) > len(ours) and not theirs[-1]["scheduled"] and not theirs[-1]["held"]:
        theirs = theirs[:-1]  # vLLM reports the last finish one step late
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert [[r, n] for r, n, _c in a["scheduled"]] == b["scheduled"], a["step"]
        assert sorted(a["preempted"]) == b["preempted"], a["step"]
        assert a["free_blocks"] == b["free_blocks"], a["step"]
        assert a["waiting"] == b["waiting"], a["step"]
        assert a["held_blocks_end"] == b["held"], a["step"]


def test_plain_model_recompute_preemption_and_shared_prefix(backend):
    """sched_plain_preempt: 99 blocks, budget 512, preemptions, r4 shares 256 tokens of r0 (caching on)."""
    oracle = parse_oracle((DATA / "sched_plain_preempt.txt").read_text())[True]
    trace = from_sched_json(json.loads((DATA / "sched_plain_preempt.json").read_text()))
    cfg = make_config(
        [full(16, 2_097_152, "runtime_group_0")],
        99 * 2_097_152,
        max_num_batched_tokens=512,
        max_num_seqs=256,
        max_model_len=1024,
        prefix_caching=True,
        fixed_step_seconds=1.0,
    )
    res = run_replay(cfg, trace, backend=backend)
    assert res.error is None
    compare(res.steps, oracle)
    assert res.summary["preemptions_total"] == sum(len(s["preempted"]) for s in oracle) > 0
    assert 0 < res.requests[4]["prefix_hit_tokens"] <= 256


@pytest.mark.parametrize("caching", [False, True])
def test_glm_like_hybrid_shared_prefix(backend, caching):
    """sched_glm_small: 4 Mamba groups, MLA attention, ring; B shares 9,300 tokens with A (RV-16 with caching)."""
    oracle = parse_oracle((DATA / "sched_glm_small.txt").read_text())[caching]
    trace = from_sched_json(json.loads((DATA / "sched_glm_small.json").read_text()))
    page = 52_322_688
    groups = [mamba(4608, page, 1, 16, f"runtime_group_{i}") for i in range(4)]
    groups += [
        full(4608, page, "runtime_group_4"),
        GroupSpec("runtime_group_5", KIND_RING, 16, page, blocks_per_request=1),
    ]
    cfg = make_config(
        groups,
        1145 * page,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        max_model_len=131_072,
        prefix_caching=caching,
        fixed_step_seconds=1.0,
    )
    res = run_replay(cfg, trace, backend=backend)
    assert res.error is None
    compare(res.steps, oracle)
