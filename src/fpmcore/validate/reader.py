"""The measurement reader: the verdict of one cell, its publication, and a whole run (05 §6, §8).

:func:`validate_files` reads one attempt for one frozen cell: the structural
rules that hold for every producer (A-1 … A-13), then the producer contract
chosen from the cell's execution identity (A-14, 05 §6.3 — never from the
artifact's own ``execution_mode`` label), then the rules from A-15 on: the
general ones here (cells without a configuration-bound identity), or those of
the model plugin that owns the contract (``fpm_validate_artifact``).
:func:`publish_files` adds publication (A-41, A-42); :func:`validate_run`
reads every attempt of a run directory against its plan.

The host never names a model or a runtime version: every producer-specific
rule lives in the plugin that owns the producer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import Diagnostic, ExecutionIdentity, ProducerContract
from fpmcore.validate.attempt import attempts
from fpmcore.validate.cell import GENERAL, HEX64, CellView, plan_digest
from fpmcore.validate.evaluation import (
    GENERAL_CONTRACT,
    run_artifact_rules,
    run_rules,
    safe,
)
from fpmcore.validate.measured_values import ABSENT, get, js, plain, shown
from fpmcore.validate.rows import expected_regime, measurement
from fpmcore.validate.structure import STRUCTURE_RULES, one_artifact_per_dp_rank


@attrs.frozen
class RetainedRow:
    """One retained value of an accepted cell (the table of ``fpm validate``)."""

    benchmark_id: Any
    rank: int
    point_type: Any
    batch_size: Any
    total_prefill_tokens: Any
    total_kv_read_tokens: Any
    wall_time: Any
    kv_seed_regime: Any


@attrs.frozen
class CellResult:
    """The verdict of one cell: its contract, the refusing diagnostic, gaps and retained values."""

    cell: str
    contract: str
    diagnostics: tuple[Diagnostic, ...]
    gaps: tuple[str, ...] = ()
    retained: tuple[RetainedRow, ...] = ()

    @property
    def status(self) -> str:
        return "refused" if self.diagnostics else "accepted"


def flagged_gaps(view: CellView) -> list[str]:
    """A-44's non-blocking gap: points whose passes still disagreed after their re-measuring visit (a
    repetition-evidence line with ``"flagged": true``); their retained value is the upper median of every pass's
    samples, and ``fpm assess`` re-measures them."""
    from fpmcore.validate.integers import parse_line

    gaps = []
    for r in view.ranks:
        for line in r.sidecar or ():
            obj = parse_line(line)
            if isinstance(obj, dict) and obj.get("flagged") is True:
                gaps.append(f"rank {r.rank}: benchmark_id={obj.get('benchmark_id')}: its passes disagree beyond the "
                            "protocol's bound after re-measuring [A-44]")  # fmt: skip
    return gaps


def prompt_gaps(view: CellView) -> list[str]:
    """The non-blocking gaps of 05 §7.3: ranks whose rows record no prompt hashes."""
    gaps = []
    for r in view.ranks:
        if any(_prompt_status(row) == "unavailable" for row in r.rows):
            gaps += [
                f"rank {r.rank}: injected prompt hashes unavailable",
                f"rank {r.rank}: preceding prompt evidence incomplete",
            ]
    return gaps


def _prompt_status(row: Any) -> Any:
    try:
        return row["fpms"][0]["benchmark_measurement"]["prompts"]["status"]
    except (KeyError, IndexError, TypeError):
        return get(get(measurement(row), "prompts"), "status")


_RETAINED_POINT_KEYS = ("benchmark_id", "point_type", "batch_size", "total_prefill_tokens", "total_kv_read_tokens")
_RETAINED_POINT = itemgetter(*_RETAINED_POINT_KEYS)


def retained_rows(view: CellView) -> list[RetainedRow]:
    """The retained value of every row of an accepted cell, rank by rank."""
    out = []
    for r in view.ranks:
        for row in r.rows:
            try:  # an accepted row has all of them
                bid, kind, b, new, kv = _RETAINED_POINT(row["point"])
                out.append(
                    RetainedRow(bid, r.rank, kind, b, new, kv, row["fpms"][0]["wall_time"], row["kv_seed_regime"])
                )
                continue
            except (KeyError, IndexError, TypeError):
                pass
            p, fpms = get(row, "point"), get(row, "fpms")
            fpm = fpms[0] if isinstance(fpms, list) and fpms else ABSENT
            bid, kind, b, new, kv = (get(p, k) for k in _RETAINED_POINT_KEYS)
            out.append(RetainedRow(bid, r.rank, kind, b, new, kv, get(fpm, "wall_time"), get(row, "kv_seed_regime")))
    return out


def _choose(host: Any, identity: ExecutionIdentity, where: str) -> ProducerContract | None:
    hit = host.hooks.choose_producer_contract(identity=identity, where=where)
    if hit is None:
        return None
    return hit[1] if isinstance(hit, tuple) else hit  # type: ignore[no-any-return]


def expected_producer(host: Any, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The producer record the runtime plugin of ``plan["engine"]["runtime"]`` gives, JSON-ready, or
    ``{"error": why}`` when there is none (the contract refuses at A-21 then)."""
    engine = plan.get("engine") if isinstance(plan, Mapping) else None
    pin = engine.get("runtime") if isinstance(engine, Mapping) else None
    if not isinstance(pin, str):
        return {"error": "the plan names no engine runtime"}
    try:
        p = host.hooks.measurement_driver(pin).producer
    except FpmError as exc:
        return {"error": exc.message}
    return {"name": p.name, "runtime": p.runtime, "plugin": p.plugin, "timing_boundary": p.timing_boundary,
            "files": p.files_json()}  # fmt: skip


