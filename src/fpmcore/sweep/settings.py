"""The settings a sweep may vary: every option of ``fpm replay``, read from its parser.

:func:`replay_settings` builds ``fpm replay``'s argument parser
(:func:`fpmcore.replay.cli.configure`) and keeps each option that changes
what is replayed, so an option added to ``fpm replay`` is a sweep setting
without a change here.  Left out are the replay's inputs, which are axes of
the grid (``PROFILE``, ``--trace``, ``--fpm-table``, ``--campaign``), its output options and the
options of how the trace file is read
(:data:`NOT_SETTINGS`).

A setting is named by the option's ``dest`` (``--max-num-seqs`` is
``max_num_seqs``) and takes the JSON or TOML value the option's parser
accepts: an integer for ``type=int``-like options (checked by the option's own
type function, so ``8.0``, ``"8"`` and ``true`` are refused), one of the
choices for a choice option, ``true``/``false`` for a flag.

:func:`config_kwargs` maps a task's settings to the keyword arguments of
:func:`fpmcore.replay.config_from_profile` the way ``fpm replay`` does: an
option whose ``dest`` is a parameter passes its value (``"on"``/``"off"``
become booleans), a flag ``--no-X`` passes ``X=False``, ``deployment`` is the
deployment index.  A replay option with no counterpart (:func:`unmapped`; the
suite expects none) is refused when a grid names it, before any run.
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Mapping
from typing import Any

import attrs

from fpmcore.errors import FpmError
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


def replay_parser() -> argparse.ArgumentParser:
    """``fpm replay``'s parser, as the CLI configures it."""
    from fpmcore.replay.cli import configure

    parser = argparse.ArgumentParser(prog="fpm replay", add_help=False)
    configure(parser)
    return parser


def replay_settings() -> dict[str, Setting]:
    """Every settable option of ``fpm replay`` by name, in the parser's order."""
    out: dict[str, Setting] = {}
    for action in replay_parser()._actions:
        if action.dest in NOT_SETTINGS or not action.option_strings or action.dest in out:
            continue  # an input or output, or the --no-X of an on/off pair: the setting is its --X
        option = max(action.option_strings, key=len)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            kind, parse = "flag", None
        elif action.choices is not None:
            kind, parse = "choice", None
        else:
            kind, parse = "value", action.type
        out[action.dest] = Setting(
            name=action.dest, option=option, kind=kind, default=action.default, help=action.help or "",
            choices=tuple(action.choices) if action.choices is not None else None, parse=parse,
        )  # fmt: skip
    return out


def setting_aliases() -> dict[str, str]:
    """A setting spelt as its option (``scheduler_reserve_full_isl`` for ``--scheduler-reserve-full-isl``, whose
    setting is ``reserve_full_isl``) → the setting's name; an option that turns a setting off (``--no-…``) is no
    alias, its value would mean the opposite."""
    out: dict[str, str] = {}
    for action in replay_parser()._actions:
        if action.dest in NOT_SETTINGS or isinstance(action, argparse._StoreFalseAction):
            continue
        for option in action.option_strings:
            alias = option.lstrip("-").replace("-", "_")
            if option.startswith("--") and alias != action.dest:
                out[alias] = action.dest
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
        if unmapped({name: setting}):
            raise FpmError(RULE, f"setting {name} ({setting.option}) has no parameter of config_from_profile; "
                                 "the sweep cannot apply it", where)  # fmt: skip
        out[name] = setting.check(value, where)
    return out


def _parameters() -> set[str]:
    from fpmcore.replay import config_from_profile

    return set(inspect.signature(config_from_profile).parameters)


def unmapped(settings: Mapping[str, Setting]) -> list[str]:
    """Settings with no parameter of ``config_from_profile`` to go to (the suite expects none)."""
    params = _parameters()
    return [s.name for s in settings.values() if s.name not in params]


def config_kwargs(values: Mapping[str, Any], settings: Mapping[str, Setting]) -> dict[str, Any]:
    """``config_from_profile`` keyword arguments for checked ``values`` (unset options keep their defaults)."""
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        s = settings[name]
        if s.choices is not None and set(s.choices) == {"on", "off"}:
            value = value == "on"
        kwargs[name] = value
    return kwargs


__all__ = [
    "NOT_SETTINGS",
    "Setting",
    "check_settings",
    "config_kwargs",
    "replay_settings",
    "setting_aliases",
    "unmapped",
]
