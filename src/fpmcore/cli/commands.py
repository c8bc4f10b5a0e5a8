"""fpmcore's own subcommands, registered as a built-in plugin through ``fpm_cli_commands``,
and the producer contract of ``fpm collect`` (``fpmcore_engine_steps``, :mod:`fpmcore.collect.contract`).

The plugin host ``fpm`` runs (:func:`fpmcore.host.build.build_host`) registers this
module first; plugin loading itself imports no command.

``fpm plugins``, ``fpm profile check``, ``fpm schema``, and the pipelines'
commands (``import``, ``probe``, ``plan``, ``validate``, ``replay``, ``verify``, …), each
defined beside its pipeline.  Heavy modules are imported only when a command
runs, so that ``fpm --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from fpmcore.cli.context import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE
from fpmcore.cli.tables import Table
from fpmcore.documents.errors import FpmError
from fpmcore.hookspecs import hookimpl
from fpmcore.host.hooktypes import API_VERSION, CliCommand, CommandContext, PluginInfo, ProducerContract

#: The pipeline commands, ``(name, help, module, factory)``: each is defined beside its pipeline
#: (``module.factory()`` gives its :class:`~fpmcore.host.hooktypes.CliCommand`).  Its name and help are
#: repeated here so that ``fpm --help`` lists it without importing its pipeline, which is imported
#: only when the command is configured or run (``tests/test_command_line.py`` checks that the two agree).
PIPELINE_COMMANDS: tuple[tuple[str, str, str, str], ...] = (
    ("probe", "observe a runtime's KV cache (a dry run of its planning, or a live engine) and write observation "
              "records", "fpmcore.probe.command", "probe_command"),
    ("import", "import runtime observation records into an FPM profile", "fpmcore.importer.command", "import_command"),
    ("plan", "generate the benchmark points of a model from an accepted profile", "fpmcore.plan.command", "plan_command"),
    ("validate", "validate the measurement artifacts of a collected run against its plan",
                 "fpmcore.validate.command", "validate_command"),
    ("replay", "replay a request trace: grouped KV pool, vLLM-like scheduler, FPM latency",
               "fpmcore.replay.command", "replay_command"),
    ("sweep", "replay a grid of profiles, traces, tables and settings, locally or on Ray",
              "fpmcore.sweep.command", "sweep_command"),
    ("collect", "measure a plan's points on the engine of the runtime plugin the plan names",
                "fpmcore.collect.command", "collect_command"),
    ("assess", "re-measure a sample of a run's points on a fresh engine: is it repeatable?",
               "fpmcore.collect.command", "assess_command"),
    ("publish", "publish a validated run as the FPM latency table fpm replay reads",
                "fpmcore.publish.command", "publish_command"),
    ("onboard", "probe, import, plan, collect, validate and publish a model in one go",
                "fpmcore.campaign.command", "onboard_command"),
    ("finalize", "accept a finished campaign and pin its artifacts in final.json",
                 "fpmcore.campaign.command", "finalize_command"),
    ("verify", "serve a trace on the campaign's engine and compare it with the replay's predictions "
               "(TTFT, TPOT, E2E, makespan, steps)", "fpmcore.verify.command", "verify_command"),
    ("trace", "a trace of any installed format: its statistics, or converted to fpmcore's JSONL",
              "fpmcore.traces.command", "trace_command"),
    ("explain", "explain a rule id: what it means, what it protects, an example and the fix",
                "fpmcore.cli.explain", "explain_command"),
)  # fmt: skip


def pipeline_command(module: str, factory: str) -> CliCommand:
    """The :class:`~fpmcore.host.hooktypes.CliCommand` that ``module.factory()`` defines (imports the pipeline)."""
    command: CliCommand = getattr(importlib.import_module(module), factory)()
    return command


def deferred_command(name: str, help: str, module: str, factory: str) -> CliCommand:  # noqa: A002  # CliCommand's field
    """The command ``module.factory()`` defines, named and described without importing ``module``:
    its pipeline is imported when the command is configured (the one subcommand the command line
    names) or run."""

    def configure(parser: argparse.ArgumentParser) -> None:
        pipeline_command(module, factory).configure(parser)

    def run(args: argparse.Namespace, ctx: CommandContext) -> int:
        return pipeline_command(module, factory).run(args, ctx)

    return CliCommand(name, help, configure, run)


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(
        id="fpmcore", kind="builtin", targets=(), api_version=API_VERSION,
        summary="fpmcore's own commands: plugins, profile, schema and the pipelines",
    )  # fmt: skip


# ---------------------------------------------------------------------------
# the producer contract of fpm collect (fpmcore.collect.contract)
# ---------------------------------------------------------------------------


@hookimpl
def fpm_producer_contracts() -> list[ProducerContract]:
    from fpmcore.collect.identity import CONTRACT

    return [CONTRACT]


@hookimpl
def fpm_validate_artifact(
    contract: ProducerContract, cell: Any, files: Any, plan: Any, attempt: str, owners: Any, producer: Any
) -> list[Any] | None:
    from fpmcore.collect.contract import validate

    return validate(contract, cell, files, plan, attempt=attempt, owners=owners, producer=producer)


@hookimpl
def fpm_trace_formats() -> list[Any]:
    """fpmcore's own trace formats: its JSONL, SCHED.json and the public production traces."""
    from fpmcore.traces.reading import BUILTIN

    return list(BUILTIN)


