"""``fpm finalize CAMPAIGN [--json]``: accept a finished campaign and pin every artifact it holds in ``final.json``.

A campaign (:mod:`fpmcore.campaign.layout`) is accepted when its full collection
validated, its repeatability report passes and its serving validation ran and
passed.  ``fpm finalize`` then writes ``CAMPAIGN/final.json`` — atomically: a
kill at any moment leaves no ``final.json`` or the whole one — naming every
artifact with its SHA-256, the producer that measured the run and the runtime
pin.  Every later reader of a finalized campaign checks those digests
(:func:`check_finalized`) and refuses a changed file, naming it.

**The rules**, checked in this order; the first that does not hold refuses the
campaign with one line (``fpm: CAMPAIGN: <message> [F-n]``).  Exit 1
when the campaign is not acceptable (a negative verdict), exit 2 when an input
cannot be read (a file that is not strict JSON or not the document it should
be) or for bad usage.

====  ======================================================================
F-1   **CAMPAIGN is a campaign folder of fpm onboard**: ``onboard.json``
      reads, with its schema, options and stages (exit 2).  Protects every
      later rule from reading a folder that is something else.
      ``fpm: runs/x: not a campaign folder of fpm onboard: cannot
      read onboard.json [F-1]``.  Fix: give the folder ``fpm onboard -o``
      wrote.
F-2   **A finalized campaign is unchanged**: when ``final.json`` exists,
      every file it names still has its recorded SHA-256 (exit 1 here; a
      reader refuses with exit 2).  Protects the accepted evidence: a table
      edited after acceptance is no longer what was accepted.
      ``fpm: CAMPAIGN/table.json: the finalized campaign's
      table.json changed since fpm finalize: final.json records sha256 …,
      found … [F-2]``.  Fix: restore the file; a change that is meant
      makes a new campaign (or, knowingly, remove ``final.json`` and
      finalize again).  An unchanged finalized campaign finalizes again
      with exit 0 and ``final.json`` is left as it is (idempotent).
F-3   **The campaign measured the full grid**, not the smoke subset: the
      onboarding options have no ``--smoke``, the plan is not a smoke plan
      and the run's ``point_set`` is ``full`` (exit 1).  Protects readers
      from a table of five points presented as a model's table.
      ``… the campaign is a smoke campaign (fpm onboard --smoke): … [F-3]``.
      Fix: onboard a new campaign without ``--smoke``.
F-4   **Every collection stage finished and nothing changed since**: the
      stages probe, import, plan, collect, validate and publish are recorded
      done in ``onboard.json``, and every recorded stage's inputs and
      outputs still have their digests (exit 1; the finalize stage's are
      ``final.json`` and its artifacts, which F-2 checks).  Protects the chain from
      the probe to the table: the table was published from this run, of
      this plan, of this profile.  ``… stage publish has not finished;
      fpm onboard --resume continues it [F-4]``, ``… stage collect: its
      input plan (plan.json) changed since the stage ran: recorded sha256 …,
      found … [F-4]``.  Fix: ``fpm onboard --resume``; a changed input
      makes a new campaign.
F-5   **The full collection validated**: ``validation.json`` says
      ``accepted``, every cell is accepted and the cells are the run's cell
      (exit 1).  ``… the collection is not validated: validation.json
      status refused [F-5]``.  Fix: a refused run is re-collected in a new
      campaign.
F-6   **The repeatability report passes**: ``assessment.json`` (``fpm
      assess``) exists, is a report of schema 1 and kind
      ``fpmcore.assessment`` (else exit 2) and says ``repeatable: true``
      (exit 1 when it is missing or says false; ``accepted_unrepeatable`` is
      recorded, it does not pass a report).  Protects readers from a table
      whose times a second collection would not reproduce.  ``… the
      repeatability report does not pass: repeatable false, 3 of 77 points
      over the bound, worst 0.31 [F-6]``.  Fix: ``fpm assess CAMPAIGN``; an
      unrepeatable run is re-collected on a quieter machine in a new
      campaign.
F-7   **The serving validation ran and passed**: ``verification.json``
      (``fpm verify -o``) exists, is a report of schema 1 with a ``verdict``
      of ``pass``, ``fail`` or ``contended`` (else exit 2), and the verdict
      is ``pass`` (exit 1 for a missing report, ``fail`` or ``contended``).
      A failed validation means the replay with this table does not predict
      the serving engine; a contended one measured a busy machine and says
      nothing either way, so neither finalizes (there is no override).
      ``… the serving validation did not pass: verdict contended … [F-7]``.
      Fix: ``fpm verify`` again on a quiet machine; a failing table is
      re-collected in a new campaign.
F-8   **A reader given a campaign reads a finalized one, and its table**
      (``fpm replay --campaign CAMPAIGN``, exit 2): the campaign holds
      ``final.json`` and ``--fpm-table``, when given, is the campaign's
      ``table.json``.  ``fpm: runs/x: not a finalized campaign: no
      final.json; run fpm finalize first [F-8]``.
====  ======================================================================

**final.json** (:data:`FINAL_SCHEMA`)::

    {"schema": "fpmcore.final/v1", "created_at": "…Z", "model": …, "runtime": "vllm==…",
     "point_set": "full", "cell": …, "options": {onboard's options},
     "producer": {the run artifact's producer record},
     "verdicts": {"validation": "accepted",
                  "assessment": {"repeatable": true, "accepted_unrepeatable": false, "summary": {…}},
                  "verification": {"verdict": "pass", "summary": {…}}},
     "artifacts": [{"role": "profile", "path": "profile.json", "sha256": …}, …]}

``artifacts`` are :data:`ARTIFACTS`, in that order: the profile, the plan, the
run's description and index and every file the index pins, the validation
verdict, the table and the two reports.  ``onboard.json`` is not among them:
``fpm onboard`` records its finalize stage in it after ``final.json`` is
written (its other stages are pinned by F-4).

**For the other commands.** :func:`check_finalized` (``campaign_dir``, and
``required=True`` where the campaign must be finalized) is the one check of a
finalized campaign's files; :func:`check_inputs` applies it to every input
path that lies in a finalized campaign (a ``final.json`` beside it);
:func:`campaign_table` resolves ``--campaign`` to its table (F-8).
:func:`stage_finalize` is the stage of ``fpm onboard``.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from fpmcore.campaign import layout
from fpmcore.collect import store
from fpmcore.documents.errors import FpmError

if TYPE_CHECKING:
    from fpmcore.host.hooktypes import CommandContext

FINAL_SCHEMA = "fpmcore.final/v1"
#: ``schema`` of the repeatability report (``fpm assess``, its ``kind``: :data:`fpmcore.campaign.layout.ASSESSMENT_KIND`) and of the
#: serving validation (``fpm verify``, its verdicts: :data:`fpmcore.verify.compare.VERDICTS`; only ``pass``
#: finalizes, F-7).
REPORT_SCHEMA = 1
#: The name of the finalize stage in ``onboard.json`` (:func:`stage_finalize`).
STAGE = "finalize"

_RUN = layout.RUN_DIR
#: ``(role, path in the campaign)`` of every artifact ``final.json`` pins, in order.
ARTIFACTS: tuple[tuple[str, str], ...] = (
    ("profile", layout.PROFILE),
    ("plan", layout.PLAN),
    ("run", f"{_RUN}/{store.RUN_FILE}"),
    ("run_index", f"{_RUN}/{store.INDEX}"),
    ("run_points", f"{_RUN}/{store.MANIFEST}"),
    ("run_provenance", f"{_RUN}/{store.PROVENANCE}"),
    ("run_repetitions", f"{_RUN}/{store.SIDECAR}"),
    ("run_artifact", f"{_RUN}/{store.ARTIFACT}"),
    ("validation", layout.VALIDATION),
    ("table", layout.TABLE),
    ("assessment", layout.ASSESSMENT),
    ("verification", layout.VERIFICATION),
)


class Refused(FpmError):
    """The campaign is not acceptable: a negative verdict (``fpm finalize`` exits 1)."""


@attrs.frozen
class Outcome:
    """What ``fpm finalize`` did: ``final`` is the document in ``final.json``; ``written`` is False when the
    campaign was finalized before and is unchanged (nothing was written)."""

    final: dict[str, Any]
    written: bool


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def _read(root: Path, name: str, rule: str, what: str) -> Any:
    """A campaign file parsed strictly; one that cannot be read or parsed is refused under ``rule`` (exit 2)."""
    from fpmcore.documents.jsonio import JsonError, load_path

    try:
        return load_path(root / name)
    except JsonError as exc:
        raise FpmError(rule, f"{what} {name} cannot be read: {exc.message}", str(root / name)) from None


def _object(value: Any, keys: Iterable[str]) -> bool:
    return isinstance(value, Mapping) and all(k in value for k in keys)


def read_manifest(root: Path) -> dict[str, Any]:
    """F-1: the campaign's ``onboard.json``, its shape checked."""
    if not root.is_dir():
        raise FpmError("F-1", "not a campaign folder of fpm onboard: no such folder", str(root))
    if not (root / layout.MANIFEST).is_file():
        raise FpmError("F-1", f"not a campaign folder of fpm onboard: no {layout.MANIFEST}", str(root))
    m = _read(root, layout.MANIFEST, "F-1", "the campaign manifest")
    problem = layout.manifest_problem(m)  # the reader fpm onboard --resume uses
    if problem is not None:
        raise FpmError("F-1", f"not a campaign folder of fpm onboard: {layout.MANIFEST}: {problem}",
                       str(root / layout.MANIFEST))  # fmt: skip
    return dict(m)


