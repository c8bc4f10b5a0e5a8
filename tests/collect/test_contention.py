"""Measuring what the engine did, not what the machine did to it: contended samples retaken, interleaved passes,
re-measured disagreeing points, and the validation of every retained sample (A-43, A-44).

The stand-in engine injects contention deterministically: a *burst* is a range of its step counter during which
a neighbour runs — the steps take 1.75 times longer and others use a whole CPU over them, which the step's
contention record says; a *silent* burst slows the steps without any record (a neighbour the counters cannot
see).  The stand-in's step counter equals the collection's forward index, so a burst can be aimed at the forwards
a reference run spent on one visit of one point.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import attrs
import pytest

from fpmcore.collect import run as collect_run
from fpmcore.collect import store
from fpmcore.collect.contention import Contention, ContentionBound
from fpmcore.collect.measure import PointFailed
from fpmcore.documents.jsonio import load_path
from fpmcore.testing import run_fpm
from fpmcore.validate.reader import validate_run
from tests.collect.conftest import plan_of, standin_host
from tests.collect.standin import StandinConfig, StandinRuntime


def _collect(plan: Path, model: Path, out: Path, config: StandinConfig | None = None, **options):
    runtime = StandinRuntime(config)
    c = collect_run.prepare(plan_of(plan), model, out, smoke=True, retake_pause=0.0, **options)
    collect_run.collect(c, runtime.driver())
    return c, runtime


def _retained(run: Path) -> dict[int, float]:
    art = load_path(run / "r0.json")
    return {r["point"]["benchmark_id"]: r["fpms"][0]["wall_time"] for r in art["results"]}


def _visit(run: Path, bid: int, visit: int | None) -> dict:
    return load_path(run / "points" / store.record_name(bid, visit))


def test_the_bound_flags_a_busy_neighbour_and_passes_an_idle_machine():
    """The numbers of the contention module's docstring: a busy loop on the other vCPU used a whole CPU over a
    0.105 s interval that waited 0.1 ms; the idle machine's system daemons used 0.3 ms of 0.077 s."""
    bound = ContentionBound()
    assert bound.contended(Contention(0.108, 0.0001, 0.1081), 0.105)
    assert not bound.contended(Contention(0.079, 0.0, 0.0002), 0.077)
    assert bound.contended(Contention(0.17, 0.063, 0.0), 0.237)  # two loops: waiting 27 % of the interval
    assert bound.contended(None, 0.1)  # unmeasured is not clean
    assert bound.describe(Contention(0.1, 0.0, 0.05), 0.1) == "wait 0% foreign 50% slowdown 0% of 0.1 s"
    # the host slowed the CPU by 70 %: recorded, not counted by default (fpmcore.collect.contention: the served steps run on
    # the same host); a bound that counts the canary calls it contended
    assert not bound.contended(Contention(0.1, 0.0, 0.0, slowdown=0.7), 0.1)
    assert ContentionBound(max_slowdown=0.4).contended(Contention(0.1, 0.0, 0.0, slowdown=0.7), 0.1)
    assert not ContentionBound(max_slowdown=0.4).contended(Contention(0.1, 0.0, 0.0, slowdown=0.3), 0.1)
    assert ContentionBound.from_json(ContentionBound().as_json()) == ContentionBound()
    assert ContentionBound.from_json(
        {"max_wait_fraction": 0.05, "max_foreign_fraction": 0.1, "max_slowdown": 0.4}
    ) == ContentionBound(max_slowdown=0.4)