def protocol_owners(host: Any) -> dict[str, str]:
    """Protocol producer name → label of the registered contract that owns it (A-17, ``fpm_producer_contracts``)."""
    return {c.protocol_producer: c.label for _, c in host.hooks.producer_contracts() if c.protocol_producer}


def validate_files(
    host: Any,
    cell: Mapping[str, Any],
    files: Mapping[str, Any],
    plan: Mapping[str, Any],
    *,
    attempt: str = ".",
    problems: Sequence[Diagnostic] = (),
    owners: Mapping[str, str] | None = None,
) -> CellResult:
    """Validate the parsed files of one attempt for ``cell`` of ``plan`` (05 §8, A-1 … A-40).

    ``problems`` are those that made the attempt unreadable
    (:func:`~fpmcore.validate.attempt.read_attempt`); the first refuses the cell.
    """
    cell_id = plain(get(cell, "cell_id"))
    if problems:
        return CellResult(cell_id, GENERAL, (problems[0],))
    owners = protocol_owners(host) if owners is None else owners
    view = CellView(cell=cell, files=files, plan=plan, attempt=attempt, owners=owners)
    if not view.ranks:
        return CellResult(cell_id, GENERAL, (one_artifact_per_dp_rank(view),))  # type: ignore[arg-type]
    d = run_artifact_rules(view, STRUCTURE_RULES)
    if d is not None:
        return CellResult(cell_id, GENERAL, (d,))
    try:  # an identity that cannot be read, or that no single plugin claims, is refused
        identity = view.identity
        contract = _choose(host, identity, view.first_path) if identity.configuration_bound else None
    except FpmError as exc:
        where = exc.where or view.first_path
        return CellResult(cell_id, GENERAL, (Diagnostic(exc.rule, f"{exc.message}: {where}", where),))
    view.contract = contract
    if contract is None:
        diags = run_rules(view, GENERAL_CONTRACT)
    else:
        try:
            diags = host.hooks.validate_artifact(contract=contract, cell=cell, files=files, plan=plan, attempt=attempt,
                                                 owners=owners, producer=expected_producer(host, plan))  # fmt: skip
        except FpmError as exc:
            diags = [Diagnostic(exc.rule, exc.message, exc.where or view.first_path)]
    gaps = tuple(prompt_gaps(view) + flagged_gaps(view))
    return CellResult(
        cell_id,
        contract.name if contract else GENERAL,
        tuple(diags),
        gaps,
        tuple(retained_rows(view)) if not diags else (),
    )


