"""The import's working objects: diagnostics, records, the per-configuration state (:class:`ImportState`).

Nothing here knows a vLLM version: version-specific answers come from
:class:`RuntimeServices` (the plugin host's hooks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import attrs

from fpmcore.documents.jsonio import one_line
from fpmcore.documents.record import SCHEMA_VERSION
from fpmcore.documents.rules_catalogue import CHECKED_RULE_ATTRIBUTE, checked_rule
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.host.stage_hooktypes import ImportRules, SpecClassification

PHASES = ("prefill", "decode")
RECORD_SCHEMA = SCHEMA_VERSION

#: A worker's ``lifecycle.measurement`` when the runtime planned the cache without
#: allocating it (a dry probe): the record is *layout-level* evidence (see
#: :mod:`fpmcore.importer.record_envelope`, I-113).
CACHE_PLANNED = "cache_planned"
LAYOUT, TENSOR = "layout", "tensor"

_WORKER_FILE = re.compile(r"^runtime-observation-worker-dp(\d+)-tp(\d+)-pp(\d+)\.json$")
_SCHEDULER_FILE = re.compile(r"^runtime-observation-scheduler-dp(\d+)\.json$")


@attrs.frozen
class ImportDiagnostic:
    """One diagnostic of 02 §1: ``{rule, configuration, phase, artifact, message}``."""

    rule: str
    message: str
    configuration: str | None = None
    phase: str | None = None
    artifact: str | None = None

    @property
    def where(self) -> str:
        """``<configuration>: <phase>/<artifact>`` with ``-`` for a null field (02 §1)."""
        return f"{self.configuration or '-'}: {self.phase or '-'}/{self.artifact or '-'}"

    def render(self) -> str:
        """One line: a value from the evidence that holds a line break or another unprintable character is escaped."""
        return one_line(f"{self.where}: {self.message} [{self.rule}]")

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "configuration": self.configuration,
            "phase": self.phase,
            "artifact": self.artifact,
            "message": self.message,
        }


@attrs.frozen
class ImportNote:
    """A rule of 02 that the record's runtime says cannot hold on its platform, accepted as it says.

    ``rule`` is the 02 rule, ``message`` what was accepted and which field of
    the runtime's :class:`~fpmcore.host.stage_hooktypes.ImportRules` says so; a note is
    never a failure (``fpm import`` prints it, the result and the provenance
    list it).
    """

    rule: str
    message: str

    def render(self) -> str:
        return f"note: {self.message} [{self.rule}]"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message}


class Refusal(Exception):
    """Raised inside a rule: the first failure of one rule for one record."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(rule, message)
        self.rule = rule
        self.message = message


