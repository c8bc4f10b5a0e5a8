"""Compare fpmcore's align-stop rule (04 G-2 … G-6) with vLLM 0.33.0's own function.

Runs ``Scheduler._mamba_block_aligned_split`` of the installed vLLM 0.33.0 (on
CPU; the function reads only scheduler flags and the request's token counts)
and :func:`fpmcore_glm53flash.align.align_split` on the same grid of
``(computed, prefix hit, chunk, prompt length, tokens, budget, junction)``
cases, with and without the prefill checkpoint, and reports every
disagreement.  Run it with the interpreter that has vLLM::

    VLLM_TARGET_DEVICE=cpu $ORACLE_PY tools/glm_align_grid.py            # B = 2176, 4608, 16
    $ORACLE_PY tools/glm_align_grid.py --block 1024 --oracle /path/to/oracle

``--oracle DIR`` also derives the scheduler flags from a real ``VllmConfig``
through the oracle harness (``vllm_oracle.py`` and its GLM-like example) and
checks that the flags this driver sets by hand are the ones vLLM derives.

The plugin's align module asks the host's rule (``fpmcore.replay.align``, the
C engine's reference), so the interpreter needs fpmcore; when the plugin is not
installed its module is loaded from its file.  Exit status 0: no disagreement.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
ALIGN_FILE = ROOT / "plugins" / "glm53flash" / "src" / "fpmcore_glm53flash" / "align.py"

#: Block sizes of the acceptance grid (04 §3): GLM TP 4, the oracle's GLM-like example, a tiny one.
DEFAULT_BLOCKS = (2176, 4608, 16)
#: The FlashKDA prefill checkpoint alignment.
ALIGNMENT = 16

Case = tuple[int, int, int, int, int, int, int, bool]  # computed, hit, k, prompt, total, budget, junction, jckpt


def load_align() -> ModuleType:
    """The plugin's align module, installed or from its file."""
    try:
        from fpmcore_glm53flash import align  # noqa: PLC0415

        return align
    except ImportError:
        spec = importlib.util.spec_from_file_location("fpm_glm_align", ALIGN_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


def scheduler_flags(block: int, budget: int, alignment: int | None, junction_checkpoint: bool) -> SimpleNamespace:
    """The attributes ``_mamba_block_aligned_split`` reads, as ``Scheduler.__init__`` sets them
    (vllm/v1/core/sched/scheduler.py:425-464) for ``H = B``, no EAGLE, no look-ahead,
    no partial hits and ``long_prefill_token_threshold = 0`` (04 G-8)."""
    return SimpleNamespace(
        cache_config=SimpleNamespace(block_size=block),
        scheduler_config=SimpleNamespace(long_prefill_token_threshold=0),
        hash_block_size=block,
        block_size=block,
        mamba_partial_cache_hit=False,
        use_eagle_block_drop=False,
        num_hash_lookahead_tokens=0,
        mamba_has_prefill_checkpoint_blocks=alignment is not None,
        mamba_prefill_checkpoint_alignment=alignment,
        max_num_scheduled_tokens=budget,
        mamba_shared_prefix_checkpoint=junction_checkpoint,
    )


def vllm_split() -> Callable[..., int]:
    """vLLM 0.33.0's ``Scheduler._mamba_block_aligned_split`` (unbound)."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm  # noqa: PLC0415
    from vllm.v1.core.sched.scheduler import Scheduler  # noqa: PLC0415

    if vllm.__version__ != "0.33.0":
        raise SystemExit(f"needs vLLM 0.33.0, found {vllm.__version__}")
    return Scheduler._mamba_block_aligned_split


def _grid_values(block: int) -> tuple[list[int], list[int], list[int]]:
    B = block
    computed = sorted(
        {
            0,
            1,
            4,
            16,
            100,
            B // 2,
            B - 4,
            B - 1,
            B,
            B + 1,
            B + 16,
            2 * B - 16,
            2 * B,
            2 * B + 4,
            3 * B,
            3 * B + 100,
            5 * B,
            8 * B + 8,
            60 * B,
            1000,
            4100,
            8200,
        }
    )
    deltas = sorted(
        {
            1,
            2,
            3,
            15,
            16,
            17,
            64,
            1192,
            B - 16,
            B - 1,
            B,
            B + 1,
            B + 15,
            B + 16,
            2 * B - 1,
            2 * B,
            2 * B + 1,
            2 * B + 16,
            3 * B,
            3 * B + 1,
            4 * B + 64,
            8191,
            8192,
            8193,
            10000,
        }
        - {0, -1, -15}
    )
    budgets = sorted({8, 2000, 4096, 8192, B, 2 * B + 16} - {0})
    return [c for c in computed if c >= 0], [d for d in deltas if d > 0], budgets


def grid(block: int) -> Iterator[Case]:
    """The comparison grid for block ``B`` (``H = B``).

    Every combination of a computed count, a prompt beyond it, a configured
    budget, three proposed chunks (all that fits the budget, what fits 1,192
    tokens left in the step, one token), a fresh or a resumed request (five
    generated tokens), no junction or one of three, the opt-in junction
    checkpoint on or off, and the start reached by computed tokens alone or by
    a prefix hit of one block.
    """
    computed, deltas, budgets = _grid_values(block)
    for c0 in computed:
        for d in deltas:
            prompt = c0 + d
            for budget in budgets:
                for total in (prompt, prompt + 5):
                    remaining = total - c0
                    ks = sorted({min(remaining, budget), min(remaining, budget, 1192), 1})
                    junctions = sorted({0, c0 + block, prompt - 1, 3 * block} - {c0})
                    for k in ks:
                        for junction in junctions:
                            for jckpt in (False, True):
                                yield (c0, 0, k, prompt, total, budget, junction, jckpt)
                                if c0 >= block:
                                    yield (c0 - block, block, k, prompt, total, budget, junction, jckpt)


def compare(
    block: int, alignment: int | None, split: Callable[..., int] | None = None, limit: int = 20
) -> tuple[int, list[tuple[Case, int, int]]]:
    """Run the grid for one block size and checkpoint setting.

    :returns: ``(cases, mismatches)``; a mismatch is ``(case, vllm, fpmcore)``
        (at most ``limit`` are kept, all are counted in ``cases``).
    """
    align = load_align()
    split = split or vllm_split()
    flags: dict[tuple[int, bool], SimpleNamespace] = {}
    cases = 0
    bad: list[tuple[Case, int, int]] = []
    for case in grid(block):
        c0, hit, k, prompt, total, budget, junction, jckpt = case
        shim = flags.get((budget, jckpt))
        if shim is None:
            shim = flags[(budget, jckpt)] = scheduler_flags(block, budget, alignment, jckpt)
        request = SimpleNamespace(
            num_computed_tokens=c0, num_prompt_tokens=prompt, num_tokens=total, shared_prefix_boundary=junction
        )
        want = split(shim, request, k, hit, 0)
        got = align.align_split(
            start=c0 + hit,
            num_new_tokens=k,
            prompt_len=prompt,
            num_tokens=total,
            block_size=block,
            hash_block_size=block,
            max_num_batched_tokens=budget,
            checkpoint_alignment=alignment,
            junction=junction,
            junction_checkpoint=jckpt,
        ).tokens
        cases += 1
        if want != got and len(bad) < limit:
            bad.append((case, want, got))
    return cases, bad


def oracle_flags_check(oracle_dir: Path) -> list[str]:
    """Differences between the flags vLLM derives for the oracle's GLM-like model and ours."""
    sys.path.insert(0, str(oracle_dir))
    import vllm_oracle  # noqa: PLC0415

    model = vllm_oracle._load(str(oracle_dir / "examples" / "glm53flash_like.json"))
    plan = vllm_oracle.plan_kv_cache(model, True)
    real = vllm_oracle.mamba_split_shim(plan, vllm_oracle.make_kv_manager(plan))
    ours = scheduler_flags(
        plan.scheduler_block_size, real.max_num_scheduled_tokens, real.mamba_prefill_checkpoint_alignment, False
    )
    out = []
    for name in (
        "hash_block_size",
        "block_size",
        "mamba_partial_cache_hit",
        "use_eagle_block_drop",
        "num_hash_lookahead_tokens",
        "mamba_has_prefill_checkpoint_blocks",
        "mamba_prefill_checkpoint_alignment",
        "max_num_scheduled_tokens",
        "mamba_shared_prefix_checkpoint",
    ):
        if getattr(real, name) != getattr(ours, name):
            out.append(f"{name}: vllm {getattr(real, name)!r}, driver {getattr(ours, name)!r}")
    if real.cache_config.block_size != ours.cache_config.block_size:
        out.append(
            f"cache_config.block_size: vllm {real.cache_config.block_size}, driver {ours.cache_config.block_size}"
        )
    if real.scheduler_config.long_prefill_token_threshold != 0:
        out.append(f"long_prefill_token_threshold: vllm {real.scheduler_config.long_prefill_token_threshold}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, action="append", help="block size B = H (repeatable)")
    parser.add_argument("--oracle", type=Path, help="oracle harness folder: also check the derived flags")
    args = parser.parse_args(argv)
    split = vllm_split()
    failed = False
    if args.oracle is not None:
        diffs = oracle_flags_check(args.oracle)
        print(f"oracle flags: {'same' if not diffs else '; '.join(diffs)}")
        failed |= bool(diffs)
    total = 0
    for block in args.block or DEFAULT_BLOCKS:
        for alignment in (ALIGNMENT, None):
            t0 = time.perf_counter()
            cases, bad = compare(block, alignment, split)
            total += cases
            setting = f"checkpoint alignment {alignment}" if alignment else "no checkpoint"
            print(f"B={block} {setting}: {cases} cases, {len(bad)} disagreements ({time.perf_counter() - t0:.1f} s)")
            for case, want, got in bad:
                print(f"  case {case}: vllm {want}, fpmcore {got}")
            failed |= bool(bad)
    print(f"total {total} cases: {'DISAGREE' if failed else 'agree'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
