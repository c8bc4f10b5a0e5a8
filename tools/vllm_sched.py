#!/usr/bin/env python3
"""Drive a real vLLM release's own Scheduler (0.33.0, 0.32.0 or 0.27.0) with step-exact traces (06 R-40).

Runs in the vLLM oracle's venv (it imports the oracle harness
``vllm_oracle.py``, whose directory is ``$FPM_ORACLE_DIR``, default
this folder), never in fpmcore's own environment::

    $ORACLE_PY tools/vllm_sched.py JOBS.json OUT.json

``JOBS.json`` is ``{"jobs": [{"model": MODEL.json, "caching": bool,
"trace": SCHED.json}, ...]}`` (the oracle's formats, ``examples/README.md``
of the oracle).  For every job the real ``Scheduler`` runs exactly as the
oracle's ``sched`` command drives it: for each step ``k`` the requests whose
``arrival_step`` is ``k`` pass vLLM's front-end admission (``AsyncLLM.check_admission``
with the real ``OutputProcessor``: ``max_num_queued_reqs``, ``max_num_queued_tokens``)
and are added, ``schedule()`` is called once, a fake model runner samples one
token for every request whose prefill is complete, and ``update_from_output``
is applied (its outputs go back to the front end).  ``OUT.json`` holds, per job, the
cache plan (pool page, ``num_blocks``, groups) and the per-step records:
scheduled tokens in batch order, preemptions, ``free_blocks``, waiting
count, and the held (non-null) blocks per group of every running request.

This driver is fpmcore's own, with no upstream file; the oracle it imports is
vendored (``vllm_oracle.py``, whose docstring names its upstream, the
specification's vLLM oracle, and how this copy differs).  It runs the oracle's
``sched`` loop for many jobs in one process; the oracle's differences from
upstream (release-detected entry points, front-end admission) are what let it
drive vLLM 0.33.0, 0.32.0 and 0.27.0 alike.
"""

from __future__ import annotations

import json
import os
import sys

_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}


def _ensure_env() -> None:
    """The oracle's environment, set before vLLM is imported; re-exec once for ``PYTHONHASHSEED=0``."""
    for key, value in _ENV.items():
        os.environ.setdefault(key, value)
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])


def _oracle():
    _ensure_env()
    path = os.environ.get("FPM_ORACLE_DIR", os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, path)
    import vllm_oracle  # noqa: E402  (re-executes with PYTHONHASHSEED=0 on first import)

    return vllm_oracle


def _groups(plan_report: dict) -> list[dict]:
    out = []
    for g in plan_report["groups"]:
        s = g["scheduler_spec"]
        out.append(
            {
                "type": s["type"],
                "block_size": s.get("block_size"),
                "sliding_window": s.get("sliding_window"),
                "attention_chunk_size": s.get("attention_chunk_size"),
                "num_prefill_checkpoint_blocks": s.get("num_prefill_checkpoint_blocks"),
                "prefill_checkpoint_alignment": s.get("prefill_checkpoint_alignment"),
                "mamba_cache_mode": s.get("mamba_cache_mode"),
                "num_layers": g["num_layers"],
            }
        )
    return out


def features(vo) -> dict:
    """What the installed vLLM has that the random models and settings depend on."""
    import dataclasses

    from vllm.config import SchedulerConfig
    from vllm.v1 import kv_cache_interface as kvi

    return {
        "version": vo.vllm.__version__,
        "kv_cache_layouts": vo.resolve_kv_cache_layout is not None,
        "ring_groups": hasattr(kvi, "CircularBufferSpec"),
        "mamba_prefill_checkpoints": "num_prefill_checkpoint_blocks"
        in {f.name for f in dataclasses.fields(kvi.MambaSpec)},
        "scheduler_config_fields": sorted(f.name for f in dataclasses.fields(SchedulerConfig)),
    }


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "--features":
        print(json.dumps(features(_oracle())))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    vo = _oracle()
    jobs = json.load(open(argv[1]))["jobs"]
    results = []
    for job in jobs:
        model = vo._merge(job["model"], job["trace"].get("model_overrides", {}))
        try:
            out = vo.run_scheduler_trace(model, job["trace"], bool(job["caching"]))
        except Exception as exc:  # a configuration vLLM refuses: report, do not stop the batch
            results.append({"error": f"{type(exc).__name__}: {exc}"})
            continue
        rep = out["plan"]
        steps = []
        for s in out["steps"]:
            steps.append(
                {
                    "step": s["step"],
                    "scheduled": [[rid, n] for rid, n in s["scheduled"].items()],
                    "preempted": s["preempted"],
                    "finished": s["finished"],
                    "rejected": s.get("rejected", []),
                    "free_blocks": s["free_blocks"],
                    "waiting": s["waiting"],
                    "running": s["running"],
                    "held": {rid: [hb[0] for hb in v] for rid, v in s["blocks"].items()},
                }
            )
        results.append(
            {
                "plan": {
                    "bytes_per_block": rep["bytes_per_block"],
                    "num_blocks": rep["num_blocks"],
                    "usable_blocks": rep["usable_blocks"],
                    "hash_block_size": rep.get("hash_block_size"),
                    "scheduler_block_size": rep.get("scheduler_block_size"),
                    "max_model_len": rep["max_model_len"],
                    "mamba_cache_mode": rep.get("mamba_cache_mode"),
                    "groups": _groups(rep),
                },
                "steps": steps,
            }
        )
    with open(argv[2], "w") as f:
        json.dump({"results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
