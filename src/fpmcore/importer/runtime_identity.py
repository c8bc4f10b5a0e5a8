"""Stage C — runtime identity and version gates (02 §4, §7.3: I-21 to I-26).

Two gates, on exact version strings (no PEP 440 normalization):

* the **hybrid gate** (I-22): a record with hybrid evidence must name exactly
  a version whose installed runtime plugin imports hybrid evidence
  (``ImportRules.hybrid_evidence``; 02 §4 names vLLM 0.33.0), whatever
  observer wrote it and whatever its launch pins;
* the **plugin gate** (I-25): some installed runtime plugin must declare the
  record's exact version (``vllm==<version>``).

After both gates, the rules of the records' version are fixed
(``fpm_runtime_rules``; a plugin that gives none is read with the defaults of
:class:`~fpmcore.host.stage_hooktypes.ImportRules`), and every record goes through its
plugin's ``fpm_normalize_record`` hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from fpmcore.documents.rules_catalogue import checks
from fpmcore.documents.runtime_pin import FRAMEWORK
from fpmcore.host.stage_hooktypes import ImportRules
from fpmcore.importer.record_values import first_difference, same, show
from fpmcore.importer.state import Finding, ImportState, Record, Refusal, guarded, per_record, pin


def holds_hybrid(rec: Record) -> bool:
    """02 §3.1: a worker group holds ``layer_specs``, or a scheduler group ``spec_fields``."""
    key = "layer_specs" if rec.kind == "worker" else "spec_fields"
    return any(isinstance(g, dict) and key in g for g in rec.groups)


@checks("I-21")
def framework_is_vllm(ctx: ImportState, rec: Record) -> None:
    """I-21: the framework is vLLM."""
    framework = rec.get("runtime", "framework")
    if framework != FRAMEWORK:
        raise Refusal(
            "I-21", f"runtime observation currently requires a vLLM source mapping; got framework {show(framework)}"
        )


def hybrid_versions(ctx: ImportState) -> list[str]:
    """The versions whose installed runtime plugin imports hybrid evidence (asked once per configuration)."""
    if "hybrid_versions" not in ctx.extra:
        ctx.extra["hybrid_versions"] = ctx.services.hybrid_versions()
    return cast(list[str], ctx.extra["hybrid_versions"])


@checks("I-22")
def hybrid_evidence_version_supported(ctx: ImportState, rec: Record) -> None:
    """I-22: hybrid evidence only from a version whose plugin imports it, compared exactly (checked before I-26 on purpose).

    The message names those versions, joined with ``or``; with the installed
    plugins it is 02 §4's.  With no such plugin installed: ``hybrid cache
    evidence requires a runtime plugin that imports it; none is installed; …``.
    """
    if not rec.hybrid:
        return
    version = rec.get("runtime", "version")
    allowed = hybrid_versions(ctx)
    if version not in allowed:
        shown = version if isinstance(version, str) else show(version)
        need = f"vLLM {' or '.join(allowed)}" if allowed else "a runtime plugin that imports it; none is installed"
        off = getattr(ctx.services, "not_loaded", lambda: "")()
        tail = f"; not loaded: {off}" if off else ""
        raise Refusal("I-22", f"hybrid cache evidence requires {need}; the record names vLLM {shown}{tail}")


@checks("I-23")
def one_version_across_records(ctx: ImportState) -> Iterator[Finding]:
    """I-23: every record names the same version."""
    recs = [r for r in ctx.ordered() if id(r) not in ctx.failed]
    for rec in recs[1:]:
        a, b = recs[0].get("runtime", "version"), rec.get("runtime", "version")
        if not same(a, b):
            yield rec, "I-23", f"runtime records name different vLLM versions: {show(a)} and {show(b)}"
            return


@checks("I-24")
def hybrid_evidence_all_or_none(ctx: ImportState) -> Iterator[Finding]:
    """I-24: all records hold hybrid evidence, or none does."""
    recs = [r for r in ctx.ordered() if id(r) not in ctx.failed]
    with_ = [r for r in recs if r.hybrid]
    without = [r for r in recs if not r.hybrid]
    if with_ and without:
        a, b = with_[0], without[0]
        later = a if a.order > b.order else b
        yield (
            later,
            "I-24",
            (f"runtime records disagree on hybrid cache evidence: {a.subject} holds it, {b.subject} does not"),
        )


@checks("I-25")
def runtime_plugin_declares_version(ctx: ImportState, rec: Record) -> None:
    """I-25: an installed runtime plugin declares the record's exact version."""
    version = rec.get("runtime", "version")
    if not isinstance(version, str) or not ctx.services.has_runtime(pin(version)):
        shown = version if isinstance(version, str) else show(version)
        raise Refusal(
            "I-25",
            f"no installed runtime plugin imports records of vLLM {shown}; installed: {ctx.services.installed()}",
        )


@checks("I-26")
def one_observer_and_source(ctx: ImportState) -> Iterator[Finding]:
    """I-26: one observer and one vLLM source per attempt; runtime version and image as launched."""
    recs = [r for r in ctx.ordered() if id(r) not in ctx.failed]
    if not recs:
        return
    first = recs[0]
    for rec in recs:
        for key, path in (
            ("observer", ("observer",)),
            ("runtime.source_revision", ("runtime", "source_revision")),
            ("runtime.source_files", ("runtime", "source_files")),
        ):
            a, b = first.get(*path), rec.get(*path)
            diff = first_difference(a, b, key)
            if diff is not None:
                yield (
                    rec,
                    "I-26",
                    f"runtime observer or source differs across records: {diff} ({first.subject} vs {rec.subject})",
                )
                break
        else:
            identity = ctx.launch["identity"]
            version = rec.get("runtime", "version")
            if not same(version, identity["framework_version"]):
                yield (
                    rec,
                    "I-26",
                    (
                        f"runtime differs from the launch: version {show(version)}, launch {show(identity['framework_version'])}"
                    ),
                )
                continue
            image = rec.get("runtime", "image")
            if not same(image, ctx.launch["deployment"]["image"]):
                yield (
                    rec,
                    "I-26",
                    (
                        f"runtime differs from the launch: image {show(image)}, launch {show(ctx.launch['deployment']['image'])}"
                    ),
                )


RULES = [
    per_record(framework_is_vllm),
    per_record(hybrid_evidence_version_supported),
    guarded(one_version_across_records),
    guarded(hybrid_evidence_all_or_none),
    per_record(runtime_plugin_declares_version),
    guarded(one_observer_and_source),
]


def prepare(ctx: ImportState) -> None:
    """Mark hybrid evidence on every record (before the rules run)."""
    for rec in ctx.records:
        rec.hybrid = holds_hybrid(rec)


def finish(ctx: ImportState) -> None:
    """After a clean stage C: fix the runtime and its rules, and normalize each record through its plugin."""
    recs = ctx.ordered()
    ctx.version = recs[0].get("runtime", "version")
    ctx.runtime_pin = pin(ctx.version)
    ctx.hybrid = recs[0].hybrid
    ctx.rules = ctx.services.rules(ctx.runtime_pin) or ImportRules(version=ctx.version)
    for rec in recs:
        normalized = ctx.services.normalize(ctx.runtime_pin, rec.data)
        if normalized is not None:
            rec.data = normalized
