"""``fpm onboard`` and ``fpm finalize``: their arguments, and the runs of the campaign's stages
(:func:`fpmcore.campaign.onboard.onboard`) and of its acceptance (:func:`fpmcore.campaign.finalize.finalize`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fpmcore.campaign import layout
from fpmcore.campaign.finalize import Refused, finalize
from fpmcore.campaign.layout import TABLE
from fpmcore.campaign.onboard import Blocked, OnboardOptions, ProbeOptions, onboard
from fpmcore.host.hooktypes import CliCommand, CommandContext


def _on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off")
    return text == "on"


def configure_onboard(p: argparse.ArgumentParser) -> None:
    from fpmcore.collect.protocol_options import add_protocol_options, at_least

    p.add_argument("model_dir", metavar="MODEL_DIR", help="the model folder (config.json, weights, tokenizer)")
    p.add_argument("-o", "--output", required=True, metavar="CAMPAIGN", help="the campaign folder (new or empty)")
    p.add_argument("--smoke", action="store_true", help="plan, collect and publish the smoke subset only")
    p.add_argument("--resume", action="store_true", help="continue at the first unfinished stage")
    p.add_argument("--dtype", metavar="DTYPE", help="model dtype of the live engine (probe and collection)")
    p.add_argument("--kv-cache-space", type=float, metavar="GIB", help="KV cache memory of the live engine, GiB")
    p.add_argument("--max-model-len", type=at_least(1), metavar="N", help="max_model_len of the live engine")
    p.add_argument("--caching", "--prefix-caching", dest="caching", type=_on_off, default=True, metavar="on|off",
                   help="prefix caching (default on; --prefix-caching is the same switch)")  # fmt: skip
    p.add_argument("--max-num-seqs", type=at_least(1), metavar="N", help="the live engine's running-request limit")
    p.add_argument(
        "--max-num-batched-tokens", type=at_least(1), metavar="N", help="the live engine's token budget per step"
    )
    add_protocol_options(p)
    p.add_argument(
        "--accept-unrepeatable",
        action="store_true",
        help="publish a full run the assessment finds not repeatable (recorded in the table)",
    )
    p.add_argument("--spacing", type=float, metavar="SECONDS", help="pause before every repetition (default 0)")
    p.add_argument("--probe", default="live", metavar="NAME", help="the probe stage (default: live)")
    p.add_argument("--json", action="store_true", help="print the manifest on stdout")


def _run_onboard(args: argparse.Namespace, ctx: CommandContext) -> int:
    options = OnboardOptions(
        model_dir=args.model_dir,
        probe=ProbeOptions(dtype=args.dtype, kv_cache_space=args.kv_cache_space, max_model_len=args.max_model_len,
                           caching=args.caching, max_num_seqs=args.max_num_seqs,
                           max_num_batched_tokens=args.max_num_batched_tokens),
        smoke=args.smoke, repetitions=args.repetitions, warmups=args.warmup, probe_stage=args.probe,
        spacing=args.spacing, passes=args.passes, max_contended=args.max_contended, retake_pause=args.retake_pause,
        accept_unrepeatable=args.accept_unrepeatable, prefill_idle=args.prefill_idle,
    )  # fmt: skip

    def report(stage: str, status: str) -> None:
        ctx.message(f"onboard: {stage} {status}")

    try:
        c = onboard(ctx, Path(args.output), options, resume=args.resume, report=report)
    except Blocked as exc:  # a negative verdict of a stage: the campaign stops here (exit 1)
        if ctx.json:
            ctx.emit_json({"command": "onboard", "campaign": args.output, "status": "blocked",
                           "rule": exc.rule, "message": exc.message})  # fmt: skip
        ctx.message(f"fpm: {exc.message} [{exc.rule}]")
        return 1
    if ctx.json:
        ctx.emit_json({"command": "onboard", "campaign": args.output, "manifest": c.manifest})
    else:
        ctx.out.print(f"onboarded {args.model_dir}: table {c.path(TABLE)}", markup=False, highlight=False)
    return 0


def onboard_command() -> CliCommand:
    return CliCommand(name="onboard", help="probe, import, plan, collect, validate and publish a model in one go",
                      configure=configure_onboard, run=_run_onboard)  # fmt: skip


def configure_finalize(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", metavar="CAMPAIGN", help="the campaign folder (fpm onboard -o)")
    p.add_argument("--json", action="store_true", help="print a JSON document on stdout")


def _run_finalize(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.cli.context import EXIT_NEGATIVE, EXIT_OK
    from fpmcore.documents.jsonio import one_line

    try:
        outcome = finalize(args.campaign)
    except Refused as exc:
        if ctx.json:
            ctx.emit_json({"command": "finalize", "campaign": args.campaign, "status": "refused",
                           "diagnostics": [{"rule": exc.rule, "message": exc.message, "where": exc.where}]})  # fmt: skip
        ctx.message(one_line(f"fpm: {exc} [{exc.rule}]"))
        return EXIT_NEGATIVE
    status = "finalized" if outcome.written else "unchanged"
    if ctx.json:
        ctx.emit_json({"command": "finalize", "campaign": args.campaign, "status": status, "final": outcome.final})
    else:
        final = Path(args.campaign) / layout.FINAL
        what = "finalized" if outcome.written else "already finalized, unchanged"
        ctx.out.print(f"{what}: {final} pins {len(outcome.final['artifacts'])} artifacts", markup=False,
                      highlight=False, soft_wrap=True)  # fmt: skip
    return EXIT_OK


def finalize_command() -> CliCommand:
    return CliCommand(name="finalize", help="accept a finished campaign and pin its artifacts in final.json",
                      configure=configure_finalize, run=_run_finalize)  # fmt: skip
