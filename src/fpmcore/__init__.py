"""fpmcore: runtime-observed forward-pass-model (FPM) profiles for vLLM deployments.

A plugin imports what it uses of fpmcore from :mod:`fpmcore.plugin_api`, the
declared plugin API (and its tests from :mod:`fpmcore.testing`)::

    from fpmcore.plugin_api import hookimpl, PluginInfo, SpecClassification

The hook value types are importable from here too.
"""

from fpmcore.documents.runtime_pin import FRAMEWORK, RuntimePin
from fpmcore.hookspecs import hookimpl
from fpmcore.host.hooktypes import (
    API_VERSION,
    AlignStopQuery,
    CliCommand,
    Diagnostic,
    EngineLimit,
    EngineRequest,
    ExecutionIdentity,
    HashBlockQuery,
    ImportRules,
    LiveProbeOptions,
    PlanLimits,
    PluginInfo,
    PointPlan,
    ProducerContract,
    ReplayRules,
    RuleEntry,
    SpecClassification,
    StartupLimits,
)
from fpmcore.replay.trace import TraceRequest
from fpmcore.traces.format import SkippedRow, TraceFormat, TraceSource

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
