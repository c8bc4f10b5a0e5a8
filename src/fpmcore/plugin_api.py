"""The plugin API: everything a plugin of fpmcore may import, in one module.

A runtime plugin, a model plugin and the support library of the vLLM runtime
plugins import from here and from :mod:`fpmcore.testing` (the pytest kit)
only; ``tests/test_plugin_api.py`` checks every shipped plugin and the plugin
template (``examples/plugin-template``).  A name here keeps its meaning
across fpmcore releases of the same :data:`API_VERSION`; the modules behind
it are the host's to rearrange.

Names are loaded on first use (:func:`__getattr__`), so a plugin that
imports this module at its top costs ``fpm --help`` nothing: import a heavy
name (the replay, the import pipeline, the host) inside the function that
uses it, as the shipped plugins do.

Plugin identity and hooks
-------------------------
``hookimpl``
    marks a plugin's hook implementations
``API_VERSION``
    the hook API this fpmcore provides (PluginInfo.api_version)
``PluginInfo``
    what a plugin is and what it serves (fpm_plugin_info)
``RuleEntry``
    one rule id a plugin raises, for fpm explain (fpm_rule_catalogue)
``checks``
    marks a check with the catalogued rule id it reports
``CliCommand``
    a subcommand a plugin adds (fpm_cli_commands)
``CommandContext``
    what a command's run(args, ctx) may use of ctx
``ProgressBar``
    what a command does with ctx.progress()
``TextTable``
    a table a command prints with ctx.print_table() (rich on a terminal, its characters into a pipe)
``Diagnostic``
    one finding of a rule: id, message, file
``FpmError``
    a refusal naming its rule: exit 2, one line
``build_host``
    the host fpm runs (its plugins and hook facade), for a hook that needs another plugin
``check_output_folder``
    a command's output folder checked before any work (O-1 … O-4), as fpm's own are
``import_object``
    the object a "module:attribute" reference names, its module imported

Runtime pins
------------
``RuntimePin``
    framework==version, parsed and written
``FRAMEWORK``
    the runtime framework fpmcore reads

Runtime plugins: import rules and the observation record
--------------------------------------------------------
``SpecClassification``
    the kind of one cache spec class (fpm_classify_spec)
``ImportRules``
    a release's import rules (fpm_runtime_rules)
``StartupLimits``
    the settings a startup reservation reads
``HashBlockQuery``
    what a release's hash block size is asked from
``StateFamily``
    the state group families of the replay: mamba, ring
``MODEL_DTYPE_LABELS``
    torch dtype strings to the record's model dtype labels
``RECORD_SCHEMA_VERSION``
    the schema of a runtime observation record
``OMITTED``
    the value of an optional record key the record leaves out
``record_to_json``
    a record as its JSON document
``Allocation``
    a part of the runtime observation record (02 §3)
``AttentionGroup``
    a part of the runtime observation record (02 §3)
``Binding``
    a part of the runtime observation record (02 §3)
``GroupState``
    a part of the runtime observation record (02 §3)
``Hardware``
    a part of the runtime observation record (02 §3)
``LayerSpec``
    a part of the runtime observation record (02 §3)
``LayerView``
    a part of the runtime observation record (02 §3)
``ModelIdentity``
    a part of the runtime observation record (02 §3)
``ModelRunner``
    a part of the runtime observation record (02 §3)
``ObserverIdentity``
    a part of the runtime observation record (02 §3)
``Rank``
    a part of the runtime observation record (02 §3)
``RuntimeIdentity``
    a part of the runtime observation record (02 §3)
``SchedulerCache``
    a part of the runtime observation record (02 §3)
``SchedulerGroup``
    a part of the runtime observation record (02 §3)
``SchedulerLifecycle``
    a part of the runtime observation record (02 §3)
``SchedulerRecord``
    a part of the runtime observation record (02 §3)
``Startup``
    a part of the runtime observation record (02 §3)
``Storage``
    a part of the runtime observation record (02 §3)
``WorkerCache``
    a part of the runtime observation record (02 §3)
``WorkerGroup``
    a part of the runtime observation record (02 §3)
``WorkerLifecycle``
    a part of the runtime observation record (02 §3)
``WorkerRecord``
    a part of the runtime observation record (02 §3)

Runtime plugins: the dry probe's evidence folder
------------------------------------------------
``runtime_distribution``
    (distribution, version) of the installed runtime, from package metadata
``ModelJsonError``
    a MODEL.json fpm probe cannot read
``PROBE_PHASES``
    the phases a probe writes records for: prefill, decode
``MODEL_CONFIG_FILE``
    the staged model configuration's file name
``read_model_json``
    a MODEL.json, read and checked
``model_layer_specs``
    the layer specs of a MODEL.json, each built by the release
``merge_settings``
    settings merged over defaults, recursively
``launch_manifest``
    a phase's launch manifest (02 §2.2)
``evidence_files``
    the files of an evidence folder, by path
``evidence_json_bytes``
    the bytes an evidence file holds for a document
``write_evidence_folder``
    an evidence folder written whole or not at all
``import_evidence``
    an evidence folder imported into a profile draft
``HostServices``
    what the import asks the host's plugins

Runtime plugins: engines, measurement and serving
-------------------------------------------------
``LiveProbeOptions``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineLimit``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineRequest``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineFacts``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineOptions``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineRun``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``EngineStep``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``MeasurementDriver``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``ProducerFile``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``ProducerRecord``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``StepWorkload``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``ServeRequest``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``ServedRequest``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``Serving``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``ServingDriver``
    a value of the engine hooks (fpm_live_probe, fpm_measurement_driver, fpm_serving_engine, fpm_engine_limits)
``cpu_sampler``
    what the machine did to each timed step (None where it cannot be read)

Runtime plugins: replay rules and checks
----------------------------------------
``ReplayRules``
    a release's scheduler rules (fpm_replay_rules)
``SCHEDULER_SETTINGS``
    every scheduler setting the replay models
``replay_config_from_profile``
    the replay configuration of a profile
``run_replay``
    a replay of engine-form requests
``parse_trace_lines``
    fpmcore's JSONL trace lines, parsed
``compare_replay_steps``
    the first step two replays differ at

Model plugins: points and profiles
----------------------------------
``AlignStopQuery``
    one prefill chunk the align-stop rule is asked about
``PlanLimits``
    the limits of a plan (fpm_generate_points)
``PointPlan``
    a model's benchmark points (fpm_generate_points)
``FpmModelProfile``
    the FPM profile (01)
``cdiv``
    ceiling division (01 §1.1)
``block_range``
    the blocks a request holds of one cache group (01 P-14)
``AlignSplit``
    what the Mamba align split does to a chunk: tokens, internal checkpoint
``mamba_align_split``
    vLLM's Mamba align split of one chunk (04 G-2 … G-6), with its checkpoint
``mamba_align_stop``
    the tokens of one chunk the Mamba align split schedules
``checkpoint_position``
    04 G-3: the last multiple of a unit strictly before a position, floored at 0
``decode_tail``
    the uncached tail of a decode request at a context
``PrefillPoint``
    a prefill benchmark point, ordered (P, n, b) (04 G-21)
``DecodePoint``
    a decode benchmark point, ordered (c, b) (04 G-21)
``point_manifest``
    the benchmark-point manifest of points (04 G-22)
``manifest_digest``
    a manifest's digest (04 G-23)
``json_digest``
    the SHA-256 of a value's canonical JSON
``load_json``
    the one strict JSON reader
``JsonError``
    JSON the strict reader refuses

Model plugins: producer contracts and artifact rules
----------------------------------------------------
``ProducerContract``
    a producer contract a plugin owns (fpm_producer_contracts)
``ExecutionIdentity``
    the execution identity of a cell
``producer_contract_hooks``
    the two contract hooks of a plugin that owns one contract
``ContractRules``
    the artifact rules of a contract
``CellView``
    one cell of a run as the artifact rules read it
``RankView``
    one rank's artifact of a cell
``plan_benchmark_points``
    options.benchmark_points of a plan (04 G-25)
``row_measurement``
    the benchmark_measurement of a row's retained FPM
``row_raw_fpms``
    the raw FPMs of a row's measurement
``KV_SEED_REGIME``
    the KV seed regime a measured row names (A-37)
``check_seeded_tokens_with_evidence``
    A-23: seeded tokens, with execution evidence
``producer_runtime_rule``
    A-22: a producer field equals the collector provenance runtime
``check_warmup_recorded``
    A-25: the warm-ups are recorded
``RepetitionRules``
    the repetition counts a contract binds
``check_repetition_sidecar``
    A-28: the repetition sidecar's digest, newline and line count
``bind_repetition_line``
    A-38: a row takes one unbound sidecar line
``check_no_unbound_repetition_lines``
    A-38: no sidecar line left unbound
``repetition_line_rule``
    A-39: each sidecar line against the counts
``ABSENT``
    a key an artifact leaves out
``get``
    obj[key] of a JSON object, ABSENT when missing
``is_int``
    a JSON integer (not a boolean)
``is_number``
    a finite JSON number (not a boolean)
``js``
    a value as compact JSON in a diagnostic
``plain``
    a value in a plain position of a diagnostic

Trace formats
-------------
``TraceFormat``
    a trace format a plugin reads (fpm_trace_formats)
``TraceSource``
    an opened trace a format reads
``TraceRequest``
    one request of a trace
``SkippedRow``
    a row a format skips, counted by reason
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fpmcore.cli.tables import Table as TextTable
    from fpmcore.collect.contention import (
        sampler as cpu_sampler,
    )
    from fpmcore.documents.blocks import (
        block_range,
        cdiv,
    )
    from fpmcore.documents.errors import (
        FpmError,
    )
    from fpmcore.documents.jsonio import (
        JsonError,
    )
    from fpmcore.documents.jsonio import (
        digest as json_digest,
    )
    from fpmcore.documents.jsonio import (
        loads as load_json,
    )
    from fpmcore.documents.output_files import (
        check_output_folder,
    )
    from fpmcore.documents.profile import (
        FpmModelProfile,
    )
    from fpmcore.documents.record import (
        ABSENT as OMITTED,
    )
    from fpmcore.documents.record import (
        SCHEMA_VERSION as RECORD_SCHEMA_VERSION,
    )
    from fpmcore.documents.record import (
        Allocation,
        AttentionGroup,
        Binding,
        GroupState,
        Hardware,
        LayerSpec,
        LayerView,
        ModelIdentity,
        ModelRunner,
        ObserverIdentity,
        Rank,
        RuntimeIdentity,
        SchedulerCache,
        SchedulerGroup,
        SchedulerLifecycle,
        SchedulerRecord,
        Startup,
        Storage,
        WorkerCache,
        WorkerGroup,
        WorkerLifecycle,
        WorkerRecord,
        record_to_json,
    )
    from fpmcore.documents.rules_catalogue import (
        checks,
    )
    from fpmcore.documents.runtime_pin import (
        FRAMEWORK,
        RuntimePin,
    )
    from fpmcore.hookspecs import (
        hookimpl,
    )
    from fpmcore.host.build import (
        build_host,
    )
    from fpmcore.host.engine_drivers import (
        EngineFacts,
        EngineOptions,
        EngineRun,
        EngineStep,
        MeasurementDriver,
        ProducerFile,
        ProducerRecord,
        ServedRequest,
        ServeRequest,
        Serving,
        ServingDriver,
        StepWorkload,
    )
    from fpmcore.host.entry_points import (
        import_object,
    )
    from fpmcore.host.hooktypes import (
        API_VERSION,
        CliCommand,
        CommandContext,
        Diagnostic,
        ExecutionIdentity,
        PluginInfo,
        ProducerContract,
        ProgressBar,
        RuleEntry,
    )
    from fpmcore.host.stage_hooktypes import (
        MODEL_DTYPE_LABELS,
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
        StateFamily,
    )
    from fpmcore.importer.pipeline import (
        HostServices,
        import_evidence,
    )
    from fpmcore.plan.point_grid import (
        DecodePoint,
        PrefillPoint,
        decode_tail,
        manifest_digest,
    )
    from fpmcore.plan.point_grid import (
        manifest as point_manifest,
    )
    from fpmcore.probe.dry_run import (
        MODEL_CONFIG as MODEL_CONFIG_FILE,
    )
    from fpmcore.probe.dry_run import (
        PHASES as PROBE_PHASES,
    )
    from fpmcore.probe.dry_run import (
        ModelJsonError,
        evidence_files,
        launch_manifest,
    )
    from fpmcore.probe.dry_run import (
        dumps as evidence_json_bytes,
    )
    from fpmcore.probe.dry_run import (
        layer_specs as model_layer_specs,
    )
    from fpmcore.probe.dry_run import (
        merge as merge_settings,
    )
    from fpmcore.probe.dry_run import (
        read_model as read_model_json,
    )
    from fpmcore.probe.dry_run import (
        write_files as write_evidence_folder,
    )
    from fpmcore.probe.live import (
        runtime_distribution,
    )
    from fpmcore.replay import (
        config_from_profile as replay_config_from_profile,
    )
    from fpmcore.replay import (
        run_replay,
    )
    from fpmcore.replay.align import (
        AlignSplit,
    )
    from fpmcore.replay.align import (
        align_split as mamba_align_split,
    )
    from fpmcore.replay.align import (
        align_stop as mamba_align_stop,
    )
    from fpmcore.replay.align import (
        pos as checkpoint_position,
    )
    from fpmcore.replay.differential import (
        compare_steps as compare_replay_steps,
    )
    from fpmcore.replay.rules import (
        SCHEDULER_SETTINGS,
        ReplayRules,
    )
    from fpmcore.replay.trace import (
        TraceRequest,
        parse_trace_lines,
    )
    from fpmcore.traces.format import (
        SkippedRow,
        TraceFormat,
        TraceSource,
    )
    from fpmcore.validate.cell import (
        CellView,
        RankView,
    )
    from fpmcore.validate.cell import (
        benchmark_points as plan_benchmark_points,
    )
    from fpmcore.validate.contract_hooks import (
        producer_contract_hooks,
    )
    from fpmcore.validate.evaluation import (
        ContractRules,
    )
    from fpmcore.validate.measured_values import (
        ABSENT,
        get,
        is_int,
        is_number,
        js,
        plain,
    )
    from fpmcore.validate.protocol import (
        check_seeded_tokens_with_evidence,
        check_warmup_recorded,
        producer_runtime_rule,
    )
    from fpmcore.validate.repetition_evidence import (
        RepetitionRules,
        bind_repetition_line,
        check_no_unbound_repetition_lines,
        check_repetition_sidecar,
        repetition_line_rule,
    )
    from fpmcore.validate.rows import (
        KV_SEED_REGIME,
    )
    from fpmcore.validate.rows import (
        measurement as row_measurement,
    )
    from fpmcore.validate.rows import (
        raw_fpms as row_raw_fpms,
    )

#: Every name of the plugin API: ``name -> "module:attribute"`` it is loaded from.
EXPORTS: dict[str, str] = {
    # Plugin identity and hooks
    "hookimpl": "fpmcore.hookspecs:hookimpl",
    "API_VERSION": "fpmcore.host.hooktypes:API_VERSION",
    "PluginInfo": "fpmcore.host.hooktypes:PluginInfo",
    "RuleEntry": "fpmcore.host.hooktypes:RuleEntry",
    "checks": "fpmcore.documents.rules_catalogue:checks",
    "CliCommand": "fpmcore.host.hooktypes:CliCommand",
    "CommandContext": "fpmcore.host.hooktypes:CommandContext",
    "ProgressBar": "fpmcore.host.hooktypes:ProgressBar",
    "TextTable": "fpmcore.cli.tables:Table",
    "Diagnostic": "fpmcore.host.hooktypes:Diagnostic",
    "FpmError": "fpmcore.documents.errors:FpmError",
    "build_host": "fpmcore.host.build:build_host",
    "check_output_folder": "fpmcore.documents.output_files:check_output_folder",
    "import_object": "fpmcore.host.entry_points:import_object",
    # Runtime pins
    "RuntimePin": "fpmcore.documents.runtime_pin:RuntimePin",
    "FRAMEWORK": "fpmcore.documents.runtime_pin:FRAMEWORK",
    # Runtime plugins: import rules and the observation record
    "SpecClassification": "fpmcore.host.stage_hooktypes:SpecClassification",
    "ImportRules": "fpmcore.host.stage_hooktypes:ImportRules",
    "StartupLimits": "fpmcore.host.stage_hooktypes:StartupLimits",
    "HashBlockQuery": "fpmcore.host.stage_hooktypes:HashBlockQuery",
    "StateFamily": "fpmcore.host.stage_hooktypes:StateFamily",
    "MODEL_DTYPE_LABELS": "fpmcore.host.stage_hooktypes:MODEL_DTYPE_LABELS",
    "RECORD_SCHEMA_VERSION": "fpmcore.documents.record:SCHEMA_VERSION",
    "OMITTED": "fpmcore.documents.record:ABSENT",
    "record_to_json": "fpmcore.documents.record:record_to_json",
    "Allocation": "fpmcore.documents.record:Allocation",
    "AttentionGroup": "fpmcore.documents.record:AttentionGroup",
    "Binding": "fpmcore.documents.record:Binding",
    "GroupState": "fpmcore.documents.record:GroupState",
    "Hardware": "fpmcore.documents.record:Hardware",
    "LayerSpec": "fpmcore.documents.record:LayerSpec",
    "LayerView": "fpmcore.documents.record:LayerView",
    "ModelIdentity": "fpmcore.documents.record:ModelIdentity",
    "ModelRunner": "fpmcore.documents.record:ModelRunner",
    "ObserverIdentity": "fpmcore.documents.record:ObserverIdentity",
    "Rank": "fpmcore.documents.record:Rank",
    "RuntimeIdentity": "fpmcore.documents.record:RuntimeIdentity",
    "SchedulerCache": "fpmcore.documents.record:SchedulerCache",
    "SchedulerGroup": "fpmcore.documents.record:SchedulerGroup",
    "SchedulerLifecycle": "fpmcore.documents.record:SchedulerLifecycle",
    "SchedulerRecord": "fpmcore.documents.record:SchedulerRecord",
    "Startup": "fpmcore.documents.record:Startup",
    "Storage": "fpmcore.documents.record:Storage",
    "WorkerCache": "fpmcore.documents.record:WorkerCache",
    "WorkerGroup": "fpmcore.documents.record:WorkerGroup",
    "WorkerLifecycle": "fpmcore.documents.record:WorkerLifecycle",
    "WorkerRecord": "fpmcore.documents.record:WorkerRecord",
    # Runtime plugins: the dry probe's evidence folder
    "runtime_distribution": "fpmcore.probe.live:runtime_distribution",
    "ModelJsonError": "fpmcore.probe.dry_run:ModelJsonError",
    "PROBE_PHASES": "fpmcore.probe.dry_run:PHASES",
    "MODEL_CONFIG_FILE": "fpmcore.probe.dry_run:MODEL_CONFIG",
    "read_model_json": "fpmcore.probe.dry_run:read_model",
    "model_layer_specs": "fpmcore.probe.dry_run:layer_specs",
    "merge_settings": "fpmcore.probe.dry_run:merge",
    "launch_manifest": "fpmcore.probe.dry_run:launch_manifest",
    "evidence_files": "fpmcore.probe.dry_run:evidence_files",
    "evidence_json_bytes": "fpmcore.probe.dry_run:dumps",
    "write_evidence_folder": "fpmcore.probe.dry_run:write_files",
    "import_evidence": "fpmcore.importer.pipeline:import_evidence",
    "HostServices": "fpmcore.importer.pipeline:HostServices",
    # Runtime plugins: engines, measurement and serving
    "LiveProbeOptions": "fpmcore.host.stage_hooktypes:LiveProbeOptions",
    "EngineLimit": "fpmcore.host.stage_hooktypes:EngineLimit",
    "EngineRequest": "fpmcore.host.stage_hooktypes:EngineRequest",
    "EngineFacts": "fpmcore.host.engine_drivers:EngineFacts",
    "EngineOptions": "fpmcore.host.engine_drivers:EngineOptions",
    "EngineRun": "fpmcore.host.engine_drivers:EngineRun",
    "EngineStep": "fpmcore.host.engine_drivers:EngineStep",
    "MeasurementDriver": "fpmcore.host.engine_drivers:MeasurementDriver",
    "ProducerFile": "fpmcore.host.engine_drivers:ProducerFile",
    "ProducerRecord": "fpmcore.host.engine_drivers:ProducerRecord",
    "StepWorkload": "fpmcore.host.engine_drivers:StepWorkload",
    "ServeRequest": "fpmcore.host.engine_drivers:ServeRequest",
    "ServedRequest": "fpmcore.host.engine_drivers:ServedRequest",
    "Serving": "fpmcore.host.engine_drivers:Serving",
    "ServingDriver": "fpmcore.host.engine_drivers:ServingDriver",
    "cpu_sampler": "fpmcore.collect.contention:sampler",
    # Runtime plugins: replay rules and checks
    "ReplayRules": "fpmcore.replay.rules:ReplayRules",
    "SCHEDULER_SETTINGS": "fpmcore.replay.rules:SCHEDULER_SETTINGS",
    "replay_config_from_profile": "fpmcore.replay:config_from_profile",
    "run_replay": "fpmcore.replay:run_replay",
    "parse_trace_lines": "fpmcore.replay.trace:parse_trace_lines",
    "compare_replay_steps": "fpmcore.replay.differential:compare_steps",
    # Model plugins: points and profiles
    "AlignStopQuery": "fpmcore.host.stage_hooktypes:AlignStopQuery",
    "PlanLimits": "fpmcore.host.stage_hooktypes:PlanLimits",
    "PointPlan": "fpmcore.host.stage_hooktypes:PointPlan",
    "FpmModelProfile": "fpmcore.documents.profile:FpmModelProfile",
    "cdiv": "fpmcore.documents.blocks:cdiv",
    "block_range": "fpmcore.documents.blocks:block_range",
    "AlignSplit": "fpmcore.replay.align:AlignSplit",
    "mamba_align_split": "fpmcore.replay.align:align_split",
    "mamba_align_stop": "fpmcore.replay.align:align_stop",
    "checkpoint_position": "fpmcore.replay.align:pos",
    "decode_tail": "fpmcore.plan.point_grid:decode_tail",
    "PrefillPoint": "fpmcore.plan.point_grid:PrefillPoint",
    "DecodePoint": "fpmcore.plan.point_grid:DecodePoint",
    "point_manifest": "fpmcore.plan.point_grid:manifest",
    "manifest_digest": "fpmcore.plan.point_grid:manifest_digest",
    "json_digest": "fpmcore.documents.jsonio:digest",
    "load_json": "fpmcore.documents.jsonio:loads",
    "JsonError": "fpmcore.documents.jsonio:JsonError",
    # Model plugins: producer contracts and artifact rules
    "ProducerContract": "fpmcore.host.hooktypes:ProducerContract",
    "ExecutionIdentity": "fpmcore.host.hooktypes:ExecutionIdentity",
    "producer_contract_hooks": "fpmcore.validate.contract_hooks:producer_contract_hooks",
    "ContractRules": "fpmcore.validate.evaluation:ContractRules",
    "CellView": "fpmcore.validate.cell:CellView",
    "RankView": "fpmcore.validate.cell:RankView",
    "plan_benchmark_points": "fpmcore.validate.cell:benchmark_points",
    "row_measurement": "fpmcore.validate.rows:measurement",
    "row_raw_fpms": "fpmcore.validate.rows:raw_fpms",
    "KV_SEED_REGIME": "fpmcore.validate.rows:KV_SEED_REGIME",
    "check_seeded_tokens_with_evidence": "fpmcore.validate.protocol:check_seeded_tokens_with_evidence",
    "producer_runtime_rule": "fpmcore.validate.protocol:producer_runtime_rule",
    "check_warmup_recorded": "fpmcore.validate.protocol:check_warmup_recorded",
    "RepetitionRules": "fpmcore.validate.repetition_evidence:RepetitionRules",
    "check_repetition_sidecar": "fpmcore.validate.repetition_evidence:check_repetition_sidecar",
    "bind_repetition_line": "fpmcore.validate.repetition_evidence:bind_repetition_line",
    "check_no_unbound_repetition_lines": "fpmcore.validate.repetition_evidence:check_no_unbound_repetition_lines",
    "repetition_line_rule": "fpmcore.validate.repetition_evidence:repetition_line_rule",
    "ABSENT": "fpmcore.validate.measured_values:ABSENT",
    "get": "fpmcore.validate.measured_values:get",
    "is_int": "fpmcore.validate.measured_values:is_int",
    "is_number": "fpmcore.validate.measured_values:is_number",
    "js": "fpmcore.validate.measured_values:js",
    "plain": "fpmcore.validate.measured_values:plain",
    # Trace formats
    "TraceFormat": "fpmcore.traces.format:TraceFormat",
    "TraceSource": "fpmcore.traces.format:TraceSource",
    "TraceRequest": "fpmcore.replay.trace:TraceRequest",
    "SkippedRow": "fpmcore.traces.format:SkippedRow",
}

__all__ = [
    "ABSENT",
    "API_VERSION",
    "AlignSplit",
    "AlignStopQuery",
    "Allocation",
    "AttentionGroup",
    "Binding",
    "CellView",
    "CliCommand",
    "CommandContext",
    "ContractRules",
    "DecodePoint",
    "Diagnostic",
    "EngineFacts",
    "EngineLimit",
    "EngineOptions",
    "EngineRequest",
    "EngineRun",
    "EngineStep",
    "ExecutionIdentity",
    "FRAMEWORK",
    "FpmError",
    "FpmModelProfile",
    "GroupState",
    "Hardware",
    "HashBlockQuery",
    "HostServices",
    "ImportRules",
    "JsonError",
    "KV_SEED_REGIME",
    "LayerSpec",
    "LayerView",
    "LiveProbeOptions",
    "MODEL_CONFIG_FILE",
    "MODEL_DTYPE_LABELS",
    "MeasurementDriver",
    "ModelIdentity",
    "ModelJsonError",
    "ModelRunner",
    "OMITTED",
    "ObserverIdentity",
    "PROBE_PHASES",
    "PlanLimits",
    "PluginInfo",
    "PointPlan",
    "PrefillPoint",
    "ProducerContract",
    "ProducerFile",
    "ProducerRecord",
    "ProgressBar",
    "RECORD_SCHEMA_VERSION",
    "Rank",
    "RankView",
    "RepetitionRules",
    "ReplayRules",
    "RuleEntry",
    "RuntimeIdentity",
    "RuntimePin",
    "SCHEDULER_SETTINGS",
    "SchedulerCache",
    "SchedulerGroup",
    "SchedulerLifecycle",
    "SchedulerRecord",
    "ServeRequest",
    "ServedRequest",
    "Serving",
    "ServingDriver",
    "SkippedRow",
    "SpecClassification",
    "Startup",
    "StartupLimits",
    "StateFamily",
    "StepWorkload",
    "Storage",
    "TextTable",
    "TraceFormat",
    "TraceRequest",
    "TraceSource",
    "WorkerCache",
    "WorkerGroup",
    "WorkerLifecycle",
    "WorkerRecord",
    "bind_repetition_line",
    "block_range",
    "build_host",
    "cdiv",
    "check_no_unbound_repetition_lines",
    "check_output_folder",
    "check_repetition_sidecar",
    "check_seeded_tokens_with_evidence",
    "check_warmup_recorded",
    "checkpoint_position",
    "checks",
    "compare_replay_steps",
    "cpu_sampler",
    "decode_tail",
    "evidence_files",
    "evidence_json_bytes",
    "get",
    "hookimpl",
    "import_evidence",
    "import_object",
    "is_int",
    "is_number",
    "js",
    "json_digest",
    "launch_manifest",
    "load_json",
    "mamba_align_split",
    "mamba_align_stop",
    "manifest_digest",
    "merge_settings",
    "model_layer_specs",
    "parse_trace_lines",
    "plain",
    "plan_benchmark_points",
    "point_manifest",
    "producer_contract_hooks",
    "producer_runtime_rule",
    "read_model_json",
    "record_to_json",
    "repetition_line_rule",
    "replay_config_from_profile",
    "row_measurement",
    "row_raw_fpms",
    "run_replay",
    "runtime_distribution",
    "write_evidence_folder",
]


def __getattr__(name: str) -> Any:
    """A name of :data:`EXPORTS`, imported from its module on first use and kept."""
    try:
        reference = EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    from fpmcore.host.entry_points import import_object as resolve

    value = resolve(reference)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
