"""``fpm probe``: observe a runtime's KV cache for a model and write the evidence folder (02 §2).

Two ways, one host side:

``fpm probe --dry-run MODEL.json -o DIR``
    predicts a runtime's cache layout on CPU: the runtime plugin plans a
    layer-spec description with the runtime's own cache planning
    (``fpm_dry_probe``) and writes layout-level evidence (no tensors; ``fpm
    import`` takes it as such, ``fpmcore.importer``, I-113).
``fpm probe --live MODEL_DIR -o DIR``
    starts the installed runtime's engine on a model folder in this process,
    observes it once its KV cache is allocated and writes tensor-level
    evidence for both phases, then shuts the engine down
    (``fpm_live_probe``).  The plugin defines the phases; a progress line
    shows while the engine starts.

The host finds the installed runtime from package metadata without importing
it (:func:`fpmcore.probe.live.runtime_distribution`: the distribution that provides the import
package ``vllm``, whatever its name, and its version), selects the runtime
plugin that targets that exact pin (``host.hooks.runtime(pin)``) and asks
it.  The host names no runtime version and never imports the runtime.
Exit codes: 0 written; 2 bad usage, a missing runtime, an input the runtime
refuses (a bad MODEL.json, a folder that is no model, settings the engine
does not start with); 130 interrupted (no evidence folder is left).
"""

from __future__ import annotations

import argparse
from typing import Any

