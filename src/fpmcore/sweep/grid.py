"""The sweep grid (TOML or JSON) and its expansion into tasks.

A grid names the inputs and the settings to vary::

    {"profiles": ["examples/profiles/glm53flash-tp4.fpm-profile.json"],
     "traces": ["examples/traces/glm-mixed-120.jsonl"],
     "settings": {"max_num_seqs": [8, 16, 32], "max_num_batched_tokens": [4096, 8192]}}

``profiles``
    profile files, or campaign folders (a folder holding ``profile.json`` and
    optionally ``table.json``); required.
``traces``
    trace files of any installed format, read as ``fpm replay --trace`` reads
    them (the format sniffed: fpmcore's JSONL, the oracle's SCHED.json,
    Mooncake, BurstGPT, Azure, a plugin's), or generator objects
    (:mod:`fpmcore.sweep.traces`); required.
``tables``
    FPM latency tables (R-27); ``null`` in the list means no table (1 s per
    step).  Without ``tables``, a campaign folder's ``table.json`` is used
    for its profile, and a profile file runs without a table.  A profile or
    table of a finalized campaign (``final.json`` beside it) is read only
    when the campaign's files are unchanged (F-2 of
    :mod:`fpmcore.campaign.finalize`).
``settings``
    ``fpm replay`` settings (:mod:`fpmcore.sweep.settings`), each a list of
    values (a single value is a list of one): the sweep runs their cross
    product.
``runs``
    instead of ``settings``: the listed setting combinations only, each an
    object of settings.

The tasks are the cross product profiles × traces × tables × settings, in
that order (settings vary fastest, in the order the grid lists them).  A
relative path is looked up next to the grid file first, then in the current
folder.  Everything is read and checked before the first run: unreadable or
invalid inputs, unknown settings, bad values, and settings that the replay
refuses for a profile (R-1, R-3) are one-line diagnostics.

Each task is keyed by the SHA-256 of the canonical JSON of its profile digest
(``profile_sha256``, 01 §9.2), trace digest (SHA-256 of its JSONL form),
table digest (SHA-256 of its canonical rows) and settings: ``--resume`` skips
a task whose key has a row, whatever the files are called.

The size of a sweep is checked from the grid alone, before any file is read
or trace generated: at most :data:`MAX_TASKS` tasks (the product of the
lists' lengths, each generator counted once per rate), and the generated
traces' bounds of :mod:`fpmcore.sweep.traces`.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.sweep import traces as gen
from fpmcore.sweep.settings import Setting, check_settings, config_kwargs, replay_settings

RULE = "sweep"
_KEYS = ("profiles", "traces", "tables", "settings", "runs")
#: Most tasks (replays) of one sweep: profiles × traces × tables × settings.
MAX_TASKS = 100_000


@attrs.frozen
class Input:
    """One parsed input: a profile, a trace or a table, with its label and digest."""

    kind: str
    label: str
    digest: str
    value: Any = attrs.field(repr=False, eq=False)
    #: The file it was read from (``None`` for a generated trace).
    path: Path | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Task:
    """One replay of the sweep: its inputs (by digest), its settings and its key."""

    index: int
    key: str
    profile: str
    trace: str
    table: str | None
    settings: Mapping[str, Any] = attrs.field(eq=False)


@attrs.frozen
class Sweep:
    """An expanded grid: the parsed inputs by digest, the tasks, the swept axes."""

    inputs: Mapping[str, Input] = attrs.field(repr=False)
    tasks: tuple[Task, ...]
    axes: tuple[str, ...]
    settings: Mapping[str, Setting] = attrs.field(repr=False)

    def label(self, digest: str | None) -> str | None:
        return None if digest is None else self.inputs[digest].label


def _err(msg: str, where: str) -> FpmError:
    return FpmError(RULE, msg, where)


def read_grid(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The grid document: TOML for ``*.toml``, strict JSON otherwise."""
    from fpmcore.documents.jsonio import JsonError, loads, read_input

    p = Path(path)
    try:
        data = read_input(p)
    except OSError as exc:
        raise _err(f"cannot read grid: {exc.strerror}", str(p)) from None
    if p.suffix.lower() == ".toml":
        try:
            doc = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise _err(f"grid is not valid TOML: {exc}", str(p)) from None
    else:
        try:
            doc = loads(data, where=str(p))
        except JsonError as exc:
            raise _err(f"grid is not strict JSON: {exc.message}", str(p)) from None
    if not isinstance(doc, dict):
        raise _err("grid must be an object with profiles, traces and settings", str(p))
    return doc