def test_a_burst_over_one_point_is_retaken_and_the_point_keeps_its_value(small_plan, model_dir, tmp_path):
    """One pass, a burst over every forward a reference run spent on the second smoke point: its contended
    samples are retaken after the burst and kept in the sidecar as ``contended``; its retained value stays within
    the stand-in's own noise (5 %) of the reference.  With a bound that lets everything through, the same burst
    moves the point by the burst's 75 %."""
    ref = tmp_path / "ref"
    _collect(small_plan, model_dir, ref, passes=1)
    bid = sorted(_retained(ref))[1]
    rec = _visit(ref, bid, None)
    burst = ((rec["forward_start"], rec["forward_end"]),)

    out = tmp_path / "retaken"
    c, _ = _collect(small_plan, model_dir, out, StandinConfig(bursts=burst), passes=1)
    reps = _visit(out, bid, None)["repetitions"]
    contended = [r for r in reps if r["role"] == "contended"]
    assert contended and all(r["contention"]["foreign_seconds"] == pytest.approx(r["wall_time"]) for r in contended)
    assert all(r["contention"]["foreign_seconds"] == 0.0 for r in reps if r["role"] == "measured")
    a, b = _retained(ref)[bid], _retained(out)[bid]
    assert abs(b - a) / a < 0.05
    (result,) = validate_run(standin_host(StandinRuntime()), out, plan_of(small_plan))
    assert result.status == "accepted", result.diagnostics

    lenient = tmp_path / "lenient"
    runtime = StandinRuntime(StandinConfig(bursts=burst))
    c = collect_run.prepare(plan_of(small_plan), model_dir, lenient, smoke=True, passes=1, retake_pause=0.0)
    c.settings = attrs.evolve(c.settings, bound=ContentionBound(1.0, 2.0))
    collect_run.collect(c, runtime.driver())
    assert _retained(lenient)[bid] / a > 1.5


def test_interleaved_passes_keep_a_burst_from_moving_a_point(small_plan, model_dir, tmp_path):
    """Three passes; a silent burst (no contention record) over pass 1 of one point: only two of its six samples
    are slow, so the upper median of the passes' samples stays within the stand-in's noise of the reference,
    and the point's passes disagree by about the burst's 75 %, so it is re-measured once (a fourth visit) and,
    agreeing then with passes 0 and 2, it is not flagged."""
    ref = tmp_path / "ref"
    _collect(small_plan, model_dir, ref)
    bid = sorted(_retained(ref))[2]
    rec = _visit(ref, bid, 1)
    out = tmp_path / "silent"
    c, _ = _collect(
        small_plan, model_dir, out, StandinConfig(silent_bursts=((rec["forward_start"], rec["forward_end"]),))
    )
    assert (out / "points" / store.record_name(bid, 3)).is_file()
    assert [p.name for p in (out / "points").glob("*.p3.json")] == [store.record_name(bid, 3)]
    merged = c.done[bid]
    assert len(merged["passes"]) == 4 and merged["pass_spread"] > 0.5 and merged["flagged"] is False
    a, b = _retained(ref)[bid], _retained(out)[bid]
    assert abs(b - a) / a < 0.05
    (result,) = validate_run(standin_host(StandinRuntime()), out, plan_of(small_plan))
    assert result.status == "accepted", result.diagnostics


def test_a_point_whose_passes_keep_disagreeing_is_flagged(small_plan, model_dir, tmp_path):
    """The silent burst covers pass 1 and the re-measuring visit: the passes still disagree after it, the point
    is flagged in the collection's summary, and the run still validates (the flag is evidence, not a refusal)."""
    ref = tmp_path / "ref"
    _collect(small_plan, model_dir, ref)
    bid = sorted(_retained(ref))[2]
    rec = _visit(ref, bid, 1)
    end = max(r["forward_end"] for r in (load_path(p) for p in (ref / "points").iterdir()))
    bursts = ((rec["forward_start"], rec["forward_end"]), (end, end + 10_000))
    out = tmp_path / "flagged"
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), "--smoke",
                "--retake-pause", "0", "--json", host=standin_host(StandinRuntime(StandinConfig(silent_bursts=bursts))))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    summary = r.json()
    assert summary["remeasured_points"] == [bid] and summary["flagged_points"] == [bid]
    assert summary["contended_samples"] == 0 and summary["passes"] == 3
    line = next(x for x in (out / "repetitions.jsonl").read_text().splitlines() if f'"benchmark_id":{bid},' in x)
    assert '"pass":3' in line and '"flagged":true' in line
    (result,) = validate_run(standin_host(StandinRuntime()), out, plan_of(small_plan))
    assert result.status == "accepted", result.diagnostics
    assert result.gaps == (
        f"rank 0: benchmark_id={bid}: its passes disagree beyond the protocol's bound after re-measuring [A-44]",
    )