def read_final(root: Path) -> dict[str, Any]:
    """The campaign's ``final.json``, its shape checked (F-2, exit 2 when it is not a finalization record)."""
    doc = _read(root, layout.FINAL, "F-2", "the finalization record")
    arts = doc.get("artifacts") if isinstance(doc, dict) else None
    if (
        not isinstance(doc, dict)
        or doc.get("schema") != FINAL_SCHEMA
        or not isinstance(arts, list)
        or not all(
            _object(a, ("role", "path", "sha256"))
            and isinstance(a["path"], str)
            and isinstance(a["sha256"], str)
            and not Path(a["path"]).is_absolute()
            and ".." not in Path(a["path"]).parts
            for a in arts
        )
    ):
        raise FpmError("F-2", f"{layout.FINAL} is not a finalization record of fpm finalize (schema {FINAL_SCHEMA} "
                              "with artifacts, each a relative path and its sha256)", str(root / layout.FINAL))  # fmt: skip
    return doc


@attrs.frozen
class Change:
    """A file of a finalized campaign whose digest is not the recorded one (``found`` None: absent)."""

    path: str
    recorded: str
    found: str | None

    def message(self) -> str:
        found = self.found if self.found is not None else "no file"
        return (f"the finalized campaign's {self.path} changed since fpm finalize: {layout.FINAL} records sha256 "
                f"{self.recorded}, found {found}; restore it, or finalize a new campaign")  # fmt: skip


