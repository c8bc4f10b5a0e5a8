"""``fpm probe --dry-run``: predict a runtime's cache layout for a model, on CPU.

The host side only: it finds the installed runtime (its distribution version,
read from package metadata without importing it), selects the runtime plugin
that targets that exact pin (``host.hooks.runtime(pin)``)
and asks that plugin (``fpm_dry_probe``) to plan MODEL.json and write the
evidence folder (02 §2: ``observations.json``, one launch manifest per phase,
one record per rank and phase).  The host names no runtime version and never
imports the runtime.

A live probe runs inside the runtime: the runtime plugin's observer
(``fpm_observe_cache_groups``) writes the records there.  ``fpm import``
takes a dry probe's folder as layout-level evidence (``fpmcore.importer``,
I-113): it imports ``complete`` with ``"evidence": "layout"`` in its result
and provenance.

The plugin does the planning through the ``fpm_dry_probe`` hook.
"""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from fpmcore.hooktypes import CliCommand

#: The runtime framework whose installed version selects the plugin.
FRAMEWORK = "vllm"

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def installed_runtime(framework: str = FRAMEWORK) -> str | None:
    """The installed runtime version, from package metadata (the runtime is not imported)."""
    try:
        return metadata.version(framework)
    except metadata.PackageNotFoundError:
        return None


def _runtime_targets(host: Any) -> list[str]:
    try:
        return sorted(t for r in host.active("runtime") for t in r.targets)
    except Exception:  # a host without records
        return []


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.json", help="layer-spec description of one rank (examples/probes/README.md)")
    parser.add_argument("-o", "--output", metavar="DIR", required=True,
                        help="evidence folder to write: new or empty, in an existing folder; published at once")
    parser.add_argument("--dry-run", action="store_true", help="plan on CPU with the installed runtime; allocate nothing")
    parser.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel size: one worker record per rank (default 1)")
    parser.add_argument("--caching", choices=("on", "off"), default="on", help="prefix caching of both phases (default on)")
    parser.add_argument("--configuration", metavar="LABEL", help="configuration label (default: MODEL.json's 'configuration' or its file name)")
    parser.add_argument("--json", action="store_true", help="print the planning summary as JSON")


def _install_hint(targets: list[str]) -> str:
    pins = ", ".join(targets) if targets else "none (install a runtime plugin such as fpmcore-vllm033)"
    return (
        f"fpm probe --dry-run needs the real {FRAMEWORK} runtime installed next to its runtime plugin; "
        f"installed runtime plugins target: {pins}. Install the runtime a plugin targets with pip "
        f"(on a CPU-only machine: pip install -r tools/real-vllm-requirements.txt, then "
        f"pip install --no-deps '<pin>' with the pin above)"
    )


def run(args: argparse.Namespace, ctx: Any) -> int:
    """Run the dry probe; 0 on success, 2 for bad usage, a missing runtime or a bad MODEL.json."""
    if not args.dry_run:
        ctx.err.print(
            "fpm probe: only --dry-run runs here; a live probe runs inside the runtime, "
            "where the runtime plugin's observer writes the records",
            markup=False,
        )
        return EXIT_USAGE
    if args.tp < 1:
        ctx.err.print(f"fpm probe: --tp must be at least 1; got {args.tp}", markup=False)
        return EXIT_USAGE
    from fpmcore.dryprobe import NEVER_OVERWRITES
    from fpmcore.errors import FpmError, PluginError
    from fpmcore.jsonio import load_path
    from fpmcore.outputs import check_output_folder

    # the inputs and the output first, before the runtime is looked for (exit 2, one line naming the file)
    load_path(args.model)  # missing, unreadable or not strict JSON
    check_output_folder(args.output, inputs=[args.model], refusal=NEVER_OVERWRITES)
    version = installed_runtime()
    if version is None:
        ctx.err.print(f"fpm probe: {FRAMEWORK} is not installed. " + _install_hint(_runtime_targets(ctx.host)),
                      markup=False, soft_wrap=True)
        return EXIT_USAGE
    pin = f"{FRAMEWORK}=={version}"
    try:
        runtime = ctx.host.hooks.runtime(pin)  # the one plugin that targets the installed pin
    except FpmError as exc:
        ctx.err.print(f"fpm probe: {exc.message} [{exc.rule}]", markup=False)
        return EXIT_USAGE
    try:
        summary = runtime.dry_probe(
            model_path=args.model, out_dir=args.output, tp=args.tp,
            caching=args.caching == "on", configuration=args.configuration,
        )  # fmt: skip
    except PluginError as exc:
        cause = exc.__cause__
        if isinstance(cause, FpmError):  # an output refused or not written (fpmcore.outputs), a bad MODEL.json
            raise cause from None
        if isinstance(cause, ImportError):
            ctx.err.print(f"fpm probe: the {pin} runtime cannot be imported: {cause}. " + _install_hint([pin]), markup=False)
            return EXIT_USAGE
        if isinstance(cause, (OSError, ValueError, KeyError, TypeError, RuntimeError, AssertionError)):
            # the runtime refused the description (a bad layer spec, an impossible layout)
            ctx.err.print(f"fpm probe: {args.model}: {type(cause).__name__}: {cause}", markup=False)
            return EXIT_USAGE
        raise
    if ctx.json:
        ctx.emit_json({"command": "probe", "runtime": pin, "plugin": runtime.plugin, "output": args.output, **summary})
    else:
        _print_summary(ctx, pin, runtime.plugin, args.output, summary)
    return EXIT_OK


def _print_summary(ctx: Any, pin: str, plugin: str, output: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    ctx.out.print(f"{pin} dry probe by {plugin}: {summary['configuration']} attempt {summary['attempt_id']} -> {output}", markup=False)
    for phase, s in summary["phases"].items():
        table = Table(title=f"{phase}: layout {s['kv_cache_layout']}, prefix caching {s['enable_prefix_caching']}, mamba {s['mamba_cache_mode']}")
        for col in ("group", "class", "layers", "block", "group page", "startup blocks"):
            table.add_column(col, justify="right" if col not in ("class",) else "left")
        for g in s["groups"]:
            table.add_row(
                str(g["group_id"]),
                g["spec_class"] if g["spec_class"] == g["layer_class"] else f"{g['spec_class']}[{g['layer_class']}]",
                str(g["num_layers"]),
                str(g["block_size"]), str(g["group_page_bytes"]), str(g["startup_blocks_per_request"]),
            )  # fmt: skip
        ctx.out.print(table)
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
        help="dry-run a runtime's cache planning for a MODEL.json on CPU and write observation records",
        configure=_configure,
        run=run,
    )
