#!/usr/bin/env python3
"""Differential test of fpmcore's replay engine against a real vLLM release's own Scheduler (06 R-40).

Generates random step-exact traces over four kinds of small models, each with
prefix caching on and off:

* ``plain``: full attention only;
* ``window``: full attention next to sliding-window attention (gpt-oss-like),
  or sliding-window attention alone;
* ``gdn``: a GDN/Mamba hybrid (Qwen3-Next-like: Mamba groups next to full
  attention), Mamba align mode with prefix caching, with or without a
  prefill checkpoint block;
* ``glm``: a GLM-like hybrid (Mamba groups, an MLA attention group, an
  optional ring group), with or without a checkpoint block;
* ``chunk`` (asked for with ``--kinds``): full attention next to chunked-local
  attention (Llama 4-like, ``ChunkedLocalAttentionSpec``), or chunked-local
  attention alone.

The replay follows the rules of the oracle's release, as its runtime plugin
gives them (``fpm_replay_rules``; a release without them is refused), and the
random models and settings are those the release has.  Traces have shared
prefixes (``prefix_from``, or content-block ids ``hash_ids`` that agree on
leading blocks), small pools (preemption and eviction), and the
scheduler settings that change what is scheduled drawn at random: ``max_num_batched_tokens``,
``max_num_scheduled_tokens``, ``max_num_seqs``, ``max_num_active_seqs``,
``long_prefill_token_threshold`` (and its adaptive form),
``prefill_schedule_interval``, ``policy`` (``priority`` with request
priorities), ``max_num_queued_reqs``, ``max_num_queued_tokens``,
``watermark`` and ``scheduler_reserve_full_isl``.  The real Scheduler runs
them through ``tools/vllm_sched.py`` (one process for the whole batch, with
vLLM's own front-end admission); fpmcore replays the same traces with the
configuration built from vLLM's own cache plan, and every step is compared:
tokens scheduled per request in batch order, preemptions, requests rejected
at arrival, running requests and their held blocks per group, waiting count
and free blocks.

    .venv/bin/python tools/replay_vs_vllm.py --traces 400 [--seed 0] [--backend c|python] [--json OUT]
    .venv/bin/python tools/replay_vs_vllm.py --windows TRACE [--window-starts 0,20] [--window-size 20] [--json OUT]

With ``--windows`` the traces are windows of a production trace file (any installed format: the
Mooncake conversation trace) on the plain and GLM-like models, prefix caching off and on
(:func:`trace_windows`, :func:`window_jobs`).

``$FPM_ORACLE_PY`` names the interpreter with vLLM (default: this interpreter
when it has vLLM, else ``~/.cache/fpm-oracle/venv/bin/python``).  Exit 0
when every trace matches; a configuration that vLLM itself refuses to start
is counted, not compared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from fpmcore.replay import make_config, run_replay  # noqa: E402
from fpmcore.replay.model import KIND_CHUNK, KIND_FULL, KIND_MAMBA, KIND_RING, KIND_WINDOW, GroupSpec  # noqa: E402
from fpmcore.replay.rules import SCHEDULER_SETTINGS, ReplayRules, default_rules  # noqa: E402
from fpmcore.replay.trace import from_sched_json  # noqa: E402


def _default_oracle_python() -> str:
    """This interpreter when it has vLLM (tox -e vllm033-real), else the oracle's venv."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    return str(Path.home() / ".cache/fpm-oracle/venv/bin/python")


ORACLE_PY = os.environ.get("FPM_ORACLE_PY") or _default_oracle_python()
BLOCK = 16
KINDS = ("plain", "window", "gdn", "glm")
#: Every kind ``--kinds`` takes: the default ones and chunked-local attention.
ALL_KINDS = (*KINDS, "chunk")