def first_change(root: Path, final: Mapping[str, Any]) -> Change | None:
    """The first artifact of ``final`` (in its order) whose file no longer has its recorded SHA-256."""
    for a in final["artifacts"]:
        found = layout.file_sha256(root / a["path"])
        if found != a["sha256"]:
            return Change(a["path"], a["sha256"], found)
    return None


def check_finalized(campaign_dir: str | os.PathLike[str], *, required: bool = False) -> None:
    """Check a finalized campaign's files against ``final.json`` (F-2); the one check every reader calls.

    Without ``final.json`` the campaign is not finalized: nothing to check, unless ``required`` (then F-8).

    :raises FpmError: rule ``F-2`` naming the changed (or missing) file and both digests, or an unreadable
        ``final.json``; rule ``F-8`` when ``required`` and the campaign is not finalized.
    """
    root = Path(campaign_dir)
    if not (root / layout.FINAL).exists():
        if required:
            raise FpmError("F-8", f"not a finalized campaign: no {layout.FINAL}; run fpm finalize {root} first",
                           str(root))  # fmt: skip
        return
    change = first_change(root, read_final(root))
    if change is not None:
        raise FpmError("F-2", change.message(), str(root / change.path))


def check_inputs(*paths: str | os.PathLike[str] | None) -> None:
    """:func:`check_finalized` for every input file that lies in a finalized campaign (``final.json`` beside it)."""
    for folder in layout.finalized_folders(*paths):
        check_finalized(folder)