# ---------------------------------------------------------------------------
# fpm plugins
# ---------------------------------------------------------------------------

_STATUS_STYLE = {"ok": "green", "disabled": "dim", "incompatible": "yellow", "failed": "red"}


def _configure_plugins(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="include fpmcore's built-in plugins")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="everything known about one plugin")
    show.add_argument("plugin_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print JSON on stdout")


def _run_plugins(args: argparse.Namespace, ctx: CommandContext) -> int:
    if args.action == "show":
        rec = ctx.host.record(args.plugin_id)
        formats = [f for plugin, f in ctx.host.hooks.trace_formats() if plugin == rec.id] if rec.status == "ok" else []
        if ctx.json:
            listed = [{"name": f.name, "summary": f.summary} for f in formats]
            ctx.emit_json({"plugin": {**rec.to_json(), "summary": rec.summary, "module": rec.module,
                                      "trace_formats": listed}})  # fmt: skip
            return EXIT_OK
        fields = (
            ("id", rec.id), ("distribution", rec.distribution), ("version", rec.version),
            ("kind", rec.kind), ("targets", ", ".join(rec.targets)), ("hooks", ", ".join(rec.hooks)),
            ("status", rec.status), ("error", rec.error), ("summary", rec.summary), ("module", rec.module),
            ("trace formats", ", ".join(f.name for f in formats) or None),
        )  # fmt: skip
        if not ctx.out.is_terminal:  # piped: one ``key  value`` line each, no cell padding after the value
            for key, value in fields:
                ctx.out.print(f"{key:<15}{'' if value is None else value}".rstrip(), markup=False, highlight=False,
                              soft_wrap=True)  # fmt: skip
            return EXIT_OK
        table = Table(show_header=False, box=False)
        for key, value in fields:
            table.add_row((key, "bold"), "" if value is None else str(value))
        ctx.print_table(table)
        return EXIT_OK

    records = [r for r in ctx.host.records if args.all or r.kind != "builtin"]
    if ctx.json:
        ctx.emit_json({"plugins": [r.to_json() for r in records]})
        return EXIT_OK
    table = Table(title="fpmcore plugins")
    for col in ("ID", "distribution", "version", "kind", "targets", "hooks", "status"):
        table.add_column(col)
    for r in records:
        status = (r.status + (f"\n{r.error}" if r.error else ""), _STATUS_STYLE[r.status])
        hooks = ", ".join(h.removeprefix("fpm_") for h in r.hooks if h != "fpm_plugin_info")
        table.add_row(r.id, r.distribution or "-", r.version or "-", r.kind or "-",
                      ", ".join(r.targets) or "-", hooks or "-", status)  # fmt: skip
    ctx.print_table(table)
    if not records:
        ctx.err.print("no plugins installed (pip install fpmcore-vllm033, …)")
    return EXIT_OK


# ---------------------------------------------------------------------------
# fpm profile check
# ---------------------------------------------------------------------------


def _configure_profile(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate a profile file (every P- rule)")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--json", action="store_true", help="print JSON on stdout")


def _profile_summary(profile: Any) -> dict[str, Any]:
    from fpmcore.documents.profile import profile_digest

    return {
        "model": profile.model,
        "model_revision": profile.model_revision,
        "deployments": len(profile.deployments),
        "cache_groups": sum(len(d.resources.cache_groups) for d in profile.deployments),
        "profile_sha256": profile_digest(profile),
    }


