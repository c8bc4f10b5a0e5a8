"""The replay's settings, declared once (06 R-1).

Each :class:`ReplaySetting` is one setting of a replay: the keyword of
:func:`fpmcore.replay.config_from_profile` and the field of
:class:`~fpmcore.replay.model.ReplayConfig` of its name, the ``fpm replay``
option that sets it, and the setting of that name an ``fpm sweep`` grid
varies.  Everything else is derived from :data:`SETTINGS`:

* ``fpm replay``'s options (:func:`fpmcore.replay.command.configure`, in the order
  and the help sections below);
* the sweep's settings, their checks and their JSON Schema
  (:mod:`fpmcore.sweep.settings`, :func:`fpmcore.sweep.grid.grid_json_schema`);
* the keywords of :func:`~fpmcore.replay.config_from_profile` and the
  defaults of :class:`~fpmcore.replay.model.ReplayConfig`;
* the vLLM scheduler settings a runtime release may lack
  (:data:`RELEASE_SETTINGS`, ``ReplayRules.settings``).

Two settings take the profile's value when unset, under the profile's
name for it (:data:`fpmcore.documents.profile.RUNTIME_SETTINGS`): ``max_num_seqs``
(``max_batch_size``) and ``max_num_batched_tokens`` (``max_num_tokens``);
``prefix_caching`` takes the profile's recorded ``enable_prefix_caching``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from fpmcore.cli.options import integer

#: Default limit on the steps of a replay (``--max-steps``): a replay that
#: reaches it stops with a diagnostic.  Steps the engine jumps over (idle
#: periods and decode-only stretches without step records) count too, so
#: that a replay stops at the same step with and without records.
DEFAULT_MAX_STEPS = 1_000_000_000

#: Where ``fpm replay --help`` lists a setting: among the deployment's options
#: (before the trace options), in the vLLM scheduler settings' group, or after them.
Section = Literal["deployment", "scheduler", "limits"]

#: The title of ``fpm replay``'s group of scheduler settings.
SCHEDULER_GROUP = "vLLM scheduler settings (vLLM's engine arguments and defaults)"

_positive = integer(minimum=1)
_non_negative = integer(minimum=0)


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}")
    return v


def _on_off(value: str | None) -> bool | None:
    return None if value is None else value == "on"


@attrs.frozen
class ReplaySetting:
    """One setting of a replay.

    ``name`` is the keyword, the config field and the sweep setting;
    ``option`` (and ``aliases``) the ``fpm replay`` option.  A ``flag`` is
    vLLM's ``--X``/``--no-X`` pair of a boolean; otherwise ``parse`` reads the
    option's text (``None``: the text itself) and ``choices`` are the values
    it takes.  ``default`` is the value when the setting is not given
    (``None`` for a value the profile gives, or for vLLM's "no limit");
    ``to_config`` turns an option's value into the config's (``on``/``off``
    into a boolean).  ``release_name`` is the name of vLLM's
    ``SchedulerConfig`` field when a runtime release may lack the setting
    (``ReplayRules.settings``); ``config_field`` is false for a setting that
    selects rather than configures (the deployment).
    """

    name: str
    option: str
    help: str
    section: Section
    default: Any = None
    parse: Callable[[str], Any] | None = attrs.field(default=None, repr=False)
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    flag: bool = False
    aliases: tuple[str, ...] = ()
    to_config: Callable[[Any], Any] | None = attrs.field(default=None, repr=False)
    release_name: str | None = None
    config_field: bool = True

    @property
    def option_help(self) -> str:
        """The option's help as ``fpm replay --help`` prints it (a flag's names its default)."""
        return f"{self.help} (default {'on' if self.default else 'off'})" if self.flag else self.help

    @property
    def options(self) -> tuple[str, ...]:
        """Every option that sets it to a value (not a flag's ``--no-X``)."""
        return (self.option, *self.aliases)

    def config_value(self, value: Any) -> Any:
        """The config's value of an option's value."""
        return value if self.to_config is None else self.to_config(value)


def _setting(name: str, help: str, section: Section, **kw: Any) -> ReplaySetting:
    return ReplaySetting(name=name, option="--" + name.replace("_", "-"), help=help, section=section, **kw)


def _vllm(name: str, help: str, **kw: Any) -> ReplaySetting:
    """A vLLM scheduler setting of its own name, which a runtime release may lack."""
    return _setting(name, help, "scheduler", release_name=name, **kw)


#: Every setting of a replay, in ``fpm replay``'s order.
SETTINGS: tuple[ReplaySetting, ...] = (
    _setting("deployment", "deployment index in the profile (default 0)", "deployment", default=0, parse=int,
             metavar="I", config_field=False),
    _setting("max_num_seqs", "default: the profile's max_batch_size", "deployment", parse=_positive, metavar="N"),
    _setting("max_num_batched_tokens", "default: the profile's max_num_tokens", "deployment", parse=_positive,
             metavar="N"),
    _setting("prefix_caching", "model vLLM prefix caching (Mamba align mode); default: the profile's "
             "enable_prefix_caching (--caching, as fpm probe and fpm onboard spell it, is the same switch)",
             "deployment", choices=("on", "off"), aliases=("--caching",), to_config=_on_off),
    _vllm("max_num_scheduled_tokens", "tokens one step schedules at most (default: --max-num-batched-tokens)",
          parse=_positive, metavar="N"),
    _vllm("max_num_active_seqs", "requests admitted into running at most (default: --max-num-seqs)",
          parse=_positive, metavar="N"),
    _vllm("long_prefill_token_threshold", "cap a prefill chunk at N tokens while other requests wait or run "
          "(default 0: no cap)", default=0, parse=_non_negative, metavar="N"),
    _vllm("long_prefill_token_threshold_adaptive", "floor that cap at max_num_batched_tokens / (running + waiting "
          "requests)", default=False, flag=True),
    _vllm("prefill_schedule_interval", "admit prefill once every N executed steps (default 1)", default=1,
          parse=_positive, metavar="N"),
    _vllm("scheduling_policy", "fcfs, or priority by the trace field priority (lower first)", default="fcfs",
          choices=("fcfs", "priority")),
    _vllm("max_num_queued_reqs", "reject an arrival when N requests are unfinished (vLLM's API server; default: "
          "no limit)", parse=_non_negative, metavar="N"),
    _vllm("max_num_queued_tokens", "reject an arrival while N prompt tokens are in prefill (default: no limit)",
          parse=_non_negative, metavar="N"),
    _vllm("watermark", "fraction of the pool kept free when admitting requests (default 0)", default=0.0,
          parse=_fraction, metavar="W"),
    ReplaySetting(name="reserve_full_isl", option="--scheduler-reserve-full-isl", section="scheduler",
                  help="admit a request only when its whole input fits (R-20)", default=True, flag=True,
                  release_name="scheduler_reserve_full_isl"),
    _setting("enable_chunked_prefill", "split prefills into chunks of the token budget", "scheduler", default=True,
             flag=True),
    _setting("max_steps", f"stop a replay that reaches N steps (default {DEFAULT_MAX_STEPS:,})", "limits",
             default=DEFAULT_MAX_STEPS, parse=_positive, metavar="N"),
)  # fmt: skip

#: The settings by name.
BY_NAME: Mapping[str, ReplaySetting] = {s.name: s for s in SETTINGS}

#: The value of each config setting when it is not given (``None``: the profile's, or no limit).
DEFAULTS: Mapping[str, Any] = {s.name: s.default for s in SETTINGS if s.config_field}

#: The vLLM scheduler settings a runtime release may lack (``ReplayRules.settings``).
RELEASE_SETTINGS: frozenset[str] = frozenset(s.release_name for s in SETTINGS if s.release_name is not None)


__all__ = [
    "BY_NAME",
    "DEFAULTS",
    "DEFAULT_MAX_STEPS",
    "RELEASE_SETTINGS",
    "SCHEDULER_GROUP",
    "SETTINGS",
    "ReplaySetting",
]