def test_a_point_that_cannot_get_clean_samples_fails_naming_the_contention(small_plan, model_dir, tmp_path):
    """A neighbour that never stops: after --max-contended retakes the point fails (exit 1, A-43), naming the
    contention seen and the bound; nothing is published and the finished points stay."""
    busy = StandinRuntime(StandinConfig(bursts=((0, 10**9),)))
    out = tmp_path / "busy"
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), "--smoke",
                "--max-contended", "3", "--retake-pause", "0", host=standin_host(busy))  # fmt: skip
    assert r.exit_code == 1
    assert "4 samples were contended (at most 3 retakes; last wait 0% foreign 100% slowdown 0% of" in r.stderr
    assert "the machine is busy" in r.stderr and r.stderr.rstrip().endswith("[A-43]")
    assert not (out / "r0.json").exists()
    with pytest.raises(PointFailed):
        _collect(small_plan, model_dir, tmp_path / "again", StandinConfig(bursts=((0, 10**9),)), max_contended=0)


def test_validate_refuses_a_retained_sample_taken_under_contention(small_plan, model_dir, tmp_path):
    """A-43: a measured repetition whose recorded contention is over the protocol's bound (the sidecar edited,
    its digests re-pinned), and one with no contention recorded."""
    import hashlib

    from fpmcore.documents.jsonio import canonical_bytes, loads

    out = tmp_path / "run"
    _collect(small_plan, model_dir, out)

    def edited(change) -> str:
        lines = [loads(x) for x in (out / "repetitions.jsonl").read_bytes().splitlines()]
        change(next(r for r in lines[0]["repetitions"] if r["role"] == "measured"))
        side = b"".join(canonical_bytes(x) + b"\n" for x in lines)
        art = load_path(out / "r0.json")
        art["repetition_evidence"]["sha256"] = hashlib.sha256(side).hexdigest()
        for row, line in zip(art["results"], lines, strict=True):
            row["repetition_evidence_sha256"] = hashlib.sha256(canonical_bytes(line)).hexdigest()
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        import shutil

        shutil.copytree(out, copy)
        (copy / "repetitions.jsonl").write_bytes(side)
        (copy / "r0.json").write_bytes(store.json_bytes(art))
        index = {"files": {n: hashlib.sha256((copy / n).read_bytes()).hexdigest() for n in store.ARTIFACT_FILES}}
        (copy / "index.json").write_bytes(store.json_bytes(index))
        (result,) = validate_run(standin_host(StandinRuntime()), copy, plan_of(small_plan))
        assert result.status == "refused"
        d = result.diagnostics[0]
        assert d.rule == "A-43"
        return d.message

    def busy(rep):
        rep["contention"]["foreign_seconds"] = rep["wall_time"] * 0.5

    msg = edited(busy)
    assert (
        "measured repetition 1 of benchmark_id=" in msg and "was contended (wait 0% foreign 50% slowdown 0% of" in msg
    )
    msg = edited(lambda rep: rep.pop("contention"))
    assert "records no contention" in msg


def test_the_contention_counts_reach_the_collections_summary(small_plan, model_dir, tmp_path):
    """--json: the passes, the samples retaken and the points re-measured or flagged (none on a quiet engine)."""
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(tmp_path / "run"), "--smoke",
                "--json", host=standin_host(StandinRuntime()))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    s = r.json()
    assert (s["passes"], s["repetitions"], s["warmups"]) == (3, 6, 1)
    assert (s["contended_samples"], s["remeasured_points"], s["flagged_points"]) == (0, [], [])
    walls = [rep["wall_time"] for line in (tmp_path / "run" / "repetitions.jsonl").read_text().splitlines()
             for rep in __import__("json").loads(line)["repetitions"] if rep["role"] == "measured"]  # fmt: skip
    assert len(walls) == 4 * 6 and statistics.median(walls) > 0