def _resolve(name: str, base: Path, where: str) -> Path:
    p = Path(name)
    if p.is_absolute():
        return p
    for candidate in (base / p, p):
        try:
            if candidate.exists():
                return candidate
        except OSError as exc:  # a name too long for the file system, …: it names no file
            raise _err(f"cannot use the name {name[:80]!r}: {exc.strerror}", where) from None
    raise _err(f"no such file or folder: {name} (looked next to the grid, {base / p}, and in the current "
               f"folder, {Path.cwd() / p})", where)  # fmt: skip


def _digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_profile(path: Path, label: str) -> Input:
    from fpmcore.campaign.finalize import check_inputs
    from fpmcore.documents.profile import load_profile, profile_digest

    check_inputs(path)  # a profile of a finalized campaign: the campaign's digests (F-2)
    profile = load_profile(path)
    return Input("profile", label, profile_digest(profile), profile, path)


def _load_table(path: Path, label: str) -> Input:
    from fpmcore.campaign.finalize import check_inputs
    from fpmcore.documents.jsonio import digest
    from fpmcore.replay import load_table
    from fpmcore.replay.table import table_rows

    check_inputs(path)  # a table of a finalized campaign: the campaign's digests (F-2)
    table = load_table(path)
    return Input("table", label, digest(table_rows(table)), table, path)


def _trace_input(trace: Any, label: str, path: Path | None = None) -> Input:
    return Input("trace", label, _digest_bytes(trace.dumps().encode("utf-8")), trace, path)


def _list(doc: Mapping[str, Any], key: str, where: str, *, required: bool) -> list[Any]:
    if key not in doc:
        if required:
            raise _err(f"grid has no {key}", where)
        return []
    value = doc[key]
    if not isinstance(value, list) or not value:
        raise _err(f"grid {key} must be a non-empty list, found {json.dumps(value)}", where)
    return value


def _setting_lists(doc: Mapping[str, Any], settings: Mapping[str, Setting], where: str) -> list[dict[str, Any]]:
    if "settings" in doc and "runs" in doc:
        raise _err("grid gives both settings and runs; give one", where)
    if "runs" in doc:
        runs = _list(doc, "runs", where, required=True)
        out = []
        for i, run in enumerate(runs):
            if not isinstance(run, dict):
                raise _err(f"grid runs[{i}] must be an object of settings, found {json.dumps(run)}", where)
            out.append(check_settings(run, settings, f"{where}: runs[{i}]"))
        return out
    grid = doc.get("settings", {})
    if not isinstance(grid, dict):
        raise _err(f"grid settings must be an object of lists, found {json.dumps(grid)}", where)
    names, lists = [], []
    for name, values in grid.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise _err(f"setting {name} has an empty list of values", where)
        docs = [check_settings({name: v}, settings, where) for v in values]
        canonical = next(iter(docs[0]))  # a setting spelt as its option is named as the setting
        if canonical in names:
            raise _err(f"settings {name} and {canonical} are one setting; give one of them", where)
        names.append(canonical)
        lists.append([d[canonical] for d in docs])
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list) else 1