def campaign_table(campaign_dir: str | os.PathLike[str], table: str | os.PathLike[str] | None) -> str:
    """``--campaign CAMPAIGN`` of a reader: the finalized campaign's ``table.json``, checked (F-8, F-2).

    ``table`` (``--fpm-table``), when given, must be that file.
    """
    root = Path(campaign_dir)
    check_finalized(root, required=True)
    want = root / layout.TABLE
    if table is not None and os.path.realpath(table) != os.path.realpath(want):
        raise FpmError("F-8", f"--fpm-table {table} is not the campaign's table {want}; leave --fpm-table out to "
                              "read the campaign's", str(root))  # fmt: skip
    return str(want)


# ---------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------


def _check_smoke(root: Path, manifest: Mapping[str, Any]) -> None:
    """F-3."""
    fix = "onboard the full grid into a new campaign (fpm onboard without --smoke)"
    if manifest["options"].get("smoke"):
        raise Refused("F-3", f"the campaign is a smoke campaign (fpm onboard --smoke): it measured the smoke subset "
                             f"only; {fix}", str(root))  # fmt: skip
    if (root / layout.PLAN).is_file():
        plan = _read(root, layout.PLAN, "F-3", "the plan")
        if isinstance(plan, dict) and plan.get("stage") == "smoke":
            raise Refused("F-3", f"the plan is a smoke plan (stage smoke); {fix}", str(root / layout.PLAN))
    run_file = f"{layout.RUN_DIR}/{store.RUN_FILE}"
    if (root / run_file).is_file():
        run = _read(root, run_file, "F-3", "the run description")
        if not isinstance(run, dict) or run.get("point_set") != "full":
            found = run.get("point_set") if isinstance(run, dict) else None
            raise Refused("F-3", f"the run measured the point set {found}, not the full one; {fix}",
                          str(root / run_file))  # fmt: skip


#: The stages of a full campaign that make its published table (F-4).
MAKING_STAGES = tuple(s for s in layout.FULL_STAGES if s not in ("assess", "verify", "finalize"))


def _check_stages(root: Path, manifest: Mapping[str, Any]) -> None:
    """F-4: every stage that makes the published table is done (the reports of ``fpm assess`` and ``fpm verify``
    are read by F-6 and F-7 whoever wrote them, so that a verification run again by hand on a quieter machine
    finalizes), and no recorded input or output of those stages changed."""
    by_name = {s["name"]: s for s in manifest["stages"]}
    for name in MAKING_STAGES:
        entry = by_name.get(name)
        if entry is None or entry["status"] != "done":
            raise Refused("F-4", f"stage {name} has not finished; fpm onboard --resume continues it", str(root))
    for side in ("inputs", "outputs"):  # a changed input names the stage that read it; then any changed output
        for entry in manifest["stages"]:
            if entry["name"] not in MAKING_STAGES:  # the reports (F-6, F-7) and final.json's own record (F-2)
                continue
            for label, item in entry[side].items():
                found = layout.digest(root, item["kind"], item["path"])
                if found != item["sha256"]:
                    raise Refused(
                        "F-4",
                        f"stage {entry['name']}: its {side[:-1]} {label} ({item['path']}) changed since the stage "
                        f"ran: recorded sha256 {item['sha256']}, found {found}; start a new campaign",
                        str(root / layout.MANIFEST),
                    )


