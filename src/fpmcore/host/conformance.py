"""The conformance suite every plugin runs against itself (``fpmcore.testing.check_plugin``).

:func:`check_plugin` returns a list of problems, one line each, empty when the
plugin conforms.  The plugin is named as its entry point names it: a module
(``"fpmcore_mymodel"``) or an object of a module (``"fpmcore_vllm033:plugin"``),
or given as that module or object.  It checks, in order:

1. **Plugin info.**  ``fpm_plugin_info`` exists and returns a complete
   :class:`~fpmcore.host.hooktypes.PluginInfo`: a non-blank id, kind ``runtime`` or
   ``model``, at least one target (a runtime plugin's targets are exact pins
   ``name==version``), a summary, and the hook API version this fpmcore
   supports (:data:`~fpmcore.host.hooktypes.API_VERSION`).  When the plugin is
   installed, its entry point in ``fpmcore.plugins`` is named after its id.
2. **Registration.**  A host with only this plugin loads it with status
   ``ok`` (no unknown hook, no clash).
3. **No runtime at import.**  In a fresh interpreter where importing
   ``vllm`` or ``torch`` fails, the module imports and answers
   ``fpm_plugin_info``, and neither name is imported.
4. **Well-typed hooks on shared cases.**  Each hook the plugin implements is
   called through the host's typed facade (which selects the plugin and checks
   the return types) on the shared cases below; a value of the wrong type or an
   exception other than a refusal (:class:`~fpmcore.documents.errors.FpmError`) is a problem.  Besides
   the facade's checks: an align stop stays in ``0 … num_new_tokens``; a point
   plan's points are JSON values whose count matches ``counts``, its digest is
   64 lowercase hex digits; a chosen producer contract is one the plugin
   registers; every command has a help text and so does each of its options.

Shared cases: :data:`ALIGN_QUERIES` for ``fpm_align_stop``, asked for every
runtime pin an installed runtime plugin targets and for :data:`UNMODELLED_PIN`
(a model plugin answers for the runtimes whose align rule it models, and
``None`` for the others), the two profiles of
``fpmcore/data/conformance-*.fpm-profile.json`` (a GLM-like hybrid and a plain
dense model) for ``fpm_generate_points``, :data:`RESIDENCIES` for
``fpm_choose_producer_contract``, an empty cell for ``fpm_validate_artifact``,
:data:`SPEC_CLASSES` for ``fpm_classify_spec`` and the plugin's own pins for
``fpm_runtime_rules``.  The hooks that need a live runtime or recorded evidence
(``fpm_observe_cache_groups``, ``fpm_dry_probe``, ``fpm_normalize_record``)
are left to the plugin's own tests with its fixtures.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.runtime_pin import FRAMEWORK, RuntimePin
from fpmcore.host.command_parser import CommandParser
from fpmcore.host.entry_points import import_object
from fpmcore.host.hooktypes import (
    API_VERSION,
    AlignStopQuery,
    CliCommand,
    ExecutionIdentity,
    PluginInfo,
    PointPlan,
    ProducerContract,
)

DATA = Path(__file__).parents[1] / "data"

#: ``fpm_align_stop`` cases: first chunks, middle chunks, final chunks, with and without a checkpoint rule.
ALIGN_QUERIES: tuple[AlignStopQuery, ...] = tuple(
    AlignStopQuery(start=start, num_new_tokens=k, prompt_len=prompt, num_tokens=prompt, block_size=block,
                   hash_block_size=block, max_num_batched_tokens=budget, checkpoint_alignment=align)
    for block, budget in ((16, 64), (2176, 8192))
    for prompt in (1, block - 1, block, 3 * block + 5, 10_000)
    for start in sorted({0, block, (prompt - 1) // block * block})
    if start < prompt
    for k in sorted({1, min(budget, prompt - start), min(block + 1, prompt - start)})
    for align in (None, 16)
)  # fmt: skip

#: A runtime pin no plugin targets: an align-stop rule must refuse it (``None``), not fail.
UNMODELLED_PIN = "conformance==unmodelled"

#: Engram residencies of ``fpm_choose_producer_contract`` cases (the known ones and one nobody claims).
RESIDENCIES = ("none", "hbm_tp_sharded", "host_offload", "conformance-unclaimed")

#: vLLM cache spec classes of ``fpm_classify_spec`` cases (and one no runtime knows).
SPEC_CLASSES = tuple(f"vllm.v1.kv_cache_interface.{c}" for c in (
    "FullAttentionSpec", "SlidingWindowSpec", "MambaSpec", "ChunkedLocalAttentionSpec", "MLAAttentionSpec",
    "CrossAttentionSpec", "ConformanceUnknownSpec",
))  # fmt: skip

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _resolve(plugin: object | str) -> tuple[object, str]:
    """The plugin and the name an entry point gives it: ``module`` or ``module:attribute``."""
    if isinstance(plugin, str):
        return import_object(plugin), plugin
    if isinstance(plugin, ModuleType):
        return plugin, plugin.__name__
    for name, module in list(sys.modules.items()):  # an object: the module attribute that holds it
        for attribute, value in list(vars(module).items()) if isinstance(module, ModuleType) else ():
            if value is plugin:
                return plugin, f"{name}:{attribute}"
    raise ValueError(f"{plugin!r} is no attribute of an imported module; name it 'module:attribute'")


def check_info(plugin: object, name: str = "") -> tuple[PluginInfo | None, list[str]]:
    """Clause 1: the plugin info and, when installed, the entry point's name (``name``: as :func:`_resolve` gives it)."""
    fn = getattr(plugin, "fpm_plugin_info", None)
    if fn is None:
        return None, ["fpm_plugin_info: not implemented (every plugin says who it is)"]
    try:
        info = fn()
    except Exception as exc:
        return None, [f"fpm_plugin_info: raised {type(exc).__name__}: {exc}"]
    if not isinstance(info, PluginInfo):
        return None, [f"fpm_plugin_info: returned {type(info).__name__}; expected PluginInfo"]
    problems = []
    if info.kind not in ("runtime", "model"):
        problems.append(f"plugin info: kind must be runtime or model, found {info.kind!r}")
    if not info.targets or not all(isinstance(t, str) and t.strip() for t in info.targets):
        problems.append(f"plugin info: targets must be non-blank strings, found {info.targets!r}")
    elif info.kind == "runtime":
        problems += [f"plugin info: runtime target {t!r} is not an exact pin name==version"
                     for t in info.targets if not RuntimePin.well_formed(t)]  # fmt: skip
    if not info.summary.strip():
        problems.append("plugin info: no summary (fpm plugins show prints it)")
    if info.api_version != API_VERSION:
        problems.append(
            f"plugin info: hook API {info.api_version} is not supported; this fpmcore provides {API_VERSION}"
        )
    for ep in metadata.entry_points(group="fpmcore.plugins"):
        if _names(ep.value, name) and ep.name != info.id:
            problems.append(f"entry point {ep.name!r} names plugin id {info.id!r}; name the entry point after the id")
    return info, problems


