"""The parsed files of one attempt, read for one frozen cell (05 §1, §6.2).

:class:`CellView` holds the cell, its plan and the attempt's files by name;
its :class:`RankView` list holds the rank artifacts (``r<k>.json``, 05 §2)
with their repetition-evidence sidecars (05 §7.5) and the state the row rules
keep while they walk a rank.  :func:`cell_identity` reads the cell's execution
identity (05 §6.2): an identity that is present but unreadable is refused,
never read as the legacy default.

The rules are functions of a view — :data:`ArtifactRule` (artifact level),
:data:`RowRule` (one row of one rank) and :data:`RankEndRule` (after a rank's
last row) — returning a :class:`~fpmcore.host.hooktypes.Diagnostic` or ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import Diagnostic, ExecutionIdentity, ProducerContract
from fpmcore.validate.measured_values import ABSENT, get, is_int, js, plain

#: The label of a cell without a configuration-bound identity (05 §6.3).
GENERAL = "general"
RANK_FILE = re.compile(r"r(0|[1-9][0-9]*)\.json\Z")
HEX64 = re.compile(r"[0-9a-f]{64}\Z")
IDENTITY_COLUMNS = ("model_config_sha256", "execution_profile", "engram_residency", "input_modality")
#: 05 §6.2: the identity of a cell without configuration-bound identity columns.
LEGACY_IDENTITY = {
    "model_config_sha256": "",
    "execution_profile": "full",
    "engram_residency": "none",
    "input_modality": "text",
}


def rank_number(name: str) -> int | None:
    """``k`` of a rank artifact ``…/r<k>.json``, ``None`` for any other file."""
    m = RANK_FILE.match(PurePosixPath(name).name)
    return int(m.group(1)) if m else None


class RankView:
    """One rank artifact with its sidecar and the state of the row rules."""

    __slots__ = ("bound", "doc", "last_forward", "line_pool", "path", "rank", "scratch", "sidecar", "sidecar_path")

    def __init__(self, path: str, doc: Any, files: Mapping[str, Any]) -> None:
        self.path = path
        self.doc = doc
        r = get(get(doc, "dp"), "rank")
        self.rank: int = r if is_int(r) else rank_number(path)  # type: ignore[assignment]
        self.sidecar_path: str | None = None
        self.sidecar: list[bytes] | None = None
        rel = get(get(doc, "repetition_evidence"), "path")
        if isinstance(rel, str) and rel and not rel.startswith("/") and ".." not in PurePosixPath(rel).parts:
            parent = PurePosixPath(path).parent
            name = str(parent / rel) if parent != PurePosixPath(".") else rel
            self.sidecar_path = name
            lines = files.get(name)
            if isinstance(lines, list) and all(isinstance(x, bytes) for x in lines):
                self.sidecar = lines
        self.reset()

    def reset(self) -> None:
        """Forget the state of an earlier row-rule pass."""
        self.last_forward: int | None = None
        self.line_pool: dict[str, list[int]] | None = None
        self.bound: dict[int, int] = {}
        self.scratch: dict[str, Any] = {}

    @property
    def rows(self) -> list[Any]:
        rows = get(self.doc, "results")
        return rows if isinstance(rows, list) else []

    @property
    def protocol(self) -> Any:
        return get(self.doc, "measurement_protocol")

    def row_suffix(self, row: Any) -> str:
        """``: benchmark_id=<id> rank=<r>: <path>`` (05 §8.4)."""
        return f": benchmark_id={plain(get(get(row, 'point'), 'benchmark_id'))} rank={self.rank}: {self.path}"


class RowSuffix:
    """The row suffix of 05 §8.4, built only when a diagnostic is (``"text" + suffix``)."""

    __slots__ = ("rank", "row")

    def __init__(self, rank: RankView, row: Any) -> None:
        self.rank, self.row = rank, row

    def __radd__(self, text: str) -> str:
        return text + self.rank.row_suffix(self.row)


class CellView:
    """The parsed files of one attempt, read for one frozen cell of a plan.

    ``files`` maps names (relative to the attempt) to parsed JSON, or for
    ``.jsonl`` files to their lines as bytes, each with its newline.
    ``contract`` is the chosen producer contract (``None``: general), and
    ``rules`` the :class:`~fpmcore.validate.evaluation.ContractRules` being run.
    """

    def __init__(
        self,
        *,
        cell: Mapping[str, Any],
        files: Mapping[str, Any],
        plan: Mapping[str, Any],
        contract: ProducerContract | None = None,
        attempt: str = ".",
        owners: Mapping[str, str] | None = None,
        producer: Mapping[str, Any] | None = None,
    ) -> None:
        self.cell = cell
        self.files = files
        self.plan = plan
        self.contract = contract
        self.rules: Any = None
        self.attempt = attempt
        self.owners = dict(owners or {})
        #: the producer record the plan's runtime plugin gives (``fpm_validate_artifact``'s ``producer``)
        self.producer = producer
        self._identity: ExecutionIdentity | FpmError | None = None
        #: benchmark id → (point, point_key), shared by the ranks' rows (A-29)
        self.point_keys: dict[int, tuple[Any, str]] = {}
        #: ranks whose row k equals their entry in iteration group k, for every k (found by A-6 for A-8)
        self.rows_match_groups: set[int] = set()
        named = sorted((k, n) for n in files if (k := rank_number(n)) is not None)
        self.ranks = [RankView(n, files[n], files) for _, n in named]
        self.provenance = sorted(
            (n, files[n]) for n in files if PurePosixPath(n).name.startswith("provenance") and n.endswith(".json")
        )
        self.manifest = ("points.json", files["points.json"]) if "points.json" in files else None
        self.merged = ("merged.json", files["merged.json"]) if "merged.json" in files else None

    @classmethod
    def from_hook(
        cls,
        contract: ProducerContract,
        cell: Mapping[str, Any],
        files: Mapping[str, Any],
        plan: Mapping[str, Any],
        *,
        attempt: str = ".",
        owners: Mapping[str, str] | None = None,
        producer: Mapping[str, Any] | None = None,
    ) -> CellView:
        """The view of what ``fpm_validate_artifact`` receives (ranks in DP-rank order).

        ``attempt`` is the attempt as diagnostics name it, ``owners`` protocol
        producer name → the label of the contract that owns it (A-17), and
        ``producer`` the producer record the runtime plugin of the plan's
        engine runtime gives (:func:`fpmcore.validate.reader.expected_producer`),
        for a contract that compares a runtime producer (A-21).
        """
        view = cls(cell=cell, files=files, plan=plan, contract=contract, attempt=attempt, owners=owners,
                   producer=producer)  # fmt: skip
        view.sort_ranks()
        return view

    def sort_ranks(self) -> None:
        self.ranks.sort(key=lambda r: r.rank)

    @property
    def identity(self) -> ExecutionIdentity:
        """The cell's execution identity (05 §6.2); raises the A-14 refusal when it is unreadable."""
        if self._identity is None:
            try:
                self._identity = cell_identity(self.cell)
            except FpmError as exc:
                self._identity = exc
        if isinstance(self._identity, FpmError):
            raise FpmError(self._identity.rule, self._identity.message, self.first_path)
        return self._identity

    @property
    def contract_name(self) -> str:
        return self.contract.name if self.contract is not None else GENERAL

    @property
    def first_path(self) -> str:
        return self.ranks[0].path if self.ranks else self.attempt

    def provenance_value(self, *keys: str) -> Any:
        """A field of the first collector provenance file, :data:`ABSENT` if missing."""
        v: Any = self.provenance[0][1] if self.provenance else ABSENT
        for k in keys:
            v = get(v, k)
        return v


