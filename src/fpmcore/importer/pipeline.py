"""The import pipeline: stages A to M for each selected configuration (02 §6).

* Within a stage every record is checked, and a record contributes at most
  its first failing rule; a configuration-level rule contributes at most one
  diagnostic.
* After a stage with a diagnostic the configuration is ``incomplete`` and
  later stages do not run.
* No exception escapes: an unexpected one becomes I-0 for its configuration
  (02 §6.2), and the other configurations continue.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fpmcore.documents.jsonio import JsonError, load_path
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.host.hooks import RuntimeHooks
from fpmcore.host.stage_hooktypes import ImportRules, SpecClassification
from fpmcore.importer import (
    block_pool,
    cache_groups,
    draft,
    evidence_files,
    launch_settings,
    layer_views,
    prefix_and_capacity,
    record_envelope,
    runtime_identity,
)
from fpmcore.importer.state import ImportDiagnostic, ImportNote, ImportState, RuntimeServices, run_stage

RESULT_SCHEMA = "fpmcore-import-result/v1"


@attrs.frozen
class ConfigResult:
    """The import result of one configuration (02 §9.1)."""

    configuration: str
    status: str
    diagnostics: tuple[ImportDiagnostic, ...]
    draft: dict[str, Any] | None
    provenance: dict[str, Any]
    profile: Any = None  #: the validated FpmModelProfile when complete
    #: ``"layout"`` (a dry run: cache planned, no tensors), ``"tensor"`` (live), ``None`` when stage B did not decide
    evidence: str | None = None
    #: what the runtime's rules accepted where 02 cannot hold on its platform (:class:`~fpmcore.importer.state.ImportNote`)
    notes: tuple[ImportNote, ...] = ()

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": RESULT_SCHEMA,
            "configuration": self.configuration,
            "status": self.status,
            "evidence": self.evidence,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "notes": [n.to_json() for n in self.notes],
            "draft": self.draft,
            "provenance": self.provenance,
        }


@attrs.frozen
class ImportRun:
    """Every selected configuration's result, and the diagnostics of the run itself (I-1 to I-3)."""

    results: tuple[ConfigResult, ...]
    run_diagnostics: tuple[ImportDiagnostic, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.run_diagnostics and bool(self.results) and all(r.complete for r in self.results)

    @property
    def diagnostics(self) -> list[ImportDiagnostic]:
        return list(self.run_diagnostics) + [d for r in self.results for d in r.diagnostics]

    @property
    def exit_code(self) -> int:
        """0 when every selected configuration is complete, else 1 (02 §6.2)."""
        return 0 if self.complete else 1


class HostServices:
    """:class:`~fpmcore.importer.state.RuntimeServices` over a :class:`fpmcore.host.plugins.PluginHost`.

    The runtime plugin of a pin is selected once (``host.hooks.runtime``) and
    every runtime hook of that pin is dispatched to it alone.
    """

    def __init__(self, host: Any) -> None:
        self.host = host
        self._runtimes: dict[str, RuntimeHooks | None] = {}

    def _runtime(self, pin: str) -> RuntimeHooks | None:
        """The runtime hooks of ``pin``, selected once; ``None`` when no single plugin targets it."""
        from fpmcore.documents.errors import FpmError

        if pin not in self._runtimes:
            try:
                self._runtimes[pin] = self.host.hooks.runtime(pin)
            except FpmError:
                self._runtimes[pin] = None
        return self._runtimes[pin]

    def has_runtime(self, pin: str) -> bool:
        return self._runtime(pin) is not None

    def installed(self) -> str:
        parts = []
        for r in self.host.active("runtime"):
            versions = ", ".join(RuntimePin.version_of(t) for t in r.targets)
            parts.append(f"{r.id} ({versions})")
        off = self.host.not_loaded()
        return (", ".join(parts) or "none") + (f"; not loaded: {off}" if off else "")

    def not_loaded(self) -> str:
        return str(self.host.not_loaded())

    def classify(self, runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
        hooks = self._runtime(runtime)
        return None if hooks is None else hooks.classify_spec(spec_class=spec_class, spec=spec)

    def normalize(self, runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
        hooks = self._runtime(runtime)
        return None if hooks is None else hooks.normalize_record(record=record)

    def rules(self, runtime: str) -> ImportRules | None:
        hooks = self._runtime(runtime)
        return None if hooks is None else hooks.rules()

    def hybrid_versions(self) -> list[str]:
        found: list[str] = []
        for r in self.host.active("runtime"):
            for pin in r.targets:
                hooks = self._runtime(pin)
                rules = None if hooks is None else hooks.rules()
                if rules is not None and rules.hybrid_evidence and rules.version not in found:
                    found.append(rules.version)
        return found


def _stages(ctx: ImportState) -> bool:
    """Stages B to L; False as soon as one stage produced a diagnostic."""
    if not run_stage(ctx, record_envelope.RULES):
        return False
    runtime_identity.prepare(ctx)
    if not run_stage(ctx, runtime_identity.RULES):
        return False
    runtime_identity.finish(ctx)
    runtime_identity.prepare(ctx)  # normalization may change what a record holds
    if not run_stage(ctx, launch_settings.RULES):
        return False
    if not run_stage(ctx, cache_groups.STAGE_E):
        return False
    cache_groups.finish_e(ctx)
    # layout-level evidence (a dry run) holds no allocated tensors: of stage H only the planned allocations
    # (I-67), no stage I (stage B, I-113)
    tensor_stages = [block_pool.STAGE_H_PLANNED] if ctx.layout else [block_pool.STAGE_H, layer_views.STAGE_I]
    for rules in (cache_groups.STAGE_F, block_pool.STAGE_G, *tensor_stages):
        if not run_stage(ctx, rules):
            return False
    if ctx.hybrid:
        for rules in (prefix_and_capacity.STAGE_J, prefix_and_capacity.STAGE_K):
            if not run_stage(ctx, rules):
                return False
    return run_stage(ctx, prefix_and_capacity.STAGE_L)


def import_configuration(
    folder: Path, label: str, index: dict[str, Any], index_ref: dict[str, str], reviewed: Any, services: RuntimeServices
) -> ConfigResult:
    """Run stages A to M for one configuration; never raises."""
    ctx = ImportState(folder=folder, label=label, services=services, index_ref=index_ref)
    prov: dict[str, Any] = {"observations_index": index_ref}
    try:
        evidence_files.run(ctx, index, reviewed)
        if not ctx.diagnostics and _stages(ctx):
            prov = draft.provenance(ctx)
            data = draft.draft(ctx, prov)
            profile, problem = draft.validate(data)
            if problem is None:
                from fpmcore.documents.profile import profile_to_dict

                return ConfigResult(
                    label, "complete", (), profile_to_dict(profile), prov, profile, ctx.evidence, tuple(ctx.notes)
                )
            ctx.diagnostics.append(ctx.diag("I-110", f"imported resources fail profile validation: {problem}"))
            prov = {"observations_index": index_ref}
    except Exception as exc:  # noqa: BLE001 - 02 §6.2: never an exception
        ctx.diagnostics.append(ctx.diag("I-0", f"import failed unexpectedly: {type(exc).__name__}: {exc}"))
        prov = {"observations_index": index_ref}
    return ConfigResult(
        label, "incomplete", tuple(ctx.diagnostics), None, prov, evidence=ctx.evidence, notes=tuple(ctx.notes)
    )


def import_evidence(
    folder: str | Path,
    services: RuntimeServices,
    *,
    launch: str | Path | None = None,
    configuration: str | None = None,
) -> ImportRun:
    """Import the evidence folder ``folder`` (02 §6.1): ``fpm import DIR [--launch L] [--configuration C]``."""
    folder = Path(folder)
    try:
        index, index_ref = evidence_files.read_index(folder)
    except evidence_files.IndexRefusal as exc:
        return ImportRun((), (ImportDiagnostic("I-1", exc.message, configuration),))
    except OSError as exc:
        message = f"runtime observation index cannot be read: {folder / evidence_files.INDEX_FILE}: {exc.strerror}"
        return ImportRun((), (ImportDiagnostic("I-1", message, configuration),))
    labels = [configuration] if configuration is not None else sorted(index["configurations"])
    if not labels:
        return ImportRun(
            (), (ImportDiagnostic("I-2", "runtime import requires selected configurations with reviewed launch facts"),)
        )
    reviewed = None
    if launch is not None:
        if len(labels) != 1:
            return ImportRun(
                (),
                (
                    ImportDiagnostic(
                        "I-2", f"a reviewed launch needs exactly one selected configuration; {len(labels)} are selected"
                    ),
                ),
            )
        try:
            reviewed = load_path(launch)
        except JsonError:
            reviewed = None
        if isinstance(reviewed, dict) and set(reviewed) == {"launch"}:
            reviewed = reviewed["launch"]
        if not isinstance(reviewed, dict):
            return ImportRun(
                (), (ImportDiagnostic("I-2", f"reviewed launch file is not a strict JSON object: {launch}"),)
            )
    results = []
    for label in labels:
        if label not in index["configurations"]:
            d = ImportDiagnostic("I-3", f"selected configuration has no runtime observation evidence: '{label}'", label)
            results.append(ConfigResult(label, "incomplete", (d,), None, {"observations_index": index_ref}))
            continue
        results.append(import_configuration(folder, label, index, index_ref, reviewed, services))
    return ImportRun(tuple(results))