def _run_profile(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.documents.jsonio import JsonError, read_input
    from fpmcore.documents.profile import parse_profile

    path = args.file
    try:
        data = read_input(path)
    except OSError as exc:
        raise JsonError(f"cannot read: {exc.strerror}", path) from None
    try:
        profile = parse_profile(data)
    except JsonError as exc:
        exc.where = path
        raise
    except FpmError as exc:
        if ctx.json:
            ctx.emit_json({"file": path, "status": "invalid", "diagnostics": [_diag(exc)]})
        else:
            from rich.markup import escape

            ctx.out.print(f"[red]invalid[/] {escape(f'{path}: {exc}')} [dim]\\[{exc.rule}][/]", highlight=False)
        return EXIT_NEGATIVE
    summary = _profile_summary(profile)
    if ctx.json:
        ctx.emit_json({"file": path, "status": "valid", "diagnostics": [], "summary": summary})
        return EXIT_OK
    _print_profile(ctx, path, profile, summary)
    return EXIT_OK


def _diag(exc: FpmError) -> dict[str, str]:
    return {"rule": exc.rule, "message": exc.message, "where": exc.where}


def _print_profile(ctx: CommandContext, path: str, profile: Any, summary: dict[str, Any]) -> None:
    from rich.markup import escape  # values from the profile are never read as markup

    ctx.out.print(
        f"[green]valid[/] {escape(f'{path}: {profile.model} @ {profile.model_revision[:12]}')}, "
        f"{summary['deployments']} deployment(s), profile_sha256 {summary['profile_sha256']}",
        highlight=False,
    )
    for i, dep in enumerate(profile.deployments):
        res = dep.resources
        title = (
            f"deployments[{i}]: {dep.system} {dep.backend} {dep.backend_version} tp={dep.tp} dp={dep.dp} "
            f"moe_tp={dep.moe_tp} moe_ep={dep.moe_ep}, {res.cache_layout} cache, "
            f"max_num_tokens {res.max_num_tokens}, max_batch_size {res.max_batch_size}"
        )
        rm = res.runtime_memory
        if rm is not None:
            title += f", kv_cache_bytes {rm.kv_cache_bytes:,}"
        table = Table(title=title, title_justify="left")
        for col in ("group", "kind", "layers", "block", "page bytes", "window", "blocks/req", "checkpoint"):
            table.add_column(col, justify="right" if col not in ("group", "kind") else "left")
        for g in res.cache_groups:
            ckpt = "-"
            if g.prefill_checkpoint_blocks is not None:
                ckpt = f"{g.prefill_checkpoint_blocks}"
                if g.prefill_checkpoint_alignment is not None:
                    ckpt += f" @ {g.prefill_checkpoint_alignment}"
            table.add_row(
                g.name, g.kind, str(g.num_layers), f"{g.block_size_tokens:,}", f"{g.page_size_bytes:,}",
                _retention(g),
                "-" if g.blocks_per_request is None else str(g.blocks_per_request), ckpt,
            )  # fmt: skip
        if res.cache_groups:
            ctx.print_table(table)


def _retention(g: Any) -> str:
    """The window column of a cache group: its sliding window, or its attention chunk (``chunk 8,192``)."""
    if g.attention_chunk_size is not None:
        return f"chunk {g.attention_chunk_size:,}"
    return "-" if g.sliding_window is None else f"{g.sliding_window:,}"


# ---------------------------------------------------------------------------
# fpm schema
# ---------------------------------------------------------------------------


def _configure_schema(p: argparse.ArgumentParser) -> None:
    from fpmcore.documents.schema import SCHEMAS

    p.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        choices=[e.name for e in SCHEMAS],
        help="the document whose JSON Schema to print; without NAME, the list of schemas",
    )
    p.add_argument("--json", action="store_true",
                   help="print JSON on stdout: the schema itself, or without NAME the list of schemas")  # fmt: skip


def _run_schema(args: argparse.Namespace, ctx: CommandContext) -> int:
    """``fpm schema NAME``: the JSON Schema (draft 2020-12) on stdout, as it is (with or without ``--json``)."""
    import json
    import sys

    from fpmcore.documents.schema import SCHEMAS, schema_named

    if args.name is None:
        listing = [{"name": e.name, "title": e.title, "summary": e.summary} for e in SCHEMAS]
        if ctx.json:
            ctx.emit_json({"schemas": listing})
            return EXIT_OK
        table = Table(title="fpm schema NAME prints", title_justify="left")
        table.add_column("NAME")
        table.add_column("document")
        for e in SCHEMAS:
            table.add_row(e.name, f"{e.title}: {e.summary}")
        ctx.print_table(table)
        return EXIT_OK
    entry = schema_named(args.name)
    assert entry is not None  # argparse's choices
    sys.stdout.write(json.dumps(entry.build(), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return EXIT_OK


# ---------------------------------------------------------------------------


@hookimpl
def fpm_cli_commands() -> list[CliCommand]:
    commands = [
        CliCommand("plugins", "list the installed plugins and their status", _configure_plugins, _run_plugins),
        CliCommand("profile", "check an FPM profile file", _configure_profile, _run_profile),
        CliCommand(
            "schema",
            "print the JSON Schema of a profile, a record, a plan, an artifact file, a trace, "
            "a latency table or a sweep grid",
            _configure_schema,
            _run_schema,
        ),  # fmt: skip
    ]
    return commands + [deferred_command(*entry) for entry in PIPELINE_COMMANDS]


__all__ = ["EXIT_NEGATIVE", "EXIT_OK", "EXIT_USAGE", "fpm_cli_commands", "fpm_plugin_info"]