def publication_labels(view: CellView) -> Diagnostic | None:
    """A-41: the published label of every row of a configuration-bound cell follows 05 §7.4.

    Cached prefill and decode rows are published ``real_kv``, a prefill
    without prefix ``not_applicable``; cells without a configuration-bound
    identity publish as native validation allows.
    """
    if not view.identity.configuration_bound:
        return None
    for r in view.ranks:
        for row in r.rows:
            point, regime = get(row, "point"), get(row, "kv_seed_regime")
            if regime != expected_regime(point):
                bid = plain(get(point, "benchmark_id"))
                return Diagnostic(
                    "A-41",
                    f"cannot publish benchmark_id={bid} rank={r.rank}: kv_seed_regime {plain(regime)} is not "
                    f"accepted for this execution identity: {r.path}",
                    r.path,
                )
    return None


def publish_files(
    host: Any, cell: Mapping[str, Any], files: Mapping[str, Any], plan: Mapping[str, Any], **kwargs: Any
) -> CellResult:
    """A-42: publication runs the reader (A-1 … A-40) and then labels the rows (A-41).

    A refusal blocks publication with the rule's own text; the gaps of 05 §7.3 do not.
    """
    result = validate_files(host, cell, files, plan, **kwargs)
    if result.diagnostics:
        return result
    view = CellView(cell=cell, files=files, plan=plan, attempt=kwargs.get("attempt", "."))
    view.sort_ranks()
    d = safe("A-41", view.first_path, publication_labels, view)
    return result if d is None else attrs.evolve(result, diagnostics=(d,), retained=())


# ---------------------------------------------------------------------------
# the frozen plan and a run
# ---------------------------------------------------------------------------


def _brief(value: Any) -> str:
    text = "absent" if value is ABSENT else js(value)
    return text if len(text) <= 60 else text[:57] + "…"


def plan_problem(plan: Any) -> str | None:
    """Why a JSON document is not a frozen collection plan, or ``None``.

    A frozen plan is an object with its 64-hex plan hash ``sha256`` (or the
    ``plan_sha256`` of a plan ``fpm plan`` writes, :func:`~fpmcore.validate.cell.plan_digest`) and a
    non-empty list ``cells`` of objects, each with a unique non-empty string
    ``cell_id`` (05 §6.2: the identity of a cell is covered by its id and the
    plan hash).  The hash is the digest of the plan's content where fpmcore wrote the plan
    (:func:`plan_content_digest`): a plan edited by hand is refused, not published under the hash of another
    plan.  A cell's execution identity is read per cell (A-14).
    ``options`` and its ``benchmark_points`` (04 G-25), when present, are
    objects, and the staged lists' ``manifest_sha256`` and
    ``smoke_manifest_sha256`` are 64-hex digests or ``null``.
    """
    if not isinstance(plan, dict):
        return f"expected a JSON object, found {_brief(plan)}"
    cells = plan.get("cells", ABSENT)
    if not (isinstance(cells, list) and cells):
        return f"cells expected a non-empty list of cells, found {_brief(cells)}"
    seen: set[str] = set()
    for i, c in enumerate(cells):
        cid = c.get("cell_id", ABSENT) if isinstance(c, dict) else ABSENT
        if not isinstance(c, dict):
            return f"cells[{i}] expected an object, found {_brief(c)}"
        if not (isinstance(cid, str) and cid):
            return f"cells[{i}].cell_id expected a non-empty string, found {_brief(cid)}"
        if cid in seen:
            return f"cells[{i}].cell_id {cid} is not unique"
        seen.add(cid)
    sha = plan_digest(plan)
    hash_key = "plan_sha256" if "sha256" not in plan and "plan_sha256" in plan else "sha256"
    if not (isinstance(sha, str) and HEX64.match(sha)):
        return f"{hash_key} expected the 64-hex plan hash, found {_brief(sha)}"
    options = plan.get("options")
    if options is not None and not isinstance(options, dict):
        return f"options expected an object, found {_brief(options)}"
    bp = (options or {}).get("benchmark_points")
    if bp is not None and not isinstance(bp, dict):
        return f"options.benchmark_points expected an object, found {_brief(bp)}"
    for key in ("manifest_sha256", "smoke_manifest_sha256"):
        digest = (bp or {}).get(key)
        if digest is not None and not (isinstance(digest, str) and HEX64.match(digest)):
            return f"options.benchmark_points.{key} expected a 64-hex digest, found {_brief(digest)}"
    content = plan_content_digest(plan)
    if content is not None and content != sha:
        return (f"{hash_key} {sha[:12]}… is not the digest of its content ({content[:12]}…): the plan was edited after it "
                "was written; plan again, or collect with the plan as written")  # fmt: skip
    return None


