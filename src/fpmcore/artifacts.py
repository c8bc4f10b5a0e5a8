"""Measurement artifacts: reading a collected cell and the general reader rules (05).

The host side of *validate artifact* (05 §8).  It reads one attempt directory
(05 §1), runs the structural rules that hold for every producer (A-1 … A-13),
chooses the producer contract from the cell's execution identity through
*choose producer contract* (A-14, 05 §6.3 — never from the artifact's own
``execution_mode`` label) and then runs the rules from A-15 on, either itself
(cells without a configuration-bound identity: the general contract) or
through the model plugin that owns the contract (``fpm_validate_artifact``).

Model plugins build their contract from the pieces here: :class:`CellView`
(the parsed cell), the general rule tables :data:`GENERAL_ARTIFACT_RULES` and
:data:`GENERAL_ROW_RULES`, and :func:`run_rules`, which evaluates the union of
the general and the contract rules in numeric order (05 §8: artifact-level
rules rule by rule over the ranks, then row-level rules rank by rank and row by
row).  The first failing rule refuses the cell; its diagnostic is the result.

The host never names a model or a runtime version: every producer-specific
rule lives in the plugin that owns the producer.

Layout of an attempt directory (05 §1; the names are those the collection
runner writes):

``r<k>.json``            rank artifact of DP rank ``k`` (05 §2)
``merged.json``          merged artifact, optional (05 §5)
``provenance*.json``     collector provenance, one per pod (05 §6.1)
``points.json``          staged point manifest, optional (04 G-22)
``*.jsonl``              line files (repetition-evidence sidecars, 05 §7.5)
``index.json``           artifact index ``{"files": {name: sha256}}``, optional;
                         when present, every other file must be indexed and
                         have the indexed bytes (05 §1)

A run directory holds one attempt directory per cell, named by the cell id;
``fpm validate RUN_DIR --plan PLAN`` validates each of them.

The ``files`` mapping handed to ``fpm_validate_artifact`` holds the attempt's
files by name (parsed JSON; ``.jsonl`` files as lists of byte lines, each
with its newline) plus two entries that are not files: ``"@attempt"`` (the
attempt as the diagnostics name it) and ``"@owners"`` (protocol producer name →
the label of the contract that owns it, for A-17).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import attrs
import orjson

from fpmcore.errors import FpmError
from fpmcore.hooktypes import CliCommand, Diagnostic, ExecutionIdentity, ProducerContract
from fpmcore.jsonio import JsonError, canonical_bytes, loads

#: Re-raise exceptions from rules instead of turning them into diagnostics
#: (tests set it to find rules that are not robust against malformed input).
STRICT = False

GENERAL = "general"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_RANK_FILE = re.compile(r"r(0|[1-9][0-9]*)\.json\Z")


# ---------------------------------------------------------------------------
# values and their rendering (05, diagnostic conventions)
# ---------------------------------------------------------------------------


class _Absent:
    """Marker of an absent key; rendered ``absent``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


def js(value: Any) -> str:
    """Compact JSON of ``value`` (keys sorted); ``absent`` for :data:`ABSENT`."""
    if value is ABSENT:
        return "absent"
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def plain(value: Any) -> str:
    """A value in a plain position: strings without quotes, everything else as :func:`js`."""
    return value if isinstance(value, str) else js(value)


def is_int(value: Any) -> bool:
    """A JSON integer: ``int`` but not ``bool`` (A-2)."""
    return type(value) is int


def is_number(value: Any) -> bool:
    """A finite JSON number that is not a boolean."""
    t = type(value)
    return t is int or (t is float and math.isfinite(value))


