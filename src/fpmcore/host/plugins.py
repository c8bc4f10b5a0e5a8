"""The plugin host: loading, records, selection.

Loading order: the built-in plugins the caller passes (the command line
registers fpmcore's own commands, :mod:`fpmcore.cli.commands`), then the plugin
objects a caller passes (tests, embedding), then every entry point of the
group ``fpmcore.plugins`` whose name is not the id of a plugin already
loaded.  The host imports no command line.  Each load and registration is
wrapped: a plugin that fails to import, implements an unknown hook, answers
``fpm_plugin_info`` wrongly or targets another hook API is recorded with its
status and the error text, and the host goes on.  ``FPM_STRICT_PLUGINS=1``
re-raises instead.

Environment (read once, when the host is built):

``FPM_PLUGINS``                  comma-separated allow list of plugin ids
``FPM_DISABLE_PLUGINS``          comma-separated ids not to load
``FPM_DISABLE_PLUGIN_AUTOLOAD=1`` load no entry point unless named by
                                 ``FPM_PLUGINS`` or ``--plugin``
``FPM_STRICT_PLUGINS=1``         re-raise the first plugin failure

The CLI's ``--plugin ID`` and ``--disable-plugin ID`` add to these.

Selection: a runtime plugin is selected by the exact runtime pin it targets
(``vllm==0.33.0``; strings compared exactly, no PEP 440 normalization), a
model plugin by its id or one of its model ids.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs
import pluggy

from fpmcore import hookspecs
from fpmcore.documents.errors import FpmError, PluginError
from fpmcore.host.entry_points import entry_points
from fpmcore.host.hooks import Hooks
from fpmcore.host.hooktypes import API_VERSION, PluginInfo

GROUP = "fpmcore.plugins"
Status = Literal["ok", "incompatible", "failed", "disabled"]


@attrs.frozen
class PluginRecord:
    """What the host knows of one plugin (one row of ``fpm plugins``)."""

    id: str
    distribution: str | None
    version: str | None
    kind: str | None
    targets: tuple[str, ...]
    hooks: tuple[str, ...]
    status: Status
    error: str | None = None
    summary: str = ""
    module: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "distribution": self.distribution,
            "version": self.version,
            "kind": self.kind,
            "targets": list(self.targets),
            "hooks": list(self.hooks),
            "status": self.status,
            "error": self.error,
        }


def _env_list(environ: Mapping[str, str], name: str) -> set[str]:
    return {p.strip() for p in environ.get(name, "").split(",") if p.strip()}


#: Values that never hold a hook implementation, as pluggy finds them on a module or on an instance's class:
#: the interpreter's own functions, methods and descriptors (no marker can be set on them), and properties and
#: cached properties (pluggy runs no descriptor, and takes neither for a hook).
_NEVER_HOOKS = (
    types.WrapperDescriptorType, types.MethodDescriptorType, types.BuiltinFunctionType,
    types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MethodWrapperType,
    property, functools.cached_property,
)  # fmt: skip


def _own_dict(obj: object) -> dict[str, Any]:
    """``obj``'s own ``__dict__`` read as pluggy reads it (no ``__getattr__`` runs), ``{}`` when it has none."""
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return own if isinstance(own, dict) else {}


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, with the common cases of its hook discovery read from ``__dict__``.

    pluggy reads each of a plugin's names through :func:`inspect.getattr_static`
    (so that no property runs), which costs about 50 µs a name: for the
    built-in commands module and the shipped plugins' objects (a runtime
    plugin is an attrs instance with sixty names, most of them inherited from
    :class:`object`), half of a one-request ``fpm replay``'s plugin loading.
    A module's attribute is its ``__dict__`` entry, and an instance's
    attribute that is not in its own ``__dict__`` is the first entry of that
    name along its class's MRO.  When that entry is a plain function, a
    class, a value that is neither callable nor a descriptor, one of
    :data:`_NEVER_HOOKS`, or a slot that holds no function, the answer is
    the one pluggy would give.  Everything else (static and class methods,
    a function in a slot, an instance's own attributes, classes as plugins)
    takes pluggy's own way.
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        if isinstance(plugin, types.ModuleType):
            found = plugin.__dict__.get(name)
        elif not isinstance(plugin, type) and name not in _own_dict(plugin):
            found = next((k.__dict__[name] for k in type(plugin).__mro__ if name in k.__dict__), None)
            if isinstance(found, types.MemberDescriptorType):  # a slot: pluggy reads what it holds
                try:
                    held = found.__get__(plugin, type(plugin))
                except AttributeError:  # empty
                    return None
                if not isinstance(held, (types.FunctionType, types.MethodType)):
                    return None
                return super().parse_hookimpl_opts(plugin, name)
        else:
            return super().parse_hookimpl_opts(plugin, name)
        if isinstance(found, (type, *_NEVER_HOOKS)):  # a class is never a hook implementation either
            return None
        if isinstance(found, types.FunctionType):
            opts = getattr(found, self.project_name + "_impl", None)
            return opts if isinstance(opts, dict) else None
        if not callable(found) and not hasattr(type(found), "__get__"):
            return None
        return super().parse_hookimpl_opts(plugin, name)


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip() not in ("", "0", "false", "no")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class PluginHost:
    """Loads plugins into a pluggy ``PluginManager`` and keeps one record per plugin.

    :param plugins: plugin objects (modules) to register besides the entry points.
    :param autoload: load entry points (default: unless
        ``FPM_DISABLE_PLUGIN_AUTOLOAD=1``).
    :param enable: ids to load even with autoload off (``--plugin``).
    :param disable: ids not to load (``--disable-plugin``).
    :param strict: re-raise plugin failures (default: ``FPM_STRICT_PLUGINS=1``).
    :param environ: the environment to read (default ``os.environ``).
    :param builtins: fpmcore's own plugin objects (``kind="builtin"``),
        registered first and never disabled.

    ``host.hooks`` is the typed facade (:class:`fpmcore.host.hooks.Hooks`).
    """

    def __init__(
        self,
        *,
        plugins: Iterable[object] = (),
        autoload: bool | None = None,
        enable: Iterable[str] = (),
        disable: Iterable[str] = (),
        strict: bool | None = None,
        environ: Mapping[str, str] | None = None,
        builtins: Iterable[object] = (),
    ) -> None:
        env = os.environ if environ is None else environ
        self.pm: pluggy.PluginManager = _PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.strict = _env_flag(env, "FPM_STRICT_PLUGINS") if strict is None else strict
        self.allow = _env_list(env, "FPM_PLUGINS")
        self.enable = set(enable)
        self.disable = _env_list(env, "FPM_DISABLE_PLUGINS") | set(disable)
        #: Where each selection came from, for :meth:`selection_warnings`.
        self._asked = {"FPM_PLUGINS": self.allow, "--plugin": self.enable,
                       "--disable-plugin or FPM_DISABLE_PLUGINS": self.disable}  # fmt: skip
        self.autoload = (not _env_flag(env, "FPM_DISABLE_PLUGIN_AUTOLOAD")) if autoload is None else autoload
        self._records: dict[str, PluginRecord] = {}
        self.hooks = Hooks(self)
        for obj in builtins:
            self._load(obj, distribution="fpmcore", version=None, builtin=True)
        for obj in plugins:
            self._load(obj, distribution=None, version=None)
        self._load_entry_points()
        self._check_contract_registrations()

    # -- loading ---------------------------------------------------------------------

    def _disabled_reason(self, plugin_id: str, *, entry_point: bool) -> str | None:
        if plugin_id in self.disable:
            return "disabled by FPM_DISABLE_PLUGINS or --disable-plugin"
        if self.allow and plugin_id not in self.allow and plugin_id not in self.enable:
            return "not in the FPM_PLUGINS allow list"
        if entry_point and not self.autoload and plugin_id not in self.enable | self.allow:
            return "autoload is off (FPM_DISABLE_PLUGIN_AUTOLOAD=1); enable it with --plugin"
        return None

    def _load_entry_points(self) -> None:
        try:
            eps = sorted(entry_points(GROUP), key=lambda e: e.name)
        except Exception as exc:  # pragma: no cover - broken metadata of the environment
            if self.strict:
                raise
            print(f"fpm: cannot read entry points: {_describe(exc)}", file=sys.stderr)
            return
        seen: set[str] = set()
        for ep in eps:
            if ep.name in seen:  # the same distribution found twice on sys.path
                continue
            seen.add(ep.name)
            if ep.name in self._records:  # a plugin object the caller passed has this id: it stands
                continue
            dist, version = ep.dist_name, ep.dist_version
            reason = self._disabled_reason(ep.name, entry_point=True)
            if reason is not None:
                self._record(PluginRecord(ep.name, dist, version, None, (), (), "disabled", reason, module=ep.value))
                continue
            try:
                obj = ep.load()
            except Exception as exc:
                if self.strict:
                    raise
                self._record(
                    PluginRecord(ep.name, dist, version, None, (), (), "failed", _describe(exc), module=ep.value)
                )
                continue
            self._load(obj, distribution=dist, version=version, expected_id=ep.name, module=ep.value)

    def _load(
        self,
        obj: object,
        *,
        distribution: str | None,
        version: str | None,
        expected_id: str | None = None,
        module: str | None = None,
        builtin: bool = False,
    ) -> None:
        module = module or str(getattr(obj, "__name__", type(obj).__name__))
        fallback_id: str = expected_id or module
        try:
            info = self._plugin_info(obj)
            if expected_id is not None and info.id != expected_id:
                raise PluginError("plugins", f"entry point '{expected_id}' names a plugin whose id is '{info.id}'")
            if info.kind == "builtin" and not builtin:
                raise PluginError("plugins", "only fpmcore itself ships builtin plugins; kind must be runtime or model")
            if info.id in self._records:
                raise PluginError("plugins", f"plugin id '{info.id}' is already registered")
        except Exception as exc:
            if self.strict:
                raise
            self._record(
                PluginRecord(fallback_id, distribution, version, None, (), (), "failed", _describe(exc), module=module)
            )
            return
        base: dict[str, Any] = dict(
            id=info.id, distribution=distribution, version=version, kind=info.kind,
            targets=tuple(info.targets), summary=info.summary, module=module,
        )  # fmt: skip
        reason = None if builtin or expected_id is not None else self._disabled_reason(info.id, entry_point=False)
        if reason is not None:
            self._record(PluginRecord(**base, hooks=(), status="disabled", error=reason))
            return
        if info.api_version != API_VERSION:
            msg = f"written for hook API {info.api_version}; this fpmcore provides API {API_VERSION}"
            if self.strict:
                raise PluginError("plugins", f"plugin '{info.id}' is incompatible: {msg}")
            self._record(PluginRecord(**base, hooks=(), status="incompatible", error=msg))
            return
        try:
            self.pm.register(obj, name=info.id)
            callers = self.pm.get_hookcallers(obj) or []
            unknown = sorted(hc.name for hc in callers if hc.spec is None)
            if unknown:
                self.pm.unregister(obj)
                raise PluginError("plugins", f"implements unknown hooks: {', '.join(unknown)}")
        except Exception as exc:
            if self.strict:
                raise
            self._record(PluginRecord(**base, hooks=(), status="failed", error=_describe(exc)))
            return
        hooks = tuple(sorted(hc.name for hc in callers))
        self._record(PluginRecord(**base, hooks=hooks, status="ok"))

    def _check_contract_registrations(self) -> None:
        """05 §6.3: one plugin per contract key — the Engram residency and, when a contract names one, the
        execution profile (:meth:`~fpmcore.host.hooktypes.ProducerContract.overlaps`); a second registration of an
        overlapping key fails its plugin."""
        owned: list[tuple[Any, str]] = []  # (contract, plugin)
        for plugin in self.hooks.implementers("fpm_producer_contracts"):  # registration order
            try:
                contracts = self.hooks.call("fpm_producer_contracts", plugin) or []
            except PluginError as exc:
                cause = exc.__cause__ or exc
                self.plugin_failed(plugin, f"fpm_producer_contracts: {_describe(cause)}", cause)
                continue
            clash = next(((c, o) for c in contracts for o in owned if c.overlaps(o[0])), None)
            if clash is not None:
                contract, (_, first) = clash
                message = f"producer contract for engram residency {contract.residency} is registered twice: {first}, {plugin}"
                self.plugin_failed(plugin, message, PluginError("A-14", message))
                continue
            owned += [(c, plugin) for c in contracts]

    @staticmethod
    def _plugin_info(obj: object) -> PluginInfo:
        """The plugin's own answer to ``fpm_plugin_info``, read before it is registered.

        This is the one hook the host calls outside pluggy: its answer (the
        plugin id and hook API) decides whether, and under which name, the
        plugin is registered at all.
        """
        fn = getattr(obj, "fpm_plugin_info", None)
        if fn is None:
            raise PluginError("plugins", "does not implement fpm_plugin_info")
        info = fn()
        if not isinstance(info, PluginInfo):
            raise PluginError("plugins", f"fpm_plugin_info returned {type(info).__name__}; expected PluginInfo")
        return info

    def _record(self, record: PluginRecord) -> None:
        self._records[record.id] = record

    def plugin_failed(self, plugin_id: str, error: str, exc: BaseException) -> None:
        """A loaded plugin broke at run time: re-raise ``exc`` under ``FPM_STRICT_PLUGINS=1``, else mark it failed."""
        if self.strict:
            raise exc
        self.mark_failed(plugin_id, error)

    def mark_failed(self, plugin_id: str, error: str) -> None:
        """Record that a loaded plugin broke at run time, and stop calling it."""
        rec = self._records.get(plugin_id)
        plugin = self.pm.get_plugin(plugin_id)
        if plugin is not None:
            self.pm.unregister(plugin)
        if rec is not None:
            self._records[plugin_id] = attrs.evolve(rec, status="failed", error=error)

    # -- queries -----------------------------------------------------------------------

    def selection_warnings(self) -> list[str]:
        """One line per selection (``FPM_PLUGINS``, ``--plugin``, ``--disable-plugin``) naming ids no plugin has.

        A mistyped id is a likely mistake that would otherwise pass in
        silence; an allow list that names no plugin disables every plugin.
        """
        known = sorted(r.id for r in self._records.values() if r.kind != "builtin")
        lines = []
        for source, ids in self._asked.items():
            unknown = sorted(ids - set(self._records))
            if not unknown:
                continue
            line = f"{source} names no installed plugin {', '.join(repr(i) for i in unknown)}"
            if source == "FPM_PLUGINS" and not (self.allow & set(self._records)):
                line += " (so every plugin is disabled)"
            lines.append(f"{line}; installed plugins: {', '.join(known) or 'none'}")
        return lines

    def not_loaded(self) -> str:
        """``<id> (<status>: <reason>), …`` of the plugins that failed or that a selection disabled; ``""`` when none.

        A plugin left out only because autoload is off is not named: that is
        the host's mode, not a choice about that plugin.
        """
        chosen = self.disable | (set(self._records) - self.allow if self.allow else set())
        off = [r for r in self.records if r.status in ("failed", "incompatible")
               or (r.status == "disabled" and r.id in chosen)]  # fmt: skip
        return ", ".join(f"{r.id} ({r.status}: {r.error})" if r.error else f"{r.id} ({r.status})" for r in off)

    @property
    def records(self) -> list[PluginRecord]:
        """Every plugin record, built-ins first, then by id."""
        return sorted(self._records.values(), key=lambda r: (r.kind != "builtin", r.id))

    def record(self, plugin_id: str) -> PluginRecord:
        try:
            return self._records[plugin_id]
        except KeyError:
            import difflib

            # the installed plugins (the built-in commands plugin is no plugin a user installed), the closest first
            ids = sorted(r.id for r in self._records.values() if r.kind != "builtin")
            close = difflib.get_close_matches(plugin_id, ids, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            known = ", ".join(ids) or "none"
            raise FpmError("plugins", f"no plugin '{plugin_id}'; {hint}installed plugins: {known}") from None

    def active(self, kind: str | None = None) -> list[PluginRecord]:
        """Records with status ``ok`` (of one kind)."""
        return [r for r in self.records if r.status == "ok" and (kind is None or r.kind == kind)]

    def select_runtime(self, pin: str) -> PluginRecord:
        """The one runtime plugin that targets ``pin`` exactly (``vllm==0.33.0``)."""
        runtimes = self.active("runtime")
        found = [r for r in runtimes if pin in r.targets]
        if len(found) == 1:
            return found[0]
        if not found:
            installed = ", ".join(f"{r.id} ({', '.join(r.targets)})" for r in runtimes) or "none"
            off = self.not_loaded()
            raise FpmError("plugins", f"no runtime plugin for {pin}; installed runtime plugins: {installed}"
                                      + (f"; not loaded: {off}" if off else ""))  # fmt: skip
        raise FpmError("plugins", f"runtime {pin} is claimed by more than one plugin: {', '.join(r.id for r in found)}")

    def select_model(self, model: str) -> PluginRecord:
        """The one model plugin whose id or targets name ``model``."""
        models = self.active("model")
        found = [r for r in models if model == r.id or model in r.targets]
        if len(found) == 1:
            return found[0]
        if not found:
            installed = ", ".join(f"{r.id} ({', '.join(r.targets)})" for r in models) or "none"
            off = self.not_loaded()
            raise FpmError("plugins", f"no model plugin for '{model}'; installed model plugins: {installed}"
                                      + (f"; not loaded: {off}" if off else ""))  # fmt: skip
        raise FpmError(
            "plugins", f"model '{model}' is claimed by more than one plugin: {', '.join(r.id for r in found)}"
        )
