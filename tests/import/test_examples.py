"""The embedded probe examples (``examples/probes/``), written from the real vLLM 0.33.0 (and 0.27.0 format).

The examples are *dry* probes (``examples/probes/README.md``): vLLM planned the
cache but allocated no tensor, so their records list the tensor evidence in
``unresolved_fields`` and the import refuses them (I-19), as the spec wants.
What they do hold was computed by vLLM itself: cache groups, specs, startup
reservations, block sizes, concurrency.  These tests run every rule that reads
only that part (stages C, D without the hardware rule, E, F, J and K) on every
example, so the import's formulas are checked against vLLM's own numbers, and
check that the full import refuses a dry probe only for what a dry probe lacks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.importer import import_evidence
from fpmcore.importer import stage_c, stage_d, stage_ef, stage_jkl
from fpmcore.importer.model import Context, Record, parse_record_name, run_stage
from fpmcore.importer.values import strict_loads

ROOT = Path(__file__).parents[2] / "examples" / "probes"
EXAMPLES = sorted(p.parent for p in ROOT.glob("*/observations.json")) if ROOT.is_dir() else []
#: what a dry probe lacks: a pinned image (I-5), tensor and hardware evidence (I-19), warm-up (I-20)
DRY_RULES = {"I-5", "I-19", "I-20"}


def planned(folder: Path, services) -> Context:
    """A context holding every observation record of the example's active attempt."""
    index = json.loads((folder / "observations.json").read_text())
    (label, conf), = index["configurations"].items()
    ctx = Context(folder=folder, label=label, services=services)
    ctx.launch = conf["launch"]
    attempt = next(a for a in conf["attempts"] if a["attempt_id"] == conf["active_attempt_id"])
    ctx.attempt_id = attempt["attempt_id"]
    for phase, entry in attempt["phases"].items():
        for art in entry["artifacts"]:
            if art["kind"] != "observation":
                continue
            kind, rank = parse_record_name(art["path"].rsplit("/", 1)[-1])
            data = strict_loads((folder / art["path"]).read_bytes())
            ctx.records.append(Record(phase=phase, path=art["path"], sha256=art["sha256"], data=data,
                                      name_kind=kind, name_rank=rank))
    return ctx


def run_planning_rules(ctx: Context) -> list[str]:
    stage_c.prepare(ctx)
    gates = [r for r in stage_c.RULES if r.__name__ != "i26_source"]
    assert run_stage(ctx, gates), [d.render() for d in ctx.diagnostics]
    stage_c.finish(ctx)
    stage_c.prepare(ctx)
    assert run_stage(ctx, [r for r in stage_d.RULES if r.__name__ != "i35_hardware"])
    assert run_stage(ctx, stage_ef.STAGE_E)
    stage_ef.finish_e(ctx)
    stages = [stage_ef.STAGE_F] + ([stage_jkl.STAGE_J, stage_jkl.STAGE_K] if ctx.hybrid else [])
    for rules in stages:
        run_stage(ctx, rules)
    return [d.render() for d in ctx.diagnostics]


pytestmark = pytest.mark.skipif(not EXAMPLES, reason="no probe examples in this tree")


@pytest.mark.parametrize("folder", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_passes_every_planning_rule(folder, services):
    """Stages C-F, J, K accept what vLLM computed (startup counts, block sizes, concurrency, size tokens)."""
    ctx = planned(folder, services)
    assert run_planning_rules(ctx) == []


@pytest.mark.parametrize("folder", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_refused_only_for_dry_probe_gaps(folder, services):
    """The full import never raises and refuses a dry probe only for what it lacks."""
    result = import_evidence(folder, services)
    if not result.complete:
        assert {d.rule for d in result.diagnostics} <= DRY_RULES, [d.render() for d in result.diagnostics]


def _startup(folder: Path, services) -> list[dict]:
    ctx = planned(folder, services)
    assert run_planning_rules(ctx) == []  # I-61, I-102, I-103 and I-104 accepted vLLM's values
    return [{"M": sum(stage_jkl.blocks_per_request(ctx, s)), "n": s.cache["num_blocks"],
             "c": s.cache["startup"]["kv_cache_max_concurrency"], "tokens": s.cache["startup"]["kv_cache_size_tokens"]}
            for s in ctx.schedulers()]


@pytest.mark.parametrize("name,M,n,c,tokens", [
    ("glm53flash-tp4", 495, 13697, 27.67070707070707, 29014839),
    ("glm53flash-tp4-no-checkpoint", 491, 13697, 27.89613034623218, 29251212),
    ("plain-dense-tp4", 512, 203368, 397.203125, 3253888),
    ("sliding-window", 8192 + 521, 76293, 8.756226328474693, 1147696),
])
def test_example_startup_numbers(services, name, M, n, c, tokens):
    """The import's C-5 sum reproduces vLLM's concurrency, sliding windows included [beyond reference]."""
    folder = ROOT / name
    if not folder.is_dir():
        pytest.skip(f"example {name} not present")
    for st in _startup(folder, services):
        assert st == {"M": M, "n": n, "c": c, "tokens": tokens}
        assert n / M == c


def test_glm_example_groups(services):
    """The GLM-5.3-Flash example: 6 groups (5 state, 1 attention), KDA checkpoint 1/16, pool page 13,516,800."""
    folder = ROOT / "glm53flash-tp4"
    if not folder.is_dir():
        pytest.skip("example glm53flash-tp4 not present")
    ctx = planned(folder, services)
    assert run_planning_rules(ctx) == []
    assert ctx.kinds == ["state"] * 4 + ["attention", "state"]
    for w in ctx.workers():
        groups = w.groups
        assert [len(g["layer_names"]) for g in groups] == [9, 9, 8, 8, 22, 11]
        assert [g["block_size_tokens"] for g in groups] == [2176] * 5 + [4]
        for g in groups[:4]:
            st = g["state"]
            assert (st["blocks_per_request"], st["num_prefill_checkpoint_blocks"], st["prefill_checkpoint_alignment"]) == (1, 1, 16)
        assert groups[5]["state"] == {"blocks_per_request": 1}
        assert w.cache["num_blocks"] == 13697
        assert [a["block_stride"] for a in w.cache["allocations"]] == [13516800] * 7
