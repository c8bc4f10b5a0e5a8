"""The ``fpm import`` subcommand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fpmcore.cli.context import print_table
from fpmcore.host.hooktypes import CliCommand, CommandContext

if TYPE_CHECKING:  # the pipeline is imported when the command runs, so that `fpm --help` stays fast
    from fpmcore.importer.pipeline import ImportRun

EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2
#: run-level rules that mean "unreadable evidence or bad usage" (exit 2)
USAGE_RULES = ("I-1", "I-2")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="DIR", help="evidence folder holding observations.json")
    p.add_argument(
        "-o",
        "--output",
        metavar="PROFILE",
        help="write the profile here when complete (a folder when several configurations are selected)",
    )
    p.add_argument("--launch", metavar="LAUNCH.json", help="the reviewed launch the evidence must equal (I-4)")
    p.add_argument("--configuration", metavar="LABEL", help="import only this configuration of the index")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def _json_result(run: ImportRun) -> dict[str, Any]:
    single = run.results[0] if len(run.results) == 1 else None
    return {
        "schema": 1,
        "status": "complete" if run.complete else "incomplete",
        "diagnostics": [{"rule": d.rule, "message": d.message, "where": d.where} for d in run.diagnostics],
        "profile": single.draft if single is not None and single.complete else None,
        "evidence": single.evidence if single is not None else None,
        "notes": [
            {"rule": n.rule, "message": n.message, "configuration": r.configuration}
            for r in run.results
            for n in r.notes
        ],
        "results": [r.to_json() for r in run.results],
    }


def _print_human(run: ImportRun, ctx: CommandContext) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = ctx.out
    for r in run.results:  # values from the evidence are never read as markup
        out.print(f"[bold]{escape(r.configuration)}[/bold]: {r.status}")
        if r.evidence == "layout":
            out.print(
                "evidence: layout-level (a dry run: the cache was planned, no tensors were allocated)",
                markup=False,
                highlight=False,
            )
        elif r.evidence == "tensor":
            out.print(
                "evidence: tensor-level (a live engine: every stage ran on its allocated tensors)",
                markup=False,
                highlight=False,
            )
        if not r.complete or r.draft is None:
            continue
        dep = r.draft["deployments"][0]
        res = dep["resources"]
        t = Table(title=escape(f"cache groups ({dep['system']}, vLLM {dep['backend_version']}, tp={dep['tp']})"))
        for col in ("group", "kind", "layers", "block tokens", "page bytes", "window", "blocks/request", "checkpoint"):
            t.add_column(col, justify="right" if col not in ("group", "kind") else "left")
        for g in res["cache_groups"]:
            ckpt = "-"
            if "prefill_checkpoint_blocks" in g:
                ckpt = str(g["prefill_checkpoint_blocks"])
                if "prefill_checkpoint_alignment" in g:
                    ckpt += f" / {g['prefill_checkpoint_alignment']}"
            t.add_row(
                escape(g["name"]),
                g["kind"],
                str(g["num_layers"]),
                str(g["block_size_tokens"]),
                str(g["page_size_bytes"]),
                (
                    f"chunk {g['attention_chunk_size']}"
                    if g.get("attention_chunk_size") is not None
                    else "-"
                    if g["sliding_window"] is None
                    else str(g["sliding_window"])
                ),
                str(g.get("blocks_per_request", "-")),
                ckpt,
            )
        print_table(out, t)
        mem = res["runtime_memory"]
        m = Table(title="runtime memory")
        m.add_column("field")
        m.add_column("value", justify="right")
        for key in (
            "kv_cache_bytes",
            "gpu_memory_utilization",
            "max_model_len",
            "enable_prefix_caching",
            "mamba_cache_mode",
            "hash_block_size_tokens",
        ):
            if key in mem:
                m.add_row(key, str(mem[key]).lower() if isinstance(mem[key], bool) else str(mem[key]))
        for s in r.provenance.get("startup", []):
            m.add_row(
                f"{s['phase']} dp{s['dp']} concurrency",
                f"{s['kv_cache_max_concurrency']!r} = {s['num_blocks']} / {s['blocks_per_request']}",
            )
            m.add_row(f"{s['phase']} dp{s['dp']} kv_cache_size_tokens", str(s["kv_cache_size_tokens"]))
        print_table(out, m)
    for r in run.results:  # what the runtime's rules accepted, one line each
        for note in r.notes:
            out.print(f"{r.configuration}: {note.render()}", soft_wrap=True, markup=False, highlight=False)
    for diag in run.diagnostics:  # 02 §1: one line each, never wrapped
        out.print(diag.render(), soft_wrap=True, markup=False, highlight=False)


def _outputs(folder: Path, args: argparse.Namespace) -> tuple[str, Path] | None:
    """Check ``-o`` before the import runs (:mod:`fpmcore.documents.output_files`): ``("file" | "folder", path)``.

    One selected configuration writes one profile file; several write a folder
    of ``<label>.fpm-profile.json`` files, published together, which replaces
    an earlier such folder of ``fpm import``.  Every file the evidence names is
    an input that the output may not overwrite, and a label that cannot name a
    file is refused (O-6).
    """
    if not args.output:
        return None
    from fpmcore.documents.output_files import check_output_folder, check_output_parent, check_output_path, safe_name
    from fpmcore.importer.evidence_files import index_outline

    outline = index_outline(folder)
    if outline is None and args.configuration is None:
        # the index cannot be read: the import refuses it (I-1) and writes nothing
        return "file", check_output_parent(args.output)
    labels, inputs = outline if outline is not None else ([], [folder / "observations.json"])
    if args.configuration is not None:
        labels = [args.configuration]
    inputs = [*inputs, args.launch]
    if len(labels) == 1:
        return "file", check_output_path(args.output, inputs=inputs)
    for label in labels:
        safe_name(label, "configuration label")
    return "folder", check_output_folder(args.output, inputs=[folder, *inputs], replace=True)


def _write(run_: ImportRun, output: tuple[str, Path]) -> None:
    """Write the complete profiles: one file, or one folder published at once."""
    from fpmcore.documents.output_files import publish_folder, safe_name, write_file
    from fpmcore.documents.profile import dumps_profile

    kind, path = output
    complete = [r for r in run_.results if r.complete and r.profile is not None]
    if kind == "file":
        if complete and len(run_.results) == 1:
            write_file(path, dumps_profile(complete[0].profile))
        return
    files = {
        f"{safe_name(r.configuration, 'configuration label')}.fpm-profile.json": dumps_profile(r.profile)
        for r in complete
    }
    if files:
        publish_folder(path, files, replace=True, command="import")


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """``fpm import``: 0 complete, 1 incomplete, 2 unreadable evidence, an output refused, or bad usage."""
    from fpmcore.documents.output_files import OutputError

    folder = Path(args.folder)
    if not folder.is_dir():
        _usage(ctx, f"evidence folder not found: {folder}")
        return EXIT_USAGE
    try:
        output = _outputs(folder, args)
    except OutputError as exc:
        _usage(ctx, exc.message, exc.rule, exc.where)
        return EXIT_USAGE
    from fpmcore.importer.pipeline import HostServices, import_evidence

    run_ = import_evidence(folder, HostServices(ctx.host), launch=args.launch, configuration=args.configuration)
    code = run_.exit_code
    if any(d.rule in USAGE_RULES for d in run_.run_diagnostics):
        code = EXIT_USAGE
    if output is not None and run_.results:
        try:
            _write(run_, output)
        except OutputError as exc:
            _usage(ctx, exc.message, exc.rule, exc.where)
            return EXIT_USAGE
    if getattr(args, "json", False) or getattr(ctx, "json", False):
        from fpmcore.documents.jsonio import dumps_output

        doc = _json_result(run_)
        if code == EXIT_USAGE:  # unreadable evidence: the error document of every command (issue 13 §5)
            doc["status"] = "error"
        sys.stdout.write(dumps_output(doc).decode("utf-8"))
        sys.stdout.flush()
    else:
        _print_human(run_, ctx)
    return code


def _usage(ctx: CommandContext, message: str, rule: str = "usage", where: str = "") -> None:
    if getattr(ctx, "json", False):
        from fpmcore.documents.jsonio import dumps_output

        doc = {
            "schema": 1,
            "status": "error",
            "profile": None,
            "diagnostics": [{"rule": rule, "message": message, "where": where}],
        }
        sys.stdout.write(dumps_output(doc).decode("utf-8"))
        sys.stdout.flush()
    suffix = "" if rule == "usage" else f" [{rule}]"
    place = f"{where}: " if where else ""
    ctx.message(f"fpm: {place}{message}{suffix}")


def import_command() -> CliCommand:
    """The ``import`` subcommand, for the built-in command plugin to register."""
    return CliCommand(
        name="import",
        help="import runtime observation records into an FPM profile",
        configure=configure,
        run=run,
    )