from fpmcore.cli.context import print_table
from fpmcore.host.hooktypes import CliCommand, CommandContext
from fpmcore.probe.live import (
    EXIT_INTERRUPTED,
    find_runtime,
    install_hint,
    live_options,
    probe_live,
    refusal_line,
)

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="--dry-run: a MODEL.json layer-spec description of one rank (examples/probes/README.md); "
        "--live: a model folder (config.json, weights, tokenizer)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        required=True,
        help="evidence folder to write: new or empty, in an existing folder; written whole or not at all",
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--dry-run", action="store_true", help="plan on CPU with the installed runtime; allocate nothing")
    how.add_argument(
        "--live",
        action="store_true",
        help="start the installed runtime's engine on the model folder, observe its allocated cache, shut it down",
    )
    parser.add_argument(
        "--caching",
        "--prefix-caching",
        dest="caching",
        choices=("on", "off"),
        default="on",
        help="prefix caching of both phases (default on; --prefix-caching, as fpm replay spells it, is the same)",
    )
    parser.add_argument(
        "--configuration",
        metavar="LABEL",
        help="configuration label (default: MODEL.json's 'configuration' or its file name; "
        "--live: the model folder's name)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    dry = parser.add_argument_group("--dry-run")
    dry.add_argument(
        "--tp", type=int, default=1, metavar="N", help="tensor-parallel size: one worker record per rank (default 1)"
    )
    live = parser.add_argument_group("--live")
    live.add_argument("--max-model-len", type=int, metavar="N", help="context length (default: the model's)")
    live.add_argument(
        "--dtype", metavar="DTYPE", help="model dtype, e.g. float32 or bfloat16 (default: the runtime's choice)"
    )
    live.add_argument(
        "--kv-cache-space",
        type=float,
        metavar="GIB",
        help="memory of the KV cache in GiB, fractions allowed (default: the runtime plugin's, 1 GiB for vLLM's CPU engine)",
    )
    live.add_argument(
        "--num-gpu-blocks",
        type=int,
        metavar="N",
        help="force the KV block pool to N blocks (memory pressure for a replay check)",
    )
    live.add_argument("--max-num-seqs", type=int, metavar="N", help="the scheduler's running-request limit")
    live.add_argument("--max-num-batched-tokens", type=int, metavar="N", help="the scheduler's token budget per step")
    live.add_argument(
        "--compile",
        action="store_true",
        help="start with graph compilation (slow: minutes); by default the engine runs eagerly",
    )


#: The options only ``--live`` reads, by their attribute name.
LIVE_ONLY = ("max_model_len", "dtype", "kv_cache_space", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens")


def _say(ctx: CommandContext, message: str) -> None:
    ctx.message(f"fpm: {message}")


def _runtime(ctx: CommandContext, mode: str) -> tuple[str, Any] | int:
    """:func:`find_runtime`, or the exit code after saying why there is none."""
    from fpmcore.documents.errors import FpmError

    try:
        return find_runtime(ctx, mode)
    except FpmError as exc:
        _say(ctx, refusal_line(exc))
        return EXIT_USAGE


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """``fpm probe``: 0 written, 2 bad usage, a missing runtime or refused input, 130 interrupted."""
    if not (args.dry_run or args.live):
        _say(ctx, "say how: --dry-run plans a MODEL.json on CPU; --live starts the runtime's engine on a model folder")
        return EXIT_USAGE
    if args.live:
        return run_live(args, ctx)
    given = [f"--{name.replace('_', '-')}" for name in LIVE_ONLY if getattr(args, name) is not None]
    if given or args.compile:
        _say(ctx, f"{', '.join(given + (['--compile'] if args.compile else []))}: only with --live")
        return EXIT_USAGE
    return run_dry(args, ctx)


def run_dry(args: argparse.Namespace, ctx: CommandContext) -> int:
    """``fpm probe --dry-run``: the runtime plugin plans MODEL.json (``fpm_dry_probe``)."""
    if args.tp < 1:
        _say(ctx, f"--tp must be at least 1; got {args.tp}")
        return EXIT_USAGE
    from fpmcore.documents.errors import FpmError, PluginError
    from fpmcore.documents.jsonio import load_path
    from fpmcore.documents.output_files import check_output_folder
    from fpmcore.probe.dry_run import NEVER_OVERWRITES

    # the inputs and the output first, before the runtime is looked for (exit 2, one line naming the file)
    load_path(args.model)  # missing, unreadable or not strict JSON
    check_output_folder(args.output, inputs=[args.model], refusal=NEVER_OVERWRITES)
    found = _runtime(ctx, "--dry-run")
    if isinstance(found, int):
        return found
    pin, runtime = found
    try:
        summary = runtime.dry_probe(
            model_path=args.model, out_dir=args.output, tp=args.tp,
            caching=args.caching == "on", configuration=args.configuration,
        )  # fmt: skip
    except PluginError as exc:
        cause = exc.__cause__
        if isinstance(
            cause, FpmError
        ):  # an output refused or not written (fpmcore.documents.output_files), a bad MODEL.json
            raise cause from None
        if isinstance(cause, ImportError):
            _say(ctx, f"the {pin} runtime cannot be imported: {cause}. " + install_hint([pin]))
            return EXIT_USAGE
        if isinstance(cause, (OSError, ValueError, KeyError, TypeError, RuntimeError, AssertionError)):
            # the runtime refused the description (a bad layer spec, an impossible layout)
            _say(ctx, f"{args.model}: {type(cause).__name__}: {cause}")
            return EXIT_USAGE
        raise
    if ctx.json:
        ctx.emit_json({"command": "probe", "runtime": pin, "plugin": runtime.plugin, "output": args.output, **summary})
    else:
        _print_summary(ctx, pin, runtime.plugin, args.output, summary)
    return EXIT_OK


def _live_options(args: argparse.Namespace) -> Any:
    """The :class:`~fpmcore.host.stage_hooktypes.LiveProbeOptions` of the command line, or a usage message."""
    options = live_options(
        caching=args.caching == "on", max_model_len=args.max_model_len, dtype=args.dtype,
        kv_cache_space=args.kv_cache_space, num_blocks=args.num_gpu_blocks, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, compile=args.compile, configuration=args.configuration,
    )  # fmt: skip
    if not isinstance(options, str) and args.tp != 1:
        return "--tp: only with --dry-run (a live probe runs one engine)"
    return options


def run_live(args: argparse.Namespace, ctx: CommandContext) -> int:
    """``fpm probe --live``: the runtime plugin starts its engine on the folder and writes the evidence
    (:func:`probe_live`, ``fpm_live_probe``).

    Ctrl-C raises :class:`~fpmcore.documents.errors.Interrupted` while the plugin works,
    so that its engine is shut down and the command ends with its message and
    exit code 130.
    """
    from fpmcore.documents.errors import FpmError, Interrupted
    from fpmcore.documents.output_files import OutputError

    options = _live_options(args)
    if isinstance(options, str):
        _say(ctx, options)
        return EXIT_USAGE
    try:
        pin, plugin, summary = probe_live(ctx, args.model, args.output, options)
    except OutputError:  # refused as every -o is, by the command line
        raise
    except Interrupted:
        _say(ctx, "interrupted; the engine was shut down and no evidence was written")
        return EXIT_INTERRUPTED
    except FpmError as exc:  # no runtime, another plugin's, a limit of its engine, or the runtime refused
        _say(ctx, refusal_line(exc))
        return EXIT_USAGE
    if ctx.json:
        ctx.emit_json({"command": "probe", "mode": "live", "runtime": pin, "plugin": plugin,
                       "output": args.output, **summary})  # fmt: skip
    else:
        _print_live_summary(ctx, pin, plugin, args.output, summary)
    return EXIT_OK


def _print_live_summary(ctx: CommandContext, pin: str, plugin: str, output: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    ctx.out.print(f"{pin} live probe by {plugin}: {summary['configuration']} attempt {summary['attempt_id']} -> {output}",
                  markup=False)  # fmt: skip
    for phase, s in summary["phases"].items():
        table = Table(title=f"{phase}: layout {s.get('kv_cache_layout')}, {s.get('coordinator')}")
        for col in ("group", "class", "layers", "block", "page"):
            table.add_column(col, justify="left" if col == "class" else "right")
        for gid, g in enumerate(s["groups"]):
            table.add_row(
                str(gid), str(g["class"]), str(len(g["layers"])), str(g["block_size"]), str(g["page_size_bytes"])
            )
        print_table(ctx.out, table)
        cc = s.get("cache_config", {})
        ctx.out.print(
            f"{s['num_blocks']} blocks ({s['free_blocks']} free), scheduler block {s['block_size']}, hash block "
            f"{s['hash_block_size']}, kv_cache_max_concurrency {cc.get('kv_cache_max_concurrency')!r}, "
            f"kv_cache_size_tokens {cc.get('kv_cache_size_tokens')}, storages "
            f"{', '.join(str(st['size_bytes']) for st in s.get('storages', []))} B",
            markup=False, highlight=False,
        )  # fmt: skip
    ctx.out.print(f"`fpm import {output}` turns the folder into a profile (tensor-level evidence)", markup=False)


def _print_summary(ctx: CommandContext, pin: str, plugin: str, output: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    ctx.out.print(
        f"{pin} dry probe by {plugin}: {summary['configuration']} attempt {summary['attempt_id']} -> {output}",
        markup=False,
    )
    for phase, s in summary["phases"].items():
        table = Table(
            title=f"{phase}: layout {s['kv_cache_layout']}, prefix caching {s['enable_prefix_caching']}, mamba {s['mamba_cache_mode']}"
        )
        for col in ("group", "class", "layers", "block", "group page", "startup blocks"):
            table.add_column(col, justify="right" if col not in ("class",) else "left")
        for g in s["groups"]:
            table.add_row(
                str(g["group_id"]),
                g["spec_class"] if g["spec_class"] == g["layer_class"] else f"{g['spec_class']}[{g['layer_class']}]",
                str(g["num_layers"]),
                str(g["block_size"]), str(g["group_page_bytes"]), str(g["startup_blocks_per_request"]),
            )  # fmt: skip
        print_table(ctx.out, table)
        ctx.out.print(
            f"pool page {s['pool_page_bytes']} B, {s['num_blocks']} blocks ({s['free_blocks']} free), "
            f"scheduler block {s['scheduler_block_size']}, hash block {s['hash_block_size']}, "
            f"kv_cache_max_concurrency {s['kv_cache_max_concurrency']!r}, kv_cache_size_tokens {s['kv_cache_size_tokens']}",
            markup=False,
        )
    ctx.out.print(
        "tensors were not allocated: the worker records list them in unresolved_fields; "
        f"`fpm import {output}` takes the folder as layout-level evidence",
        markup=False,
    )


def probe_command() -> CliCommand:
    """The ``probe`` subcommand (registered by the lead through ``fpm_cli_commands``)."""
    return CliCommand(
        name="probe",
        help="observe a runtime's KV cache (a dry run of its planning, or a live engine) and write observation records",
        configure=_configure,
        run=run,
    )
