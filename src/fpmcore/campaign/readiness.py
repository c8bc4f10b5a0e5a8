"""Readiness: may the full collection start?  What ``fpm onboard`` decides after the smoke collection.

A full collection of a tiny model takes minutes, of a real one hours; the
smoke subset (04 G-24: a handful of the plan's points, measured with the same
protocol) exists to find out first whether the full one can succeed.
:func:`readiness` reads the smoke run, the plan and the profile and writes
``readiness.json``::

    {"schema": 1, "kind": "fpmcore.readiness", "ready_for_full_collection": true|false,
     "blockers": [{"rule", "message", "fix"}], "gaps": [...], "smoke": {...}}

**Blockers** (each with its rule and its fix; any one stops the campaign
before the full collection):

* **A smoke point was rejected** — it exhausted its rejections or could not
  get clean samples (``fpm collect``'s refusal, its rule: the workload the
  engine ran differs from the point, A-43 contention): the full collection
  would stop at the same point.
* **The smoke run does not validate** (its A- rule): the full run would not
  either.
* **Contention too high to measure clean samples** (A-43): more than half of
  the smoke's measured samples were contended and retaken — the machine is
  busy; a full collection would take several times longer and risk failing
  points.  Fix: stop the other work, start a new campaign.
* **The engine fell back to another dtype** (A-46): the engine ran the
  model in another dtype than asked for (``--dtype``), so its table would
  describe another deployment.
* **The plan does not follow from the profile** (G-26): the plan's drop
  counters or its staged list differ from the plan the profile's capacity
  gives now (a plan made for another capacity).

**Gaps** (reported, not blocking): points whose passes still disagreed after
re-measuring (A-44), and the validation's own gaps.

``fpm onboard`` records the readiness stage as done whatever it found; the
full collection stage starts only when ``ready_for_full_collection`` is true,
and ``fpm onboard --resume`` of a blocked campaign reports the first blocker
(exit 1) instead of starting it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KIND = "fpmcore.readiness"
#: More than this fraction of the smoke's measured samples contended: the machine is too busy (A-43).
MAX_CONTENDED_SHARE = 0.5


def dtype_label(value: Any) -> str | None:
    """A dtype as one label: ``torch.float32`` → ``float32``, ``half`` → ``float16``, ``bf16`` → ``bfloat16``."""
    if not isinstance(value, str) or not value:
        return None
    label = value.removeprefix("torch.")
    return {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32", "fp32": "float32"}.get(
        label, label
    )


def blocker(rule: str, message: str, fix: str) -> dict[str, str]:
    return {"rule": rule, "message": message, "fix": fix}


def readiness(
    smoke_dir: Path,
    plan: Mapping[str, Any],
    *,
    host: Any,
    profile: Any,
    failure: Mapping[str, str] | None = None,
    dtype: str | None = None,
) -> dict[str, Any]:
    """The readiness document of a smoke collection (module docstring)."""
    from fpmcore.collect import store

    blockers: list[dict[str, str]] = []
    gaps: list[str] = []
    smoke: dict[str, Any] = {"run": smoke_dir.name}
    if failure is not None:
        blockers.append(blocker(failure["rule"], f"a smoke point was rejected: {failure['message']}",
                                "the full collection would stop at the same point: fix what the message names "
                                "(for contention: stop other work on the machine), then start a new campaign"))  # fmt: skip
    run: dict[str, Any] | None = None
    if (smoke_dir / store.RUN_FILE).is_file():
        run = store.RunFolder(smoke_dir).read_run()
    if run is not None:
        lines = []
        sidecar = smoke_dir / store.SIDECAR
        if sidecar.is_file():
            import orjson

            lines = [orjson.loads(x) for x in sidecar.read_bytes().splitlines() if x]
        reps = [rep for line in lines for rep in line["repetitions"]]
        measured = sum(1 for r in reps if r.get("role") == "measured")
        contended = sum(1 for r in reps if r.get("role") == "contended")
        smoke.update(points=len(lines), measured_samples=measured, contended_samples=contended)
        if measured + contended and contended > MAX_CONTENDED_SHARE * (measured + contended):
            blockers.append(blocker(
                "A-43", f"contention too high to measure clean samples: {contended} of {measured + contended} smoke "
                        "samples were contended and retaken",
                "stop the other work on the machine (the load average is in the collection's records), then start "
                "a new campaign"))  # fmt: skip
        gaps += [f"benchmark_id={line['benchmark_id']}: its passes disagree beyond the protocol's bound after "
                 "re-measuring [A-44]" for line in lines if line.get("flagged")]  # fmt: skip
        ran = dtype_label((run.get("serving_config") or {}).get("dtype"))
        want = dtype_label(dtype) or dtype_label((plan.get("engine") or {}).get("dtype"))
        if ran is not None and want is not None and ran != want:
            blockers.append(blocker("A-46", f"the engine ran the model in {ran}, not in the {want} asked for",
                                    f"give a --dtype the engine runs this model in ({ran}), or install a runtime "
                                    f"that runs {want}, then start a new campaign"))  # fmt: skip
        if (smoke_dir / store.INDEX).is_file() and failure is None:
            from fpmcore.validate.reader import validate_run

            for r in validate_run(host, smoke_dir, plan):
                for d in r.diagnostics:
                    blockers.append(blocker(d.rule, f"the smoke run does not validate: {d.message}",
                                            "the full run would be refused the same way: fix the cause"))  # fmt: skip
                gaps += list(r.gaps)
    blockers += _plan_blockers(plan, host, profile)
    return {
        "schema": 1, "kind": KIND, "ready_for_full_collection": not blockers, "blockers": blockers,
        "gaps": gaps, "smoke": smoke,
    }  # fmt: skip


def _plan_blockers(plan: Mapping[str, Any], host: Any, profile: Any) -> list[dict[str, str]]:
    """G-26: the plan is the one the profile's capacity gives at the plan's own limits (its drop counters and
    staged list): a plan made from another profile, or for another capacity, is not."""
    from fpmcore.plan.planning import generate, plan_document, resolve_limits

    lim = plan.get("limits") or {}
    dep = plan.get("deployment", 0)
    try:
        limits = resolve_limits(profile, dep if isinstance(dep, int) else 0,
                                **{k: lim[k] for k in ("token_budget", "max_model_len", "block_size", "hash_block_size")
                                   if isinstance(lim.get(k), int)})  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a plan whose limits the profile refuses is a blocker, not a crash
        return [blocker("G-26", f"the plan's limits do not apply to the profile: {exc}", "plan again")]
    fresh = plan_document(model=profile.model, profile=profile, deployment=dep, limits=limits,
                          plan=generate(host, profile.model, profile, dep, limits))  # fmt: skip
    out = []
    if fresh.get("dropped") != plan.get("dropped"):
        out.append(blocker("G-26", f"the plan's drop counters {plan.get('dropped')} differ from those the profile's "
                                   f"capacity gives now {fresh.get('dropped')}",
                           "plan again from the campaign's profile (a plan made for another capacity)"))  # fmt: skip
    key = ("options", "benchmark_points", "manifest_sha256")

    def manifest(doc: Mapping[str, Any]) -> Any:
        return ((doc.get(key[0]) or {}).get(key[1]) or {}).get(key[2])

    if manifest(fresh) != manifest(plan):
        out.append(blocker("G-26", f"the plan's staged list {manifest(plan)} is not the one the profile gives now "
                                   f"{manifest(fresh)}", "plan again from the campaign's profile"))  # fmt: skip
    return out


def first_blocker(doc: Mapping[str, Any]) -> str:
    """The first blocker as one line: ``message [rule]; fix: …``."""
    blockers: Sequence[Mapping[str, str]] = doc.get("blockers") or []
    if not blockers:
        return "no blocker"
    b = blockers[0]
    more = f" (and {len(blockers) - 1} more in readiness.json)" if len(blockers) > 1 else ""
    return f"{b['message']} [{b['rule']}]; fix: {b['fix']}{more}"


def read_readiness(path: Path) -> dict[str, Any]:
    from fpmcore.documents.errors import FpmError
    from fpmcore.documents.jsonio import load_path

    doc = load_path(path)
    if not isinstance(doc, dict) or doc.get("kind") != KIND or type(doc.get("ready_for_full_collection")) is not bool:
        raise FpmError("onboard", f"not a readiness document of fpm onboard (kind {KIND})", str(path))
    return doc