def oracle_features() -> dict[str, Any]:
    """What the oracle's vLLM has (``vllm_sched.py --features``): its version, KV cache layouts, ring
    groups, Mamba prefill checkpoint blocks and the fields of its ``SchedulerConfig``."""
    proc = subprocess.run(
        [ORACLE_PY, str(ROOT / "tools" / "vllm_sched.py"), "--features"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm_sched.py --features failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def oracle_rules(features: dict[str, Any]) -> ReplayRules:
    """The replay rules of the oracle's vLLM: those its runtime plugin gives (``fpm_replay_rules``).

    A release without a runtime plugin that gives them is refused (R-1), as ``fpm replay`` refuses it.
    """
    from fpmcore.host.build import build_host

    return build_host().hooks.replay_rules(f"vllm=={features['version']}")


#: The oracle's vLLM as the generator sees it when no runtime is given (vLLM 0.33.0's features).
DEFAULT_FEATURES: dict[str, Any] = {"kv_cache_layouts": True}


def _attn(indices: list[int], spec: str = "FullAttentionSpec", **kw: Any) -> dict[str, Any]:
    return {
        "name": "model.layers.{i}.self_attn.attn",
        "indices": indices,
        "spec": {"type": spec, "num_kv_heads": 1, "head_size": 16, "dtype": "bfloat16", **kw},
    }


def scheduler_settings(
    rng: random.Random, max_model_len: int, settings: frozenset[str] = SCHEDULER_SETTINGS
) -> dict[str, Any]:
    """vLLM scheduler settings, each either vLLM's default or a random value; only the ``settings`` the runtime has."""
    budget = rng.choice([16, 32, 48, 64, 128, 256])
    seqs = rng.randint(1, 6)
    s: dict[str, Any] = {"max_num_batched_tokens": budget, "max_num_seqs": seqs}
    # Each draw is made whether or not the runtime has the setting, so that one seed draws the same traces.
    draws = {
        "scheduler_reserve_full_isl": rng.random() < 0.6,
        "watermark": rng.choice([0.0, 0.0, 0.0, 0.05, 0.1]),
        "max_num_scheduled_tokens": (
            rng.choice([max(budget // 2, 1), max(budget - 5, 1), budget + 16]) if rng.random() < 0.3 else None
        ),
        "max_num_active_seqs": rng.randint(1, seqs) if rng.random() < 0.3 else None,
    }
    threshold = rng.random() < 0.35
    draws["long_prefill_token_threshold"] = min(rng.choice([4, 8, 16, 24, 40]), max_model_len) if threshold else None
    draws["long_prefill_token_threshold_adaptive"] = (rng.random() < 0.5) if threshold else None
    draws["prefill_schedule_interval"] = rng.randint(2, 4) if rng.random() < 0.25 else None
    draws["scheduling_policy"] = "priority" if rng.random() < 0.35 else None
    draws["max_num_queued_reqs"] = rng.randint(1, 8) if rng.random() < 0.2 else None
    draws["max_num_queued_tokens"] = rng.choice([0, 40, 120, 300]) if rng.random() < 0.2 else None
    for name in ("scheduler_reserve_full_isl", "watermark"):
        s[name] = draws[name] if name in settings else {"scheduler_reserve_full_isl": True, "watermark": 0.0}[name]
    for name, value in draws.items():
        if value is None or name not in settings or name in s:
            continue
        s["policy" if name == "scheduling_policy" else name] = value
    return s


def model_json(
    kind: str,
    rng: random.Random,
    caching: bool,
    max_model_len: int,
    rules: ReplayRules | None = None,
    features: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A small MODEL.json for the oracle (its ``examples/README.md`` format): what the oracle's vLLM has
    (``features``), with the scheduler settings the replay models for it (``rules``)."""
    rules = rules or default_rules()
    features = features or DEFAULT_FEATURES
    sched = scheduler_settings(rng, max_model_len, rules.settings)
    m: dict[str, Any] = {"max_model_len": max_model_len, "available_memory_bytes": 10**9, "scheduler": sched}
    per_req = -(-max_model_len // BLOCK)
    t = sched["max_num_batched_tokens"]
    if kind == "plain":
        m["supported_layouts"] = ["LBNHC"]
        m["cache"] = {"block_size": BLOCK}
        m["layers"] = [_attn([0, 1])]
        need = per_req
    elif kind == "window":
        w = rng.choice([8, 16, 33, 48, 64])
        m["supported_layouts"] = ["LBNHC"]
        m["cache"] = {"block_size": BLOCK}
        window_need = -(-min(w - 1 + t, max_model_len) // BLOCK) + 1
        if rng.random() < 0.3:  # sliding window alone (one KV cache group)
            m["layers"] = [_attn([0, 1], "SlidingWindowSpec", sliding_window=w)]
            need = window_need
        else:
            m["layers"] = [_attn([0, 2]), _attn([1, 3], "SlidingWindowSpec", sliding_window=w)]
            need = per_req + window_need
    elif kind == "chunk":
        c = rng.choice([16, 32, 48, 64, 100])
        m["supported_layouts"] = ["LBNHC"]
        m["cache"] = {"block_size": BLOCK}
        # vLLM's startup check sizes a chunked-local group at most as a full one: a request of max_model_len fits
        if rng.random() < 0.3:  # chunked-local attention alone (one KV cache group)
            m["layers"] = [_attn([0, 1], "ChunkedLocalAttentionSpec", attention_chunk_size=c)]
            need = per_req
        else:  # one full layer and three chunked-local ones: vLLM makes four groups of one layer
            m["layers"] = [_attn([3]), _attn([0, 1, 2], "ChunkedLocalAttentionSpec", attention_chunk_size=c)]
            need = 4 * per_req
    else:
        ngroups_mamba = rng.choice([1, 2])
        ck = rng.choice([0, 1, 1])
        align = rng.choice([1, 2, 4, 8, 16])
        mamba_spec = {
            "type": "MambaSpec",
            "shapes": [[8, 3], [2, 8, 8]],
            "dtypes": ["bfloat16", "float32"],
            "mamba_type": "GDN_ATTN",
        }
        if rules.no_mamba_checkpoints:
            ck = 0  # the runtime's MambaSpec has no checkpoint fields
        else:
            mamba_spec["num_prefill_checkpoint_blocks"] = ck
        if ck:
            mamba_spec["prefill_checkpoint_alignment"] = align
        # vLLM groups layers into groups of the attention group's layer count.
        layers = [{"name": "model.layers.{i}.self_attn", "indices": list(range(ngroups_mamba)), "spec": mamba_spec}]
        ring = 0
        if kind == "gdn":
            layers.append(
                {
                    "name": "model.layers.{i}.self_attn.attn",
                    "indices": [ngroups_mamba],
                    "spec": {"type": "FullAttentionSpec", "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"},
                }
            )
        else:
            # A vLLM without KV cache layouts (0.27.0) unifies the group pages by growing the
            # attention block: an MLA page of 128 × 16 × 2 bytes equals the padded Mamba page,
            # so that every group keeps the block of 16.
            mla_head = 64 if features["kv_cache_layouts"] else 128
            layers.append(
                {
                    "name": "model.layers.{i}.self_attn.attn",
                    "indices": [ngroups_mamba],
                    "spec": {
                        "type": "MLAAttentionSpec",
                        "num_kv_heads": 1,
                        "max_tp_shards": 1,
                        "head_size": mla_head,
                        "dtype": "bfloat16",
                        "cache_dtype_str": "auto",
                    },
                }
            )
            if rng.random() < 0.7 and not rules.no_ring_groups:
                ring = 1
                layers.append(
                    {
                        "name": "model.layers.{i}.self_attn.indexer.tail_cache",
                        "indices": [ngroups_mamba],
                        "spec": {
                            "type": "CircularBufferSpec",
                            "block_size": 16,
                            "num_kv_heads": 1,
                            "head_size": 16,
                            "head_size_v": 0,
                            "dtype": "bfloat16",
                            "dcp_sharded": False,
                        },
                    }
                )
        m["kv_cache_layout"] = "BLHNC"
        m["cache"] = {"block_size": BLOCK, "mamba_page_size_padded": 4096}
        m["layers"] = layers
        need = per_req + ngroups_mamba * (3 if caching else 1) + ring
    slack = rng.choice([0, 1, 2, 4, 8, 24]) if not caching else rng.choice([0, 2, 8, 24, 48, 96])
    m["cache"]["num_gpu_blocks_override"] = need + 1 + slack
    return m


def _hash_ids(rng: random.Random, d: dict[str, Any], hashed: dict[str, Any]) -> None:
    """Give request ``d`` content-block ids (``hash_ids``): mostly an earlier request's leading ids, then
    ids of a small alphabet, so chains share leading blocks, part, and meet again further on."""
    size = hashed["size"]
    need = -(-d["prompt_len"] // size)
    ids: list[int] = []
    if hashed["ids"] and rng.random() < 0.75:
        src = rng.choice(hashed["ids"])
        ids = src[: min(len(src), need) if rng.random() < 0.6 else rng.randint(0, min(len(src), need))]
    while len(ids) < need:
        ids.append(rng.randrange(4) if rng.random() < 0.7 else rng.randrange(2**63))
    d["hash_ids"], d["hash_block_tokens"] = ids, size
    hashed["ids"].append(ids)


def random_trace(
    rng: random.Random, max_model_len: int, share: bool, priorities: bool, hash_block: int | None = None
) -> dict[str, Any]:
    """Random requests; with ``share`` many copy a prefix of an earlier request (``prefix_from``),
    mostly a long one (a system prompt, a conversation's history), arriving at or after it.  With
    ``hash_block`` most requests give their prompts as content-block ids of that many tokens each
    (``hash_ids``) that agree on leading blocks with any earlier request."""
    n = rng.randint(1, 12)
    reqs: dict[str, Any] = {}
    hashed: dict[str, Any] | None = {"size": hash_block, "ids": []} if hash_block else None
    for i in range(n):
        d = {
            "prompt_len": rng.randint(1, min(max_model_len - 2, rng.choice([40, 120, 300]))),
            "seed": rng.randint(1, 10**6),
            "max_tokens": rng.randint(1, rng.choice([4, 24, 64, 160])),
            "arrival_step": rng.choice([0, 0, 0, 1, 2, 3, 5, 8]),
        }
        if hashed is not None and rng.random() < 0.9:
            _hash_ids(rng, d, hashed)
        elif share and i > 0 and rng.random() < 0.65:
            src = f"r{rng.randrange(i)}"
            most = min(d["prompt_len"], reqs[src]["prompt_len"])
            if rng.random() < 0.7:
                d["prompt_len"] = max(d["prompt_len"], reqs[src]["prompt_len"] + rng.randint(-8, 40))
                d["prompt_len"] = min(d["prompt_len"], max_model_len - 2)
                most = min(d["prompt_len"], reqs[src]["prompt_len"])
                d["prefix_len"] = max(1, most - rng.randint(0, 8))
            else:
                d["prefix_len"] = rng.randint(1, most)
            d["prefix_from"] = src
            d["arrival_step"] = reqs[src]["arrival_step"] + rng.choice([0, 0, 1, 2, 4, 8, 16])
        if priorities:
            d["priority"] = rng.randint(-2, 2)
        reqs[f"r{i}"] = d
    return {"max_steps": 5000, "requests": reqs}


def fpm_config(plan: dict[str, Any], model: dict[str, Any], caching: bool, rules: ReplayRules | None = None):
    """The replay configuration of vLLM's own cache plan and scheduler settings (06 R-1)."""
    page = plan["bytes_per_block"]
    groups = []
    for i, g in enumerate(plan["groups"]):
        name = f"runtime_group_{i}"
        if g["type"] in ("FullAttentionSpec", "MLAAttentionSpec"):
            groups.append(GroupSpec(name, KIND_FULL, g["block_size"], page))
        elif g["type"] == "SlidingWindowSpec":
            groups.append(GroupSpec(name, KIND_WINDOW, g["block_size"], page, window=g["sliding_window"]))
        elif g["type"] == "ChunkedLocalAttentionSpec":
            groups.append(GroupSpec(name, KIND_CHUNK, g["block_size"], page, window=g["attention_chunk_size"]))
        elif g["type"] == "MambaSpec":
            ck = g["num_prefill_checkpoint_blocks"] or 0
            groups.append(
                GroupSpec(
                    name,
                    KIND_MAMBA,
                    g["block_size"],
                    page,
                    blocks_per_request=1,
                    checkpoint_blocks=ck,
                    checkpoint_alignment=g["prefill_checkpoint_alignment"] or 0,
                )
            )
        elif g["type"] == "CircularBufferSpec":
            groups.append(GroupSpec(name, KIND_RING, g["block_size"], page, blocks_per_request=1))
        else:
            raise ValueError(f"unexpected group type {g['type']}")
    s = model["scheduler"]
    return make_config(
        groups,
        plan["usable_blocks"] * page,
        max_num_batched_tokens=s["max_num_batched_tokens"],
        max_num_seqs=s["max_num_seqs"],
        max_model_len=plan["max_model_len"],
        reserve_full_isl=s["scheduler_reserve_full_isl"],
        watermark=s["watermark"],
        prefix_caching=caching,
        hash_block_size=plan["hash_block_size"] if caching else 0,
        fixed_step_seconds=1.0,
        max_num_scheduled_tokens=s.get("max_num_scheduled_tokens"),
        max_num_active_seqs=s.get("max_num_active_seqs"),
        long_prefill_token_threshold=s.get("long_prefill_token_threshold", 0),
        long_prefill_token_threshold_adaptive=s.get("long_prefill_token_threshold_adaptive", False),
        prefill_schedule_interval=s.get("prefill_schedule_interval", 1),
        scheduling_policy=s.get("policy", "fcfs"),
        max_num_queued_reqs=s.get("max_num_queued_reqs"),
        max_num_queued_tokens=s.get("max_num_queued_tokens"),
        rules=rules,
    )


def compare(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str | None:
    """The first difference, or None.

    vLLM reports finished requests one step late, so its loop makes one more
    ``schedule()`` call after the last finish, which schedules nothing; such
    trailing empty steps are not compared.
    """
    while (
        len(theirs) > len(ours)
        and not theirs[-1]["scheduled"]
        and not theirs[-1]["running"]
        and theirs[-1]["waiting"] == 0
    ):
        theirs = theirs[:-1]
    for k in range(max(len(ours), len(theirs))):
        if k >= len(ours) or k >= len(theirs):
            return f"step {k}: replay has {len(ours)} steps, vLLM {len(theirs)}"
        a, b = ours[k], theirs[k]
        checks = [
            ("scheduled", [[r, n] for r, n, _c in a["scheduled"]], b["scheduled"]),
            ("preempted", sorted(a["preempted"]), sorted(b["preempted"])),
            ("rejected", sorted(a["rejected"]), sorted(b.get("rejected", []))),
            ("running", list(a["held_blocks_end"]), b["running"]),
            ("held", a["held_blocks_end"], b["held"]),
            ("waiting", a["waiting"], b["waiting"]),
            ("free_blocks", a["free_blocks"], b["free_blocks"]),
        ]
        for what, x, y in checks:
            if x != y:
                return f"step {k}: {what}: replay {x} != vLLM {y}"
    return None


def build_jobs(
    n: int,
    seed: int,
    kinds: tuple[str, ...] = KINDS,
    rules: ReplayRules | None = None,
    features: dict[str, Any] | None = None,
    hash_traces: int = 0,
) -> list[dict[str, Any]]:
    """``n`` random jobs (model, caching on or off, trace), then ``hash_traces`` jobs with prefix caching
    whose traces give prompts as content-block ids (drawn from a generator of their own, so the first
    ``n`` jobs of a seed stay what they were)."""
    rng = random.Random(seed)
    combos = [(k, c) for k in kinds for c in (False, True)]
    jobs = []
    for i in range(n):
        kind, caching = combos[i % len(combos)]
        L = rng.choice([128, 256, 512])
        model = model_json(kind, rng, caching, L, rules, features)
        priorities = model["scheduler"].get("policy") == "priority"
        jobs.append(
            {
                "kind": kind,
                "caching": caching,
                "model": model,
                "trace": random_trace(rng, L, share=caching and rng.random() < 0.8, priorities=priorities),
            }
        )
    hrng = random.Random(f"{seed}:hash_ids")
    for i in range(hash_traces):
        kind = kinds[i % len(kinds)]
        L = hrng.choice([128, 256, 512])
        model = model_json(kind, hrng, True, L, rules, features)
        priorities = model["scheduler"].get("policy") == "priority"
        block = hrng.choice([8, 16, 24, 40, 100])
        trace = random_trace(hrng, L, share=True, priorities=priorities, hash_block=block)
        jobs.append({"kind": kind, "caching": True, "hash_ids": True, "model": model, "trace": trace})
    return jobs


#: The models a production trace's windows are compared on: full attention, and the GLM-like hybrid.
WINDOW_KINDS = ("plain", "glm")


def trace_windows(
    path: str | Path, starts: list[int], size: int, *, max_prompt_len: int = 16384, ms_per_step: int = 10
) -> list[tuple[str, Any]]:
    """Windows of a trace file of any installed format, read as ``fpm replay`` reads it (the format
    sniffed, ``--start S --limit N --max-prompt-len P --over-long clip``): requests ``start`` …
    ``start + size - 1`` for each of ``starts``, prompts longer than ``max_prompt_len`` clipped with their
    content-block ids, and arrivals as scheduler steps, one step to ``ms_per_step`` ms of the trace's
    time: a request arriving ``t`` ms after the window's first arrives at step ``t // ms_per_step``.
    ``(label, trace)`` per window, the label naming the window's lines (0-based)."""
    import attrs

    from fpmcore.host.build import build_host
    from fpmcore.replay.trace import trace_of
    from fpmcore.traces.reading import read_trace
    from fpmcore.traces.transforms import Transforms

    formats = build_host().hooks.trace_formats()
    out = []
    for start in starts:
        window = Transforms(start=start, limit=size, max_prompt_len=max_prompt_len, over_long="clip")
        trace, _provenance = read_trace(formats, path, transforms=window)
        steps = [
            attrs.evolve(r, arrival_time=None, arrival_step=round(r.arrival_time * 1000) // ms_per_step)
            for r in trace.requests
        ]
        out.append((f"{start}-{start + len(steps) - 1}", trace_of(steps)))
    return out


def window_pool_blocks(model: dict[str, Any], caching: bool, slack: int) -> int:
    """The pool of a window's model: one request of ``max_model_len`` tokens (what vLLM needs to start),
    its Mamba and ring blocks, and ``slack`` blocks more."""
    need = -(-model["max_model_len"] // BLOCK)
    for layer in model["layers"]:
        if layer["spec"]["type"] == "MambaSpec":
            need += len(layer["indices"]) * (3 if caching else 1)
        elif layer["spec"]["type"] == "CircularBufferSpec":
            need += 1
    return need + 1 + slack


def window_jobs(
    windows: list[tuple[str, Any]],
    seed: int,
    rules: ReplayRules | None = None,
    features: dict[str, Any] | None = None,
    kinds: tuple[str, ...] = WINDOW_KINDS,
) -> list[dict[str, Any]]:
    """Jobs of trace windows (:func:`trace_windows`): each window on each model kind with prefix caching
    off and on.  ``max_model_len`` fits the window's longest request, the pool holds one such request and
    a few blocks more (a window's requests of ordinary lengths preempt one another), and the scheduler has
    vLLM's defaults but for a random step budget, ``max_num_seqs`` and ``scheduler_reserve_full_isl``."""
    from fpmcore.replay.trace import to_sched_json

    rules = rules or default_rules()
    rng = random.Random(f"{seed}:windows")
    jobs = []
    for label, trace in windows:
        sched = {**to_sched_json(trace), "max_steps": 1_000_000}
        longest = max(r.prompt_len + r.output_len for r in trace.requests)
        max_model_len = -(-(longest + 1) // 256) * 256
        for kind in kinds:
            for caching in (False, True):
                model = model_json(kind, rng, caching, max_model_len, rules, features)
                full_isl = rng.random() < 0.6 if "scheduler_reserve_full_isl" in rules.settings else True
                model["scheduler"] = {
                    "max_num_batched_tokens": rng.choice([1024, 2048, 4096]),
                    "max_num_seqs": rng.choice([4, 8, 16]),
                    "scheduler_reserve_full_isl": full_isl,
                    "watermark": 0.0,
                }
                slack = rng.choice([0, 64, 256, 1024])
                model["cache"]["num_gpu_blocks_override"] = window_pool_blocks(model, caching, slack)
                jobs.append({"kind": kind, "caching": caching, "window": label, "model": model, "trace": sched})
    return jobs


def run_oracle(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "jobs.json", Path(d) / "out.json"
        src.write_text(json.dumps({"jobs": [{k: j[k] for k in ("model", "caching", "trace")} for j in jobs]}))
        proc = subprocess.run(
            [ORACLE_PY, str(ROOT / "tools" / "vllm_sched.py"), str(src), str(dst)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"vllm_sched.py failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(dst.read_text())["results"]


def _settings_used(model: dict[str, Any]) -> list[str]:
    s = model["scheduler"]
    used = [
        k
        for k in (
            "max_num_scheduled_tokens",
            "max_num_active_seqs",
            "long_prefill_token_threshold",
            "prefill_schedule_interval",
            "max_num_queued_reqs",
            "max_num_queued_tokens",
        )
        if k in s
    ]
    if s.get("long_prefill_token_threshold_adaptive"):
        used.append("long_prefill_token_threshold_adaptive")
    if s.get("policy") == "priority":
        used.append("policy=priority")
    if s["watermark"] > 0:
        used.append("watermark")
    if not s["scheduler_reserve_full_isl"]:
        used.append("no scheduler_reserve_full_isl")
    return used


def differential(
    n: int,
    seed: int,
    backend: str | None = None,
    kinds: tuple[str, ...] = KINDS,
    rules: ReplayRules | None = None,
    hash_traces: int = 0,
) -> dict[str, Any]:
    """Run ``n`` random traces (and ``hash_traces`` traces of content-block ids, their kinds suffixed
    ``/hash``) through vLLM and the replay; a report of the outcome."""
    features = oracle_features()
    rules = rules or oracle_rules(features)
    return compare_jobs(build_jobs(n, seed, kinds, rules, features, hash_traces), features, rules, backend)


def excerpt_windows(seed: int) -> tuple[list[str], ReplayRules, dict[str, Any]]:
    """The shipped Mooncake excerpt's two windows (lines 0–19 and 20–39) compared with the installed vLLM's
    Scheduler (C engine): the windows' labels, the oracle's rules and the report — what each release's test
    asserts on."""
    excerpt = ROOT / "examples" / "traces" / "public" / "mooncake-conversation-40.jsonl"
    windows = trace_windows(excerpt, [0, 20], 20)
    features = oracle_features()
    rules = oracle_rules(features)
    report = compare_jobs(window_jobs(windows, seed, rules, features), features, rules, backend="c")
    return [label for label, _t in windows], rules, report


def compare_jobs(
    jobs: list[dict[str, Any]], features: dict[str, Any], rules: ReplayRules, backend: str | None = None
) -> dict[str, Any]:
    """Run ``jobs`` through vLLM and the replay, step by step; a report of the outcome, by kind: the model's
    kind, ``on``/``off`` (prefix caching), then ``/hash`` for random traces of content-block ids and
    ``/window`` for windows of a production trace (these also one by one, under ``windows``)."""
    n = len(jobs)
    results = run_oracle(jobs)
    report: dict[str, Any] = {"vllm": features["version"], "rules": rules.runtime, "traces": n, "compared": 0, "matched": 0, "vllm_refused": 0, "steps": 0,
                              "preemptions": 0, "prefix_hit_requests": 0, "prefix_hit_tokens": 0, "rejected": 0,
                              "settings": {}, "mismatches": [], "refusals": [], "by_kind": {}}  # fmt: skip
    for i, (job, res) in enumerate(zip(jobs, results)):
        suffix = "/window" if "window" in job else "/hash" if job.get("hash_ids") else ""
        key = f"{job['kind']}/{'on' if job['caching'] else 'off'}{suffix}"
        kr = report["by_kind"].setdefault(
            key,
            {
                "compared": 0,
                "matched": 0,
                "steps": 0,
                "preemptions": 0,
                "prefix_hit_requests": 0,
                "prefix_hit_tokens": 0,
                "rejected": 0,
            },
        )
        if "error" in res:
            report["vllm_refused"] += 1
            report["refusals"].append({"job": i, "kind": key, "error": res["error"]})
            continue
        vsteps = res["steps"]
        cfg = fpm_config(res["plan"], job["model"], job["caching"], rules)
        trace = from_sched_json(job["trace"])
        out = run_replay(cfg, trace, backend=backend)
        npre = sum(len(s["preempted"]) for s in vsteps)
        hits = [r["prefix_hit_tokens"] for r in out.requests if r["prefix_hit_tokens"]]
        nrej = sum(len(s.get("rejected", [])) for s in vsteps)
        for kr_or_total in (report, kr):
            kr_or_total["compared"] += 1
            kr_or_total["steps"] += len(out.steps)
            kr_or_total["preemptions"] += npre
            kr_or_total["prefix_hit_requests"] += len(hits)
            kr_or_total["prefix_hit_tokens"] += sum(hits)
            kr_or_total["rejected"] += nrej
        for name in _settings_used(job["model"]):
            report["settings"][name] = report["settings"].get(name, 0) + 1
        diff = compare(list(out.steps), vsteps) if out.error is None else f"replay stopped: {out.error}"
        if "window" in job:
            report.setdefault("windows", []).append(
                {"window": job["window"], "kind": key, "requests": len(trace.requests), "steps": len(out.steps),
                 "preemptions": npre, "prefix_hit_requests": len(hits), "prefix_hit_tokens": sum(hits),
                 "identical": diff is None}
            )  # fmt: skip
        if diff is None:
            report["matched"] += 1
            kr["matched"] += 1
        else:
            report["mismatches"].append(
                {"job": i, "kind": key, "diff": diff, "model": job["model"], "trace": job["trace"]}
            )
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", choices=("c", "python"), default=None)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"comma-separated model kinds of {', '.join(ALL_KINDS)} (default: {', '.join(KINDS)})")  # fmt: skip
    ap.add_argument("--hash-traces", type=int, default=0,
                    help="also this many traces of content-block ids (hash_ids), prefix caching on")  # fmt: skip
    ap.add_argument(
        "--windows",
        metavar="TRACE",
        help="compare windows of this trace (any installed format; the Mooncake conversation trace) "
        "instead of random traces, on the plain and GLM-like models, prefix caching off and on",
    )
    ap.add_argument("--window-starts", default="0", help="comma-separated first lines (0-based) of the windows")
    ap.add_argument("--window-size", type=int, default=40, help="requests per window")
    ap.add_argument("--max-prompt-len", type=int, default=16384, help="longer prompts of a window are clipped")
    ap.add_argument("--ms-per-step", type=int, default=10, help="milliseconds of the trace's time per step")
    ap.add_argument("--json", metavar="OUT", help="write the full report")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown:
        ap.error(f"unknown model kind {unknown[0]!r}; kinds: {', '.join(ALL_KINDS)}")
    import time

    t0 = time.monotonic()
    if args.windows:
        starts = [int(s) for s in args.window_starts.split(",") if s]
        windows = trace_windows(args.windows, starts, args.window_size, max_prompt_len=args.max_prompt_len,
                                ms_per_step=args.ms_per_step)  # fmt: skip
        features = oracle_features()
        rules = oracle_rules(features)
        jobs = window_jobs(windows, args.seed, rules, features, tuple(k for k in kinds if k in WINDOW_KINDS))
        rep = compare_jobs(jobs, features, rules, args.backend)
    else:
        rep = differential(args.traces, args.seed, args.backend, kinds, hash_traces=args.hash_traces)
    rep["seconds"] = round(time.monotonic() - t0, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(rep, indent=1))
    summary = {k: v for k, v in rep.items() if k not in ("mismatches", "refusals")}
    print(json.dumps(summary, indent=1))
    for m in rep["mismatches"][:10]:
        print(f"job {m['job']} ({m['kind']}): {m['diff']}")
    for m in rep["refusals"][:5]:
        print(f"vLLM refused job {m['job']} ({m['kind']}): {m['error'][:200]}")
    return 0 if not rep["mismatches"] else 1


if __name__ == "__main__":
    sys.exit(main())
