"""The settings a sweep may vary: the replay's settings, declared once in :mod:`fpmcore.replay.settings`.

:func:`replay_settings` turns each :class:`~fpmcore.replay.settings.ReplaySetting`
into a :class:`Setting` of the grid, so a setting declared there is an
``fpm replay`` option, a ``config_from_profile`` keyword and a sweep setting
without a change here.  The replay's inputs are axes of the grid (``PROFILE``,
``--trace``, ``--fpm-table``, ``--campaign``); its output options and the
options of how the trace file is read are no settings (:data:`NOT_SETTINGS`).

A setting is named by its name (``--max-num-seqs`` is ``max_num_seqs``) and
takes the JSON or TOML value its option's parser accepts: an integer for an
integer option (checked by the option's own type function, so ``8.0``,
``"8"`` and ``true`` are refused), one of the choices for a choice option,
``true``/``false`` for a flag.

:func:`config_kwargs` maps a task's settings to the keyword arguments of
:func:`fpmcore.replay.config_from_profile` the way ``fpm replay`` does
(``"on"``/``"off"`` become booleans; ``deployment`` is the deployment index).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.traces.options import TRACE_OPTIONS

#: ``fpm replay`` options that are no setting: the grid's axes, the outputs, and how a trace file is read
#: (:data:`fpmcore.traces.options.TRACE_OPTIONS`: a grid's traces are files; ``fpm trace convert`` writes a
#: window, a filter or a time scale of a trace as one).
NOT_SETTINGS = (
    frozenset({"help", "profile", "trace", "fpm_table", "campaign", "steps", "out", "out_format", "plot", "json"})
    | TRACE_OPTIONS
)

RULE = "sweep"


@attrs.frozen
class Setting:
    """One settable ``fpm replay`` option.

    ``kind`` is ``"flag"`` (``store_true``/``store_false``), ``"choice"`` or
    ``"value"`` (parsed by ``parse``, the option's ``type``).
    """

    name: str
    option: str
    kind: str
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    parse: Any = attrs.field(default=None, repr=False, eq=False)

    def check(self, value: Any, where: str) -> Any:
        """The value as ``fpm replay`` would see it, or a one-line refusal."""
        shown = json.dumps(value)
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise FpmError(RULE, f"setting {self.name} ({self.option}) takes true or false, found {shown}", where)
            return value
        if self.choices is not None:
            if isinstance(value, bool) or value not in self.choices:
                allowed = ", ".join(json.dumps(c) for c in self.choices)
                raise FpmError(
                    RULE, f"setting {self.name} ({self.option}) must be one of {allowed}, found {shown}", where
                )
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise FpmError(RULE, f"setting {self.name} ({self.option}): bad value {shown}", where)
        if self.parse is None:
            return value
        try:
            parsed = self.parse(value if isinstance(value, str) else json.dumps(value))
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise FpmError(RULE, f"setting {self.name} ({self.option}): {exc}, found {shown}", where) from None
        if isinstance(value, str) and not isinstance(parsed, str):
            raise FpmError(RULE, f"setting {self.name} ({self.option}) takes a number, found {shown}", where)
        return parsed


def replay_settings() -> dict[str, Setting]:
    """Every setting of a replay by name, in ``fpm replay``'s order (:data:`fpmcore.replay.settings.SETTINGS`)."""
    from fpmcore.replay.settings import SETTINGS

    out: dict[str, Setting] = {}
    for s in SETTINGS:
        kind = "flag" if s.flag else "choice" if s.choices is not None else "value"
        out[s.name] = Setting(name=s.name, option=s.option, kind=kind, default=s.default, help=s.option_help,
                              choices=s.choices, parse=s.parse)  # fmt: skip
    return out


def setting_aliases() -> dict[str, str]:
    """A setting spelt as its option (``scheduler_reserve_full_isl`` for ``--scheduler-reserve-full-isl``, whose
    setting is ``reserve_full_isl``) → the setting's name; an option that turns a setting off (``--no-…``) is no
    alias, its value would mean the opposite."""
    from fpmcore.replay.settings import SETTINGS

    out: dict[str, str] = {}
    for s in SETTINGS:
        for option in s.options:
            alias = option.lstrip("-").replace("-", "_")
            if alias != s.name:
                out[alias] = s.name
    return out


def check_settings(values: Mapping[str, Any], settings: Mapping[str, Setting], where: str) -> dict[str, Any]:
    """``values`` checked against ``settings``: an unknown name or a bad value is refused.  A setting may be
    spelt as its option (:func:`setting_aliases`); it is checked and returned under its name."""
    aliases = setting_aliases()
    out: dict[str, Any] = {}
    for given, value in values.items():
        name = aliases.get(given, given) if given not in settings else given
        if name != given and name in values:
            raise FpmError(RULE, f"settings {given} and {name} are one setting ({settings[name].option}); give "
                                 "one of them", where)  # fmt: skip
        setting = settings.get(name)
        if setting is None:
            known = ", ".join(settings)
            raise FpmError(RULE, f"unknown setting {name!r}; fpm replay's settings are: {known}", where)
        out[name] = setting.check(value, where)
    return out


def config_kwargs(values: Mapping[str, Any], settings: Mapping[str, Setting]) -> dict[str, Any]:
    """``config_from_profile`` keyword arguments for checked ``values`` (unset options keep their defaults)."""
    from fpmcore.replay.settings import BY_NAME

    return {name: BY_NAME[name].config_value(value) for name, value in values.items()}


__all__ = [
    "NOT_SETTINGS",
    "Setting",
    "check_settings",
    "config_kwargs",
    "replay_settings",
    "setting_aliases",
]
