"""The hook implementations of a vLLM runtime plugin, given its release's parts.

A vLLM runtime plugin is one :class:`VllmRuntimePlugin`, named by its entry
point (``vllm_033 = "fpmcore_vllm033:plugin"``)::

    plugin = VllmRuntimePlugin("vllm_033", "fpmcore_vllm033", "fpmcore-vllm033", "0.33.0",
                               rules_from="fpmcore_vllm033.rules:RULES",
                               classify_from="fpmcore_vllm033.classes:classify",
                               replay_from="fpmcore_vllm033.replay:REPLAY_RULES",
                               summary="vLLM 0.33.0: hybrid cache groups …")

The release's import rules, class table and replay rules are named
``"module:attribute"`` and imported when a hook first asks for them: ``fpm
--help`` and ``fpm plugins`` need only the plugin's identity (its pin comes
from ``version``), and a replay only the replay rules of the one release its
profile names.  The plugin's package also holds ``<package>.observe``
(``SOURCE_FILES``, the files the observer reads, and ``worker_cache``, the
worker ``cache`` its tensors give) and ``<package>.probe``
(``prepare_environment``, ``plan`` and ``plan_summary``, and, where its
observer reads more than the shared source gives, ``worker_source``).  Both
are imported when a hook needs them, so that loading the plugin never
imports vLLM; so are the shared observer and dry probe
(:mod:`fpmcore_vllm_support.observe`, :mod:`fpmcore_vllm_support.dryprobe`),
so that loading the plugin stays cheap for a command that never calls them.

The host calls the runtime hooks only for the pin the plugin targets
(``vllm==<version>``), so no implementation takes, or compares, the
``runtime`` argument.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from fpmcore.plugin_api import API_VERSION, PluginInfo, RuntimePin, hookimpl, import_object

if TYPE_CHECKING:
    from fpmcore.plugin_api import ImportRules, ReplayRules, SpecClassification
    from fpmcore_vllm_support import observe


def _named(reference: Any) -> Any:
    """The attribute ``"module:attribute"`` names, its module imported; anything but a string is itself."""
    return import_object(reference) if isinstance(reference, str) else reference


@attrs.frozen(eq=False)
class VllmRuntimePlugin:
    """One vLLM release as an fpmcore runtime plugin.

    ``plugin_id``     the plugin id (the entry point's name, ``vllm_033``);
    ``package``       the plugin's package (``fpmcore_vllm033``), home of its
                      ``observe`` and ``probe`` modules;
    ``distribution``  the plugin's distribution (``fpmcore-vllm033``), the
                      records' ``observer.plugin``;
    ``version``       the release it targets (``0.33.0``): its pin is ``vllm==<version>``;
    ``rules_from``    where its :class:`~fpmcore.host.stage_hooktypes.ImportRules` are
                      (``"fpmcore_vllm033.rules:RULES"``): their ``version`` is
                      ``version``, their ``hybrid_evidence`` whether its records
                      carry hybrid evidence;
    ``classify_from`` where its class table is, spec class → classification (02 §5);
    ``summary``       one line for ``fpm plugins show``;
    ``replay_from``   where its scheduler's :class:`fpmcore.replay.rules.ReplayRules`
                      are (``fpm replay`` follows them), or ``None`` for a release
                      whose scheduler the replay was not checked against.

    Each ``*_from`` is imported when first read through :attr:`rules`,
    :attr:`classify` or :attr:`replay_rules`, or is the value itself (a test's
    plugin with edited rules); rules of another version than ``version`` fail
    the hook that reads them (the host names the plugin).
    """

    plugin_id: str
    package: str
    distribution: str
    version: str
    rules_from: str | ImportRules
    classify_from: str | Callable[[str], SpecClassification]
    summary: str = ""
    replay_from: str | ReplayRules | None = None

    @property
    def pin(self) -> str:
        """The exact runtime pin the plugin targets (``vllm==0.33.0``)."""
        return str(RuntimePin(self.version))

    @functools.cached_property
    def rules(self) -> ImportRules:
        """The release's import rules (imported from :attr:`rules_from` when first read)."""
        rules: ImportRules = _named(self.rules_from)
        if rules.version != self.version:
            raise ValueError(f"{self.plugin_id}: {self.rules_from} are the rules of {rules.version!r}, "
                             f"the plugin targets {self.version!r}")  # fmt: skip
        return rules

    @functools.cached_property
    def classify(self) -> Callable[[str], SpecClassification]:
        """The release's class table (imported from :attr:`classify_from` when first read)."""
        classify: Callable[[str], SpecClassification] = _named(self.classify_from)
        return classify

    @functools.cached_property
    def replay_rules(self) -> ReplayRules | None:
        """The release's replay rules (imported from :attr:`replay_from` when first read), or ``None``."""
        replay: ReplayRules | None = None if self.replay_from is None else _named(self.replay_from)
        return replay

    def release(self) -> observe.Release:
        """What the release's observer adds to the shared building blocks (imports ``<package>.observe``)."""
        from fpmcore_vllm_support import observe

        module = importlib.import_module(f"{self.package}.observe")
        return observe.Release(
            version=self.version, distribution=self.distribution, observer=module.__name__,
            source_files=tuple(module.SOURCE_FILES), hybrid=self.rules.hybrid_evidence, classify=self.classify,
            worker_cache=module.worker_cache, absent_hardware=self.rules.absent_hardware,
        )  # fmt: skip

    def build_record(self, source: Mapping[str, Any], *, phase: str, rank: int) -> dict[str, Any]:
        """One record of the release from the live objects of ``source`` (:func:`fpmcore_vllm_support.observe.build_record`)."""
        from fpmcore_vllm_support import observe

        return observe.build_record(source, phase=phase, rank=rank, release=self.release())

    def dry_probe(
        self,
        model_path: str | os.PathLike[str],
        out_dir: str | os.PathLike[str],
        *,
        tp: int = 1,
        caching: bool = True,
        configuration: str | None = None,
    ) -> dict[str, Any]:
        """Plan ``model_path`` with the release for ``tp`` ranks and write the evidence folder ``out_dir`` (02 §2).

        Writes ``observations.json``, ``model-config.json`` and, per phase,
        ``<attempt>/<phase>/launch-manifest.json`` and one record per worker
        rank and scheduler, never over a file
        (:func:`fpmcore_vllm_support.dryprobe.dry_probe`, with the release's
        ``plan``, ``plan_summary`` and observer).  Returns what vLLM planned, per phase.
        """
        from fpmcore_vllm_support import dryprobe

        probe = importlib.import_module(f"{self.package}.probe")
        probe.prepare_environment()
        sources = {"worker_source": probe.worker_source} if hasattr(probe, "worker_source") else {}
        return dryprobe.dry_probe(
            model_path, out_dir, version=self.version, tp=tp, caching=caching, configuration=configuration,
            model_labels=self.rules.model_dtype_labels,
            plan=probe.plan, observer=self.build_record, summarize=probe.plan_summary, **sources,
        )  # fmt: skip

    @hookimpl
    def fpm_plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, kind="runtime", targets=(self.pin,), api_version=API_VERSION,
                          summary=self.summary)  # fmt: skip

    @hookimpl
    def fpm_classify_spec(self, spec_class: str) -> SpecClassification:
        """02 §5: the release's class table."""
        return self.classify(spec_class)

    @hookimpl
    def fpm_runtime_rules(self) -> ImportRules:
        """The release's import rules besides its class table."""
        return self.rules

    @hookimpl
    def fpm_replay_rules(self) -> ReplayRules | None:
        """The release's scheduler rules for the replay engine (06)."""
        return self.replay_rules

    @hookimpl
    def fpm_observe_cache_groups(self, source: Mapping[str, Any], phase: str, rank: int) -> dict[str, Any]:
        """02 §3: one record from the release's live objects (vLLM imported by the observer)."""
        return self.build_record(source, phase=phase, rank=rank)

    @hookimpl
    def fpm_dry_probe(
        self, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
    ) -> dict[str, Any]:
        """02 §2: plan MODEL.json with the release's own cache planning on CPU and write its evidence."""
        return self.dry_probe(model_path, out_dir, tp=tp, caching=caching, configuration=configuration)
