"""The measurement protocol's command-line options, which ``fpm collect`` and ``fpm onboard`` both take.

The two commands are of two stages (:mod:`fpmcore.collect.command`,
:mod:`fpmcore.campaign.command`); neither imports the other's command module,
both add these options from here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least(low: int) -> Callable[[str], int]:  # an argparse type
    """An integer option of at least ``low``, through the command line's one integer type (:mod:`fpmcore.cli.options`)."""
    from fpmcore.cli.options import integer

    return integer(minimum=low)


def add_protocol_options(p: argparse.ArgumentParser) -> None:
    """The measurement protocol's options, shared by ``fpm collect`` and ``fpm onboard``."""
    p.add_argument(
        "--repetitions",
        type=at_least(3),
        metavar="N",
        help="clean measured samples per point over all passes (default 6; the retained value is the trimmed mean "
        "of all but the first)",
    )
    p.add_argument(
        "--passes",
        type=at_least(1),
        metavar="P",
        help="passes over the whole plan that share a point's samples, so that no burst of load moves all of them "
        "(default 3)",
    )
    p.add_argument("--warmup", type=at_least(0), metavar="N", help="warm-up repetitions per point and pass (default 1)")
    p.add_argument(
        "--max-contended",
        type=at_least(0),
        metavar="N",
        help="contended samples a point may retake in one pass before it fails (default 20)",
    )
    p.add_argument(
        "--retake-pause",
        type=float,
        metavar="SECONDS",
        help="first pause before retaking a contended sample, doubled per contended sample in a row up to 16 s (default 0.5)",
    )
    p.add_argument(
        "--prefill-idle",
        type=float,
        metavar="SECONDS",
        help="the engine idles this long before every prefill repetition, as before a served prefill-only step "
        "(default 0.1)",
    )
