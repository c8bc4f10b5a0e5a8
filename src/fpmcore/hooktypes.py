"""Value types exchanged through the hooks of :mod:`fpmcore.hookspecs`.

Every type here is an ``attrs`` frozen class: a plugin builds one, the host
checks it (:mod:`fpmcore.hooks`) and never mutates it.  Plugins import them
from :mod:`fpmcore` directly::

    from fpmcore import PluginInfo, SpecClassification, hookimpl
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

#: Version of the hook API.  A plugin whose :class:`PluginInfo` names another
#: ``api_version`` is listed as ``incompatible`` and never called.
API_VERSION = 1

PluginKind = Literal["runtime", "model", "builtin"]
CacheKind = Literal["attention", "state", "unsupported"]


def _nonblank(_inst: object, attribute: attrs.Attribute, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{attribute.name} must be a non-blank string; got {value!r}")


@attrs.frozen
class PluginInfo:
    """What a plugin is and what it serves.

    ``id``
        Short stable identifier (``vllm_033``, ``glm53flash``): the name of the
        entry point, the key of ``FPM_PLUGINS``/``--plugin``.
    ``kind``
        ``"runtime"`` (one exact runtime version), ``"model"`` (one model
        family) or ``"builtin"`` (ships inside fpmcore itself).
    ``targets``
        Runtime plugins: exact pins such as ``"vllm==0.33.0"``; model plugins:
        model ids (``"glm53flash"``, ``"zai-org/GLM-5.3-Flash"``).
    ``api_version``
        The :data:`API_VERSION` the plugin was written against.
    ``summary``
        One line for ``fpm plugins show``.
    """

    id: str = attrs.field(validator=_nonblank)
    kind: PluginKind = attrs.field(validator=attrs.validators.in_(("runtime", "model", "builtin")))
    targets: tuple[str, ...] = attrs.field(converter=tuple)
    api_version: int = attrs.field(validator=attrs.validators.instance_of(int))
    summary: str = ""


@attrs.frozen
class SpecClassification:
    """The answer of ``fpm_classify_spec`` for one vLLM cache spec class.

    ``kind`` is ``"attention"`` or ``"state"`` (02 §5), or ``"unsupported"``
    with ``reason`` saying why.  ``windowed`` is true for the window classes
    (``SlidingWindowSpec``, ``SlidingWindowMLASpec``).  ``uniform`` is true for
    ``UniformTypeKVCacheSpecs``: the group takes the one kind of its inner
    specs, so the caller classifies those instead.
    """

    kind: CacheKind = attrs.field(validator=attrs.validators.in_(("attention", "state", "unsupported")))
    windowed: bool = False
    uniform: bool = False
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.kind == "unsupported") != (self.reason is not None):
            raise ValueError("reason is required exactly when kind is 'unsupported'")


@attrs.frozen
class AlignStopQuery:
    """One evaluation of the Mamba align-stop rule (04 G-2).

    ``start``            tokens already computed plus new prefix-cache hits;
    ``num_new_tokens``   the proposed chunk ``k`` (> 0), already clipped to the
                         token budget left in the step;
    ``prompt_len``       prompt length;
    ``num_tokens``       prompt plus tokens generated so far;
    ``block_size``       the Mamba / attention block ``B``;
    ``hash_block_size``  the prefix-hash block ``H``;
    ``max_num_batched_tokens``  the *configured* token budget (G-5);
    ``checkpoint_alignment``  ``A`` when every Mamba group has a prefill
                         checkpoint block, else ``None`` (G-2 ``ckpt_all``);
    ``junction``         shared-prefix boundary, 0 when none (R-36);
    ``junction_checkpoint``  the opt-in shared-prefix checkpoint (G-6 stop 4).
    """

    start: int
    num_new_tokens: int
    prompt_len: int
    num_tokens: int
    block_size: int
    hash_block_size: int
    max_num_batched_tokens: int
    checkpoint_alignment: int | None
    junction: int = 0
    junction_checkpoint: bool = False


@attrs.frozen
class PlanLimits:
    """The limits a point list is planned for (04 G-9).

    Defaults come from the profile; the CLI flags override them.
    """

    token_budget: int
    max_model_len: int
    block_size: int
    hash_block_size: int


@attrs.frozen
class PointPlan:
    """The result of ``fpm_generate_points`` (04 G-16 … G-25).

    ``points``   the canonical point list (JSON-ready mappings, G-21/G-22);
    ``counts``   points per phase (``{"prefill": 496, "decode": 81}``);
    ``dropped``  candidates dropped per rule, in rule order;
    ``digest``   lowercase hex SHA-256 of the canonical list (G-23);
    ``smoke``    the smoke subset (G-24);
    ``report``   anything else worth printing (capacity needed, …).
    """

    points: tuple[Mapping[str, Any], ...] = attrs.field(converter=tuple)
    counts: Mapping[str, int]
    dropped: Mapping[str, int]
    digest: str
    smoke: tuple[Mapping[str, Any], ...] = attrs.field(converter=tuple)
    report: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ExecutionIdentity:
    """The execution identity of a collection cell (05 §6.2)."""

    model_config_sha256: str
    execution_profile: str
    engram_residency: str
    input_modality: str

    @property
    def configuration_bound(self) -> bool:
        """A cell with an empty ``model_config_sha256`` has no configuration-bound identity."""
        return self.model_config_sha256 != ""


@attrs.frozen
class ProducerContract:
    """A producer contract a model plugin claims (05 §6.3).

    ``name`` such as ``glm53flash_native_graph_policy``; ``execution_mode``
    the artifact label the contract requires; ``residency`` the Engram
    residency it is registered for; ``label`` how diagnostics name the
    contract's model (``glm-5.3-flash``); ``protocol_producer`` the
    ``measurement_protocol.producer.name`` only this contract may carry
    (A-17), or ``None``.
    """

    name: str = attrs.field(validator=_nonblank)
    execution_mode: str = attrs.field(validator=_nonblank)
    residency: str = attrs.field(validator=_nonblank)
    label: str = ""
    protocol_producer: str | None = None


@attrs.frozen
class Diagnostic:
    """One finding: the rule id, the message, and where (path, record, field)."""

    rule: str
    message: str
    where: str = ""

    def render(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@attrs.frozen
class CliCommand:
    """A subcommand a plugin adds to ``fpm``.

    ``configure(parser)`` adds its arguments; ``run(args, ctx)`` does the work
    and returns the exit code (0 ok, 1 negative verdict, 2 bad usage/input).
    ``ctx`` is the :class:`fpmcore.cli.Context` (host, consoles, json flag).
    """

    name: str = attrs.field(validator=_nonblank)
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Any], int]