def _names(value: str, name: str) -> bool:
    """An entry point value ``module[:attribute]`` names the plugin ``name``."""
    return value == name or (":" not in name and value.split(":")[0] == name)


_NO_RUNTIME = r"""
import importlib.abc, sys
heavy = tuple(sys.argv[2:])
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in heavy:
            raise ImportError(f"conformance: {name} must not be imported at module level")
        return None
sys.meta_path.insert(0, Block())
from fpmcore.host.entry_points import import_object
import_object(sys.argv[1]).fpm_plugin_info()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
if loaded:
    raise SystemExit("imported at module level: " + ", ".join(loaded))
"""


def check_no_runtime_import(module_name: str) -> list[str]:
    """Clause 3: the module (``module[:attribute]``) imports and answers without vLLM or torch (in a fresh interpreter)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what this process imports from
    r = subprocess.run([sys.executable, "-c", _NO_RUNTIME, module_name, FRAMEWORK, "torch"], capture_output=True, text=True,
                       timeout=120, env=env, check=False)  # fmt: skip
    if r.returncode == 0:
        return []
    last = (r.stderr.strip().splitlines() or ["exit status " + str(r.returncode)])[-1]
    return [f"import without vLLM and torch failed: {last}"]


def _call(problems: list[str], what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except FpmError as exc:
        if type(exc) is not FpmError:  # a PluginError: the facade found a wrong value
            problems.append(f"{what}: {exc.message}")
        return None
    except Exception as exc:
        problems.append(f"{what}: raised {type(exc).__name__}: {exc}")
        return None


def _check_model_hooks(host: Any, info: PluginInfo, hooks: set[str], problems: list[str]) -> None:
    from fpmcore.documents.jsonio import canonical_bytes

    if "fpm_align_stop" in hooks:
        before = len(problems)
        cases = [(model, pin, q) for model in info.targets for pin in (*_runtime_pins(), UNMODELLED_PIN)
                 for q in ALIGN_QUERIES]  # fmt: skip
        for model, pin, q in cases:  # the facade checks the type and 0 <= n <= num_new_tokens
            _call(problems, f"fpm_align_stop({model!r}, {pin}, {q})", host.hooks.model(model).align_stop,
                  runtime=pin, query=q)  # fmt: skip
            if len(problems) > before:  # one wrong answer says enough
                break
    if "fpm_generate_points" in hooks:
        from fpmcore.documents.profile import load_profile
        from fpmcore.plan.planning import resolve_limits

        for path in sorted(DATA.glob("conformance-*.fpm-profile.json")):
            profile = load_profile(path)
            limits = resolve_limits(profile, 0)
            for model in info.targets:
                what = f"fpm_generate_points({model!r}, {path.name})"
                plan = _call(problems, what, host.hooks.model(model).generate_points, profile=profile, deployment=0,
                             limits=limits)  # fmt: skip
                if not isinstance(plan, PointPlan):
                    continue
                try:
                    canonical_bytes([dict(p) for p in plan.points] + [dict(p) for p in plan.smoke])
                except (TypeError, ValueError) as exc:
                    problems.append(f"{what}: points are not JSON values: {exc}")
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in plan.counts.values()):
                    problems.append(f"{what}: counts must be integers, found {dict(plan.counts)}")
                elif sum(plan.counts.values()) != len(plan.points):
                    problems.append(f"{what}: counts {dict(plan.counts)} do not add up to {len(plan.points)} points")
                if not isinstance(plan.digest, str) or not _HEX64.match(plan.digest):
                    problems.append(f"{what}: digest must be 64 lowercase hex digits, found {plan.digest!r}")
    own: list[ProducerContract] = []
    if "fpm_producer_contracts" in hooks:
        own = [c for plugin, c in _call(problems, "fpm_producer_contracts", host.hooks.producer_contracts) or []
               if plugin == info.id]  # fmt: skip
    if "fpm_choose_producer_contract" in hooks:
        for residency in RESIDENCIES:
            identity = ExecutionIdentity("c" * 64, "full", residency, "text")
            hit = _call(problems, f"fpm_choose_producer_contract({residency!r})", host.hooks.choose_producer_contract,
                        identity=identity)  # fmt: skip
            if hit is not None and hit[1] not in own:
                problems.append(f"fpm_choose_producer_contract({residency!r}): chose {hit[1].name}, "
                                "which the plugin does not register through fpm_producer_contracts")  # fmt: skip
    if "fpm_validate_artifact" in hooks:
        for contract in own:
            _call(problems, f"fpm_validate_artifact({contract.name}, empty cell)", host.hooks.validate_artifact,
                  contract=contract, cell={}, files={}, plan={})  # fmt: skip


def _runtime_pins() -> list[str]:
    """Every runtime pin an installed runtime plugin targets."""
    from fpmcore.host.build import build_host

    return sorted({t for r in build_host(environ={}).active("runtime") for t in r.targets})


def _check_runtime_hooks(host: Any, info: PluginInfo, hooks: set[str], problems: list[str]) -> None:
    for pin in info.targets:
        runtime = _call(problems, f"runtime selection ({pin})", host.hooks.runtime, pin)
        if runtime is None:
            continue
        if "fpm_classify_spec" in hooks:
            for cls in SPEC_CLASSES:
                _call(problems, f"fpm_classify_spec({pin}, {cls})", runtime.classify_spec, spec_class=cls, spec={})
        if "fpm_runtime_rules" in hooks:
            _call(problems, f"fpm_runtime_rules({pin})", runtime.rules)


def _check_commands(plugin: object, problems: list[str]) -> None:
    fn: Any = getattr(plugin, "fpm_cli_commands")  # noqa: B009 - any object; the hook name is not its type's
    commands = _call(problems, "fpm_cli_commands", fn)
    if commands is None:
        return
    if not isinstance(commands, list) or not all(isinstance(c, CliCommand) for c in commands):
        problems.append(f"fpm_cli_commands: must return a list of CliCommand, found {commands!r}")
        return
    for command in commands:
        if not command.help.strip():
            problems.append(f"fpm_cli_commands: command {command.name!r} has no help")
        parser = CommandParser(prog=f"fpm {command.name}")
        if _call(problems, f"fpm_cli_commands: configure {command.name!r}", command.configure, parser) is None:
            for action in parser.added_actions:  # -h/--help among them, with its help
                if action.option_strings and not action.help:
                    problems.append(f"fpm_cli_commands: option {'/'.join(action.option_strings)} of "
                                    f"{command.name!r} has no help")  # fmt: skip


def check_plugin(plugin: object | str) -> list[str]:
    """Every problem of ``plugin`` (a module or object, or its ``module[:attribute]`` name), one line each; empty when it conforms."""
    from fpmcore.host.build import build_host

    obj, name = _resolve(plugin)
    info, problems = check_info(obj, name)
    if info is None:
        return problems
    # an installed plugin is loaded through its entry point, as fpm loads it; one on its own directly
    eps = tuple(ep.name for ep in metadata.entry_points(group="fpmcore.plugins") if _names(ep.value, name))
    kw: dict[str, Any] = {"enable": eps} if eps else {"plugins": (obj,)}
    host = build_host(autoload=False, environ={}, **kw)
    record = next((r for r in host.records if r.id == info.id), None)
    if record is None or record.status != "ok":
        reason = "not loaded" if record is None else f"{record.status}: {record.error}"
        return problems + [f"registration: {reason}"]
    problems += check_no_runtime_import(name)
    hooks = set(record.hooks)
    if info.kind == "model":
        _check_model_hooks(host, info, hooks, problems)
    else:
        _check_runtime_hooks(host, info, hooks, problems)
    if "fpm_cli_commands" in hooks:
        _check_commands(obj, problems)
    if "fpm_trace_formats" in hooks:
        _check_trace_formats(host, info.id, problems)
    return problems


def _check_trace_formats(host: Any, plugin: str, problems: list[str]) -> None:
    """The plugin's trace formats are :class:`~fpmcore.traces.format.TraceFormat` s whose sniff never raises."""
    try:
        formats = host.hooks.call("fpm_trace_formats", plugin) or []
    except Exception as exc:  # noqa: BLE001 - reported as a problem
        problems.append(f"fpm_trace_formats: {exc}")
        return
    for fmt in formats:
        for head in (b"", b"\xff\xfe\x00", b"{}\n"):
            try:
                fmt.sniff(head)
            except Exception as exc:  # noqa: BLE001 - reported as a problem
                problems.append(f"fpm_trace_formats: {fmt.name}: sniff({head!r}) raised {type(exc).__name__}: {exc}")


__all__ = [
    "ALIGN_QUERIES",
    "RESIDENCIES",
    "SPEC_CLASSES",
    "UNMODELLED_PIN",
    "check_info",
    "check_no_runtime_import",
    "check_plugin",
]
