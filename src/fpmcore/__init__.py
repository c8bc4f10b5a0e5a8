"""fpmcore: runtime-observed forward-pass-model (FPM) profiles for vLLM deployments.

A plugin imports what it uses of fpmcore from :mod:`fpmcore.plugin_api`, the
declared plugin API (and its tests from :mod:`fpmcore.testing`)::

    from fpmcore.plugin_api import hookimpl, PluginInfo, SpecClassification

The hook value types are importable from here too (each imported when first read).
"""

from typing import TYPE_CHECKING, Any

from fpmcore.documents.generated_code import install as _install_code_cache

_install_code_cache("attr._make")  # attrs' generated methods compiled once, not every run (generated_code)

if TYPE_CHECKING:
    from fpmcore.documents.runtime_pin import FRAMEWORK, RuntimePin
    from fpmcore.hookspecs import hookimpl
    from fpmcore.host.hooktypes import (
        API_VERSION,
        CliCommand,
        Diagnostic,
        ExecutionIdentity,
        PluginInfo,
        ProducerContract,
        ReplayRules,
        RuleEntry,
    )
    from fpmcore.host.stage_hooktypes import (
        AlignStopQuery,
        EngineLimit,
        EngineRequest,
        HashBlockQuery,
        ImportRules,
        LiveProbeOptions,
        PlanLimits,
        PointPlan,
        SpecClassification,
        StartupLimits,
    )
    from fpmcore.replay.trace import TraceRequest
    from fpmcore.traces.format import SkippedRow, TraceFormat, TraceSource

#: Where each name of :data:`__all__` lives: imported when first read (``fpmcore.PluginInfo``), so that
#: ``import fpmcore`` (which every ``fpm`` command does) imports none of them.
_HOME = {
    **dict.fromkeys(("FRAMEWORK", "RuntimePin"), "fpmcore.documents.runtime_pin"),
    "hookimpl": "fpmcore.hookspecs",
    **dict.fromkeys(
        (
            "AlignStopQuery",
            "EngineLimit",
            "EngineRequest",
            "HashBlockQuery",
            "ImportRules",
            "LiveProbeOptions",
            "PlanLimits",
            "PointPlan",
            "SpecClassification",
            "StartupLimits",
        ),
        "fpmcore.host.stage_hooktypes",
    ),  # fmt: skip
    "TraceRequest": "fpmcore.replay.trace",
    **dict.fromkeys(("SkippedRow", "TraceFormat", "TraceSource"), "fpmcore.traces.format"),
}


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        value = getattr(importlib.import_module(_HOME.get(name, "fpmcore.host.hooktypes")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fpmcore' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "FRAMEWORK",
    "AlignStopQuery",
    "CliCommand",
    "Diagnostic",
    "ExecutionIdentity",
    "HashBlockQuery",
    "EngineLimit",
    "EngineRequest",
    "LiveProbeOptions",
    "PlanLimits",
    "PluginInfo",
    "PointPlan",
    "ProducerContract",
    "ReplayRules",
    "RuleEntry",
    "RuntimePin",
    "ImportRules",
    "SpecClassification",
    "SkippedRow",
    "StartupLimits",
    "TraceFormat",
    "TraceRequest",
    "TraceSource",
    "__version__",
    "hookimpl",
]
