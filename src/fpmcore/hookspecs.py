"""Every hook of fpmcore, documented.

A plugin is a module (or object) with functions named like the specs below and
decorated with :data:`fpmcore.hookimpl`; it is found through the entry-point
group ``fpmcore.plugins``.  An implementation may accept any subset of a
hook's arguments, by name.  The host always calls hooks with keyword
arguments and never relies on defaults, so no spec has any.

Two calling conventions are used:

*first-result*
    One answer.  The **runtime hooks** go only to the runtime plugin the host
    selected for the runtime pin (the one plugin whose
    :class:`~fpmcore.host.hooktypes.PluginInfo` ``targets`` names the record's,
    profile's or installed pin exactly), the **model hooks** (align stop,
    points) only to the model plugin selected for the model id; so an
    implementation never returns ``None`` to say "not my runtime" or "not my
    model".  ``fpm_validate_artifact`` is asked of each model plugin in
    pluggy's order until one answers; there ``None`` means "not my contract".
*collecting*
    Every implementation is called; the host gets one answer per plugin and
    knows which plugin gave it.

**The runtime argument.**  Every runtime hook gets ``runtime``, the exact pin
(``"vllm==0.33.0"``) the plugin was selected for.  It stays in the specs
because one plugin may target several pins (``PluginInfo.targets``) and tell
them apart; a plugin with one pin ignores it (an implementation may leave the
argument out of its signature).  No implementation compares it with its own
pin to decline a call: the host never calls a runtime plugin for a pin it
does not target.

Core code never calls ``pm.hook`` itself: :class:`fpmcore.host.hooks.Hooks` is the
typed facade.  It calls these hooks through pluggy (``pm.subset_hook_caller``
bound to the selected plugin, so hook wrappers, ``pm.trace`` and
``pm.add_hookcall_monitoring`` apply), checks what each plugin returned
against one table (:data:`fpmcore.host.hooks.RETURNS`) and names the plugin and
the hook when an answer is wrong or an implementation raises.  A plugin may
wrap any hook (``@hookimpl(wrapper=True)``); a wrapper of a runtime or model
hook runs around the selected plugin's implementation.

Version- and model-specific knowledge lives behind these hooks: the host never
names a vLLM version or a model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from fpmcore.documents.profile import FpmModelProfile
    from fpmcore.host.engine_drivers import MeasurementDriver, ServingDriver
    from fpmcore.host.hooktypes import (
        CliCommand,
        Diagnostic,
        ExecutionIdentity,
        PluginInfo,
        ProducerContract,
        RuleEntry,
    )
    from fpmcore.host.stage_hooktypes import (
        AlignStopQuery,
        EngineLimit,
        EngineRequest,
        ImportRules,
        LiveProbeOptions,
        PlanLimits,
        PointPlan,
        SpecClassification,
    )
    from fpmcore.replay.rules import ReplayRules
    from fpmcore.traces.format import TraceFormat

PROJECT = "fpmcore"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------
# identity
# --------------------------------------------------------------------------


@hookspec
def fpm_plugin_info() -> PluginInfo:
    """Say who the plugin is.  *Collecting*; every plugin must implement it.

    The host calls each plugin's implementation on its own while loading it,
    and keeps the answer in the plugin's record (``fpm plugins``).  A plugin
    whose ``api_version`` differs from :data:`fpmcore.host.hooktypes.API_VERSION`
    is marked ``incompatible`` and never called again.

    :returns: a :class:`~fpmcore.host.hooktypes.PluginInfo`.

    Example::

        >>> @hookimpl
        ... def fpm_plugin_info():
        ...     return PluginInfo(id="vllm_033", kind="runtime",
        ...                       targets=("vllm==0.33.0",), api_version=API_VERSION)
        >>> fpm_plugin_info().targets
        ('vllm==0.33.0',)
    """


# --------------------------------------------------------------------------
# runtime plugins
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def fpm_observe_cache_groups(runtime: str, source: Mapping[str, Any], phase: str, rank: int) -> dict[str, Any] | None:
    """Probe side of *observe cache groups*: live vLLM objects → one record.  *First-result*.

    Called inside the vLLM process, after the KV cache is planned (and, when
    the run allocates them, after the tensors exist).  Imports of vLLM and
    torch belong inside the implementation, never at module level.

    :param runtime: the running runtime as an exact pin, ``"vllm==0.33.0"``:
        one of your targets.
    :param source: the live objects and the probe's context, by name:
        ``"vllm_config"``, ``"kv_cache_config"``, ``"launch"`` (the launch
        manifest, 02 §2.2), ``"kind"`` (``"worker"`` or ``"scheduler"``),
        ``"dp_rank"``; for a scheduler record ``"scheduler"``; for a worker,
        when the cache is allocated, ``"kv_caches"`` (layer name → the views
        bound to the layer) and ``"model_runner"``; optional
        ``"available_cache_bytes"``, ``"hardware"``, ``"lifecycle"``,
        ``"model"``, ``"image"``, ``"source_revision"``, ``"error"``.  A runtime
        plugin documents the exact set it reads.
    :param phase: ``"prefill"`` or ``"decode"``.
    :param rank: the TP rank the record describes.
    :returns: the ``fpmcore-runtime-observation/v1`` record (02 §3) as a
        JSON-ready dict: the attrs record of :mod:`fpmcore.documents.record`, unstructured
        with :func:`fpmcore.documents.record.record_to_json`.

    A real observer reads ``source["kv_cache_config"]`` and the other live
    objects, importing vLLM inside the function.

    Example::

        >>> @hookimpl
        ... def fpm_observe_cache_groups(source, phase, rank):
        ...     return {"phase": phase, "rank": rank, "kind": source["kind"]}
        >>> fpm_observe_cache_groups(source={"kind": "worker"}, phase="prefill", rank=0)
        {'phase': 'prefill', 'rank': 0, 'kind': 'worker'}
    """


@hookspec(firstresult=True)
def fpm_dry_probe(
    runtime: str, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
) -> dict[str, Any] | None:
    """Plan a layer-spec description with the installed runtime on CPU, and write its evidence.  *First-result*.

    ``fpm probe --dry-run`` calls it: the runtime plugin runs the runtime's own
    cache planning for ``tp`` ranks without allocating tensors and writes the
    evidence folder of 02 §2 (index, launch manifests, one record per rank
    and phase, tensors marked as not allocated).  The runtime is imported
    inside the implementation.

    :param runtime: the installed runtime as an exact pin, ``"vllm==0.33.0"``:
        one of your targets.
    :param model_path: the MODEL.json layer-spec description (one TP rank's view).
    :param out_dir: the evidence folder to write.
    :param tp: tensor-parallel size (one worker record per rank).
    :param caching: prefix caching of both phases.
    :param configuration: the configuration label, or ``None`` for the default.
    :returns: the planning summary (per phase: groups, pool page, blocks,
        concurrency), JSON-ready.

    The example runs with vLLM 0.33.0 installed (``tox -e vllm033-real``).

    Example::

        >>> summary = host.hooks.runtime("vllm==0.33.0").dry_probe(
        ...     model_path="tools/probe_models/glm53flash_tp4.json", out_dir=str(tmp / "glm"),
        ...     tp=4, caching=True, configuration=None)
        >>> summary["phases"]["prefill"]["num_blocks"]
        13697
    """


@hookspec(firstresult=True)
def fpm_live_probe(
    runtime: str,
    model_dir: str,
    out_dir: str,
    options: LiveProbeOptions,
    progress: Callable[[str], AbstractContextManager[None]],
) -> dict[str, Any] | None:
    """Start the installed runtime's engine on a model, observe it, write its evidence, shut it down.  *First-result*.

    ``fpm probe --live`` calls it.  The runtime plugin starts an engine in
    this process with ``options``, observes it once its KV cache is allocated
    (the scheduler's cache plan and block pool, the worker's real cache
    tensors, layer views, attention groups and model runner) through its own
    observer (:func:`fpm_observe_cache_groups`), writes the evidence folder of
    02 §2 with tensor-level records for both phases, and shuts the engine
    down, also when it fails or is interrupted (an interrupt, ``KeyboardInterrupt``
    or the :class:`~fpmcore.documents.errors.Interrupted` the host raises on Ctrl-C, goes
    on after the shutdown).  The folder appears whole or not at all.
    The plugin says what its phases are.  **Optional**: a runtime that cannot
    run an engine here leaves it out, and ``fpm probe --live`` says so.

    :param runtime: the installed runtime as an exact pin, ``"vllm==0.32.0"``:
        one of your targets.
    :param model_dir: the model folder the engine loads.
    :param out_dir: the evidence folder to write; it must not exist yet, or be empty.
    :param options: the engine settings, a :class:`~fpmcore.host.stage_hooktypes.LiveProbeOptions`.
    :param progress: ``progress(message)`` is a context manager that shows
        ``message`` on stderr while its block runs (a live timer on a
        terminal); wrap the engine's start-up in it.
    :returns: a summary, JSON-ready: ``configuration``, ``attempt_id`` and,
        per phase, what the engine itself reports (``num_blocks``, groups,
        block and page sizes, ``kv_cache_max_concurrency``, …).  A refusal
        (not a model folder, settings the engine does not start with) is an
        :class:`~fpmcore.documents.errors.FpmError` whose message is one line.

    Example::

        >>> import contextlib
        >>> runtime = host.hooks.runtime("vllm==0.32.0")
        >>> runtime.live_probe(model_dir="examples", out_dir=str(tmp / "ev"),
        ...     options=LiveProbeOptions(max_model_len=2048), progress=lambda message: contextlib.nullcontext())
        Traceback (most recent call last):
        ...
        fpmcore.documents.errors.FpmError: examples is not a model folder: it holds no config.json

    On a model folder it returns the engine's numbers:
    ``summary["phases"]["prefill"]["num_blocks"]`` is 512 for
    ``examples/probes/live/tiny-llama`` (0.25 GiB of 524,288-byte blocks).
    """


@hookspec(firstresult=True)
def fpm_engine_limits(runtime: str, request: EngineRequest) -> list[EngineLimit] | None:
    """*Engine limits*: what the runtime's engine cannot run here, known before it starts.  *First-result*.

    ``fpm probe --live``, ``fpm collect`` and ``fpm onboard`` ask before they
    start an engine (and before they write anything): the model's
    configuration and the settings go in, the limits the configuration meets
    come out, and the command refuses with the first one in one line — its
    rule, its message and its way out — with exit code 2 and no engine
    started.  A runtime plugin keeps its limits as data (a table of
    condition, message and way out, each citing the runtime's source) and
    knows which model architectures meet them; the host names neither.
    **Optional**: a runtime that names no limit leaves it out.  Never import
    the runtime here.

    :param runtime: the runtime pin the engine would run, ``"vllm==0.32.0"``: one of your targets.
    :param request: the model configuration and settings, an :class:`~fpmcore.host.stage_hooktypes.EngineRequest`.
    :returns: the :class:`~fpmcore.host.stage_hooktypes.EngineLimit` s the request meets (empty: none), or ``None``.

    Example::

        >>> runtime = host.hooks.runtime("vllm==0.32.0")
        >>> granite = {"architectures": ["GraniteMoeHybridForCausalLM"],
        ...            "layer_types": ["linear_attention", "full_attention"]}
        >>> [limit.rule for limit in runtime.engine_limits(request=EngineRequest(granite, prefix_caching=True))]
        ['mamba2-prefix-caching']
        >>> runtime.engine_limits(request=EngineRequest(granite, prefix_caching=False))
        []
    """


@hookspec(firstresult=True)
def fpm_normalize_record(runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Import side of *observe cache groups*: one record of your version → normalized form.  *First-result*.

    The import calls it for every record before its rules run, so that a
    plugin whose observer writes something differently from 02 §3 can put it
    in the form the rules read.  **Optional**: a plugin whose records already
    have that form leaves it out, and the host's default stands (a new
    top-level dict holding the record's values, ``dict(record)``).  Never
    import vLLM here.

    :param runtime: the record's runtime pin, ``"vllm==0.27.0"``: one of your targets.
    :param record: the parsed record (do not mutate it).
    :returns: a new dict in the form the import rules read, or ``None`` for
        the default.

    For instance, an observer that left out a null key.

    Example::

        >>> @hookimpl
        ... def fpm_normalize_record(record):
        ...     return {**record, "error": record.get("error")}
        >>> fpm_normalize_record(record={"phase": "decode"})
        {'phase': 'decode', 'error': None}
    """


@hookspec(firstresult=True)
def fpm_classify_spec(runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
    """*Classify spec*: map one vLLM cache spec class to a cache kind.  *First-result*.

    The class tables are those of 02 §5: each runtime plugin answers for the
    exact versions it targets, and answers ``"unsupported"`` with a reason
    for classes it does not model.

    :param runtime: the record's runtime pin, ``"vllm==0.33.0"``: one of your targets.
    :param spec_class: the fully qualified class name as recorded,
        ``"vllm.v1.kv_cache_interface.MambaSpec"``.
    :param spec: the recorded spec fields (02 §3.7 ``fields``); may be empty.
    :returns: a :class:`~fpmcore.host.stage_hooktypes.SpecClassification` (``None`` is
        read as "unsupported: no class table").

    Example::

        >>> host.hooks.runtime("vllm==0.33.0").classify_spec(
        ...     spec_class="vllm.v1.kv_cache_interface.MambaSpec", spec={})
        SpecClassification(kind='state', windowed=False, composite=False, reason=None, chunked=False)
    """


@hookspec(firstresult=True)
def fpm_runtime_rules(runtime: str) -> ImportRules | None:
    """The import rules of one runtime version besides its class table.  *First-result*.

    The import (02, 03) asks it for the hybrid gate (I-22: every installed
    pin, to learn which versions import hybrid evidence) and, after the
    plugin gate (I-25), once for the record's version: KV dtype labels
    (I-32), the settings the runtime leaves ``null`` (I-28), the class table
    of records without hybrid evidence (02 §5.1), the state family of a spec
    class, the ``prefix_cacheable`` class rule (I-44), the startup
    reservation of one spec (03 C-1, I-61, stage K), the in-flight batches
    (03 C-2) and the hash block size (I-97).  A runtime plugin that returns
    ``None`` is read with the defaults of
    :class:`~fpmcore.host.stage_hooktypes.ImportRules`.  Never import vLLM here.

    :param runtime: a runtime pin, ``"vllm==0.33.0"``: one of your targets.
    :returns: a :class:`~fpmcore.host.stage_hooktypes.ImportRules` whose ``version``
        is the pin's, or ``None``.

    Example::

        >>> rules = host.hooks.runtime("vllm==0.33.0").rules()
        >>> rules.hybrid_evidence, rules.kv_dtype_labels["fp8_e4m3"]
        (True, 'fp8')
        >>> rules.startup_blocks("vllm.v1.kv_cache_interface.MambaSpec",
        ...     {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 1}, 2176,
        ...     StartupLimits(1048576, 8192, mamba_cache_mode="align"))
        (3, 'align mode: 2 + 0 speculative + 1 checkpoint')
    """


@hookspec(firstresult=True)
def fpm_measurement_driver(runtime: str) -> MeasurementDriver | None:
    """*Measurement driver*: how ``fpm collect`` measures on this runtime's engine.  *First-result*.

    The answer holds the plugin's producer record (who measures: its name,
    timing boundary, and the installed runtime files it relies on with their
    SHA-256, known without importing the runtime; the engine-steps contract
    compares an artifact's producer with it, A-21) and ``start(model_dir,
    options)``, which imports the runtime, starts an engine for the model
    folder with the deployment's :class:`~fpmcore.host.engine_drivers.EngineOptions`
    and returns a :class:`~fpmcore.host.engine_drivers.MeasurementEngine`: it admits
    batches of requests with real token ids and reports every engine step
    (the workload the scheduler computed and its wall time) and each
    request's prefix-cache hit.

    Why a hook: the measurement protocol — points, prefix seeds, warm-ups,
    repetitions, the reduction, the evidence, the artifacts, durability and
    resume (:mod:`fpmcore.collect`) — is the same for every runtime version
    and lives once in the host; starting one release's engine, reaching its
    scheduler and model runner and timing its steps depend on that release's
    internal objects, so they live in its runtime plugin like every other
    version-specific rule.  Imports of the runtime belong inside ``start``.

    :param runtime: the pin the plan's profile was probed on, ``"vllm==0.32.0"``:
        one of your targets.
    :returns: a :class:`~fpmcore.host.engine_drivers.MeasurementDriver`, or ``None`` when
        the plugin does not drive an engine.

    ``driver.start("models/tiny-llama", EngineOptions(2048, 4096, 256, True))``
    starts the engine (in the runtime's environment: ``tox -e vllm032-live``);
    ``engine.run([[5, 17, 42]], max_tokens=1).steps[0].scheduled.sum_prefill_tokens``
    is then 3.

    Example::

        >>> driver = host.hooks.runtime("vllm==0.32.0").measurement_driver()
        >>> driver.producer.name, driver.producer.timing_boundary
        ('vllm_032_cpu_engine_steps', 'vllm_032_admission_and_llm_engine_step')
        >>> [f.path for f in driver.producer.files][:2]
        ['vllm/entrypoints/llm.py', 'vllm/outputs.py']
    """


@hookspec(firstresult=True)
def fpm_serving_engine(runtime: str) -> ServingDriver | None:
    """*Serving engine*: how ``fpm verify`` serves a trace on this runtime's engine.  *First-result*.

    The answer's ``start(model_dir, options)`` imports the runtime, starts an
    engine for the model folder with the deployment's
    :class:`~fpmcore.host.engine_drivers.EngineOptions` (the plan's, as for
    :func:`fpm_measurement_driver`) and returns a
    :class:`~fpmcore.host.engine_drivers.ServingEngine`.  Its ``serve(requests)``
    serves a list of :class:`~fpmcore.host.engine_drivers.ServeRequest` open loop in
    wall-clock time, from an empty prefix cache: each request is added with
    its token ids once its arrival time has passed, the engine steps while a
    request is unfinished and waits for the next arrival when none is.  It
    returns a :class:`~fpmcore.host.engine_drivers.Serving`: per request its arrival,
    first-token and finish times (the ends of the steps that returned them)
    and its output tokens; per non-empty step its start and end, the
    workload the scheduler computed and what the machine did to it, read
    with ``fpmcore.collect.contention.sampler(precise=False)`` around the step (a
    cheap reading that does not slow the served engine).

    Why a hook: the comparison — traces, the replay of the same trace, the
    errors, the contention bound and the verdict (:mod:`fpmcore.verify`) — is
    the same for every runtime and lives once in the host; adding requests to
    one release's engine, stepping it and reading its scheduler's output are
    that release's internals, so they live in its runtime plugin.  Imports of
    the runtime belong inside ``start``.  **Optional**: ``fpm verify``
    refuses a runtime whose plugin gives none (V-1), naming the plugins that
    implement it.

    :param runtime: the pin of the plan's engine (``plan["engine"]["runtime"]``,
        ``"vllm==0.32.0"``): one of your targets.
    :returns: a :class:`~fpmcore.host.engine_drivers.ServingDriver`, or ``None`` when
        the plugin serves no engine.

    ``driver.start("models/tiny-llama", EngineOptions(2048, 4096, 256, True))``
    starts the engine (in the runtime's environment: ``tox -e vllm032-live``);
    ``engine.serve([ServeRequest("a", 0.0, [5, 17, 42], 4)]).requests[0].output_tokens``
    is then 4.

    Example::

        >>> from fpmcore.host.engine_drivers import ServingDriver
        >>> @hookimpl
        ... def fpm_serving_engine():
        ...     return ServingDriver(start=lambda model_dir, options: None)
        >>> callable(fpm_serving_engine().start)
        True
        >>> callable(host.hooks.runtime("vllm==0.32.0").serving_engine().start)
        True
    """


@hookspec(firstresult=True)
def fpm_replay_rules(runtime: str) -> ReplayRules | None:
    """*Replay rules*: the scheduler and pool rules of one runtime release that ``fpm replay`` follows.  *First-result*.

    The replay engine (06) is one library for every release; what differs
    between releases of the runtime's scheduler is a
    :class:`fpmcore.replay.rules.ReplayRules` value: the switches the
    engine consults and the scheduler settings the release has.  ``fpm
    replay`` and ``fpm sweep`` ask it for the profile's runtime pin
    (``vllm==<backend_version>``) and refuse a profile whose runtime gives
    none (R-1).  Answer only for a release whose scheduler the rules were
    checked against step by step (R-40).  Never import vLLM here.

    :param runtime: a runtime pin, ``"vllm==0.33.0"``: one of your targets.
    :returns: the release's :class:`~fpmcore.replay.rules.ReplayRules`,
        whose ``runtime`` is the pin, or ``None`` (no replay semantics).

    Example::

        >>> rules = host.hooks.runtime("vllm==0.27.0").replay_rules()
        >>> rules.runtime, rules.long_prefill_cap_always
        ('vllm==0.27.0', True)
    """


# --------------------------------------------------------------------------
# model plugins
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def fpm_align_stop(model: str, runtime: str, query: AlignStopQuery) -> int | None:
    """*Align stop*: how many tokens of a proposed prefill chunk the runtime schedules.  *First-result*.

    The Mamba align split (04 G-1) is the runtime's scheduler rule, and the
    host states it once: ``fpm plan``'s grid and ``fpm replay`` apply
    :mod:`fpmcore.replay.align` (the C engine's reference; a model plugin's
    planner asks it as ``fpmcore.plugin_api.mamba_align_split``), and neither
    calls this hook.  A model plugin answers it to say for which runtimes its
    points were checked against that rule (the GLM plugin answers with the
    host's rule); ``run_replay(..., align_stop=...)`` runs the Python
    reference with a plugin's answer in the host's place, and the conformance
    suite asks every model plugin that implements it.

    :param model: the model id the deployment runs (``"glm53flash"``): one of your targets.
    :param runtime: the runtime pin the deployment runs (``"vllm==0.33.0"``,
        the profile's ``backend_version`` as a pin).  Return ``None`` when
        you know no align rule of that runtime for the model: the caller
        then refuses, naming the model and the runtime.
    :param query: one evaluation, :class:`~fpmcore.host.stage_hooktypes.AlignStopQuery`.
    :returns: the tokens to schedule, ``0 ≤ n ≤ query.num_new_tokens``
        (0: cannot schedule the request in this step, 04 G-6).

    Example::

        >>> host.hooks.model("glm53flash").align_stop(runtime="vllm==0.33.0", query=AlignStopQuery(
        ...     start=0, num_new_tokens=8192, prompt_len=8192, num_tokens=8192,
        ...     block_size=2176, hash_block_size=2176,
        ...     max_num_batched_tokens=8192, checkpoint_alignment=None))
        6528
    """


@hookspec(firstresult=True)
def fpm_generate_points(model: str, profile: FpmModelProfile, deployment: int, limits: PlanLimits) -> PointPlan | None:
    """*Point generation*: the benchmark points to measure for a model.  *First-result*.

    :param model: the model id asked for (``fpm plan --model glm53flash``): one of your targets.
    :param profile: the accepted :class:`~fpmcore.documents.profile.FpmModelProfile`.
    :param deployment: index of the deployment in ``profile.deployments``.
    :param limits: the resolved :class:`~fpmcore.host.stage_hooktypes.PlanLimits`.
    :returns: a :class:`~fpmcore.host.stage_hooktypes.PointPlan`.  A refusal is raised
        as :class:`fpmcore.documents.errors.FpmError` with its rule and message.

    Example::

        >>> plan = host.hooks.model("glm53flash").generate_points(profile=p,
        ...     deployment=0, limits=PlanLimits(8192, 1048576, 2176, 2176))
        >>> dict(plan.counts)
        {'prefill': 496, 'decode': 81}
    """


@hookspec
def fpm_producer_contracts() -> list[ProducerContract]:
    """Register the producer contracts a model plugin owns.  *Collecting*.

    The host reads the registrations once, when it loads the plugins.  A
    contract's key is its Engram residency and, when it names one, the cells'
    execution profile (``ProducerContract.execution_profile``; ``None``: every
    profile): a key registered by two plugins, or overlapping another's,
    fails the later plugin with
    ``producer contract for engram residency <residency> is registered twice:
    <plugin>, <plugin>`` (05 §6.3), and A-17 finds the contract that owns a
    ``measurement_protocol.producer`` by its ``protocol_producer``.

    :returns: the plugin's :class:`~fpmcore.host.hooktypes.ProducerContract` list.

    Example::

        >>> @hookimpl
        ... def fpm_producer_contracts():
        ...     return [ProducerContract("glm53flash_native_graph_policy", "native_graph_policy", "none",
        ...                              label="glm-5.3-flash", protocol_producer="glm53flash_prefix_scheduler",
        ...                              execution_profile="full")]
        >>> sorted((c.name, c.execution_profile) for _plugin, c in host.hooks.producer_contracts()
        ...        if c.residency == "none")
        [('fpmcore_engine_steps', 'engine_steps'), ('glm53flash_native_graph_policy', 'full')]
    """


@hookspec
def fpm_choose_producer_contract(identity: ExecutionIdentity) -> ProducerContract | None:
    """*Choose producer contract*: claim a collection cell by its execution identity.  *Collecting*.

    The contract comes from the cell's identity (its Engram residency), never
    from the artifact's own ``execution_mode`` label (05 §6.3).  The host asks
    every model plugin: nobody claiming a configuration-bound identity gives
    A-14 (``native execution identity cell has no audited producer contract:
    <residency>``); two plugins claiming it give the conflict diagnostic.

    **Optional**: a plugin that does not implement it claims, by default, its
    registered contracts (:func:`fpm_producer_contracts`) whose key matches
    the identity: its Engram residency and, when the contract names one, its
    execution profile (``ProducerContract.claims``).  Implement it to claim
    by more than that.

    :param identity: the cell's :class:`~fpmcore.host.hooktypes.ExecutionIdentity`.
    :returns: a :class:`~fpmcore.host.hooktypes.ProducerContract`, or ``None``
        when the identity is not yours.

    Example::

        >>> @hookimpl
        ... def fpm_choose_producer_contract(identity):
        ...     if identity.engram_residency == "none":
        ...         return ProducerContract("glm53flash_native_graph_policy",
        ...                                 "native_graph_policy", "none")
        ...     return None
        >>> fpm_choose_producer_contract(identity=ExecutionIdentity(
        ...     "ab" * 32, "native_graph_policy", "none", "text")).execution_mode
        'native_graph_policy'
    """


@hookspec(firstresult=True)
def fpm_validate_artifact(
    contract: ProducerContract,
    cell: Mapping[str, Any],
    files: Mapping[str, Any],
    plan: Mapping[str, Any],
    attempt: str,
    owners: Mapping[str, str],
    producer: Mapping[str, Any],
) -> list[Diagnostic] | None:
    """*Validate artifact*: the measurement-record and producer rules of one contract.  *First-result*.

    :param contract: the contract :func:`fpm_choose_producer_contract` chose;
        return ``None`` unless it is yours.
    :param cell: the frozen plan cell (its id and execution identity).
    :param files: the cell's files by name (``"r0.json"``, the merged artifact,
        provenance, sidecars), parsed JSON or, for line files, lists of lines;
        nothing else.
    :param plan: the plan the run was collected for.
    :param attempt: the attempt folder as diagnostics name it.
    :param owners: protocol producer name → the label of the registered
        contract that owns it (A-17).
    :param producer: the producer record the runtime plugin of the plan's
        engine runtime gives (JSON-ready), or ``{"error": why}`` when there is
        none; a contract that compares a runtime producer reads it (A-21).
    :returns: the diagnostics (A- rules, in the spec's order); an empty list
        means the cell is accepted.

    An implementation names the arguments it reads (pluggy passes only
    those).  For instance, a contract whose rows must name their point.

    Example::

        >>> @hookimpl
        ... def fpm_validate_artifact(contract, files, attempt):
        ...     if contract.name != "acme_eager":
        ...         return None
        ...     return [Diagnostic("A-31", "row without a point id", where=f"{attempt}/{name}")
        ...             for name, rows in files.items() if any("point_id" not in r for r in rows)]
        >>> fpm_validate_artifact(contract=ProducerContract("acme_eager", "eager", "none"),
        ...     files={"r0.json": [{"latency_s": 0.1}]}, attempt="run/a1")
        [Diagnostic(rule='A-31', message='row without a point id', where='run/a1/r0.json')]
    """


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


@hookspec
def fpm_cli_commands() -> list[CliCommand]:
    """Add subcommands to ``fpm``.  *Collecting*.

    fpmcore's own subcommands are registered through this hook too, by the
    built-in plugin :mod:`fpmcore.cli.commands` that the command line registers
    first (:func:`fpmcore.host.build.build_host`).  A name claimed twice keeps the
    first registration.  A plugin whose implementation raises or returns
    anything but a list of :class:`~fpmcore.host.hooktypes.CliCommand` loses its
    commands (``fpm plugins`` shows it ``failed``); the command line stays.

    :returns: a list of :class:`~fpmcore.host.hooktypes.CliCommand`.

    Example::

        >>> @hookimpl
        ... def fpm_cli_commands():
        ...     return [CliCommand(name="hello", help="say hello",
        ...                        configure=lambda p: p.add_argument("who"),
        ...                        run=lambda args, ctx: print("hello", args.who) or 0)]
        >>> [c.name for c in fpm_cli_commands()]
        ['hello']
    """


# --------------------------------------------------------------------------
# trace formats
# --------------------------------------------------------------------------


@hookspec
def fpm_trace_formats() -> list[TraceFormat]:
    """Add trace formats to ``fpm replay --trace`` and ``fpm trace``.  *Collecting*.

    A :class:`~fpmcore.traces.format.TraceFormat` is a name (what
    ``--trace-format`` names), a one-line summary, a ``sniff`` function (the
    first bytes of the file, decompressed: does the format claim it?) and a
    streaming ``read`` function (a :class:`~fpmcore.traces.format.TraceSource`
    → the trace's :class:`~fpmcore.replay.trace.TraceRequest` s in file order,
    and :class:`~fpmcore.traces.format.SkippedRow` s for rows that are not
    requests).  ``read`` reads ``source.lines()`` one at a time and raises
    :class:`~fpmcore.documents.errors.FpmError` naming the line of a malformed row.
    fpmcore's own formats (``fpmcore``, ``sched-json``, ``mooncake``,
    ``burstgpt``, ``azure``) are registered through this hook by the host's
    built-in plugin, first; a name given twice keeps the first registration.
    Without ``--trace-format`` the formats are sniffed in registration order
    (fpmcore's JSONL last).  A plugin whose implementation raises or returns
    anything but a list of formats loses its formats (``fpm plugins`` shows
    it ``failed``).  **Optional.**

    :returns: a list of :class:`~fpmcore.traces.format.TraceFormat`.

    A format of CSV rows ``arrival_s,prompt,output`` after a header.

    Example::

        >>> from fpmcore import SkippedRow, TraceFormat, TraceRequest
        >>> def read(source):
        ...     for n, text in source.lines():
        ...         if n == 1:
        ...             continue  # the header
        ...         t, prompt, output = text.split(",")
        ...         if int(output) == 0:
        ...             yield SkippedRow("failed")
        ...         else:
        ...             yield TraceRequest(request_id=str(n), arrival_time=float(t),
        ...                                prompt_len=int(prompt), output_len=int(output))
        >>> @hookimpl
        ... def fpm_trace_formats():
        ...     return [TraceFormat(name="my-csv", summary="arrival_s,prompt,output",
        ...                         sniff=lambda head: head.startswith(b"arrival_s,prompt,output"),
        ...                         read=read)]
        >>> [f.name for f in fpm_trace_formats()]
        ['my-csv']
        >>> [name for _plugin, fmt in host.hooks.trace_formats() for name in [fmt.name]][:5]
        ['sched-json', 'mooncake', 'burstgpt', 'azure', 'fpmcore']
    """


# --------------------------------------------------------------------------
# the rule catalogue
# --------------------------------------------------------------------------


@hookspec
def fpm_rule_catalogue() -> list[RuleEntry]:
    """Describe the rule ids only this plugin raises.  *Collecting*.

    ``fpm explain RULE`` and the docs site's rules page read the host's
    catalogue (:mod:`fpmcore.documents.rules_catalogue`) and then every plugin's
    answer.  A plugin that raises ids of its own (an engine limit's id, a
    contract section, a refusal of its planner) describes each one here:
    its one-line meaning, what it protects, a refusal as ``fpm`` prints it
    and the fix.  An id the host describes keeps the host's entry; an id two
    plugins describe keeps the first plugin's.  **Optional.**

    :returns: a list of :class:`~fpmcore.host.hooktypes.RuleEntry`.

    Example::

        >>> @hookimpl
        ... def fpm_rule_catalogue():
        ...     return [RuleEntry("G-12", "The planner refuses the deployments' settings.",
        ...                       "Plans the model's collection can measure.",
        ...                       "fpm: my-model requires hash_block_size_tokens to be a multiple of 4: found 6 [G-12]",
        ...                       "Import a profile whose settings the planner accepts.")]
        >>> [e.id for e in fpm_rule_catalogue()]
        ['G-12']
        >>> any(plugin == "glm53flash" for plugin, _entry in host.hooks.rule_catalogue())
        True
    """