def check_size(doc: Mapping[str, Any], where: str) -> None:
    """Refuse a grid of more than :data:`MAX_TASKS` tasks, or generated traces of more than
    :data:`~fpmcore.sweep.traces.MAX_GENERATED_REQUESTS` requests, from the grid's lists alone."""
    traces = doc.get("traces")
    n_traces = generated = 0
    for item in traces if isinstance(traces, list) else []:
        rates = _length(item.get("rate")) if isinstance(item, dict) else 1
        n_traces += rates
        requests = item.get("requests") if isinstance(item, dict) else None
        if isinstance(requests, int) and not isinstance(requests, bool) and requests > 0:
            generated += rates * min(requests, gen.MAX_REQUESTS + 1)
    if generated > gen.MAX_GENERATED_REQUESTS:
        raise _err(
            f"the grid's generated traces hold {generated:,} requests; the limit is "
            f"{gen.MAX_GENERATED_REQUESTS:,} (split the sweep, or give long traces as files)",
            where,
        )
    grid = doc.get("settings")
    if "runs" in doc:
        n_settings = _length(doc["runs"])
    elif isinstance(grid, dict):
        n_settings = math.prod(_length(v) for v in grid.values())
    else:
        n_settings = 1
    sizes = [_length(doc.get("profiles")), n_traces, _length(doc.get("tables")), n_settings]
    tasks = math.prod(max(n, 1) for n in sizes)
    if tasks > MAX_TASKS:
        shown = " x ".join(f"{n:,}" for n in sizes)
        raise _err(
            f"the grid makes {tasks:,} tasks (profiles x traces x tables x settings: {shown}); the limit is "
            f"{MAX_TASKS:,} (split the sweep, or list the combinations to run under runs)",
            where,
        )


def task_key(profile: str, trace: str, table: str | None, settings: Mapping[str, Any]) -> str:
    """The resume key of a task (see the module docstring)."""
    from fpmcore.documents.jsonio import digest

    return digest({"profile": profile, "trace": trace, "table": table, "settings": dict(settings)})


def rules_key(profile: str) -> str:
    """The key, among a sweep's inputs, of the replay rules of the profile whose digest is ``profile``."""
    return f"rules:{profile}"


def deployment_rules(profile: Any, replay_rules: Callable[[str], Any]) -> tuple[Any, ...]:
    """Per deployment of ``profile``: the replay rules of its runtime (``replay_rules(pin)``), or the R-1
    refusal's message when no installed runtime plugin gives them."""
    from fpmcore.replay.config import runtime_pin

    out: list[Any] = []
    for i in range(len(profile.deployments)):
        try:
            out.append(replay_rules(runtime_pin(profile, i)))
        except FpmError as exc:
            if exc.rule != "R-1":
                raise
            out.append(exc.message)
    return tuple(out)


def build_config(
    profile: Any, table: Any, values: Mapping[str, Any], settings: Mapping[str, Setting], rules: Sequence[Any]
) -> Any:
    """The replay configuration of one task, as ``fpm replay`` builds it from the same options.

    ``rules`` are the profile's :func:`deployment_rules`: a deployment whose
    runtime has none is refused (R-1), as ``fpm replay`` refuses it.
    """
    from fpmcore.replay import config_from_profile

    kwargs = config_kwargs(values, settings)
    deployment = kwargs.pop("deployment", 0)
    if not 0 <= deployment < len(profile.deployments):
        raise FpmError("R-1", f"profile has no deployment {deployment}")
    if isinstance(rules[deployment], str):
        raise FpmError("R-1", rules[deployment])
    return config_from_profile(profile, deployment, table=table, rules=rules[deployment], **kwargs)