def _check_validated(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """F-5: ``(run description, validation verdict)``."""
    v = _read(root, layout.VALIDATION, "F-5", "the validation verdict")
    run_file = f"{layout.RUN_DIR}/{store.RUN_FILE}"
    run = _read(root, run_file, "F-5", "the run description")
    where = str(root / layout.VALIDATION)
    if not isinstance(v, dict) or not isinstance(v.get("cells"), list) or not isinstance(run, dict):
        raise FpmError("F-5", f"{layout.VALIDATION} is not the verdict of fpm onboard's validate stage "
                              "(status and cells)", where)  # fmt: skip
    if v.get("status") != "accepted":
        raise Refused("F-5", f"the collection is not validated: {layout.VALIDATION} status {v.get('status')}; a "
                             "refused run is collected again in a new campaign", where)  # fmt: skip
    cells = [c.get("cell") if isinstance(c, dict) else None for c in v["cells"]]
    bad = [c for c in v["cells"] if not isinstance(c, dict) or c.get("status") != "accepted"]
    if not cells or bad or set(cells) != {run.get("cell_id")}:
        raise Refused("F-5", f"the collection is not validated: {layout.VALIDATION} accepts the cells {cells}, the run "
                             f"is the cell {run.get('cell_id')}", where)  # fmt: skip
    return run, v


def _check_assessment(root: Path) -> dict[str, Any]:
    """F-6: the repeatability report, passing."""
    path = root / layout.ASSESSMENT
    if not path.exists():
        raise Refused("F-6", f"no {layout.ASSESSMENT}: the run's repeatability was not assessed; run fpm assess "
                             f"{root}", str(path))  # fmt: skip
    a = _read(root, layout.ASSESSMENT, "F-6", "the repeatability report")
    if (
        not isinstance(a, dict)
        or a.get("schema") != REPORT_SCHEMA
        or a.get("kind") != layout.ASSESSMENT_KIND
        or not isinstance(a.get("repeatable"), bool)
    ):
        raise FpmError("F-6", f"{layout.ASSESSMENT} is not a repeatability report of fpm assess (schema "
                              f"{REPORT_SCHEMA}, kind {layout.ASSESSMENT_KIND}, repeatable true or false)", str(path))  # fmt: skip
    if not a["repeatable"]:
        summary = a.get("summary")
        s: dict[str, Any] = summary if isinstance(summary, dict) else {}
        over = s.get("over_bound")
        detail = ""
        if isinstance(over, list) and s.get("points") is not None:
            detail = f", {len(over)} of {s['points']} points over the bound"
        if s.get("worst") is not None:
            detail += f", worst {s['worst']}"
        raise Refused("F-6", f"the repeatability report does not pass: repeatable false{detail}; the run is collected "
                             "again on a quieter machine in a new campaign", str(path))  # fmt: skip
    return a


def _check_verification(root: Path) -> dict[str, Any]:
    """F-7: the serving validation, passed."""
    from fpmcore.verify.compare import VERDICTS  # the comparison itself only here: fpm replay reads this module too

    path = root / layout.VERIFICATION
    if not path.exists():
        raise Refused("F-7", f"no {layout.VERIFICATION}: the serving validation did not run; run fpm verify with "
                             f"-o {path}", str(path))  # fmt: skip
    v = _read(root, layout.VERIFICATION, "F-7", "the serving validation")
    if not isinstance(v, dict) or v.get("schema") != REPORT_SCHEMA or v.get("verdict") not in VERDICTS:
        raise FpmError("F-7", f"{layout.VERIFICATION} is not a serving validation of fpm verify (schema "
                              f"{REPORT_SCHEMA}, verdict {', '.join(VERDICTS)})", str(path))  # fmt: skip
    if v["verdict"] == "contended":
        raise Refused("F-7", "the serving validation did not pass: verdict contended (the machine was busy, the "
                             "comparison says nothing); run fpm verify again on a quiet machine", str(path))  # fmt: skip
    if v["verdict"] == "fail":
        raise Refused("F-7", "the serving validation did not pass: verdict fail (the replay with this table does "
                             "not predict the engine); collect again in a new campaign", str(path))  # fmt: skip
    return v


# ---------------------------------------------------------------------------
# finalizing
# ---------------------------------------------------------------------------


def final_document(
    root: Path,
    manifest: Mapping[str, Any],
    run: Mapping[str, Any],
    assessment: Mapping[str, Any],
    verification: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``final.json`` of an accepted campaign (module docstring), its digests computed now."""
    artifact = _read(root, f"{layout.RUN_DIR}/{store.ARTIFACT}", "F-5", "the run artifact")
    producer = artifact.get("producer") if isinstance(artifact, dict) else None
    plan = _read(root, layout.PLAN, "F-5", "the plan")
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "schema": FINAL_SCHEMA,
        "created_at": now,
        "model": plan.get("model") if isinstance(plan, dict) else None,
        "runtime": run.get("runtime"),
        "point_set": run.get("point_set"),
        "cell": run.get("cell_id"),
        "options": manifest["options"],
        "producer": producer,
        "verdicts": {
            "validation": "accepted",
            "assessment": {"repeatable": assessment["repeatable"],
                           "accepted_unrepeatable": assessment.get("accepted_unrepeatable"),
                           "summary": assessment.get("summary")},
            "verification": {"verdict": verification["verdict"], "summary": verification.get("summary")},
        },
        "artifacts": [{"role": role, "path": path, "sha256": layout.file_sha256(root / path)}
                      for role, path in ARTIFACTS],
    }  # fmt: skip


def _remove_stray_temporaries(root: Path) -> None:
    """The temporary files a kill during an earlier write of ``final.json`` left (``.final.json.*.tmp``)."""
    for p in root.glob(f".{layout.FINAL}.*.tmp"):
        if p.is_file():
            p.unlink()


def finalize(campaign_dir: str | os.PathLike[str]) -> Outcome:
    """Check F-1 … F-7 in order and write ``final.json`` (module docstring).

    :raises Refused: the campaign is not acceptable (exit 1).
    :raises FpmError: an input cannot be read, or ``final.json`` cannot be written (exit 2).
    """
    from fpmcore.documents.output_files import check_output_path

    root = Path(campaign_dir)
    manifest = read_manifest(root)  # F-1
    target = root / layout.FINAL
    final = read_final(root) if os.path.lexists(target) else None
    if final is None:
        check_output_path(target)  # O-1 … O-4, before any work
    if final is not None:  # F-2
        change = first_change(root, final)
        if change is not None:
            raise Refused("F-2", change.message(), str(root / change.path))
    _check_smoke(root, manifest)  # F-3
    _check_stages(root, manifest)  # F-4
    run, _ = _check_validated(root)  # F-5
    assessment = _check_assessment(root)  # F-6
    verification = _check_verification(root)  # F-7
    if final is not None:
        return Outcome(final, written=False)
    doc = final_document(root, manifest, run, assessment, verification)
    _remove_stray_temporaries(root)
    store.write_durable(target, store.json_bytes(doc))
    return Outcome(doc, written=True)


def stage_finalize(ctx: CommandContext, campaign: Any, options: Any) -> None:
    """The finalize stage of ``fpm onboard`` (its ``RUNNERS`` signature): :func:`finalize`, then the stage
    recorded with every artifact as its input and ``final.json`` as its output.

    A refusal is the stage's refusal (``stage finalize: <message>``, its F- rule).  Killed between
    ``final.json`` and the record, the stage runs again on resume and finds the campaign finalized, unchanged.
    """
    try:
        finalize(campaign.root)
    except FpmError as exc:  # a refusal stays a refusal (exit 1), bad input stays exit 2
        raise type(exc)(exc.rule, f"stage finalize: {exc.message}", exc.where) from None
    campaign.record(STAGE, {role: ("file", path) for role, path in ARTIFACTS},
                    {"final": ("file", layout.FINAL)})  # fmt: skip
