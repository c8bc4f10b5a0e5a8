"""Never an exception (02 §6.2): values of the wrong JSON type anywhere in a record give a rule, not I-0.

The sweep replaces the value at many key paths of a prefill worker record and
of the prefill scheduler record with values of other JSON types, and runs the
rules on the records in memory (stages B to M; stage A's file checks are
covered elsewhere).  Every edit must be refused by a named rule other than
I-0, the catch-all for unexpected exceptions.
"""

from __future__ import annotations

from typing import Any

import fpm_import_glm_fixture as G
import pytest

from fpmcore.importer.pipeline import _stages
from fpmcore.importer.record_values import same
from fpmcore.importer.state import ImportState, Record, parse_record_name

WRONG = (None, "x", -1, 1.5, True, [], {})


def paths(value: Any, prefix: tuple = (), depth: int = 0) -> list[tuple]:
    """Key paths of a record, one list element per list (the first), down to depth 5."""
    out = []
    if depth > 5:
        return out
    if isinstance(value, dict):
        items = list(value.items())
        if prefix and prefix[-1] in ("layer_specs", "layer_views"):
            items = items[:1]
        for k, v in items:
            out.append(prefix + (k,))
            out += paths(v, prefix + (k,), depth + 1)
    elif isinstance(value, list) and value and prefix[-1:] not in (("layer_names",), ("layers",)):
        out.append(prefix + (0,))
        out += paths(value[0], prefix + (0,), depth + 1)
    return out


def in_memory(ev: G.Evidence, services) -> ImportState:
    ctx = ImportState(
        folder=".", label=ev.config, services=services, index_ref={"path": "observations.json", "sha256": ""}
    )
    ctx.launch, ctx.attempt_id = ev.launch, ev.attempt
    for phase in G.PHASES:
        for name, rec in ev.records[phase].items():
            kind, rank = parse_record_name(name)
            ctx.records.append(
                Record(phase=phase, path=ev.path(phase, name), sha256="", data=rec, name_kind=kind, name_rank=rank)
            )
    return ctx


def _get(obj: Any, path: tuple) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


WORKER_PATHS = [p for p in paths(G.record("prefill", "worker", 0)) if p[0] not in ("launch",)]
SCHEDULER_PATHS = [p for p in paths(G.record("prefill", "scheduler", None)) if p[0] not in ("launch",)]


def test_in_memory_runner_accepts_the_fixture(services):
    ctx = in_memory(G.Evidence(), services)
    assert _stages(ctx), [d.render() for d in ctx.diagnostics]


@pytest.mark.parametrize("kind,half", [("worker", 0), ("scheduler", 1)])
def test_wrong_types_everywhere(services, kind, half):
    """Every other key path of the record (worker: even ones, scheduler: odd ones), with rotating wrong values."""
    paths_ = WORKER_PATHS if kind == "worker" else SCHEDULER_PATHS
    assert len(paths_) > 100
    all_paths = paths_[half::2]
    base = G.Evidence()
    failures = []
    checked = 0
    for i, path in enumerate(all_paths):
        value = WRONG[(i + half) % len(WRONG)]
        ev = G.Evidence.__new__(G.Evidence)
        ev.__dict__.update(base.__dict__)
        ev.records = {ph: dict(recs) for ph, recs in base.records.items()}
        name = G.worker_name(0) if kind == "worker" else G.scheduler_name()
        record = G.record("prefill", kind, 0 if kind == "worker" else None)
        try:
            original = _get(record, path)
            if same(original, value):
                continue
            _set(record, path, value)
        except (KeyError, IndexError, TypeError):
            continue
        ev.records["prefill"] = dict(ev.records["prefill"], **{name: record})
        ctx = in_memory(ev, services)
        try:
            ok = _stages(ctx)
        except Exception as exc:  # the pipeline turns this into I-0 (02 §6.2); here it is a finding
            import traceback

            failures.append(
                (path, value, f"{type(exc).__name__}: {exc} at {traceback.extract_tb(exc.__traceback__)[-1][:3]}")
            )
            continue
        checked += 1
        rules = {d.rule for d in ctx.diagnostics}
        if "I-0" in rules:
            failures.append((path, value, [d.render() for d in ctx.diagnostics if d.rule == "I-0"]))
        elif ok and not _harmless(path, value):
            failures.append((path, value, "accepted"))
    assert checked > 40
    assert failures == []


def _harmless(path: tuple, value: Any) -> bool:
    """Edits that leave valid evidence (values that no rule reads, or equal in meaning)."""
    text = ".".join(str(p) for p in path)
    # free-form strings and open maps no rule judges, and a null observer error
    return (
        text.startswith(
            (
                "runtime.source_files",
                "cache.attention_groups.0.backend",
                "cache.model_runner.class",
                "cache.model_runner.version",
            )
        )
        # a scheduler's mamba_block_size is set per process and read by no rule (02 §3.4 note)
        or (text == "settings.cache.mamba_block_size" and value is None)
        or (path[-1] == "error" and value is None)
        or (text == "settings.cache.cpu_offload_gb" and value == 0)
    )