#: The frozen plans fpmcore writes (``tests/support/artifacts/plans.py``): ``sha256`` is the digest of every other field.
OWN_FROZEN_PLAN = "fpmcore_collection_plan_excerpt"


def plan_content_digest(plan: Mapping[str, Any]) -> str | None:
    """The digest the plan's hash must equal, where fpmcore knows what it covers: every field but ``plan_sha256``
    and ``stage`` of a plan ``fpm plan`` writes, every field but ``sha256`` of a frozen plan fpmcore writes
    (:data:`OWN_FROZEN_PLAN`); ``None`` for another producer's frozen plan, whose hash covers what that producer
    chose (the collection records it as it is, A-13)."""
    from fpmcore.validate.measured_values import canonical_digest

    if "sha256" not in plan:
        return canonical_digest({k: v for k, v in plan.items() if k not in ("plan_sha256", "stage")})
    if plan.get("schema_name") == OWN_FROZEN_PLAN:
        return canonical_digest({k: v for k, v in plan.items() if k != "sha256"})
    return None


def read_plan(path: str | Path) -> dict[str, Any]:
    """The frozen collection plan at ``path``, as ``fpm validate`` and ``fpm publish`` read it: the strict JSON
    reader of the run's files, then :func:`plan_problem` (``input``, exit 2)."""
    from fpmcore.validate.attempt import load_json_file

    plan = load_json_file(path)
    problem = plan_problem(plan)
    if problem is not None:
        raise FpmError("input", f"not a frozen collection plan: {problem}", shown(str(path)))
    return dict(plan)


def plan_cells(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cells = get(plan, "cells")
    out: dict[str, Mapping[str, Any]] = {}
    for c in cells if isinstance(cells, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("cell_id"), str):
            out[c["cell_id"]] = c
    return out


def validate_run(host: Any, run_dir: str | Path, plan: Mapping[str, Any], *, publish: bool = False) -> list[CellResult]:
    """Validate every attempt of a run directory (one sub-directory per cell, or one attempt).

    A directory that holds ``index.json`` or a rank artifact itself is one
    attempt, whose cell is named by its collector provenance; otherwise each
    sub-directory is the attempt of the cell it is named after
    (:func:`~fpmcore.validate.attempt.attempts`).  ``publish`` reads each
    attempt for publication (A-41, A-42: :func:`publish_files`).
    """
    check = publish_files if publish else validate_files
    cells = plan_cells(plan)
    owners = protocol_owners(host)
    results = []
    for attempt in attempts(run_dir):
        name = attempt.name
        if name is None:  # one attempt: named by its collector provenance
            prov = next((v for n, v in sorted(attempt.files.items()) if Path(n).name.startswith("provenance")), None)
            name = Path(attempt.label).name if prov is None else plain(get(prov, "cell_id"))
        cell = cells.get(name)
        if cell is None and not attempt.problems:
            d = Diagnostic(
                "A-13",
                "collector provenance differs from the frozen cell: cell_id expected a cell of the plan, found "
                f"{shown(name)}: {attempt.label}",
                attempt.label,
            )
            results.append(CellResult(shown(name), GENERAL, (d,)))
            continue
        results.append(
            check(
                host,
                cell if cell is not None else {"cell_id": shown(name)},
                attempt.files,
                plan,
                attempt=attempt.label,
                problems=attempt.problems,
                owners=owners,
            )
        )
    return results