@attrs.define(eq=False)
class Record:
    """One parsed record file and where it sits (02 §2.3)."""

    phase: str
    path: str  #: relative to the evidence folder
    sha256: str
    data: Any
    #: kind and rank as the file name gives them (``None`` when it does not parse)
    name_kind: str | None = None
    name_rank: tuple[int, int | None, int | None] | None = None
    hybrid: bool = False

    @property
    def file(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def kind(self) -> str | None:
        b = self.data.get("binding") if isinstance(self.data, dict) else None
        k = b.get("kind") if isinstance(b, dict) else None
        return k if k in ("worker", "scheduler") else self.name_kind

    @property
    def is_worker(self) -> bool:
        return self.kind == "worker"

    @property
    def rank(self) -> tuple[Any, Any, Any]:
        b = self.data.get("binding") if isinstance(self.data, dict) else None
        r = b.get("rank") if isinstance(b, dict) else None
        if isinstance(r, dict):
            return (r.get("dp"), r.get("tp"), r.get("pp"))
        return self.name_rank or (None, None, None)

    @property
    def level(self) -> str | None:
        """``"layout"`` for a worker whose cache was planned, not allocated; ``"tensor"`` for
        another worker; ``None`` for a scheduler (its record is the same in both)."""
        if not self.is_worker:
            return None
        return LAYOUT if self.get("lifecycle", "measurement") == CACHE_PLANNED else TENSOR

    @property
    def dp(self) -> Any:
        return self.rank[0]

    @property
    def subject(self) -> str:
        """``<phase> worker dp<d>-tp<t>-pp<p>`` or ``<phase> scheduler dp<d>`` (02 §1)."""
        d, t, p = self.rank
        if self.kind == "scheduler":
            return f"{self.phase} scheduler dp{d}"
        return f"{self.phase} worker dp{d}-tp{t}-pp{p}"

    @property
    def order(self) -> tuple[Any, ...]:
        """Record order (02 §1): phase, then workers by (dp, tp, pp), then schedulers by dp."""
        rank = self.name_rank or (0, 0, 0)
        kind = self.name_kind or ("scheduler" if "scheduler" in self.file else "worker")
        return (
            PHASES.index(self.phase) if self.phase in PHASES else 9,
            0 if kind == "worker" else 1,
            tuple(-1 if v is None else v for v in rank),
            self.path,
        )

    def get(self, *path: str | int, default: Any = None) -> Any:
        cur = self.data
        for step in path:
            if isinstance(step, int):
                if not isinstance(cur, list) or not -len(cur) <= step < len(cur):
                    return default
            elif not isinstance(cur, dict) or step not in cur:
                return default
            cur = cur[step]
        return cur

    @property
    def cache(self) -> dict[str, Any]:
        c = self.get("cache")
        return c if isinstance(c, dict) else {}

    @property
    def groups(self) -> list[Any]:
        g = self.cache.get("groups")
        return g if isinstance(g, list) else []

    @property
    def settings(self) -> dict[str, Any]:
        s = self.get("settings")
        return s if isinstance(s, dict) else {}

    def setting(self, section: str, key: str, default: Any = None) -> Any:
        sec = self.settings.get(section)
        return sec.get(key, default) if isinstance(sec, dict) else default


def pin(version: object) -> str:
    """The runtime pin a record's ``runtime.version`` names (I-25 selects its plugin by it)."""
    return str(RuntimePin(str(version)))


def parse_record_name(file: str) -> tuple[str | None, tuple[int, int | None, int | None] | None]:
    m = _WORKER_FILE.match(file)
    if m:
        return "worker", (int(m[1]), int(m[2]), int(m[3]))
    m = _SCHEDULER_FILE.match(file)
    if m:
        return "scheduler", (int(m[1]), None, None)
    return None, None


class RuntimeServices(Protocol):
    """What the import asks of the plugin host; all version knowledge lives behind it."""

    def has_runtime(self, pin: str) -> bool:
        """True when an installed runtime plugin declares exactly ``pin`` (I-25)."""

    def installed(self) -> str:
        """``<plugin (versions), …>`` for I-25's message."""

    def classify(self, runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
        """The plugin's class table (02 §5)."""

    def normalize(self, runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The plugin's record normalization (02 §3.14)."""

    def rules(self, runtime: str) -> ImportRules | None:
        """The plugin's :class:`~fpmcore.host.stage_hooktypes.ImportRules` (``None``: the plugin gives none)."""

    def hybrid_versions(self) -> list[str]:
        """The versions whose installed plugin imports hybrid evidence (I-22), in plugin order."""

    def not_loaded(self) -> str:
        """``<id> (<status>: <reason>), …`` of the plugins that are disabled or failed; ``""`` when none is."""


@attrs.define(eq=False)
class ImportState:
    """Everything one configuration's import knows so far."""

    folder: Any
    label: str
    services: RuntimeServices
    launch: Any = None  #: the reviewed launch (§6.1)
    index_entry: Any = None
    attempt_id: str | None = None
    records: list[Record] = attrs.Factory(list)
    manifests: dict[str, dict[str, Any]] = attrs.Factory(dict)
    manifest_refs: list[dict[str, str]] = attrs.Factory(list)
    artifacts: list[dict[str, str]] = attrs.Factory(list)
    other_artifacts: list[dict[str, str]] = attrs.Factory(list)
    index_ref: dict[str, str] | None = None
    hybrid: bool = False
    version: str | None = None
    runtime_pin: str | None = None
    #: the record version's rules (fixed after stage C, :attr:`runtime_rules`)
    rules: ImportRules | None = None
    #: per group index, the class-table kind (stage E)
    kinds: list[str] = attrs.Factory(list)
    #: ``"layout"`` or ``"tensor"``: the evidence level of the attempt, fixed by I-113 (stage B)
    evidence: str | None = None
    diagnostics: list[ImportDiagnostic] = attrs.Factory(list)
    #: what the runtime's rules accepted where 02 cannot hold on its platform, each once
    notes: list[ImportNote] = attrs.Factory(list)
    #: records that already failed in the running stage
    failed: set[int] = attrs.Factory(set)
    extra: dict[str, Any] = attrs.Factory(dict)

    @property
    def runtime_rules(self) -> ImportRules:
        """The :class:`~fpmcore.host.stage_hooktypes.ImportRules` of the records' version (set after stage C)."""
        if self.rules is None:
            raise RuntimeError("the runtime rules are fixed after stage C")
        return self.rules

    @property
    def layout(self) -> bool:
        """True for layout-level evidence: the rules that need allocated tensors do not run."""
        return self.evidence == LAYOUT

    # -- record selection ----------------------------------------------------

    def ordered(self) -> list[Record]:
        return sorted(self.records, key=lambda r: r.order)

    def phase(self, phase: str) -> list[Record]:
        return [r for r in self.ordered() if r.phase == phase]

    def workers(self, phase: str | None = None) -> list[Record]:
        return [r for r in self.ordered() if r.is_worker and (phase is None or r.phase == phase)]

    def schedulers(self, phase: str | None = None) -> list[Record]:
        return [r for r in self.ordered() if r.kind == "scheduler" and (phase is None or r.phase == phase)]

    def scheduler_for(self, rec: Record) -> Record | None:
        for s in self.schedulers(rec.phase):
            if s.dp == rec.dp:
                return s
        return None

    def rules_of(self, rec: Record) -> ImportRules:
        """The rules of ``rec``'s runtime version before stage C fixes them (the defaults without a plugin)."""
        if self.rules is not None:
            return self.rules
        version = rec.get("runtime", "version")
        if not isinstance(version, str):
            return ImportRules(version="unknown")
        key = f"rules:{version}"
        if key not in self.extra:
            self.extra[key] = self.services.rules(pin(version)) or ImportRules(version=version)
        return self.extra[key]  # type: ignore[no-any-return]

    # -- diagnostics --------------------------------------------------------

    def note(self, rule: str, message: str) -> None:
        """Record that ``rule`` accepted what the runtime's rules say (:class:`ImportNote`), once."""
        found = ImportNote(rule, message)
        if found not in self.notes:
            self.notes.append(found)

    def diag(self, rule: str, message: str, rec: Record | None = None, *, whole: bool = False) -> ImportDiagnostic:
        if rec is None:
            return ImportDiagnostic(rule, message, None if whole else self.label, None, None)
        return ImportDiagnostic(rule, message, self.label, rec.phase, rec.file)


#: A rule function: yields ``(record or None, rule, message)``; the stage runner keeps
#: the first failure of each record and one diagnostic per configuration-level rule.
Finding = tuple["Record | None", str, str]
Rule = Callable[[ImportState], Iterable[Finding]]


#: Exceptions a rule raises when a value has another JSON type than 02 §3 gives.
TYPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError, ZeroDivisionError)


def rule_id(check: Callable[..., Any]) -> str:
    """The rule id a check was marked with (``@checks("I-14")`` → ``I-14``); ``I-0`` when it has none."""
    return checked_rule(check) or "I-0"


def type_message(rec: Record | None) -> str:
    """The message of a rule that met a value of another JSON type than 02 §3 gives."""
    where = rec.subject if rec is not None else "the configuration"
    return f"runtime observation value of another JSON type than the record schema gives: {where}"


def per_record(
    check: Callable[[ImportState, Record], None], select: Callable[[ImportState], list[Record]] | None = None
) -> Rule:
    """Turn a check that raises :class:`Refusal` for one record into a rule function.

    A check that meets a value of another JSON type (it raises ``TypeError``,
    ``KeyError``, …) fails with its own rule id (02 §1, *Types*).
    """

    def rule(ctx: ImportState) -> Iterator[Finding]:
        for rec in select(ctx) if select else ctx.ordered():
            if id(rec) in ctx.failed:
                continue
            try:
                check(ctx, rec)
            except Refusal as r:
                yield rec, r.rule, r.message
            except TYPE_ERRORS:
                yield rec, rule_id(check), type_message(rec)

    rule.__name__ = getattr(check, "__name__", "rule")
    rule.__doc__ = check.__doc__
    setattr(rule, CHECKED_RULE_ATTRIBUTE, checked_rule(check))
    return rule


def guarded(gen: Callable[[ImportState], Iterable[Finding]]) -> Rule:
    """A configuration-level rule that fails with its own id on a value of another JSON type."""

    def rule(ctx: ImportState) -> Iterator[Finding]:
        try:
            yield from gen(ctx)
        except TYPE_ERRORS:
            yield None, rule_id(gen), type_message(None)

    rule.__name__ = gen.__name__
    rule.__doc__ = gen.__doc__
    setattr(rule, CHECKED_RULE_ATTRIBUTE, checked_rule(gen))
    return rule


def run_stage(ctx: ImportState, rules: Iterable[Rule]) -> bool:
    """Run one stage (02 §6.1); return True when it produced no diagnostic."""
    ctx.failed = set()
    before = len(ctx.diagnostics)
    for rule in rules:
        config_level_seen: set[str] = set()
        for rec, rule_id, message in rule(ctx):
            if rec is None:
                if rule_id in config_level_seen:
                    continue
                config_level_seen.add(rule_id)
                ctx.diagnostics.append(ctx.diag(rule_id, message))
            else:
                if id(rec) in ctx.failed:
                    continue
                ctx.failed.add(id(rec))
                ctx.diagnostics.append(ctx.diag(rule_id, message, rec))
    return len(ctx.diagnostics) == before