def close(a: float, b: float, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    """The float comparison of 05: ``isclose(a, b, rel=1e-9, abs=1e-12)``."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` of a JSON object, :data:`ABSENT` when missing or ``obj`` is no object."""
    if obj.__class__ is dict:
        return obj.get(key, ABSENT)
    return obj.get(key, ABSENT) if isinstance(obj, Mapping) else ABSENT


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_digest(value: Any) -> str:
    """04 G-23 ``digest(value)``."""
    return sha256_hex(canonical_bytes(value))


def point_key(point: Mapping[str, Any]) -> str:
    """05 §4.2 ``point_key`` of a Dynamo point."""
    tp = point.get("total_prefill_tokens", 0)
    kv = point.get("total_kv_read_tokens", 0)
    ident = {
        "batch_size": point.get("batch_size"),
        "partition": point.get("partition"),
        "point_type": point.get("point_type"),
        "rows": point.get("rows"),
        "total_kv_read_tokens": 0 if kv is None else kv,
        "total_prefill_tokens": 0 if tp is None else tp,
    }
    if _plain_identity(ident):  # orjson writes exactly the canonical form of these values
        return sha256_hex(orjson.dumps(ident))
    return canonical_digest(ident)


def _plain_identity(ident: dict[str, Any]) -> bool:
    if ident["point_type"] not in ("prefill", "decode") or ident["partition"] is not None:
        return False
    for k in ("batch_size", "total_kv_read_tokens", "total_prefill_tokens"):
        v = ident[k]
        if type(v) is not int or not -(2**63) <= v < 2**63:
            return False
    rows = ident["rows"]
    if rows is None:
        return True
    return type(rows) is list and all(
        type(r) is list and all(type(x) is int and -(2**63) <= x < 2**63 for x in r) for r in rows
    )


def manifest_of(points: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Encode Dynamo points (in id order) as the benchmark-point manifest of 04 G-22."""
    prefill: list[dict[str, Any]] = []
    decode: list[dict[str, Any]] = []
    for p in points:
        if p.get("point_type") == "decode":
            decode.append({"batch_size": p.get("batch_size"), "total_kv_read_tokens": p.get("total_kv_read_tokens")})
        else:
            prefill.append(
                {
                    "batch_size": p.get("batch_size"),
                    "total_prefill_tokens": p.get("total_prefill_tokens"),
                    "total_kv_read_tokens": p.get("total_kv_read_tokens"),
                    "rows": p.get("rows"),
                }
            )
    return {"schema_version": 3, "prefill": prefill, "decode": decode}


def upper_median(values: Sequence[float]) -> float:
    """Sort ascending and take the element at ``len // 2`` (05 §4.2)."""
    s = sorted(values)
    return s[len(s) // 2]


def same(a: Any, b: Any) -> bool:
    """JSON equality of two values (a boolean never equals a number; :data:`ABSENT` only itself)."""
    if a.__class__ is b.__class__ and a.__class__ in (str, int):
        return bool(a == b)
    return first_difference(a, b) is None and (a is ABSENT) == (b is ABSENT)


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first path at which two JSON values differ, with both values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            d = first_difference(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else k)
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            d = first_difference(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if a is ABSENT or b is ABSENT:
        return None if a is b else (path, a, b)
    if type(a) is bool or type(b) is bool:
        return None if type(a) is type(b) and a == b else (path, a, b)
    return None if a == b else (path, a, b)


# ---------------------------------------------------------------------------
# the parsed cell
# ---------------------------------------------------------------------------


class RankView:
    """One rank artifact with its sidecar and the state of the row rules."""

    __slots__ = ("rank", "path", "doc", "sidecar_path", "sidecar", "last_forward", "line_pool", "bound", "scratch")

    def __init__(self, path: str, doc: Any, files: Mapping[str, Any]) -> None:
        self.path = path
        self.doc = doc
        r = get(get(doc, "dp"), "rank")
        self.rank: int = r if is_int(r) else int(_RANK_FILE.match(Path(path).name).group(1))  # type: ignore[union-attr]
        self.sidecar_path: str | None = None
        self.sidecar: list[bytes] | None = None
        rel = get(get(doc, "repetition_evidence"), "path")
        if isinstance(rel, str) and rel and not rel.startswith("/") and ".." not in Path(rel).parts:
            name = str(Path(path).parent / rel) if Path(path).parent != Path(".") else rel
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


class _Suffix:
    """The row suffix, built only when a diagnostic is (``"text" + suffix``)."""

    __slots__ = ("rank", "row")

    def __init__(self, rank: RankView, row: Any) -> None:
        self.rank, self.row = rank, row

    def __radd__(self, text: str) -> str:
        return text + self.rank.row_suffix(self.row)


class CellView:
    """The parsed files of one attempt, read for one frozen cell of a plan."""

    def __init__(
        self,
        *,
        cell: Mapping[str, Any],
        files: Mapping[str, Any],
        plan: Mapping[str, Any],
        contract: ProducerContract | None = None,
        attempt: str = ".",
        owners: Mapping[str, str] | None = None,
    ) -> None:
        self.cell = cell
        self.files = files
        self.plan = plan
        self.contract = contract
        self.attempt = attempt
        self.owners = dict(owners or {})
        self.identity = cell_identity(cell)
        #: benchmark id → (point, point_key), shared by the ranks' rows (A-29)
        self.point_keys: dict[int, tuple[Any, str]] = {}
        #: equalities found by A-2's pass over the points and read by A-6 and A-8 (:func:`_points_pass`)
        self.memo: dict[str, Any] = {}
        names = sorted(
            (n for n in files if _RANK_FILE.match(Path(n).name)),
            key=lambda n: int(_RANK_FILE.match(Path(n).name).group(1)),  # type: ignore[union-attr]
        )
        self.ranks = [RankView(n, files[n], files) for n in names]
        self.provenance = sorted(
            (n, files[n]) for n in files if Path(n).name.startswith("provenance") and n.endswith(".json")
        )
        self.manifest = ("points.json", files["points.json"]) if "points.json" in files else None
        self.merged = ("merged.json", files["merged.json"]) if "merged.json" in files else None

    @classmethod
    def from_hook(
        cls, contract: ProducerContract, cell: Mapping[str, Any], files: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> CellView:
        """The view a plugin builds in ``fpm_validate_artifact`` (ranks in DP-rank order)."""
        view = cls(cell=cell, files=files, plan=plan, contract=contract, attempt=str(files.get("@attempt", ".")))
        owners = files.get("@owners")
        if isinstance(owners, Mapping):
            view.owners = dict(owners)
        view.sort_ranks()
        return view

    def sort_ranks(self) -> None:
        self.ranks.sort(key=lambda r: r.rank)

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


def cell_identity(cell: Mapping[str, Any]) -> ExecutionIdentity:
    """The execution identity of a frozen cell (05 §6.2).

    Read from ``cell["execution_identity"]`` or from the four columns on the
    cell itself; missing columns take the legacy default ``("", "full",
    "none", "text")``.
    """
    src = cell.get("execution_identity") if isinstance(cell, Mapping) else None
    if not isinstance(src, Mapping):
        src = cell if isinstance(cell, Mapping) else {}
    defaults = {
        "model_config_sha256": "",
        "execution_profile": "full",
        "engram_residency": "none",
        "input_modality": "text",
    }
    vals = {k: src.get(k, d) for k, d in defaults.items()}
    return ExecutionIdentity(**{k: v if isinstance(v, str) else js(v) for k, v in vals.items()})


def benchmark_points(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    """``options.benchmark_points`` of a plan (04 G-25), empty when the plan has none."""
    bp = get(get(plan, "options"), "benchmark_points")
    return bp if isinstance(bp, Mapping) else {}


# ---------------------------------------------------------------------------
# rule tables and the evaluation order
# ---------------------------------------------------------------------------

ArtifactRule = Callable[[CellView], "Diagnostic | None"]
RowRule = Callable[[CellView, RankView, int, Any], "Diagnostic | None"]
RankEndRule = Callable[[CellView, RankView], "Diagnostic | None"]


@attrs.frozen
class ContractRules:
    """The rules a producer contract adds to the general ones.

    ``artifact``/``rows``/``rank_end`` are ``(rule id, function)`` pairs;
    ``owns_protocol_producer`` says the contract's artifacts carry
    ``measurement_protocol.producer`` (A-17).
    """

    name: str
    artifact: tuple[tuple[str, ArtifactRule], ...] = ()
    rows: tuple[tuple[str, RowRule], ...] = ()
    rank_end: tuple[tuple[str, RankEndRule], ...] = ()
    owns_protocol_producer: bool = False


def _rule_number(rule: str) -> float:
    """Sort key of a rule id: ``A-n`` → n; a contract check outside chapter 05 (``§6.4``) runs
    right after the contract identity rules A-14 … A-17."""
    m = re.fullmatch(r"A-(\d+)", rule)
    return float(m.group(1)) if m else 17.5


def _safe(rule: str, where: str, fn: Callable[..., Diagnostic | None], *args: Any) -> Diagnostic | None:
    try:
        return fn(*args)
    except Exception as exc:  # a rule must never turn bad input into a traceback
        if STRICT:
            raise
        return Diagnostic(rule, f"{rule} cannot read the input: {type(exc).__name__}: {where}", where)


def run_artifact_rules(view: CellView, rules: Iterable[tuple[str, ArtifactRule]]) -> Diagnostic | None:
    """Artifact-level rules in numeric order (stable); the first diagnostic or ``None``."""
    for rule, fn in sorted(rules, key=lambda r: _rule_number(r[0])):
        d = _safe(rule, view.first_path, fn, view)
        if d is not None:
            return d
    return None


def run_rules(view: CellView, contract: ContractRules) -> list[Diagnostic]:
    """Rules A-15 … A-40 of one cell: the general ones plus ``contract``'s, in numeric order (05 §8)."""
    arts = list(GENERAL_ARTIFACT_RULES) + list(contract.artifact)
    d = run_artifact_rules(view, [(r, _bind_contract(fn, contract)) for r, fn in arts])
    if d is not None:
        return [d]
    rows = sorted(list(GENERAL_ROW_RULES) + list(contract.rows), key=lambda r: _rule_number(r[0]))
    for rank in view.ranks:
        rank.reset()
        for k, row in enumerate(rank.rows):
            for rule, fn in rows:
                try:
                    d = fn(view, rank, k, row)
                except Exception as exc:  # as in _safe, inlined: this loop runs once per row and rule
                    if STRICT:
                        raise
                    d = Diagnostic(rule, f"{rule} cannot read the input: {type(exc).__name__}: {rank.path}", rank.path)
                if d is not None:
                    return [d]
        for rule, fn in contract.rank_end:
            d = _safe(rule, rank.path, fn, view, rank)
            if d is not None:
                return [d]
    return []


def _bind_contract(fn: Any, contract: ContractRules) -> ArtifactRule:
    if fn is a17_protocol_producer:
        return lambda view: a17_protocol_producer(view, contract)
    return fn  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------
# A-1 … A-13: structure, merge invariants, plan and provenance
# ---------------------------------------------------------------------------


def a1_schema(view: CellView) -> Diagnostic | None:
    """A-1: every rank artifact is an object with ``schema_version`` 2 and ``artifact_type`` ``rank``."""
    for r in view.ranks:
        sv, at = get(r.doc, "schema_version"), get(r.doc, "artifact_type")
        if not (isinstance(r.doc, dict) and is_int(sv) and sv == 2 and at == "rank"):
            if not isinstance(r.doc, dict):
                sv = at = ABSENT
            return Diagnostic(
                "A-1",
                f"unsupported native rank artifact: schema_version={plain(sv)}, artifact_type={plain(at)}: {r.path}",
                r.path,
            )
    return None


# A-2 integer fields -----------------------------------------------------------
# A schema is a dict key -> spec; a spec is INT, NINT (integer or null), a nested
# dict, ("list", spec) or ROWS (list of lists of integers).
INT, NINT, ROWS = "int", "nint", "rows"

_COUNTS = {
    "num_prefill_requests": INT, "sum_prefill_tokens": INT, "sum_prefill_kv_tokens": INT,
    "num_decode_requests": INT, "sum_decode_kv_tokens": INT,
}  # fmt: skip
_SAMPLE = {
    "sample_index": INT,
    "forward_index": INT,
    "cudagraph": {"num_unpadded_tokens": NINT, "num_padded_tokens": NINT, "num_paddings": NINT},
}
_RAW_FPM = {
    "version": INT, "dp_rank": INT, "counter_id": INT,
    "scheduled_requests": _COUNTS, "queued_requests": _COUNTS, "benchmark_sample": _SAMPLE,
}  # fmt: skip
_MEASUREMENT = {
    "schema_version": INT,
    "dp_rank": INT,
    "prompts": {"requests": ("list", {"slot": INT, "num_tokens": INT})},
    "preparation": {"completed_points_before": INT, "warmup_records_before": NINT},
    "expected_internal_samples": INT,
    "raw_fpms": ("list", _RAW_FPM),
    "estimate": {"raw_sample_indices": ("list", INT)},
}
_FPM = dict(_RAW_FPM, benchmark_measurement=_MEASUREMENT)
_POINT = {
    "benchmark_id": INT, "batch_size": INT, "total_prefill_tokens": INT, "total_kv_read_tokens": INT,
    "rows": ROWS, "expected_capture_size": NINT, "padding_tokens": NINT,
}  # fmt: skip
_ROW = {"point": _POINT, "fpms": ("list", _FPM)}
_GROUP = {"benchmark_id": INT, "point": _POINT, "expected_dp_ranks": ("list", INT),
          "rank_results": ("list", {"dp_rank": INT, "fpms": ("list", _FPM)})}  # fmt: skip
_WARMUP_RECORD = {
    "forward_index_start": NINT, "forward_index_end": NINT, "observed_forward_count": INT,
    "completed_points_before": INT,
}  # fmt: skip
RANK_INT_SCHEMA: dict[str, Any] = {
    "schema_version": INT,
    "dp": {"rank": INT, "size": INT},
    "coverage": {"expected_points": INT, "completed_points": INT, "skipped_points": INT},
    "producer": {"context_policy": {"measured_context": INT, "internal_positions": INT}},
    "measurement_protocol": {
        "schema_version": INT,
        "independent_repetitions": INT,
        "preparation": {"warmup_iterations": INT, "giant_kv_threshold": INT, "giant_kv_repeats": INT},
        "execution_evidence": {"schema_version": INT},
        "producer": {"warmup_repetitions": INT, "measured_repetitions": INT, "max_rejected_repetitions": INT},
    },
    "warmup_evidence": {"records": ("list", _WARMUP_RECORD)},
    "repetition_evidence": {"records": INT},
    "results": ("list", _ROW),
    "iteration_groups": ("list", _GROUP),
}
SIDECAR_INT_SCHEMA: dict[str, Any] = {
    "benchmark_id": INT,
    "dp_rank": INT,
    "repetitions": ("list", {"index": INT, "fpm_count": INT, "raw_sample_index": INT}),
}


def find_non_integer(obj: Any, schema: Mapping[str, Any], path: str = "", top: bool = False) -> tuple[str, Any] | None:
    """The first integer field (document order) of ``obj`` that is not a JSON integer (A-2).

    Returns ``(field path, value)``.  The verdict comes first from
    :func:`integers_ok`; the document is walked in document order, for the
    path, only when it reports a wrong field.
    """
    if not isinstance(obj, dict) or integers_ok(obj, schema):
        return None
    hit = _walk(obj, schema, top)
    if hit is None:  # pragma: no cover - integers_ok and _walk visit the same fields
        return None
    segments, value = hit
    out = path
    for seg in reversed(segments):
        out = f"{out}[{seg}]" if isinstance(seg, int) else f"{out}.{seg}" if out else seg
    return out, value


def integers_ok(obj: dict[str, Any], schema: Mapping[str, Any]) -> bool:
    """``True`` when no integer field of ``schema`` in the object ``obj`` breaks A-2.

    The fields are visited in schema order (the verdict does not depend on
    the order); the bulk shapes of an artifact (rows, groups, FPMs, raw
    samples, warm-up records, sidecar lines) are first tried by a fast test
    that reads the fields of their usual form at once and answers ``True``
    only when every one of them is an integer — any other form, and every
    wrong field, falls back to this generic visit.  A field the walk visits
    is a present key of an object, every element of a list of integers, or a
    field of an object element of a list of objects.
    """
    fast = _FAST.get(id(schema))
    if fast is not None and fast(obj):
        return True
    get_ = obj.get
    for key, spec in schema.items():
        v = get_(key, ABSENT)
        if v is ABSENT:
            continue
        if spec is INT:
            if type(v) is not int:
                return False
        elif spec is NINT:
            if v is not None and type(v) is not int:
                return False
        elif spec is ROWS:
            if isinstance(v, list):
                for row in v:
                    if isinstance(row, list):
                        for x in row:
                            if type(x) is not int:
                                return False
        elif type(spec) is tuple:
            if isinstance(v, list):
                inner = spec[1]
                if type(inner) is dict:
                    for item in v:
                        if isinstance(item, dict) and not integers_ok(item, inner):
                            return False
                else:
                    for item in v:
                        if type(item) is not int:
                            return False
        elif isinstance(v, dict):
            if not integers_ok(v, spec):
                return False
    return True


def _walk(obj: Any, schema: Mapping[str, Any], top: bool = False) -> tuple[list[str | int], Any] | None:
    """:func:`find_non_integer` in document order, with the path as a reversed list of segments;
    elements of a list of objects that :func:`integers_ok` accepts are skipped."""
    if not isinstance(obj, dict):
        return None
    keys: Iterable[str] = obj
    if top and "results" in obj and "iteration_groups" in obj:
        order = list(obj)
        i, j = order.index("results"), order.index("iteration_groups")
        if j < i:  # the whole of results is visited before iteration_groups
            order.remove("iteration_groups")
            order.insert(order.index("results") + 1, "iteration_groups")
        keys = order
    for key in keys:
        spec = schema.get(key)
        if spec is None:
            continue
        value = obj[key]
        if spec is INT:
            if type(value) is not int:
                return [key], value
        elif spec is NINT:
            if value is not None and type(value) is not int:
                return [key], value
        elif spec is ROWS:
            if isinstance(value, list):
                for i, row in enumerate(value):
                    if isinstance(row, list):
                        for j, x in enumerate(row):
                            if type(x) is not int:
                                return [j, i, key], x
        elif isinstance(spec, tuple):
            if isinstance(value, list):
                inner = spec[1]
                if isinstance(inner, dict):
                    for i, item in enumerate(value):
                        if isinstance(item, dict) and not integers_ok(item, inner):
                            hit = _walk(item, inner)
                            if hit is not None:
                                hit[0].extend((i, key))
                                return hit
                else:
                    for i, item in enumerate(value):
                        if type(item) is not int:
                            return [i, key], item
        elif isinstance(value, dict):
            hit = _walk(value, spec)
            if hit is not None:
                hit[0].append(key)
                return hit
    return None


# Fast tests of the bulk shapes: each reads the fields of the usual form at once
# (missing keys or other types raise and answer False) and is True only when every
# integer field of its schema in the object is an integer.

_INT_TYPES = frozenset((int,))
_SPKV = "sum_prefill_kv_tokens"  # absent from Dynamo's queued_requests; checked when present
_MEASUREMENT_PARTS = itemgetter(
    "schema_version", "dp_rank", "expected_internal_samples", "prompts", "preparation", "estimate", "raw_fpms"
)
_PREP_PARTS = itemgetter("completed_points_before", "warmup_records_before")


def _counts_fast(f: dict[str, Any]) -> bool:
    """``version``, ``dp_rank``, ``counter_id`` and the request counts of an FPM (raises on another form)."""
    s, q = f["scheduled_requests"], f["queued_requests"]
    return (
        type(f["version"]) is int and type(f["dp_rank"]) is int and type(f["counter_id"]) is int
        and type(s["num_prefill_requests"]) is int and type(s["sum_prefill_tokens"]) is int
        and type(s["sum_prefill_kv_tokens"]) is int and type(s["num_decode_requests"]) is int
        and type(s["sum_decode_kv_tokens"]) is int
        and type(q["num_prefill_requests"]) is int and type(q["sum_prefill_tokens"]) is int
        and type(q["num_decode_requests"]) is int and type(q["sum_decode_kv_tokens"]) is int
        and type(q.get(_SPKV, 0)) is int
    )  # fmt: skip


def _raw_fast(f: dict[str, Any]) -> bool:
    """A raw FPM (``_RAW_FPM``)."""
    try:
        bs = f["benchmark_sample"]
        cg = bs["cudagraph"]
        if not (_counts_fast(f) and type(bs["sample_index"]) is int and type(bs["forward_index"]) is int):
            return False
        g1, g2, g3 = cg["num_unpadded_tokens"], cg["num_padded_tokens"], cg["num_paddings"]
    except (KeyError, TypeError, AttributeError):
        return False
    return (g1 is None or type(g1) is int) and (g2 is None or type(g2) is int) and (g3 is None or type(g3) is int)


def _measurement_fast(m: dict[str, Any]) -> bool:
    """A ``benchmark_measurement`` (``_MEASUREMENT``) with its raw FPMs."""
    try:
        a, b, c, prompts, prep, est, raw = _MEASUREMENT_PARTS(m)
        reqs, idx = prompts["requests"], est["raw_sample_indices"]
        cpb, wrb = _PREP_PARTS(prep)
    except (KeyError, TypeError):
        return False
    if not (
        type(a) is int and type(b) is int and type(c) is int and type(cpb) is int
        and (wrb is None or type(wrb) is int)
        and type(reqs) is list and type(idx) is list and type(raw) is list
    ):  # fmt: skip
        return False
    for x in idx:
        if type(x) is not int:
            return False
    for q in reqs:
        if type(q) is not dict or type(q.get("slot", 0)) is not int or type(q.get("num_tokens", 0)) is not int:
            return False
    for f in raw:  # _raw_fast, inlined: this loop holds most of an artifact's integers
        if type(f) is not dict:
            return False
        try:
            s, q, bs = f["scheduled_requests"], f["queued_requests"], f["benchmark_sample"]
            cg = bs["cudagraph"]
            g1, g2, g3 = cg["num_unpadded_tokens"], cg["num_padded_tokens"], cg["num_paddings"]
            if not (
                type(f["version"]) is int and type(f["dp_rank"]) is int and type(f["counter_id"]) is int
                and type(s["num_prefill_requests"]) is int and type(s["sum_prefill_tokens"]) is int
                and type(s["sum_prefill_kv_tokens"]) is int and type(s["num_decode_requests"]) is int
                and type(s["sum_decode_kv_tokens"]) is int
                and type(q["num_prefill_requests"]) is int and type(q["sum_prefill_tokens"]) is int
                and type(q["num_decode_requests"]) is int and type(q["sum_decode_kv_tokens"]) is int
                and type(q.get(_SPKV, 0)) is int
                and type(bs["sample_index"]) is int and type(bs["forward_index"]) is int
                and (g1 is None or type(g1) is int) and (g2 is None or type(g2) is int)
                and (g3 is None or type(g3) is int)
            ):  # fmt: skip
                return False
        except (KeyError, TypeError, AttributeError):
            return False
    return True


def _fpm_fast(f: dict[str, Any]) -> bool:
    """A retained FPM (``_FPM``: no ``benchmark_sample``, a ``benchmark_measurement``)."""
    try:
        m = f["benchmark_measurement"]
        if not _counts_fast(f):
            return False
    except (KeyError, TypeError, AttributeError):
        return False
    return "benchmark_sample" not in f and type(m) is dict and _measurement_fast(m)


def _point_fast(p: dict[str, Any]) -> bool:
    """A Dynamo point (``_POINT``)."""
    g = p.get
    if not (
        type(g("benchmark_id", 0)) is int and type(g("batch_size", 0)) is int
        and type(g("total_prefill_tokens", 0)) is int and type(g("total_kv_read_tokens", 0)) is int
    ):  # fmt: skip
        return False
    for k in ("expected_capture_size", "padding_tokens"):
        v = g(k)
        if v is not None and type(v) is not int:
            return False
    rows = g("rows")
    if isinstance(rows, list):
        for r in rows:
            if isinstance(r, list):
                for x in r:
                    if type(x) is not int:
                        return False
    return True


def _fpms_fast(fpms: Any) -> bool:
    if type(fpms) is not list:
        return False
    for f in fpms:
        if type(f) is not dict or not _fpm_fast(f):
            return False
    return True


def _row_fast(row: dict[str, Any]) -> bool:
    """A result row (``_ROW``)."""
    p = row.get("point")
    return type(p) is dict and _point_fast(p) and _fpms_fast(row.get("fpms"))


def _group_fast(g: dict[str, Any]) -> bool:
    """An iteration group (``_GROUP``)."""
    p, exp, rr = g.get("point"), g.get("expected_dp_ranks"), g.get("rank_results")
    if type(g.get("benchmark_id", 0)) is not int or type(p) is not dict or not _point_fast(p):
        return False
    if type(exp) is not list or type(rr) is not list:
        return False
    for x in exp:
        if type(x) is not int:
            return False
    for res in rr:
        if type(res) is not dict or type(res.get("dp_rank", 0)) is not int or not _fpms_fast(res.get("fpms")):
            return False
    return True


_RECORD_PARTS = itemgetter(
    "forward_index_start", "forward_index_end", "observed_forward_count", "completed_points_before"
)


def _record_fast(rec: dict[str, Any]) -> bool:
    """A warm-up record."""
    try:
        a, b, c, d = _RECORD_PARTS(rec)
    except KeyError:
        return False
    return (a is None or type(a) is int) and (b is None or type(b) is int) and type(c) is int and type(d) is int


_REP_PARTS = itemgetter("index", "fpm_count")


def _line_fast(obj: dict[str, Any]) -> bool:
    """A parsed sidecar line (``SIDECAR_INT_SCHEMA``)."""
    reps = obj.get("repetitions")
    if type(obj.get("benchmark_id", 0)) is not int or type(obj.get("dp_rank", 0)) is not int or type(reps) is not list:
        return False
    for r in reps:
        if type(r) is not dict:
            return False
        try:
            a, b = _REP_PARTS(r)
        except KeyError:
            return False
        if type(a) is not int or type(b) is not int or type(r.get("raw_sample_index", 0)) is not int:
            return False
    return True


#: Fast tests by the schema they stand for (a ``False`` answer means "visit the fields").
_FAST: dict[int, Callable[[dict[str, Any]], bool]] = {
    id(_FPM): _fpm_fast,
    id(_RAW_FPM): _raw_fast,
    id(_MEASUREMENT): _measurement_fast,
    id(_ROW): _row_fast,
    id(_GROUP): _group_fast,
    id(_POINT): _point_fast,
    id(_WARMUP_RECORD): _record_fast,
    id(SIDECAR_INT_SCHEMA): _line_fast,
}


@functools.lru_cache(maxsize=4096)
def parse_line(line: bytes) -> Any:
    """A sidecar line parsed (without its newline), :data:`ABSENT` when it is not JSON.

    Cached, so that A-2 and A-39 parse each line once; callers never mutate the result.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return ABSENT


_RANK_REST_SCHEMA = {k: v for k, v in RANK_INT_SCHEMA.items() if k not in ("results", "iteration_groups")}


def _points_pass(view: CellView) -> bool:
    """A-2's verdict for every rank and sidecar line; ``True`` when no integer field is wrong.

    The rows and iteration groups — the bulk of the artifacts — are read
    point by point over all ranks, and while a point's objects are at hand
    the pass records the equalities that A-6 and A-8 compare later, in
    ``view.memo``: ``"groups_equal"`` (the rank artifact whose
    ``iteration_groups`` those of every rank equal, as A-6 compares them) and
    ``"rows_equal"`` (rank → every row ``k`` has the point and the retained
    FPM of group ``k``'s entry for that rank, as A-8 compares them).  Only
    the verdict and these equalities are computed here; the rules keep their
    own order and diagnostics.
    """
    ranks = view.ranks
    docs = [r.doc for r in ranks]
    if not docs or not all(d.__class__ is dict and integers_ok(d, _RANK_REST_SCHEMA) for d in docs):
        return False
    results = [d.get("results") for d in docs]
    groups = [d.get("iteration_groups") for d in docs]
    n = len(results[0]) if results[0].__class__ is list else -1
    if not all(x.__class__ is list and len(x) == n for x in (*results, *groups)):
        # another form: the plain verdict, nothing recorded
        if not all(integers_ok(d, RANK_INT_SCHEMA) for d in docs):
            return False
        return _lines_pass(view)
    groups_equal = True
    rows_equal = {r.rank: True for r in ranks}
    for k in range(n):
        g0 = groups[0][k]
        for i, r in enumerate(ranks):
            row, g = results[i][k], groups[i][k]
            if isinstance(row, dict) and not integers_ok(row, _ROW):
                return False
            if isinstance(g, dict) and not integers_ok(g, _GROUP):
                return False
            if i and groups_equal and g != g0:
                groups_equal = False
            if rows_equal[r.rank]:
                try:
                    same_row = row["point"] == g["point"] and row["fpms"][0] == g["rank_results"][r.rank]["fpms"][0]
                except (KeyError, IndexError, TypeError):
                    same_row = False
                if not same_row:
                    rows_equal[r.rank] = False
    if not _lines_pass(view):
        return False
    view.memo["groups_equal"] = docs[0] if groups_equal else None  # compared with this rank's groups
    view.memo["rows_equal"] = rows_equal
    return True


def _lines_pass(view: CellView) -> bool:
    for r in view.ranks:
        for line in r.sidecar or ():
            obj = parse_line(line)
            if isinstance(obj, dict) and not integers_ok(obj, SIDECAR_INT_SCHEMA):
                return False
    return True


def a2_integers(view: CellView) -> Diagnostic | None:
    """A-2 [BEYOND]: every integer field is a JSON integer (not a bool, a float or a string).

    Fields are visited in document order, ``results`` before
    ``iteration_groups``, then the rank's sidecar lines; the first wrong
    field is reported.  :func:`integers_ok` decides, point by point over the
    ranks (:func:`_points_pass`), and only a refused artifact or line is
    walked for the field's path.
    """
    if _points_pass(view):
        return None
    for r in view.ranks:
        hit = find_non_integer(r.doc, RANK_INT_SCHEMA, top=True)
        if hit is not None:
            return Diagnostic("A-2", f"{hit[0]} must be an integer, found {js(hit[1])}: {r.path}", r.path)
        if r.sidecar is not None:
            for i, line in enumerate(r.sidecar):
                obj = parse_line(line)
                if obj.__class__ is dict and _line_fast(obj):
                    continue
                hit = find_non_integer(obj, SIDECAR_INT_SCHEMA, f"lines[{i}]")
                if hit is not None:
                    return Diagnostic(
                        "A-2", f"{hit[0]} must be an integer, found {js(hit[1])}: {r.sidecar_path}", str(r.sidecar_path)
                    )
    return None


def a3_ranks(view: CellView) -> Diagnostic | None:
    """A-3: one rank artifact per DP rank ``0 … dp.size−1``, ``dp.size`` equal on all ranks."""
    sizes = [get(get(r.doc, "dp"), "size") for r in view.ranks]
    ranks = [get(get(r.doc, "dp"), "rank") for r in view.ranks]
    size = sizes[0] if sizes else ABSENT
    ok = (
        bool(view.ranks)
        and is_int(size)
        and all(is_int(s) and s == size for s in sizes)
        and sorted(x for x in ranks if is_int(x)) == list(range(size))
        and all(is_int(x) for x in ranks)
    )
    if ok:
        view.sort_ranks()
        return None
    upper = f"{size - 1}" if is_int(size) else plain(size)
    found = js(sorted(x for x in ranks if is_int(x)))
    return Diagnostic(
        "A-3", f"native rank artifacts do not cover dp ranks 0..{upper}: found {found}: {view.attempt}", view.attempt
    )


def a4_status(view: CellView) -> Diagnostic | None:
    """A-4: a complete, valid, usable artifact without stop reason or error; then ``timing_valid``."""
    for r in view.ranks:
        d = r.doc
        usable = get(d, "usable")
        ok = (
            get(d, "status") == "complete"
            and get(d, "valid") is True
            and (usable is ABSENT or usable is True)
            and get(d, "stop_reason") is None
            and get(d, "error") is None
            and get(d, "missing_phases") == []
        )
        if not ok:
            return Diagnostic(
                "A-4",
                f"native rank artifact is not complete: status={plain(get(d, 'status'))}, "
                f"stop_reason={plain(get(d, 'stop_reason'))}: {r.path}",
                r.path,
            )
        if get(d, "timing_valid") is not True:
            return Diagnostic(
                "A-4",
                f"native rank artifact has no valid timing: timing_valid={plain(get(d, 'timing_valid'))}: {r.path}",
                r.path,
            )
    return None


def a5_coverage(view: CellView) -> Diagnostic | None:
    """A-5: completed = expected, nothing skipped, one result row and one group per point."""
    for r in view.ranks:
        cov = get(r.doc, "coverage")
        e, c, s = get(cov, "expected_points"), get(cov, "completed_points"), get(cov, "skipped_points")
        res, groups = get(r.doc, "results"), get(r.doc, "iteration_groups")
        nres = len(res) if isinstance(res, list) else ABSENT
        ngr = len(groups) if isinstance(groups, list) else ABSENT
        if not (is_int(e) and is_int(c) and is_int(s) and c == e and s == 0 and nres == c and ngr == c):
            return Diagnostic(
                "A-5",
                f"native coverage is inconsistent: expected_points={plain(e)}, completed_points={plain(c)}, "
                f"skipped_points={plain(s)}, results={plain(nres)}, iteration_groups={plain(ngr)}: {r.path}",
                r.path,
            )
    return None


_EQUAL_FIELDS = ("run_id", "grid_digest", "status", "coverage", "stop_reason", "dp.size", "iteration_groups")


def a6_cross_rank(view: CellView) -> Diagnostic | None:
    """A-6: §3.3 cross-rank equalities (``measurement_protocol`` is left to A-18).

    The first differing sub-field is named, so that a difference deep inside
    ``iteration_groups`` shows the values that differ.
    """
    for r in view.ranks:
        for key in ("run_id", "grid_digest"):
            v = get(r.doc, key)
            if not (isinstance(v, str) and v):
                return Diagnostic("A-6", f"native {key} must be a non-empty string, found {js(v)}: {r.path}", r.path)
    ref = view.ranks[0]
    groups_equal = view.memo.get("groups_equal") is ref.doc  # A-2 compared them (see _points_pass)
    for r in view.ranks[1:]:
        for field in _EQUAL_FIELDS:
            if groups_equal and field == "iteration_groups":
                continue
            a, b = ref.doc, r.doc
            for k in field.split("."):
                a, b = get(a, k), get(b, k)
            if a == b and (a is ABSENT) == (b is ABSENT):
                continue
            diff = first_difference(a, b, field) or (field, a, b)
            return Diagnostic(
                "A-6",
                f"native ranks disagree on {diff[0]}: rank {ref.rank}={plain(diff[1])}, rank "
                f"{r.rank}={plain(diff[2])}: {r.path}",
                r.path,
            )
    return None


def a7_groups(view: CellView) -> Diagnostic | None:
    """A-7: benchmark ids 1…N in order; every group complete for DP ranks 0…size−1 in order."""
    for r in view.ranks:
        groups = get(r.doc, "iteration_groups")
        size = get(get(r.doc, "dp"), "size")
        ids = [get(g, "benchmark_id") for g in groups]
        if ids != list(range(1, len(groups) + 1)) or not all(is_int(i) for i in ids):
            return Diagnostic(
                "A-7",
                "native iteration groups are not a contiguous 1-based sequence: found "
                f"{js([plain(i) if i is ABSENT else i for i in ids])}: {r.path}",
                r.path,
            )
        want = list(range(size))
        for g in groups:
            exp = get(g, "expected_dp_ranks")
            rr = get(g, "rank_results")
            got = [get(x, "dp_rank") for x in rr] if isinstance(rr, list) else None
            if exp != want or get(g, "complete") is not True or got != want:
                return Diagnostic(
                    "A-7",
                    f"iteration group benchmark_id={g['benchmark_id']} is incomplete: expected_dp_ranks={js(exp)}, "
                    f"complete={js(get(g, 'complete'))}: {r.path}",
                    r.path,
                )
    return None


def a8_rows(view: CellView) -> Diagnostic | None:
    """A-8: one FPM per rank-point with the point's counter and the rank; each row equals its group."""
    rows_equal = view.memo.get("rows_equal") or {}
    for r in view.ranks:
        listed = r.doc["iteration_groups"]
        groups = {g["benchmark_id"]: g for g in listed}
        # A-2 found row k equal to group k (point and this rank's fpm): see _points_pass
        compared = rows_equal.get(r.rank) is True
        seen: set[Any] = set()
        for k, row in enumerate(r.doc["results"]):
            bid = get(get(row, "point"), "benchmark_id")
            fpms = get(row, "fpms")
            if not isinstance(fpms, list) or len(fpms) != 1:
                n = len(fpms) if isinstance(fpms, list) else 0
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: the native save did not keep one fpm of one rank: rank {r.rank} "
                    f"holds {n} fpms: {r.path}",
                    r.path,
                )
            fpm = fpms[0]
            c, dr = get(fpm, "counter_id"), get(fpm, "dp_rank")
            if not (is_int(c) and c == bid and is_int(dr) and dr == r.rank):
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: fpm counter_id {plain(c)} or dp_rank {plain(dr)} does not match "
                    f"rank {r.rank}: {r.path}",
                    r.path,
                )
            g = groups.get(bid) if is_int(bid) else None
            gf = get(get(g, "rank_results")[r.rank], "fpms") if g is not None else ABSENT
            if (
                g is None
                or bid in seen
                or not isinstance(gf, list)
                or len(gf) != 1
                or (
                    not (compared and g is listed[k])
                    and (get(row, "point") != g.get("point", ABSENT) or fpm != gf[0])
                )
            ):
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: rank {r.rank} row differs from its synchronized group: {r.path}",
                    r.path,
                )
            seen.add(bid)
    return None


def a9_wall_times(view: CellView) -> Diagnostic | None:
    """A-9: group wall time = slowest retained wall time; Σ group wall times = measured ≤ elapsed."""
    for r in view.ranks:
        total = 0.0
        for g in r.doc["iteration_groups"]:
            walls = [get(x["fpms"][0], "wall_time") for x in g["rank_results"]]
            w = get(g, "wall_time")
            if not all(is_number(x) for x in walls) or not is_number(w) or not close(w, max(walls)):
                m = max((x for x in walls if is_number(x)), default=ABSENT)
                return Diagnostic(
                    "A-9",
                    f"benchmark_id={g['benchmark_id']}: iteration wall time {plain(w)} differs from the slowest rank "
                    f"{plain(m)}: {r.path}",
                    r.path,
                )
            total += w
        timing = get(r.doc, "timing")
        s, elapsed = get(timing, "measured_iteration_seconds"), get(timing, "benchmark_elapsed_seconds")
        if not is_number(s) or not close(s, total) or not is_number(elapsed) or elapsed < 0 or s > elapsed + 1e-12:
            return Diagnostic(
                "A-9",
                f"measured_iteration_seconds {plain(s)} differs from the sum of iteration wall times {js(total)}: "
                f"{r.path}",
                r.path,
            )
    return None


def a10_staged_points(view: CellView) -> Diagnostic | None:
    """A-10: the points of the groups, encoded as 04 G-22, have the digest the plan staged for the cell.

    The staged list is the full list or the smoke subset of the plan's
    ``options.benchmark_points`` (04 G-25); the staged manifest
    (``points.json``) says which one.  A plan without a benchmark-point record
    and without a staged manifest leaves the points to the runtime.
    """
    bp = benchmark_points(view.plan)
    staged = [bp.get("manifest_sha256"), bp.get("smoke_manifest_sha256")]
    staged = [s for s in staged if isinstance(s, str)]
    expected: Any = None
    if view.manifest is not None:
        path, man = view.manifest
        found = canonical_digest(man)
        if staged and found not in staged:
            return Diagnostic(
                "A-10",
                f"native points differ from the staged plan list: expected manifest {staged[0]}, found {found}: {path}",
                path,
            )
        expected = found
    elif staged:
        expected = staged
    if expected is None:
        return None
    # A-6 made the iteration groups of all ranks equal and A-2 their integers exact: one digest serves all ranks
    for r in view.ranks[:1]:
        found = canonical_digest(manifest_of(get(g, "point") for g in r.doc["iteration_groups"]))
        ok = found == expected if isinstance(expected, str) else found in expected
        if not ok:
            exp = expected if isinstance(expected, str) else expected[0]
            return Diagnostic(
                "A-10",
                f"native points differ from the staged plan list: expected manifest {exp}, found {found}: {r.path}",
                r.path,
            )
    return None


_ENGINE_DROP = ("resolved", "resolution", "resolved_scope", "worker_probe")
_ATTENTION_DROP = ("backend_resolved", "mla_prefill_backend_resolved", "resolution")


def engine_identity(engine: Any) -> Any:
    """An ``engine`` block without the fields that may differ across ranks (05 §3.4)."""
    if not isinstance(engine, dict):
        return engine
    out = {k: v for k, v in engine.items() if k not in _ENGINE_DROP and k != "capture_error"}
    att = out.get("attention")
    if isinstance(att, dict):
        out["attention"] = {k: v for k, v in att.items() if k not in _ATTENTION_DROP}
    par = out.get("parallel")
    if isinstance(par, dict):
        out["parallel"] = {k: v for k, v in par.items() if k != "data_parallel_rank"}
    return out


def a11_engine(view: CellView) -> Diagnostic | None:
    """A-11: the ``engine`` blocks of all ranks without a capture error are equal (05 §3.4)."""
    if not any(get(r.doc, "engine") is not ABSENT for r in view.ranks):
        return None
    live = [r for r in view.ranks if get(get(r.doc, "engine"), "capture_error") in (ABSENT, None)]
    if not live:
        return None
    ref = live[0]
    a = engine_identity(get(ref.doc, "engine"))
    for r in live[1:]:
        b = engine_identity(get(r.doc, "engine"))
        diff = first_difference(a, b, "engine")
        if diff is not None:
            return Diagnostic(
                "A-11",
                f"native ranks disagree on engine provenance: field={diff[0]}, rank {ref.rank} vs rank {r.rank}: "
                f"{r.path}",
                r.path,
            )
    return None


def merge_ranks(
    ranks: Sequence[Mapping[str, Any]], *, rank_files: Sequence[str] = (), merged_output_path: str = "merged.json"
) -> dict[str, Any]:
    """Dynamo's merge of rank artifacts (05 §5), as fpmcore re-computes it for A-12.

    The reference rank is the lowest rank.  ``rank_files`` and
    ``merged_output_path`` are the paths the merge wrote (not compared).
    """
    import copy

    ranks = sorted(ranks, key=lambda d: d["dp"]["rank"])
    out = copy.deepcopy(dict(ranks[0]))
    size = len(ranks)
    out["artifact_type"] = "merged"
    out["dp"] = {
        "ranks": list(range(size)),
        "source_ranks": [d["dp"]["rank"] for d in ranks],
        "managed_size": size,
        "global_size": size,
    }
    out["rank_files"] = list(rank_files)
    out["merged_output_path"] = merged_output_path
    rows = []
    by_rank = [{row["point"]["benchmark_id"]: row for row in d["results"]} for d in ranks]
    for bid in sorted(by_rank[0]):
        for r, rows_of in enumerate(by_rank):
            row = rows_of[bid]
            entry: dict[str, Any] = {"point": {**row["point"], "dp_rank": r}, "fpms": copy.deepcopy(row["fpms"])}
            if "kv_seed_regime" in row:
                entry["kv_seed_regime"] = row["kv_seed_regime"]
            rows.append(entry)
    out["results"] = rows
    out["coverage"] = {k: v * size for k, v in ranks[0]["coverage"].items()}
    slowest = max(ranks, key=lambda d: d["timing"]["benchmark_elapsed_seconds"])
    out["timing"] = dict(copy.deepcopy(slowest["timing"]))
    out["timing"]["rank_benchmark_elapsed_seconds"] = {
        str(d["dp"]["rank"]): d["timing"]["benchmark_elapsed_seconds"] for d in ranks
    }
    out["rank_warmup_evidence"] = {
        str(d["dp"]["rank"]): d.get("warmup_evidence", {"status": "unavailable", "records": []}) for d in ranks
    }
    if isinstance(out.get("engine"), dict):
        out["engine"] = copy.deepcopy(out["engine"])
        if isinstance(out["engine"].get("parallel"), dict):
            out["engine"]["parallel"]["data_parallel_rank"] = None
        out["engine"]["capture_errors"] = [
            d["dp"]["rank"] for d in ranks if get(d.get("engine"), "capture_error") not in (ABSENT, None)
        ]
    return out


def a12_merged(view: CellView) -> Diagnostic | None:
    """A-12: a present merged artifact equals the merge of the rank artifacts (05 §5)."""
    if view.merged is None:
        return None
    path, merged = view.merged
    expected = merge_ranks([r.doc for r in view.ranks])
    if not isinstance(merged, dict):
        return Diagnostic(
            "A-12", f"native merged artifact differs from the merge of its rank artifacts: artifact_type: {path}", path
        )
    for key in list(expected) + [k for k in merged if k not in expected]:
        if key in ("rank_files", "merged_output_path"):
            continue
        diff = first_difference(expected.get(key, ABSENT), merged.get(key, ABSENT), key)
        if diff is not None:
            return Diagnostic(
                "A-12", f"native merged artifact differs from the merge of its rank artifacts: {diff[0]}: {path}", path
            )
    return None


def a13_provenance(view: CellView) -> Diagnostic | None:
    """A-13: collector provenance identical across pods and equal to the frozen cell and plan."""
    if not view.provenance:
        return Diagnostic(
            "A-13",
            "collector provenance differs from the frozen cell: provenance expected present, found absent: "
            f"{view.attempt}",
            view.attempt,
        )
    cell_id = get(view.cell, "cell_id")
    expect = (
        (("schema_name",), "fpmcore_collector_provenance"),
        (("schema_version",), 1),
        (("cell_id",), cell_id),
        (("plan_sha256",), get(view.plan, "sha256")),
        (("runtime", "backend"), "vllm"),
    )
    path0, first = view.provenance[0]
    for keys, want in expect:
        v = first
        for k in keys:
            v = get(v, k)
        if first_difference(v, want) is not None or v is ABSENT:
            return Diagnostic(
                "A-13",
                f"collector provenance differs from the frozen cell: {'.'.join(keys)} expected {plain(want)}, found "
                f"{plain(v)}: {path0}",
                path0,
            )
    for key in ("attempt_id",):
        if not isinstance(get(first, key), str):
            return Diagnostic(
                "A-13",
                f"collector provenance differs from the frozen cell: {key} expected a string, found "
                f"{plain(get(first, key))}: {path0}",
                path0,
            )
    bv = get(get(first, "runtime"), "backend_version")
    if not isinstance(bv, str):
        return Diagnostic(
            "A-13",
            "collector provenance differs from the frozen cell: runtime.backend_version expected a string, found "
            f"{plain(bv)}: {path0}",
            path0,
        )
    for path, other in view.provenance[1:]:
        diff = first_difference(first, other)
        if diff is not None:
            return Diagnostic("A-13", f"collector provenance differs across pods: {diff[0]}: {path}", path)
    return None


STRUCTURE_RULES: tuple[tuple[str, ArtifactRule], ...] = (
    ("A-1", a1_schema), ("A-2", a2_integers), ("A-3", a3_ranks), ("A-4", a4_status), ("A-5", a5_coverage),
    ("A-6", a6_cross_rank), ("A-7", a7_groups), ("A-8", a8_rows), ("A-9", a9_wall_times),
    ("A-10", a10_staged_points), ("A-11", a11_engine), ("A-12", a12_merged), ("A-13", a13_provenance),
)  # fmt: skip


# ---------------------------------------------------------------------------
# A-15 … A-24 (artifact level, general part)
# ---------------------------------------------------------------------------

IDENTITY_COLUMNS = ("model_config_sha256", "execution_profile", "engram_residency", "input_modality")


def a15_identity(view: CellView) -> Diagnostic | None:
    """A-15: the artifact's ``execution_identity`` equals the cell's (contract cells only)."""
    if view.contract is None:
        return None
    for r in view.ranks:
        ident = get(r.doc, "execution_identity")
        for col in IDENTITY_COLUMNS:
            want, v = getattr(view.identity, col), get(ident, col)
            if v != want or not isinstance(v, str):
                return Diagnostic(
                    "A-15",
                    f"native execution identity differs from the frozen cell: {col} expected {plain(want)}, found "
                    f"{plain(v)}: {r.path}",
                    r.path,
                )
    return None


def a16_execution_mode(view: CellView) -> Diagnostic | None:
    """A-16: the artifact's ``execution_mode`` is the contract's mode (contract cells only)."""
    if view.contract is None:
        return None
    for r in view.ranks:
        mode = get(r.doc, "execution_mode")
        if mode != view.contract.execution_mode or not isinstance(mode, str):
            return Diagnostic(
                "A-16",
                f"native execution identity cell expects execution mode {view.contract.execution_mode}, found "
                f"{plain(mode)}: {r.path}",
                r.path,
            )
    return None


def a17_protocol_producer(view: CellView, contract: ContractRules | None = None) -> Diagnostic | None:
    """A-17: a cell whose contract does not own ``measurement_protocol.producer`` carries none."""
    if contract is not None and contract.owns_protocol_producer:
        return None
    for r in view.ranks:
        prod = get(r.protocol, "producer")
        if prod is not ABSENT:
            name = get(prod, "name")
            owner = view.owners.get(name) if isinstance(name, str) else None
            label = owner or (name if isinstance(name, str) else "another")
            return Diagnostic(
                "A-17",
                f"measurement_protocol.producer belongs to the {label} producer contract, found in a cell with "
                f"contract {view.contract_name}: {r.path}",
                r.path,
            )
    return None


def a18_protocol_presence(view: CellView) -> Diagnostic | None:
    """A-18: every rank has ``measurement_protocol`` or none does, and all are equal."""
    ref = view.ranks[0]
    for r in view.ranks[1:]:
        a, b = ref.protocol, r.protocol
        if (a is ABSENT) != (b is ABSENT) or first_difference(a, b) is not None:
            return Diagnostic("A-18", f"native ranks disagree on measurement_protocol: rank {r.rank}: {r.path}", r.path)
    return None


PROTOCOL_FIELDS: tuple[tuple[str, Any], ...] = (
    ("schema_version", 1),
    ("content_identity", "coordinate_rank_slot_v1"),
    ("prompt_hash_encoding", "uint32_le"),
    ("independent_repetitions", 1),
    ("timing_metric", "scheduler_wall_time"),
    ("input_evidence_scope", "injected_prompt_token_ids"),
)
SYNTHETIC_CONTENT = ("random", "sharegpt", "sharegpt_chain", "zeros", "seeded_tokens")
EXECUTION_EVIDENCE = {
    "schema_version": 1,
    "sample_field": "benchmark_sample",
    "warmup_field": "warmup_evidence",
    "forward_index_scope": "rank_process",
    "timing_clock": "process_local_monotonic",
    "cudagraph_source": "ModelRunnerOutput.cudagraph_stats",
    "warmup_scope": "request_completion_and_existing_shape_validation",
}


def a19_protocol_fields(view: CellView) -> Diagnostic | None:
    """A-19: the field values of 05 §4.1."""
    for r in view.ranks:
        p = r.protocol
        if p is ABSENT:
            continue

        def bad(field: str, want: str, v: Any, r: RankView = r) -> Diagnostic:
            return Diagnostic(
                "A-19", f"measurement_protocol.{field} expected {want}, found {plain(v)}: {r.path}", r.path
            )

        if not isinstance(p, dict):
            return Diagnostic("A-19", f"measurement_protocol expected an object, found {js(p)}: {r.path}", r.path)
        for field, want in PROTOCOL_FIELDS:
            v = get(p, field)
            if first_difference(v, want) is not None or v is ABSENT:
                return bad(field, plain(want), v)
        for field in ("content_seed", "synthetic_pool_tag"):
            if not isinstance(get(p, field), str):
                return bad(field, "a string", get(p, field))
        sc = get(p, "synthetic_content")
        if sc not in SYNTHETIC_CONTENT or not isinstance(sc, str):
            return bad("synthetic_content", "|".join(SYNTHETIC_CONTENT), sc)
        un = get(p, "unobserved")
        if not (isinstance(un, list) and un and all(isinstance(x, str) and x for x in un)):
            return bad("unobserved", "a non-empty list of non-empty strings", un)
        prep = get(p, "preparation")
        for field in ("warmup_iterations", "giant_kv_threshold", "giant_kv_repeats"):
            v = get(prep, field)
            if not (is_int(v) and v >= 0):
                return bad(f"preparation.{field}", "an integer ≥ 0", v)
        for field in ("prefill_real_seed", "decode_real_kv_warmup"):
            v = get(prep, field)
            if type(v) is not bool:
                return bad(f"preparation.{field}", "true|false", v)
    return None


def a20_execution_evidence(view: CellView) -> Diagnostic | None:
    """A-20: ``execution_evidence``, when present, is the exact object of 05 §4.1."""
    for r in view.ranks:
        ev = get(r.protocol, "execution_evidence")
        if ev is not ABSENT and first_difference(ev, EXECUTION_EVIDENCE) is not None:
            return Diagnostic(
                "A-20",
                f"measurement_protocol.execution_evidence expected {js(EXECUTION_EVIDENCE)}, found {js(ev)}: {r.path}",
                r.path,
            )
    return None


WARMUP_KINDS = ("global", "eager_shape", "real_prefix_seed", "real_prefix_shape")
WARMUP_STATUS = ("running", "completed", "failed")
VALIDATION_STATUS = ("not_performed", "passed", "failed")


_WARMUP_PARTS = itemgetter(
    "kind", "status", "validation", "forward_index_start", "forward_index_end", "observed_forward_count",
    "completed_points_before",
)  # fmt: skip


def _warmup_records_pass(records: list[Any]) -> bool:
    """The fast path of :func:`warmup_problem`: ``True`` only when every record passes its checks
    with an integer forward range (a record without one is left to the full check)."""
    prev_end: int | None = None
    prev_points = 0
    try:
        for rec in records:
            kind, st, val, start, end, count, cpb = _WARMUP_PARTS(rec)
            vs, reason = val["status"], val.get("reason", "")
            if not (
                kind.__class__ is str and kind in WARMUP_KINDS and st.__class__ is str and st in WARMUP_STATUS
                and vs.__class__ is str and vs in VALIDATION_STATUS and reason.__class__ is str
                and count.__class__ is int and cpb.__class__ is int and cpb >= prev_points
                and start.__class__ is int and end.__class__ is int and 0 <= start <= end and end - start == count
                and (prev_end is None or start >= prev_end)
            ):  # fmt: skip
                return False
            prev_end, prev_points = end, cpb
    except (KeyError, TypeError, AttributeError):
        return False
    return True


def warmup_problem(ev: Any) -> str | None:
    """What is wrong with a ``warmup_evidence`` block (05 §4.4), or ``None``."""
    if not isinstance(ev, dict):
        return f"warmup_evidence expected an object, found {js(ev)}"
    status, records = get(ev, "status"), get(ev, "records")
    if status not in ("recorded", "unavailable") or not isinstance(status, str):
        return f"status expected recorded|unavailable, found {plain(status)}"
    if not isinstance(records, list):
        return f"records expected a list, found {js(records)}"
    if status == "unavailable" and records:
        return f"status unavailable with {len(records)} records"
    if _warmup_records_pass(records):
        return None
    prev_end: int | None = None
    prev_points = 0
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            return f"records[{i}] expected an object, found {js(rec)}"
        g = rec.get
        kind, st, val = g("kind", ABSENT), g("status", ABSENT), g("validation", ABSENT)
        if kind.__class__ is not str or kind not in WARMUP_KINDS:
            return f"records[{i}].kind expected {'|'.join(WARMUP_KINDS)}, found {plain(kind)}"
        if st.__class__ is not str or st not in WARMUP_STATUS:
            return f"records[{i}].status expected {'|'.join(WARMUP_STATUS)}, found {plain(st)}"
        vs = get(val, "status")
        if vs.__class__ is not str or vs not in VALIDATION_STATUS:
            return f"records[{i}].validation.status expected {'|'.join(VALIDATION_STATUS)}, found {plain(vs)}"
        reason = val.get("reason", ABSENT)
        if reason is not ABSENT and reason.__class__ is not str:
            return f"records[{i}].validation.reason expected a string, found {js(reason)}"
        start, end = g("forward_index_start", ABSENT), g("forward_index_end", ABSENT)
        count, cpb = g("observed_forward_count", ABSENT), g("completed_points_before", ABSENT)
        for name, v in (("forward_index_start", start), ("forward_index_end", end)):
            if not (v is None or (v.__class__ is int and v >= 0)):
                return f"records[{i}].{name} expected an integer ≥ 0 or null, found {plain(v)}"
        for name, v in (("observed_forward_count", count), ("completed_points_before", cpb)):
            if not (v.__class__ is int and v >= 0):
                return f"records[{i}].{name} expected an integer ≥ 0, found {plain(v)}"
        if start is not None and end is not None:
            if end < start or end - start != count:
                return (
                    f"records[{i}] forward range [{start}, {end}) holds {end - start} forwards, "
                    f"observed_forward_count {count}"
                )
        if start is not None and prev_end is not None and start < prev_end:
            return f"records[{i}] starts at forward {start} before the previous record ends ({prev_end})"
        if cpb < prev_points:
            return f"records[{i}].completed_points_before {cpb} is below the previous record's {prev_points}"
        if end is not None:
            prev_end = end
        prev_points = cpb
    return None


def a24_warmup(view: CellView) -> Diagnostic | None:
    """A-24: the warm-up ledger is well formed when the protocol declares execution evidence."""
    for r in view.ranks:
        if get(r.protocol, "execution_evidence") is ABSENT:
            continue
        problem = warmup_problem(get(r.doc, "warmup_evidence"))
        if problem is not None:
            return Diagnostic("A-24", f"warmup_evidence is invalid: {problem}: rank {r.rank}: {r.path}", r.path)
    return None


GENERAL_ARTIFACT_RULES: tuple[tuple[str, ArtifactRule], ...] = (
    ("A-15", a15_identity), ("A-16", a16_execution_mode), ("A-17", a17_protocol_producer),
    ("A-18", a18_protocol_presence), ("A-19", a19_protocol_fields), ("A-20", a20_execution_evidence),
    ("A-24", a24_warmup),
)  # fmt: skip


# ---------------------------------------------------------------------------
# A-29 … A-40 (row level, general part)
# ---------------------------------------------------------------------------


def measurement(row: Any) -> Any:
    """The ``benchmark_measurement`` of a row's retained FPM, :data:`ABSENT` if none."""
    try:
        fpm = row["fpms"][0]
    except (KeyError, IndexError, TypeError):
        return ABSENT
    return fpm.get("benchmark_measurement", ABSENT) if fpm.__class__ is dict else ABSENT


def raw_fpms(row: Any) -> list[Any]:
    """The raw FPMs of a row's measurement, ``[]`` if none."""
    bm = measurement(row)
    raw = bm.get("raw_fpms") if bm.__class__ is dict else None
    return raw if raw.__class__ is list else []


def _row_point_key(view: CellView, point: dict[str, Any]) -> str:
    """``point_key`` of a row's point, computed once per benchmark id for points equal on all ranks."""
    bid = point.get("benchmark_id")
    hit = view.point_keys.get(bid) if type(bid) is int and point.get("partition") is None else None
    if hit is not None and hit[0] == point:
        return hit[1]
    key = point_key(point)
    if type(bid) is int:
        view.point_keys[bid] = (point, key)
    return key


def a29_identity(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-29: ``benchmark_measurement`` identity (``schema_version``, ``dp_rank``, ``point_key``)."""
    bm = measurement(row)
    if rank.protocol is ABSENT:
        if bm is not ABSENT:
            return Diagnostic(
                "A-29", "benchmark_measurement has no measurement_protocol" + rank.row_suffix(row), rank.path
            )
        return None
    point = get(row, "point")
    pk = _row_point_key(view, point) if isinstance(point, dict) else ABSENT
    if bm.__class__ is dict:  # fast path: the three values exactly
        sv, dr, key = bm.get("schema_version"), bm.get("dp_rank"), bm.get("point_key")
        if (
            sv.__class__ is int and sv == 1 and dr.__class__ is int and dr == rank.rank
            and key.__class__ is str and key == pk
        ):  # fmt: skip
            return None
    for field, want in (("schema_version", 1), ("dp_rank", rank.rank), ("point_key", pk)):
        v = get(bm, field)
        if v is ABSENT or not same(v, want):
            return Diagnostic(
                "A-29",
                f"benchmark_measurement has missing or inconsistent rank/point identity: {field} expected "
                f"{plain(want)}, found {plain(v)}" + rank.row_suffix(row),
                rank.path,
            )
    return None


def a30_preparation(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-30: ``preparation``: the artifact's grid digest, the row's position and regime."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    prep = get(bm, "preparation")
    for field, want in (
        ("grid_digest", get(rank.doc, "grid_digest")),
        ("completed_points_before", k),
        ("kv_seed_regime", get(row, "kv_seed_regime")),
    ):
        v = get(prep, field)
        if not same(v, want):
            return Diagnostic(
                "A-30",
                f"benchmark_measurement has inconsistent grid/order/kv preparation: {field} expected {plain(want)}, "
                f"found {plain(v)}" + rank.row_suffix(row),
                rank.path,
            )
    return None


def a31_prompts(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-31: prompt evidence well formed; ``unavailable`` is a reported gap, not a refusal."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    pr = get(bm, "prompts")
    status, sha, reqs = get(pr, "status"), get(pr, "sha256"), get(pr, "requests")

    def bad(detail: str) -> Diagnostic:
        return Diagnostic(
            "A-31", f"benchmark_measurement has malformed prompt evidence: {detail}" + rank.row_suffix(row), rank.path
        )

    if status == "unavailable":
        if sha is not None or reqs != []:
            return bad(f"status=unavailable, sha256={plain(sha)}, requests={js(reqs)}")
        return None
    if status != "recorded":
        return bad(f"status={plain(status)}")
    if not isinstance(reqs, list):
        return bad(f"requests={js(reqs)}")
    for i, req in enumerate(reqs):
        slot, n, h = get(req, "slot"), get(req, "num_tokens"), get(req, "sha256")
        if not (is_int(slot) and slot == i and is_int(n) and n >= 0 and isinstance(h, str) and _HEX64.match(h)):
            return bad(f"requests[{i}]={js(req)}")
    agg = canonical_digest(reqs)
    if sha != agg:
        return Diagnostic(
            "A-31",
            f"recorded prompt evidence aggregate hash disagrees with requests: expected {agg}, found {plain(sha)}"
            + rank.row_suffix(row),
            rank.path,
        )
    return None


def a33_raw_samples(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-33: raw samples: count, identity, sample and forward indices, timing, graph status, wall time."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = _Suffix(rank, row)
    raw, exp = get(bm, "raw_fpms"), get(bm, "expected_internal_samples")
    fpm = row["fpms"][0]
    n = len(raw) if isinstance(raw, list) else ABSENT
    if (
        not (isinstance(raw, list) and raw and is_int(exp) and exp >= 1 and exp >= len(raw))
        or "benchmark_sample" in fpm
    ):
        return Diagnostic(
            "A-33",
            f"benchmark_measurement has malformed internal sample evidence: raw_samples={plain(n)}, "
            f"expected_internal_samples={plain(exp)}" + sfx,
            rank.path,
        )
    bid, worker = get(get(row, "point"), "benchmark_id"), get(fpm, "worker_id")
    passed = _raw_samples_pass(raw, bid, rank.rank, worker, rank.last_forward)
    if passed is not None:
        rank.last_forward, started = passed
        # every sample observed its graph dispatch; with a start time on each, A-36 has nothing to check
        rank.scratch["started_and_observed"] = k if started else None
        return None
    for i, s in enumerate(raw):
        w = get(s, "wall_time")
        if not is_number(w) or w <= 0:
            return Diagnostic(
                "A-33", f"raw sample {i} has a non-positive or non-finite wall_time: {plain(w)}" + sfx, rank.path
            )
        c, d, wk = get(s, "counter_id"), get(s, "dp_rank"), get(s, "worker_id")
        if not (is_int(c) and c == bid and is_int(d) and d == rank.rank and isinstance(wk, str) and wk == worker):
            return Diagnostic(
                "A-33",
                f"raw sample {i} has a different point/rank identity: counter_id={plain(c)}, dp_rank={plain(d)}, "
                f"worker_id={plain(wk)}" + sfx,
                rank.path,
            )
        bs = get(s, "benchmark_sample")
        si, fi = get(bs, "sample_index"), get(bs, "forward_index")
        prev = rank.last_forward
        if not (is_int(si) and si == i and is_int(fi) and fi >= 0 and (prev is None or fi > prev)):
            return Diagnostic(
                "A-33",
                f"raw sample {i} has an invalid sample/forward index: sample_index={plain(si)}, "
                f"forward_index={plain(fi)}, "
                f"previous forward_index={plain(prev)}" + sfx,
                rank.path,
            )
        rank.last_forward = fi
        t = get(bs, "timing")
        basis, start, end = get(t, "basis"), get(t, "start_monotonic"), get(t, "end_monotonic")
        if basis not in ("schedule_to_output", "inter_output") or not isinstance(basis, str) or not is_number(end):
            return Diagnostic("A-33", f"raw sample {i} has no timing interval: basis={plain(basis)}" + sfx, rank.path)
        if start is not ABSENT and start is not None:
            if not is_number(start) or start > end or not close(end - start, w, rel=1e-9, abs_=1e-9):
                return Diagnostic(
                    "A-33",
                    f"raw sample {i} contradicts its timing interval: start={plain(start)}, end={plain(end)}, "
                    f"wall_time={plain(w)}" + sfx,
                    rank.path,
                )
        g = get(bs, "cudagraph")
        st = get(g, "status")
        vals = [get(g, f) for f in ("runtime_mode", "num_unpadded_tokens", "num_padded_tokens", "num_paddings")]
        if st == "observed":
            mode, unp, pad, pads = vals
            if not (
                isinstance(mode, str)
                and mode
                and is_int(unp)
                and is_int(pad)
                and is_int(pads)
                and pad >= unp >= 0
                and pads == pad - unp
            ):
                return Diagnostic("A-33", f"raw sample {i} has invalid observed graph data: {js(g)}" + sfx, rank.path)
        elif st == "unavailable":
            if any(v is not None for v in vals):
                return Diagnostic(
                    "A-33",
                    f"raw sample {i} contradicts its graph observation status: status={plain(st)}" + sfx,
                    rank.path,
                )
        else:
            return Diagnostic(
                "A-33", f"raw sample {i} contradicts its graph observation status: status={plain(st)}" + sfx, rank.path
            )
    return None


_BASES = frozenset(("schedule_to_output", "inter_output"))
_INF = math.inf


_A33_RAW = itemgetter("wall_time", "counter_id", "dp_rank", "worker_id", "benchmark_sample")
_A33_SAMPLE = itemgetter("sample_index", "forward_index", "timing", "cudagraph")
_A33_TIMING = itemgetter("basis", "end_monotonic")
_A33_GRAPH = itemgetter("status", "runtime_mode", "num_unpadded_tokens", "num_padded_tokens", "num_paddings")


def _raw_samples_pass(
    raw: list[Any], bid: Any, rank_id: int, worker: Any, last: int | None
) -> tuple[int | None, bool] | None:
    """The fast path of A-33: ``(last forward index, every sample has a start time)`` when every
    raw sample passes with an observed graph dispatch, else ``None`` (then the rule's own loop
    finds the diagnostic)."""
    if type(bid) is not int or type(worker) is not str:
        return None
    started = True
    isclose = math.isclose
    try:
        for i, s in enumerate(raw):
            w, c, d, wk, bs = _A33_RAW(s)
            tw = type(w)
            if not ((tw is float or tw is int) and 0 < w < _INF):
                return None
            if type(c) is not int or c != bid or type(d) is not int or d != rank_id or wk != worker:
                return None
            si, fi, t, g = _A33_SAMPLE(bs)
            if type(si) is not int or si != i or type(fi) is not int or fi < 0 or (last is not None and fi <= last):
                return None
            basis, end = _A33_TIMING(t)
            te = type(end)
            if basis not in _BASES or not ((te is float or te is int) and -_INF < end < _INF):
                return None
            start = t.get("start_monotonic")
            if start is None:
                started = False
            else:
                ts = type(start)
                if not ((ts is float or ts is int) and start <= end):
                    return None
                gap = end - start - w
                if not -1e-9 <= gap <= 1e-9 and not isclose(end - start, w, rel_tol=1e-9, abs_tol=1e-9):
                    return None
            st, mode, unp, pad, pads = _A33_GRAPH(g)
            if not (st == "observed" and type(mode) is str and mode and type(unp) is int and type(pad) is int
                    and type(pads) is int and pad >= unp >= 0 and pads == pad - unp):  # fmt: skip
                return None
            last = fi
    except (KeyError, TypeError, AttributeError):
        return None
    return last, started


REDUCTIONS = ("single_step", "last_step", "adjacent_upper_median")


@functools.lru_cache(maxsize=256)
def _reduction_indices(method: str, count: int, expected: int) -> tuple[int, ...] | None:
    want = reduction_indices(method, count, expected)
    return None if want is None else tuple(want)


def reduction_indices(method: str, count: int, expected: int) -> list[int] | None:
    """``raw_sample_indices`` of a reduction, or ``None`` when its preconditions fail (05 §4.2)."""
    if method == "single_step" and count == 1:
        return [0]
    if method == "last_step" and expected > 1 and count == expected:
        return [count - 1]
    if method == "adjacent_upper_median" and expected > 2 and count > 1:
        return list(range(1, count))
    return None


def a34_reduction(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-34: the reduction method, its indices and the retained wall time (the upper median)."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = _Suffix(rank, row)
    raw, exp = bm["raw_fpms"], bm["expected_internal_samples"]
    est = get(bm, "estimate")
    method, idx = get(est, "method"), get(est, "raw_sample_indices")
    want = _reduction_indices(method, len(raw), exp) if method.__class__ is str and exp.__class__ is int else None
    if want is None:
        return Diagnostic(
            "A-34",
            f"benchmark_measurement has inconsistent reduction method: method={plain(method)}, "
            f"raw_samples={len(raw)}, expected_internal_samples={exp}" + sfx,
            rank.path,
        )
    if idx.__class__ is not list or tuple(idx) != want or not _INT_TYPES.issuperset(map(type, idx)):
        return Diagnostic(
            "A-34",
            f"benchmark_measurement has inconsistent raw sample indices: expected {js(list(want))}, found {js(idx)}"
            + sfx,
            rank.path,
        )
    reduced = upper_median([raw[i]["wall_time"] for i in want])
    retained = get(row["fpms"][0], "wall_time")
    if not is_number(retained) or not close(retained, reduced):
        return Diagnostic(
            "A-34",
            f"benchmark_measurement reduction disagrees with retained timing: retained={plain(retained)}, "
            f"reduced={js(reduced)}" + sfx,
            rank.path,
        )
    return None


def _warmup_prefix(rank: RankView, records: list[Any]) -> tuple[list[int], list[int]]:
    """Per prefix length ``n``: the largest end among the first ``n`` records, and how many of
    them are clean (finished with an integer end); kept per rank."""
    cached = rank.scratch.get("warmup_prefix")
    if cached is None:
        ends, clean = [-1], [0]
        ok = True
        top = -1
        for rec in records:
            if rec.__class__ is dict:
                end, status = rec.get("forward_index_end"), rec.get("status")
            else:
                end, status = get(rec, "forward_index_end"), get(rec, "status")
            good = end.__class__ is int
            ok = ok and good and status != "running"
            if good and end > top:
                top = end
            ends.append(top)
            clean.append(len(clean) if ok else clean[-1])
        cached = rank.scratch["warmup_prefix"] = (ends, clean)
    return cached  # type: ignore[no-any-return]


def a35_warmup_reference(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-35: ``warmup_records_before`` counts finished warm-up records that end before the first raw sample."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = _Suffix(rank, row)
    ev = get(rank.doc, "warmup_evidence")
    status, records = get(ev, "status"), get(ev, "records")
    wrb = get(get(bm, "preparation"), "warmup_records_before")
    if status == "recorded" and isinstance(records, list):
        if not (is_int(wrb) and 0 <= wrb <= len(records)):
            return Diagnostic(
                "A-35", f"warmup reference is invalid: warmup_records_before={plain(wrb)}" + sfx, rank.path
            )
        first = bm["raw_fpms"][0]["benchmark_sample"]["forward_index"]
        ends, clean = _warmup_prefix(rank, records)
        if clean[wrb] == wrb and ends[wrb] <= first:
            return None
        for j in range(wrb):
            rec = records[j]
            end = get(rec, "forward_index_end")
            if get(rec, "status") == "running" or not is_int(end) or end > first:
                return Diagnostic(
                    "A-35",
                    f"warmup reference overlaps measurement: record {j} ends at forward {plain(end)} after the first "
                    f"raw sample {first}" + sfx,
                    rank.path,
                )
    elif wrb is not None:
        return Diagnostic("A-35", f"warmup reference is invalid: warmup_records_before={plain(wrb)}" + sfx, rank.path)
    return None


def expected_workload(point: Any) -> list[tuple[str, Any]]:
    """The ``scheduled_requests`` values a point's forward must show (A-40), in check order."""
    b, tp, kv = get(point, "batch_size"), get(point, "total_prefill_tokens"), get(point, "total_kv_read_tokens")
    if get(point, "point_type") == "decode":
        return [("num_decode_requests", b), ("sum_decode_kv_tokens", kv), ("num_prefill_requests", 0)]
    return [
        ("num_prefill_requests", b),
        ("sum_prefill_tokens", tp),
        ("sum_prefill_kv_tokens", kv),
        ("num_decode_requests", 0),
    ]


def _workloads_match(fpms: list[Any], want: list[tuple[str, Any]]) -> bool:
    """The fast path of A-40: every FPM's ``scheduled_requests`` holds the wanted integers."""
    try:
        for f in fpms:
            sr = f["scheduled_requests"]
            for field, v in want:
                x = sr[field]
                if x.__class__ is not int or x != v:
                    return False
    except (KeyError, TypeError):
        return False
    return True


def a40_workload(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-40 [BEYOND]: every raw sample's workload, and the retained FPM's, equals its point."""
    want = expected_workload(get(row, "point"))
    raw = raw_fpms(row)
    if _workloads_match([*raw, row["fpms"][0]], want):
        return None
    sfx = _Suffix(rank, row)
    for i, s in enumerate(raw):
        sr = get(s, "scheduled_requests")
        for field, v in want:
            got = get(sr, field)
            if not is_int(got) or got != v:
                return Diagnostic(
                    "A-40",
                    f"raw sample {i} workload differs from its point: {field} expected {plain(v)}, found {plain(got)}"
                    + sfx,
                    rank.path,
                )
    sr = get(row["fpms"][0], "scheduled_requests")
    for field, v in want:
        got = get(sr, field)
        if not is_int(got) or got != v:
            return Diagnostic(
                "A-40",
                f"retained fpm workload differs from its point: {field} expected {plain(v)}, found {plain(got)}" + sfx,
                rank.path,
            )
    return None


GENERAL_ROW_RULES: tuple[tuple[str, RowRule], ...] = (
    ("A-29", a29_identity), ("A-30", a30_preparation), ("A-31", a31_prompts), ("A-33", a33_raw_samples),
    ("A-34", a34_reduction), ("A-35", a35_warmup_reference), ("A-40", a40_workload),
)  # fmt: skip

#: The rules of a cell without a configuration-bound identity.
GENERAL_CONTRACT = ContractRules(name=GENERAL)


# ---------------------------------------------------------------------------
# reading an attempt directory (05 §1)
# ---------------------------------------------------------------------------


def read_attempt(root: str | Path) -> tuple[dict[str, Any], list[Diagnostic]]:
    """Read the files of one attempt: ``(files, problems)``.

    ``files`` maps each name (relative to ``root``) to its parsed JSON, or
    for ``.jsonl`` files to the list of its lines as bytes, each with its
    newline.  ``problems`` lists files that are not strict JSON or differ
    from the artifact index (05 §1); such a cell is refused.
    """
    base = Path(root)
    files: dict[str, Any] = {}
    problems: list[Diagnostic] = []
    raw: dict[str, bytes] = {}
    for p in sorted(base.rglob("*")):
        if p.is_file():
            raw[p.relative_to(base).as_posix()] = p.read_bytes()
    index = None
    if "index.json" in raw:
        try:
            index = get(loads(raw.pop("index.json"), "index.json"), "files")
        except JsonError as exc:
            problems.append(
                Diagnostic("INDEX", f"artifact index is not strict JSON: {exc.message}: index.json", "index.json")
            )
        if not isinstance(index, dict):
            problems.append(Diagnostic("INDEX", "artifact index has no files object: index.json", "index.json"))
            index = {}
    for name, data in raw.items():
        if index is not None:
            want = index.get(name)
            if want is None:
                continue  # only indexed files are read
            if sha256_hex(data) != want:
                problems.append(
                    Diagnostic(
                        "INDEX",
                        f"file differs from the artifact index: expected {plain(want)}, found {sha256_hex(data)}: "
                        f"{name}",
                        name,
                    )
                )
                continue
        if name.endswith(".jsonl"):
            files[name] = data.splitlines(keepends=True)
        elif name.endswith(".json"):
            try:
                files[name] = loads(data, name)
            except JsonError as exc:
                problems.append(Diagnostic("JSON", f"{exc.message}: {name}", name))
    if index is not None:
        for name in index:
            if name not in raw:
                problems.append(Diagnostic("INDEX", f"indexed file is missing: {name}", name))
    return files, problems


# ---------------------------------------------------------------------------
# one cell: structure, contract, then the contract's rules
# ---------------------------------------------------------------------------


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


def prompt_gaps(view: CellView) -> list[str]:
    """The non-blocking gaps of 05 §7.3: ranks whose rows record no prompt hashes."""
    gaps = []
    for r in view.ranks:
        if any(get(get(measurement(row), "prompts"), "status") == "unavailable" for row in r.rows):
            gaps += [
                f"rank {r.rank}: injected prompt hashes unavailable",
                f"rank {r.rank}: preceding prompt evidence incomplete",
            ]
    return gaps


def retained_rows(view: CellView) -> list[RetainedRow]:
    out = []
    for r in view.ranks:
        for row in r.rows:
            p, fpms = get(row, "point"), get(row, "fpms")
            fpm = fpms[0] if isinstance(fpms, list) and fpms else ABSENT
            out.append(
                RetainedRow(
                    get(p, "benchmark_id"), r.rank, get(p, "point_type"), get(p, "batch_size"),
                    get(p, "total_prefill_tokens"), get(p, "total_kv_read_tokens"), get(fpm, "wall_time"),
                    get(row, "kv_seed_regime"),
                )  # fmt: skip
            )
    return out


def _choose(host: Any, identity: ExecutionIdentity, where: str) -> ProducerContract | None:
    hit = host.hooks.choose_producer_contract(identity=identity, where=where)
    if hit is None:
        return None
    return hit[1] if isinstance(hit, tuple) else hit


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
    """Validate the parsed files of one attempt for ``cell`` of ``plan`` (05 §8, A-1 … A-40)."""
    cell_id = plain(get(cell, "cell_id"))
    if problems:
        return CellResult(cell_id, GENERAL, (problems[0],))
    owners = protocol_owners(host) if owners is None else owners
    view = CellView(cell=cell, files=files, plan=plan, attempt=attempt, owners=owners)
    if not view.ranks:
        return CellResult(cell_id, GENERAL, (a3_ranks(view),))  # type: ignore[arg-type]
    d = run_artifact_rules(view, STRUCTURE_RULES)
    if d is not None:
        return CellResult(cell_id, GENERAL, (d,))
    try:
        contract = _choose(host, view.identity, view.first_path) if view.identity.configuration_bound else None
    except FpmError as exc:
        where = exc.where or view.first_path
        return CellResult(cell_id, GENERAL, (Diagnostic(exc.rule, f"{exc.message}: {where}", where),))
    view.contract = contract
    if contract is None:
        diags = run_rules(view, GENERAL_CONTRACT)
    else:
        hook_files = dict(files)
        hook_files["@attempt"] = attempt
        hook_files["@owners"] = dict(owners)
        try:
            diags = host.hooks.validate_artifact(contract=contract, cell=cell, files=hook_files, plan=plan)
        except FpmError as exc:
            diags = [Diagnostic(exc.rule, exc.message, exc.where or view.first_path)]
    gaps = tuple(prompt_gaps(view))
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
            kv = get(point, "total_kv_read_tokens")
            cached = get(point, "point_type") == "decode" or (is_int(kv) and kv > 0)
            if regime != ("real_kv" if cached else "not_applicable"):
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
    d = _safe("A-41", view.first_path, publication_labels, view)
    return result if d is None else attrs.evolve(result, diagnostics=(d,), retained=())


def plan_cells(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cells = get(plan, "cells")
    out: dict[str, Mapping[str, Any]] = {}
    for c in cells if isinstance(cells, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("cell_id"), str):
            out[c["cell_id"]] = c
    return out


def validate_run(host: Any, run_dir: str | Path, plan: Mapping[str, Any]) -> list[CellResult]:
    """Validate every attempt of a run directory (one sub-directory per cell, or one attempt).

    A directory that holds rank artifacts itself is one attempt whose cell is
    named by its collector provenance; otherwise each sub-directory is the
    attempt of the cell it is named after.
    """
    base = Path(run_dir)
    cells = plan_cells(plan)
    owners = protocol_owners(host)
    if any(_RANK_FILE.match(p.name) for p in base.iterdir() if p.is_file()):
        attempts = [(None, base)]
    else:
        attempts = [(p.name, p) for p in sorted(base.iterdir()) if p.is_dir()]
    results = []
    for name, path in attempts:
        files, problems = read_attempt(path)
        if name is None:
            prov = next((v for n, v in sorted(files.items()) if Path(n).name.startswith("provenance")), None)
            name = plain(get(prov, "cell_id"))
        cell = cells.get(name)
        label = str(path)
        if cell is None:
            d = Diagnostic(
                "A-13",
                "collector provenance differs from the frozen cell: cell_id expected a cell of the plan, found "
                f"{name}: {label}",
                label,
            )
            results.append(CellResult(name, GENERAL, (d,)))
            continue
        results.append(validate_files(host, cell, files, plan, attempt=label, problems=problems, owners=owners))
    return results


# ---------------------------------------------------------------------------
# fpm validate
# ---------------------------------------------------------------------------


def _configure(p: Any) -> None:
    p.add_argument("artifact_dir", metavar="ARTIFACT_DIR", help="a run directory (one attempt per cell) or one attempt")
    p.add_argument("--plan", required=True, metavar="PLAN", help="the frozen collection plan the run was collected for")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _run(args: Any, ctx: Any) -> int:
    from fpmcore.jsonio import load_path

    run_dir = Path(args.artifact_dir)
    if not run_dir.is_dir():
        raise FpmError("input", f"not a directory: {run_dir}")
    plan = load_path(args.plan)
    if not isinstance(plan, dict):
        raise FpmError("input", f"plan is not a JSON object: {args.plan}")
    results = validate_run(ctx.host, run_dir, plan)
    if not results:
        raise FpmError("input", f"no attempt found in {run_dir}")
    refused = any(r.status == "refused" for r in results)
    if ctx.json:
        ctx.emit_json(
            {
                "status": "refused" if refused else "accepted",
                "cells": [
                    {
                        "cell": r.cell,
                        "contract": r.contract,
                        "status": r.status,
                        "diagnostics": [
                            {"rule": d.rule, "message": d.message, "where": d.where} for d in r.diagnostics
                        ],
                    }
                    for r in results
                ],
            }
        )
        return 1 if refused else 0
    from rich.markup import escape
    from rich.table import Table

    for r in results:
        mark = "[red]refused[/red]" if r.diagnostics else "[green]accepted[/green]"
        ctx.out.print(f"cell {escape(r.cell)} ({escape(r.contract)}): {mark}")
        for d in r.diagnostics:
            ctx.out.print(f"  [bold]{escape(d.rule)}[/bold] {escape(d.message)}")
        for g in r.gaps:
            ctx.out.print(f"  gap: {escape(g)}")
        if r.retained:
            t = Table("id", "rank", "phase", "b", "new", "kv read", "wall_time (s)", "kv_seed_regime")
            for x in r.retained:
                t.add_row(
                    *(
                        plain(v)
                        for v in (
                            x.benchmark_id,
                            x.rank,
                            x.point_type,
                            x.batch_size,
                            x.total_prefill_tokens,
                            x.total_kv_read_tokens,
                            x.wall_time,
                            x.kv_seed_regime,
                        )
                    )
                )
            ctx.out.print(t)
    return 1 if refused else 0


def validate_command() -> CliCommand:
    """``fpm validate ARTIFACT_DIR --plan PLAN [--json]`` (exit 0 all accepted, 1 some refused, 2 unreadable input)."""
    return CliCommand(
        name="validate",
        help="validate the measurement artifacts of a collected run against its plan (05)",
        configure=_configure,
        run=_run,
    )