def _column_problem(column: str, value: Any) -> str | None:
    if column == "model_config_sha256":
        if isinstance(value, str) and (value == "" or HEX64.match(value)):
            return None
        return f"model_config_sha256 expected an empty string or a 64-hex digest, found {js(value)}"
    if isinstance(value, str) and value:
        return None
    return f"{column} expected a non-empty string, found {js(value)}"


def cell_identity(cell: Mapping[str, Any]) -> ExecutionIdentity:
    """The execution identity of a frozen cell (05 §6.2).

    A cell carries its identity as ``execution_identity``, an object of
    exactly the four columns, or as the columns on the cell itself (missing
    ones take the legacy default ``("", "full", "none", "text")``; a cell with
    none of them has no configuration-bound identity).  Every column present
    must be a string — ``model_config_sha256`` empty or 64 lowercase hex,
    the others non-empty.  Anything else raises the A-14 refusal: a cell
    whose identity cannot be read has no contract, and is never read under
    the general rules instead of its own.
    """

    def refuse(problem: str) -> FpmError:
        return FpmError("A-14", f"native execution identity of the frozen cell is unreadable: {problem}")

    if not isinstance(cell, Mapping):
        raise refuse(f"cell expected an object, found {js(cell)}")
    if "execution_identity" in cell:
        src = cell["execution_identity"]
        if not isinstance(src, Mapping) or set(src) != set(IDENTITY_COLUMNS):
            want = ", ".join(IDENTITY_COLUMNS)
            raise refuse(f"execution_identity expected an object of {want}, found {js(src)}")
        vals = {k: src[k] for k in IDENTITY_COLUMNS}
    else:
        vals = {k: cell.get(k, d) for k, d in LEGACY_IDENTITY.items()}
    for column in IDENTITY_COLUMNS:
        problem = _column_problem(column, vals[column])
        if problem is not None:
            raise refuse(problem)
    return ExecutionIdentity(**vals)


def plan_digest(plan: Mapping[str, Any]) -> Any:
    """The plan hash a collection records: ``sha256`` of a frozen collection plan, else the ``plan_sha256``
    that ``fpm plan`` writes; :data:`ABSENT` when the plan has neither."""
    found = get(plan, "sha256")
    return get(plan, "plan_sha256") if found is ABSENT else found


def benchmark_points(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    """``options.benchmark_points`` of a plan (04 G-25), empty when the plan has none."""
    bp = get(get(plan, "options"), "benchmark_points")
    return bp if isinstance(bp, Mapping) else {}


ArtifactRule = Callable[[CellView], "Diagnostic | None"]
RowRule = Callable[[CellView, RankView, int, Any], "Diagnostic | None"]
RankEndRule = Callable[[CellView, RankView], "Diagnostic | None"]