def expand(
    path: str | os.PathLike[str],
    doc: Mapping[str, Any] | None = None,
    replay_rules: Callable[[str], Any] | None = None,
    trace_formats: Sequence[tuple[str, Any]] | None = None,
) -> Sweep:
    """Read, check and expand a grid file into a :class:`Sweep` (no replay runs).

    ``replay_rules`` gives the replay rules of a runtime pin (by default the
    installed runtime plugins', ``host.hooks.replay_rules``); the rules of
    each profile's deployments are kept among the inputs (:func:`rules_key`).
    ``trace_formats`` are the formats a trace file is read in (by default the
    installed ones, ``host.hooks.trace_formats()``).
    """
    if replay_rules is None or trace_formats is None:
        from fpmcore.host.build import build_host

        host = build_host()
        replay_rules = host.hooks.replay_rules if replay_rules is None else replay_rules
        trace_formats = host.hooks.trace_formats() if trace_formats is None else trace_formats
    where = str(path)
    doc = read_grid(path) if doc is None else doc
    base = Path(path).parent
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        raise _err(f"unknown grid key {unknown[0]!r}; grid keys are: {', '.join(_KEYS)}", where)
    check_size(doc, where)
    settings = replay_settings()
    inputs: dict[str, Input] = {}

    def keep(item: Input) -> str:
        inputs.setdefault(item.digest, item)
        return item.digest

    # profiles, with the table of a campaign folder
    profiles: list[tuple[str, str | None]] = []
    for i, name in enumerate(_list(doc, "profiles", where, required=True)):
        if not isinstance(name, str) or not name:
            raise _err(f"grid profiles[{i}] must be a path, found {json.dumps(name)}", where)
        p = _resolve(name, base, where)
        campaign_table = None
        if p.is_dir():
            if not (p / "profile.json").is_file():
                raise _err(f"campaign folder {name} has no profile.json", where)
            if (p / "table.json").is_file():
                campaign_table = keep(_load_table(p / "table.json", f"{name}/table.json"))
            p = p / "profile.json"
        digest = keep(_load_profile(p, name))
        profiles.append((digest, campaign_table))
        if rules_key(digest) not in inputs:
            keep(Input("rules", name, rules_key(digest), deployment_rules(inputs[digest].value, replay_rules)))
    # traces
    trace_digests: list[str] = []
    for i, item in enumerate(_list(doc, "traces", where, required=True)):
        if isinstance(item, str) and item:
            from fpmcore.traces.reading import read_trace

            trace_path = _resolve(item, base, where)
            file_trace, _provenance = read_trace(trace_formats, trace_path)
            trace_digests.append(keep(_trace_input(file_trace, item, trace_path)))
        elif isinstance(item, dict):
            from fpmcore.replay.trace import parse_trace_lines

            for spec in gen.check_generator(item, f"{where}: traces[{i}]"):
                label = gen.label(spec)
                generated = parse_trace_lines(gen.generate_lines(spec), label)
                trace_digests.append(keep(_trace_input(generated, label)))
        else:
            raise _err(f"grid traces[{i}] must be a path or a generator object, found {json.dumps(item)}", where)
    # tables
    tables: list[str | None] | None = None
    if "tables" in doc:
        tables = []
        for i, name in enumerate(_list(doc, "tables", where, required=True)):
            if name is None:
                tables.append(None)
            elif isinstance(name, str) and name:
                tables.append(keep(_load_table(_resolve(name, base, where), name)))
            else:
                raise _err(f"grid tables[{i}] must be a path or null, found {json.dumps(name)}", where)
    combos = _setting_lists(doc, settings, where)
    # the cross product, each configuration checked once before any run
    tasks: list[Task] = []
    seen: set[str] = set()
    checked: set[str] = set()
    for profile, campaign_table in profiles:
        for trace in trace_digests:
            for table in tables if tables is not None else [campaign_table]:
                for values in combos:
                    key = task_key(profile, trace, table, values)
                    if key in seen:
                        continue
                    seen.add(key)
                    conf = task_key(profile, "", table, values)
                    if conf not in checked:
                        checked.add(conf)
                        try:
                            build_config(inputs[profile].value, None if table is None else inputs[table].value,
                                         values, settings, inputs[rules_key(profile)].value)  # fmt: skip
                        except FpmError as exc:
                            shown = json.dumps(values, sort_keys=True)
                            raise _err(
                                f"profile {inputs[profile].label} with settings {shown}: {exc.message} [{exc.rule}]",
                                where,
                            ) from None
                    tasks.append(Task(len(tasks), key, profile, trace, table, values))
    axes = _axes(tasks, [n for n in settings if any(n in t.settings for t in tasks)])
    return Sweep(inputs=inputs, tasks=tuple(tasks), axes=axes, settings=settings)


