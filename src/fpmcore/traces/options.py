"""The command line's trace options, one definition for ``fpm replay`` and ``fpm trace``.

``--trace-filter KEY=VALUE`` (not ``--filter``): every option that changes how a trace is read
starts with ``--trace-`` (``--trace-format``, ``--trace-filter``), so none can be mistaken for a
setting of the replay (its scheduler options, its record filters) and ``fpm replay --help``
groups them; the keys are the format's (``model``, ``log-type`` of BurstGPT).
"""

from __future__ import annotations

import argparse
from typing import Any

from fpmcore.cli.options import integer, number
from fpmcore.traces.format import DEFAULT_HASH_BLOCK_TOKENS
from fpmcore.traces.transforms import OVER_LONG, Transforms

#: The ``dest`` of every trace option: how the trace file is read, not a setting of the replay (``fpm sweep``
#: names its traces as files; a transformed trace is one ``fpm trace convert`` writes).
TRACE_OPTIONS = frozenset({"trace_format", "hash_block_tokens", "trace_filter", "start", "limit", "max_prompt_len",
                           "over_long", "time_scale", "rate"})  # fmt: skip


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE (model=GPT-4); got {text[:40]!r}")
    return key.strip(), value.strip()


def add_trace_options(p: argparse.ArgumentParser, *, transforms: bool = True) -> None:
    """``--trace-format``, ``--hash-block-tokens``, ``--trace-filter`` and (``transforms``) the transforms."""
    g = p.add_argument_group("trace format and transforms (docs: Replaying a trace)")
    g.add_argument("--trace-format", metavar="NAME",
                   help="the trace's format (fpm plugins show fpmcore lists the host's; default: the one whose "
                        "sniff claims the file's first bytes)")  # fmt: skip
    g.add_argument("--hash-block-tokens", type=integer(minimum=1), default=DEFAULT_HASH_BLOCK_TOKENS, metavar="N",
                   help="tokens per content-block id of a trace with hash_ids (mooncake; default 512)")  # fmt: skip
    g.add_argument("--trace-filter", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="keep the rows whose KEY equals VALUE (burstgpt: model=GPT-4, log-type='API log'); "
                        "repeatable")  # fmt: skip
    if not transforms:
        return
    g.add_argument("--start", type=integer(minimum=0), default=0, metavar="N",
                   help="skip the trace's first N requests (its arrivals then start at 0)")  # fmt: skip
    g.add_argument("--limit", type=integer(minimum=1), metavar="N", help="keep N requests (from --start)")
    g.add_argument("--max-prompt-len", type=integer(minimum=1), metavar="L",
                   help="prompts longer than L are dropped or clipped (--over-long), and counted")  # fmt: skip
    g.add_argument("--over-long", choices=OVER_LONG, default="drop",
                   help="what --max-prompt-len does to a longer prompt (default drop)")  # fmt: skip
    timing = g.add_mutually_exclusive_group()
    timing.add_argument("--time-scale", type=number(minimum=1e-9), metavar="X",
                        help="multiply arrival times by X (2: half the load)")  # fmt: skip
    timing.add_argument("--rate", type=number(minimum=1e-9), metavar="R",
                        help="scale arrival times to a mean rate of R requests per second")  # fmt: skip


def transforms_of(args: argparse.Namespace) -> Transforms:
    return Transforms(time_scale=args.time_scale, rate=args.rate, start=args.start, limit=args.limit,
                      max_prompt_len=args.max_prompt_len, over_long=args.over_long)  # fmt: skip


def read_options(args: argparse.Namespace, *, transforms: bool = True) -> dict[str, Any]:
    """The keyword arguments of :func:`~fpmcore.traces.reading.read_trace` of the options."""
    out: dict[str, Any] = {
        "name": args.trace_format,
        "hash_block_tokens": args.hash_block_tokens,
        "filters": tuple(args.trace_filter),
    }
    if transforms:
        out["transforms"] = transforms_of(args)
    return out


__all__ = ["TRACE_OPTIONS", "add_trace_options", "read_options", "transforms_of"]
