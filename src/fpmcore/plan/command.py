"""``fpm plan``: its arguments, and the run that generates a plan (:func:`fpmcore.plan.planning.generate`), writes it and says
what it holds."""

from __future__ import annotations

import argparse

from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import CliCommand, CommandContext
from fpmcore.plan.planning import (
    check_model_named,
    empty_plan_reason,
    generate,
    json_output,
    plan_document,
    render_summary,
    resolve_limits,
    write_plan,
)

EXIT_OK, EXIT_NEGATIVE = 0, 1


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", metavar="PROFILE", help="the accepted FPM profile (*.fpm-profile.json)")
    p.add_argument("--model", help="model plugin id or model id (default: the profile's model)")
    p.add_argument(
        "--deployment", type=int, default=0, metavar="N", help="deployment whose limits are the defaults (default 0)"
    )
    p.add_argument(
        "--token-budget", type=int, metavar="N", help="token budget of one step (default: the profile's max_num_tokens)"
    )
    p.add_argument(
        "--max-model-len", type=int, metavar="N", help="max_model_len (default: the profile's runtime memory)"
    )
    p.add_argument("--smoke", action="store_true", help="show the smoke subset; the plan stages it")
    p.add_argument(
        "-o",
        "--output",
        metavar="PLAN",
        help="write the plan file (its folder must exist; never a special file or the profile)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also print the model plugin's log lines on stderr")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def _run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.documents.output_files import check_output_path
    from fpmcore.documents.profile import load_profile

    output = check_output_path(args.output, inputs=[args.profile]) if args.output else None  # before any work
    profile = load_profile(args.profile)
    model = args.model or profile.model
    if args.model is not None and args.model != profile.model:
        check_model_named(ctx.host, args.model)
    overrides = {"token_budget": args.token_budget, "max_model_len": args.max_model_len}
    limits = resolve_limits(profile, args.deployment, **overrides)
    try:
        plan = generate(ctx.host, model, profile, args.deployment, limits)
    except FpmError as exc:
        if not exc.where.startswith(args.profile):
            exc.where = f"{args.profile}: {exc.where}" if exc.where else args.profile
        raise
    empty = sum(plan.counts.values()) == 0
    document = None
    if output is not None and not empty:
        document = plan_document(
            model=model, profile=profile, deployment=args.deployment, limits=limits, plan=plan, smoke=args.smoke
        )
        write_plan(output, document)
    if ctx.json:
        ctx.emit_json(json_output(plan))
    else:
        render_summary(
            ctx.out,
            model=model,
            profile=profile,
            deployment=args.deployment,
            limits=limits,
            plan=plan,
            smoke=args.smoke,
            path=args.output if document is not None else None,
            plan_sha256=None if document is None else document["plan_sha256"],
        )
    if getattr(args, "verbose", False):
        for line in plan.report.get("log") or ():
            ctx.message(str(line))
    if empty:
        reason = empty_plan_reason(ctx.host, model, profile, args.deployment, limits, plan, overrides)
        ctx.err.print(
            f"fpm: {args.profile}: no benchmark points: {reason} [G-9]",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_NEGATIVE
    if document is None:
        ctx.err.print(
            "fpm: note: the plan was not saved (give -o PLAN to write the plan file)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_OK


def plan_command() -> CliCommand:
    """``fpm plan PROFILE [--model M] [--token-budget N] [--max-model-len N] [--smoke] [-o PLAN] [--json]``."""
    return CliCommand(
        name="plan",
        help="generate the benchmark points of a model from an accepted profile",
        configure=_configure,
        run=_run,
    )