def _axes(tasks: Sequence[Task], setting_names: Sequence[str]) -> tuple[str, ...]:
    """The axes that take more than one value: ``profile``, ``trace``, ``table`` and setting names."""
    out = []
    for axis in ("profile", "trace", "table"):
        if len({getattr(t, axis) for t in tasks}) > 1:
            out.append(axis)
    for name in setting_names:
        if len({json.dumps(t.settings.get(name)) for t in tasks}) > 1:
            out.append(name)
    return tuple(out)


def _accepts(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    return True


def setting_json_schema(setting: Setting) -> dict[str, Any]:
    """The JSON Schema of one value of a setting, read from its ``fpm replay`` option.

    A flag takes a boolean, a choice option one of its choices; a value
    option a number of the type its parser returns (an integer when it
    refuses ``0.5``), with the smallest of -1, 0 and 1 it accepts as the
    minimum (none when it accepts -1).  The option's help is the description.
    """
    out: dict[str, Any]
    if setting.kind == "flag":
        out = {"type": "boolean"}
    elif setting.choices is not None:
        out = {"enum": list(setting.choices)}
    elif setting.parse is None:
        out = {"type": ["number", "string"]}
    else:
        integer = not _accepts(setting.parse, "0.5")
        out = {"type": "integer" if integer else "number"}
        low = next((v for v in (-1, 0, 1) if _accepts(setting.parse, str(v))), None)
        if low is not None and low > -1:
            out["minimum"] = low
    if setting.help:
        out["description"] = setting.help.replace("%%", "%")
    return out


def grid_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a sweep grid, from the reader's declarations.

    The grid keys, the settings (every ``fpm replay`` option that is a setting,
    :func:`~fpmcore.sweep.settings.replay_settings`, with the values its
    parser accepts) and the generator objects
    (:func:`~fpmcore.sweep.traces.generator_json_schema`).  A TOML grid has the
    same shape.  Paths, the profiles' and tables' contents and what a setting
    means for a profile are checked when the grid is read.
    """
    from fpmcore.documents.schema import schema_document

    settings = replay_settings()
    values = {name: setting_json_schema(s) for name, s in settings.items()}
    path = {"type": "string", "minLength": 1}
    props: dict[str, Any] = {
        "profiles": {"type": "array", "minItems": 1, "items": path,
                     "description": "profile files, or campaign folders (profile.json and optionally table.json)"},
        "traces": {"type": "array", "minItems": 1, "items": {"anyOf": [path, gen.generator_json_schema()]},
                   "description": "trace files of any installed format (sniffed) or generator objects"},
        "tables": {"type": "array", "minItems": 1, "items": {"anyOf": [path, {"type": "null"}]},
                   "description": "FPM latency tables (R-27); null: no table"},
        "settings": {"type": "object", "additionalProperties": False, "description": "each a value or a "
                     "non-empty list of values; the sweep runs their cross product",
                     "properties": {n: {"anyOf": [{"$ref": f"#/$defs/{n}"},
                                                  {"type": "array", "items": {"$ref": f"#/$defs/{n}"}, "minItems": 1}]}
                                    for n in values}},
        "runs": {"type": "array", "minItems": 1, "description": "instead of settings: the listed combinations",
                 "items": {"type": "object", "additionalProperties": False,
                           "properties": {n: {"$ref": f"#/$defs/{n}"} for n in values}}},
    }  # fmt: skip
    assert tuple(props) == _KEYS
    body = {
        "type": "object",
        "properties": props,
        "required": ["profiles", "traces"],
        "additionalProperties": False,
        "not": {"required": ["settings", "runs"]},
        "$defs": values,
    }
    return schema_document("sweep-grid", "fpm sweep grid",
                           "Profiles × traces × tables × settings: the replays of one sweep.", body)  # fmt: skip


__all__ = [
    "Input",
    "Sweep",
    "Task",
    "build_config",
    "deployment_rules",
    "expand",
    "grid_json_schema",
    "read_grid",
    "rules_key",
    "task_key",
]
