"""fpm collect on the stand-in engine: the protocol, the artifacts, resume, validation and publication."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from fpmcore.collect import run as collect_run
from fpmcore.collect import store
from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import load_path, loads
from fpmcore.publish.publication import publish_run
from fpmcore.testing import make_host, run_fpm
from fpmcore.validate.reader import validate_run
from tests.collect.conftest import plan_of, standin_host
from tests.collect.standin import StandinConfig, StandinRuntime


@pytest.fixture
def engine() -> StandinRuntime:
    return StandinRuntime()


def _collect(plan: Path, model: Path, out: Path, *extra: str, host) -> None:
    result = run_fpm("collect", str(plan), "--model-dir", str(model), "-o", str(out), *extra, host=host)
    assert result.exit_code == 0, result.stderr


@pytest.fixture(scope="module")
def collected(small_plan, model_dir, tmp_path_factory):
    """One uninterrupted collection of the small plan (module-wide, read-only)."""
    out = tmp_path_factory.mktemp("run") / "run"
    _collect(small_plan, model_dir, out, host=standin_host(StandinRuntime()))
    return out


def test_a_collected_run_validates_under_the_engine_steps_contract(collected, small_plan, engine):
    results = validate_run(standin_host(engine), collected, plan_of(small_plan))
    assert [(r.cell, r.contract, r.status) for r in results] == [
        ("gdn-hybrid-tp4-d0-full", "fpmcore_engine_steps", "accepted")
    ]
    assert len(results[0].retained) == 77
    assert results[0].gaps == ()  # every row records its prompts


def test_the_run_holds_the_protocol(collected, small_plan):
    """Each row: six raw samples from three passes of one warm-up and two samples each, the mean of samples
    1…5 retained (five samples: none trimmed), forward indices rising within a row and never shared, each pass after the previous
    pass over the whole list, the measured workload of the point, seeds recorded in the warm-up ledger."""
    art = load_path(collected / "r0.json")
    plan = plan_of(small_plan)
    assert art["measurement_protocol"]["producer"] == {
        "name": "fpmcore_engine_steps",
        "reduction": "trimmed_mean_after_first_repetition",
        "warmup_repetitions": 1,
        "measured_repetitions": 6,
        "max_rejected_repetitions": 10,
        "state_protocol": "fpmcore_prefix_cache_real_seed_v1",
        "timing_boundary": "standin_virtual_clock_step",
        "repetition_spacing_seconds": 0.0,
        "passes": 3,
        "contention_bound": {"max_wait_fraction": 0.05, "max_foreign_fraction": 0.1},
        "max_contended_samples": 20,
        "retake_pause_seconds": 0.5,
        "pass_disagreement_bound": 0.15,
        "prefill_idle_seconds": 0.0,
        "decode_lead_in_steps": 16,
    }
    assert art["execution_identity"] == plan["cells"][0]["execution_identity"]
    seen: set[int] = set()
    firsts = []
    for row, point in zip(art["results"], plan["points"], strict=True):
        bm = row["fpms"][0]["benchmark_measurement"]
        walls = [s["wall_time"] for s in bm["raw_fpms"]]
        assert len(walls) == 6 and row["fpms"][0]["wall_time"] == math.fsum(walls[1:]) / 5
        assert bm["estimate"] == {"method": "adjacent_trimmed_mean", "raw_sample_indices": [1, 2, 3, 4, 5]}
        forwards = [s["benchmark_sample"]["forward_index"] for s in bm["raw_fpms"]]
        assert forwards == sorted(forwards) and not seen & set(forwards)
        seen |= set(forwards)
        firsts.append(forwards[::2])  # the first sample of each pass
        for s in bm["raw_fpms"]:
            sr = s["scheduled_requests"]
            if point["phase"] == "prefill":
                b, n, P = point["batch_size"], point["new_tokens"], point["prefix_tokens"]
                assert (sr["num_prefill_requests"], sr["sum_prefill_tokens"], sr["sum_prefill_kv_tokens"]) == (
                    b,
                    b * n,
                    b * P,
                )
            else:
                assert (sr["num_decode_requests"], sr["sum_decode_kv_tokens"]) == (
                    point["batch_size"],
                    point["batch_size"] * point["context_tokens"],
                )
    # pass k of every point comes after pass k - 1 of every point
    for k in (1, 2):
        assert min(f[k] for f in firsts) > max(f[k - 1] for f in firsts)
    kinds = [r["kind"] for r in art["warmup_evidence"]["records"]]
    # a decode repetition runs 16 lead-in decodes where the b uncached tails of its prompt (c − 16 tokens, the
    # part but its last token in whole 544-token hash blocks cached) fit the engine's token budget in one forward:
    # at c = 546 and 1,090 the tails are 530 tokens (prompts of 530 and 1,074, 0 and 544 seeded); where
    # b × 530 tokens do not fit, the lead-in is one (prompts 545 and 1,089, seeded 544 and 1,088, tails of one
    # token); context 2 leaves room for one
    budget = plan["engine"]["max_num_batched_tokens"]
    expected: dict[tuple[int, int], tuple[int, set[int]]] = {}
    for p in plan["points"]:
        b, c = p["batch_size"], p.get("context_tokens", 0)
        if p["phase"] == "decode":
            long = c > 2 and (b == 1 or b * 530 <= budget)
            expected[b, c] = (16, {c - 546} - {0}) if long else (1, {c - 2} if c > 2 else set())
    assert {lead for lead, _ in expected.values()} == {1, 16}  # both kinds are in this plan
    decode_seeds = sum(len(seeded) for _, seeded in expected.values())
    prefill_seeds = sum(1 for p in plan["points"] if p.get("prefix_tokens", 0) > 0)
    assert kinds.count("real_prefix_seed") == 3 * (prefill_seeds + decode_seeds)
    for f in sorted((collected / "points").iterdir()):
        rec = load_path(f)
        p = rec["point"]
        if p["point_type"] == "decode":
            lead, seeded = expected[p["batch_size"], p["total_kv_read_tokens"] // p["batch_size"]]
            assert {r["fpm_count"] for r in rec["repetitions"] if r["role"] in ("warmup", "measured")} == {lead + 2}
            assert {
                w["requested_shape"]["prefix_tokens"] for w in rec["warmups"] if w["kind"] == "real_prefix_seed"
            } == seeded
    assert (collected / "index.json").is_file() and sorted(load_path(collected / "index.json")["files"]) == [
        "points.json",
        "provenance.json",
        "r0.json",
        "repetitions.jsonl",
    ]


def test_resume_keeps_finished_points_and_builds_the_same_rows(small_plan, model_dir, collected, engine, tmp_path):
    """A run stopped after 30 + 77 + 77 of its 3 × 77 visits (their records kept, a stray temporary file left)
    resumes to the rows of the uninterrupted run: the kept records are not rewritten, only the 47 missing
    visits of the last pass are measured."""
    out = tmp_path / "run"
    shutil.copytree(collected, out)
    for name in ("r0.json", "repetitions.jsonl", "points.json", "provenance.json", "index.json"):
        (out / name).unlink()
    last_pass = sorted((out / "points").glob("*.p2.json"))
    for path in last_pass[30:]:
        path.unlink()
    kept = {p.name: p.read_bytes() for p in (out / "points").iterdir()}
    assert len(kept) == 77 + 77 + 30
    (out / "points" / ".000031.p2.json.abc123").write_bytes(b'{"benchmark_id": 31, "tor')  # a kill mid-write
    _collect(small_plan, model_dir, out, "--resume", host=standin_host(engine))
    assert {p.name: p.read_bytes() for p in (out / "points").iterdir() if p.name in kept} == kept
    assert len(list((out / "points").iterdir())) == 3 * 77
    assert not [p for p in (out / "points").iterdir() if p.name.startswith(".")]
    assert len(engine.engines) == 1
    a, b = load_path(collected / "r0.json"), load_path(out / "r0.json")
    assert [r["fpms"][0]["wall_time"] for r in a["results"]] == [r["fpms"][0]["wall_time"] for r in b["results"]]
    assert validate_run(standin_host(engine), out, plan_of(small_plan))[0].status == "accepted"


def test_resume_of_a_complete_run_starts_no_engine(small_plan, model_dir, collected, engine, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(collected, out)
    (out / "index.json").unlink()  # killed after the rank artifact, before the index
    _collect(small_plan, model_dir, out, "--resume", host=standin_host(engine))
    assert engine.engines == []
    assert (out / "index.json").read_bytes() == (collected / "index.json").read_bytes()


def test_collect_refusals(small_plan, model_dir, collected, engine, tmp_path):
    host = standin_host(engine)
    wrong = tmp_path / "other-model"
    wrong.mkdir()
    (wrong / "config.json").write_text("{}")
    r = run_fpm("collect", str(small_plan), "--model-dir", str(wrong), "-o", str(tmp_path / "a"), host=host)
    assert r.exit_code == 2 and "the model folder is not the model the plan was made for" in r.stderr
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(collected), host=host)
    assert r.exit_code == 2 and "add --resume to continue it" in r.stderr and "[O-2]" in r.stderr
    r = run_fpm(
        "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(tmp_path / "no" / "run"), host=host
    )
    assert r.exit_code == 2 and "[O-1]" in r.stderr
    out = tmp_path / "b"
    shutil.copytree(collected, out)
    r = run_fpm(
        "collect",
        str(small_plan),
        "--model-dir",
        str(model_dir),
        "-o",
        str(out),
        "--resume",
        "--repetitions",
        "7",
        host=host,
    )
    assert r.exit_code == 2 and "--repetitions 7 differs from the run's 6" in r.stderr
    r = run_fpm(
        "collect",
        str(small_plan),
        "--model-dir",
        str(model_dir),
        "-o",
        str(out),
        "--resume",
        "--spacing",
        "0.5",
        host=host,
    )
    assert r.exit_code == 2 and "--spacing 0.5 differs from the run's 0.0" in r.stderr
    r = run_fpm(
        "collect",
        str(small_plan),
        "--model-dir",
        str(model_dir),
        "-o",
        str(tmp_path / "c"),
        "--repetitions",
        "2",
        host=host,
    )
    assert r.exit_code == 2 and "argument --repetitions: must be an integer from 3 to " in r.stderr
    assert engine.engines == []


def test_spacing_pauses_before_every_repetition(small_plan, model_dir, engine, tmp_path, monkeypatch):
    """--spacing 0.25: a pause before each of the 3 × (1 + 2) repetitions of every point, recorded in the
    protocol."""
    from fpmcore.collect import measure

    pauses: list[float] = []
    monkeypatch.setattr(measure.time, "sleep", pauses.append)
    _collect(small_plan, model_dir, tmp_path / "run", "--smoke", "--spacing", "0.25", host=standin_host(engine))
    assert pauses == [0.25] * (4 * 9)
    art = load_path(tmp_path / "run" / "r0.json")
    assert art["measurement_protocol"]["producer"]["repetition_spacing_seconds"] == 0.25
    assert validate_run(standin_host(engine), tmp_path / "run", plan_of(small_plan))[0].status == "accepted"


def test_prefill_repetitions_start_from_an_idle_engine(small_plan, model_dir, engine, tmp_path, monkeypatch):
    """--prefill-idle 0.1: the engine idles before each of the 3 × (1 + 2) repetitions of the smoke set's
    prefill points and never before a decode repetition; recorded in the protocol and validated."""
    from fpmcore.collect import measure

    pauses: list[float] = []
    monkeypatch.setattr(measure.time, "sleep", pauses.append)
    _collect(small_plan, model_dir, tmp_path / "run", "--smoke", "--prefill-idle", "0.1", host=standin_host(engine))
    smoke = plan_of(small_plan)["smoke"]
    prefill = sum(1 for p in smoke if p["phase"] == "prefill")
    assert 0 < prefill < len(smoke)  # the smoke set has both kinds
    assert pauses == [0.1] * (prefill * 9)
    art = load_path(tmp_path / "run" / "r0.json")
    assert art["measurement_protocol"]["producer"]["prefill_idle_seconds"] == 0.1
    assert validate_run(standin_host(engine), tmp_path / "run", plan_of(small_plan))[0].status == "accepted"


def test_the_prefill_idle_defaults_to_a_tenth_of_a_second():
    from fpmcore.collect import measure

    assert measure.DEFAULT_PREFILL_IDLE == 0.1


def test_an_engine_that_runs_another_deployment_is_refused(small_plan, model_dir, tmp_path):
    other = StandinRuntime(StandinConfig(block_size=128, hash_block_size=128))
    c = collect_run.prepare(plan_of(small_plan), model_dir, tmp_path / "run")
    with pytest.raises(FpmError, match="block_size 128, plan 544; hash_block_size 128, plan 544"):
        collect_run.collect(c, other.driver())
    assert other.engines[0].closed


def test_a_point_that_keeps_failing_stops_the_collection(small_plan, model_dir, tmp_path):
    """A cache too small to keep any seeded prefix: every cached point misses its prefix; after ten rejections
    the collection stops (exit 1), and the points finished before it stay."""
    tiny = StandinRuntime(StandinConfig(cache_blocks=0))
    out = tmp_path / "run"
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), host=standin_host(tiny))
    assert r.exit_code == 1
    assert "was rejected 11 times (at most 10); last reason prefix_miss:0" in r.stderr
    done = sorted(p.name for p in (out / "points").iterdir())
    assert done and all(
        loads(Path(out / "points" / n).read_bytes())["kv_seed_regime"] == "not_applicable" for n in done
    )
    assert not (out / "r0.json").exists()


def test_publish_makes_the_table_replay_reads(collected, small_plan, engine, tmp_path, gdn_profile):
    table = tmp_path / "table.json"
    r = run_fpm(
        "publish", str(collected), "--plan", str(small_plan), "-o", str(table), "--json", host=standin_host(engine)
    )
    assert r.exit_code == 0, r.stderr
    doc = load_path(table)
    plan = plan_of(small_plan)
    assert len(doc["rows"]) == 77
    src = doc["source"]
    assert (src["plan_sha256"], src["profile_sha256"], src["manifest_sha256"]) == (
        plan["plan_sha256"],
        plan["profile"]["profile_sha256"],
        plan["options"]["benchmark_points"]["manifest_sha256"],
    )
    import hashlib

    assert src["run_index_sha256"] == hashlib.sha256((collected / "index.json").read_bytes()).hexdigest()
    art = load_path(collected / "r0.json")
    walls = {r["point"]["benchmark_id"]: r["fpms"][0]["wall_time"] for r in art["results"]}
    assert sorted(row["wall_time_seconds"] for row in doc["rows"]) == sorted(walls.values())
    # RD-16: the step cost a mixed step pays once is the cheapest decode step measured
    assert doc["shared_step_seconds"] == min(r["wall_time_seconds"] for r in doc["rows"] if r["phase"] == "decode")
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"request_id": "a", "arrival_time": 0.0, "prompt_len": 300, "output_len": 8}\n')
    rep = run_fpm(
        "replay",
        str(gdn_profile),
        "--trace",
        str(trace),
        "--fpm-table",
        str(table),
        "--json",
        host=make_host(entry_points=("vllm_033",)),
    )  # its replay rules
    assert rep.exit_code == 0, rep.stderr
    assert rep.json()["summary"]["finished"] == 1


def test_publish_refuses_a_run_that_does_not_validate(collected, small_plan, engine, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(collected, out)
    (out / "r0.json").write_bytes((out / "r0.json").read_bytes().replace(b'"wall_time": 0.', b'"wall_time": 1.', 1))
    table = tmp_path / "table.json"
    r = run_fpm("publish", str(out), "--plan", str(small_plan), "-o", str(table), host=standin_host(engine))
    assert r.exit_code == 1
    assert "file differs from the artifact index" in r.stderr and "nothing was published" in r.stderr
    assert not table.exists()
    doc, results = publish_run(standin_host(engine), collected, plan_of(small_plan))
    assert doc is not None and results[0].status == "accepted"


def test_store_records_are_checked_against_the_list(collected, small_plan, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(collected, out)
    (out / "points" / "000999.p0.json").write_bytes((out / "points" / "000001.p0.json").read_bytes())
    with pytest.raises(FpmError, match="not a point of the staged list: 000999.p0.json"):
        store.RunFolder(out).visits(plan_of(small_plan)["points"], passes=3)


def test_a_decode_repetition_whose_prompt_the_budget_splits_is_measured_after_its_prefill():
    """Without prefix caching a decode point at context 898 prefills its whole 897-token prompt, which a 768-token
    budget splits into two forwards (768 + 129): the lockstep decode is the third forward and the measured one the
    fourth; a run whose third forward still prefills has its lockstep decode too late."""
    from fpmcore.collect.content import TokenSource
    from fpmcore.collect.measure import Measurer, PlannedPoint, ProtocolSettings
    from fpmcore.host.engine_drivers import EngineRun, EngineStep, StepWorkload

    point = PlannedPoint(30, "decode", 1, context_tokens=898)
    m = Measurer(None, TokenSource(0, 1000, ()), ProtocolSettings(1, 3, 3, 0), 1024, False)  # type: ignore[arg-type]

    def step(i: int, w: StepWorkload) -> EngineStep:
        return EngineStep(start=float(i), end=i + 0.5, scheduled=w)

    prefill = [StepWorkload(num_prefill_requests=1, sum_prefill_tokens=768),
               StepWorkload(num_prefill_requests=1, sum_prefill_tokens=129, sum_prefill_kv_tokens=768)]  # fmt: skip
    decodes = [StepWorkload(num_decode_requests=1, sum_decode_kv_tokens=897),
               StepWorkload(num_decode_requests=1, sum_decode_kv_tokens=898)]  # fmt: skip
    steps = [step(i, w) for i, w in enumerate(prefill + decodes)]
    measured, reason = m.check(point, EngineRun(steps, [0], [3]), 0)
    assert reason is None and measured is steps[3]
    one = [step(0, StepWorkload(num_prefill_requests=1, sum_prefill_tokens=897))] + [step(i + 1, w) for i, w in
                                                                                    enumerate(decodes)]  # fmt: skip
    measured, reason = m.check(point, EngineRun(one, [0], [3]), 0)
    assert reason is None and measured is one[2]
    mixed = steps[:2] + [step(2, StepWorkload(num_prefill_requests=1, sum_prefill_tokens=1, num_decode_requests=1,
                                              sum_decode_kv_tokens=897))] + steps[3:]  # fmt: skip
    assert m.check(point, EngineRun(mixed, [0], [3]), 0) == (None, "no_lockstep:sum_decode_kv_tokens=898!=897")


def test_a_decode_repetition_measures_after_its_lead_in_decodes_in_lockstep():
    """Two requests at context 258 with a lead-in of 16 (the tiny llama's deployment: 128-token hash blocks, a
    768-token budget): prompts of 242 tokens, 128 of them seeded, tails of 114 (two: 228 tokens, one forward);
    decodes at 242 … 257 for both requests, then the measured one at 258.  A lead-in decode that holds one
    request only (the other still prefilling, or finished) rejects the repetition, naming the step's count."""
    from fpmcore.collect.content import TokenSource
    from fpmcore.collect.measure import Measurer, PlannedPoint, ProtocolSettings, decode_lead_in
    from fpmcore.host.engine_drivers import EngineRun, EngineStep, StepWorkload

    point = PlannedPoint(7, "decode", 2, context_tokens=258)
    assert decode_lead_in(point, 16, 128, True, 768) == 16
    assert point.seeded_prefix(128, True, 16) == 128
    # eight requests at 258: every prompt of 242 … 256 tokens leaves tails of 114 … 128 (8 × 114 > 768), so the
    # lead-in is one (prompts of 257, 256 seeded); at 140 a lead-in of 11 is the most whose prompts (129 tokens)
    # reach past a hash block (128 seeded, tails of one token): 12 … 16 leave prompts of 124 … 128 uncached
    assert decode_lead_in(PlannedPoint(8, "decode", 8, context_tokens=258), 16, 128, True, 768) == 1
    eight = PlannedPoint(8, "decode", 8, context_tokens=140)
    assert decode_lead_in(eight, 16, 128, True, 768) == 11 and eight.seeded_prefix(128, True, 11) == 128
    # without prefix caching the plan's rule (8 × 139 tokens > 768: dropped) leaves nothing to shrink; one request
    # may split its prompt, and a context of 2 leaves room for one decode before the measured one
    assert decode_lead_in(PlannedPoint(8, "decode", 1, context_tokens=900), 16, 128, False, 768) == 16
    assert decode_lead_in(PlannedPoint(8, "decode", 4, context_tokens=2), 16, 128, True, 768) == 1
    m = Measurer(None, TokenSource(0, 1000, ()), ProtocolSettings(1, 3, 3, 0), 128, True,  # type: ignore[arg-type]
                 budget=768)  # fmt: skip
    assert m.lead_in(point) == 16 and m.lead_in(PlannedPoint(9, "prefill", 1, new_tokens=64)) == 0

    def step(i: int, w: StepWorkload) -> EngineStep:
        return EngineStep(start=float(i), end=i + 0.5, scheduled=w)

    tails = StepWorkload(num_prefill_requests=2, sum_prefill_tokens=228, sum_prefill_kv_tokens=256)
    decodes = [StepWorkload(num_decode_requests=2, sum_decode_kv_tokens=2 * c) for c in range(242, 259)]
    steps = [step(i, w) for i, w in enumerate([tails, *decodes])]
    measured, reason = m.check(point, EngineRun(steps, [128, 128], [18, 18]), 128, 16)
    assert reason is None and measured is steps[17]
    broken = list(steps)
    broken[5] = step(5, StepWorkload(num_decode_requests=1, sum_decode_kv_tokens=246))
    assert m.check(point, EngineRun(broken, [128, 128], [18, 18]), 128, 16) == (
        None, "no_lockstep:num_decode_requests=1!=2")  # fmt: skip
    assert m.check(point, EngineRun(steps[:17], [128, 128], [17, 17]), 128, 16) == (None, "split_into_17_forwards")


def test_an_output_that_is_no_real_folder_is_refused_for_what_it_is(small_plan, model_dir, tmp_path):
    """``-o`` a symbolic link to an empty folder, a file, or /dev/null: O-2 naming what it is, nothing written."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    for out, kind in ((tmp_path / "link", "a symbolic link"), (tmp_path / "file", "a file"),
                      (Path("/dev/null"), "a character device")):  # fmt: skip
        r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), "--smoke",
                    host=standin_host())  # fmt: skip
        assert r.exit_code == 2, r.stderr
        assert f"the output exists and is {kind}, not a folder [O-2]" in r.stderr, r.stderr
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["options"].__setitem__("benchmark_points", 7),
     "options.benchmark_points expected an object, found 7"),
    (lambda p: p["options"]["benchmark_points"].__setitem__("manifest_sha256", 2**64),
     "options.benchmark_points.manifest_sha256 expected a 64-hex digest, found 18446744073709551616"),
    (lambda p: p.__setitem__("options", []), "options expected an object, found []"),
])  # fmt: skip
def test_validate_and_publish_read_a_plan_the_same_way(collected, small_plan, engine, tmp_path, edit, message):
    """One reader: a plan fpm validate refuses is refused by fpm publish with the same line, never a crash."""
    import json

    plan = plan_of(small_plan)
    edit(plan)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(plan))
    line = f"fpm: {bad}: not a frozen collection plan: {message} [input]\n"
    v = run_fpm("validate", str(collected), "--plan", str(bad), host=standin_host(engine))
    table = tmp_path / "table.json"
    p = run_fpm("publish", str(collected), "--plan", str(bad), "-o", str(table), host=standin_host(engine))
    assert (v.exit_code, v.stderr) == (p.exit_code, p.stderr) == (2, line)
    assert not table.exists()


@pytest.mark.parametrize("edit", [lambda p: p.__setitem__("model", "someone/Other-Model"),
                                  lambda p: p["cells"][0].__setitem__("execution_profile", "edited")])  # fmt: skip
def test_a_plan_edited_after_it_was_written_is_refused_by_validate_and_publish(collected, small_plan, engine,
                                                                               tmp_path, edit):  # fmt: skip
    """A plan whose ``model`` (or any field) was edited by hand keeps the hash of the plan it was: fpm validate and
    fpm publish refuse it (exit 2, ``input``), so no table carries the edited model under the original hash."""
    import json

    plan = plan_of(small_plan)
    edit(plan)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(plan))
    table = tmp_path / "table.json"
    v = run_fpm("validate", str(collected), "--plan", str(bad), host=standin_host(engine))
    p = run_fpm("publish", str(collected), "--plan", str(bad), "-o", str(table), host=standin_host(engine))
    assert v.exit_code == p.exit_code == 2 and v.stderr == p.stderr, (v.stderr, p.stderr)
    assert v.stderr.startswith(f"fpm: {bad}: not a frozen collection plan: plan_sha256 {plan['plan_sha256'][:12]}… "
                               "is not the digest of its content (")  # fmt: skip
    assert v.stderr.endswith("the plan was edited after it was written; plan again, or collect with the plan as "
                             "written [input]\n")  # fmt: skip
    assert not table.exists()


def test_the_example_frozen_plan_edited_is_refused_and_a_reference_plan_is_read_as_it_is(tmp_path):
    """fpmcore's frozen plan (``sha256`` over every other field) is checked; the reference's plan, whose hash covers
    what its producer chose, is read as it is."""
    import json

    from fpmcore.validate.reader import plan_problem

    root = Path(__file__).resolve().parents[2]
    plan = json.loads((root / "examples" / "artifacts" / "glm53flash" / "plan.json").read_text())
    assert plan_problem(plan) is None
    plan["model"] = "someone/Other-Model"
    assert "sha256 6ea660072219… is not the digest of its content" in str(plan_problem(plan))
    reference = json.loads((root / "tests" / "validate" / "data" / "fpm_collection_plan_v10.json").read_text())
    assert plan_problem(reference) is None


def test_a_table_source_records_only_strings_of_the_plan(collected, small_plan, engine):
    """The table's source takes a string of the plan or ``null`` (a plan of 2**64 as its model publishes nothing:
    its hash no longer covers it; the document is built here from the results of the plan as written)."""
    from fpmcore.publish.publication import table_document

    plan = plan_of(small_plan)
    doc, results = publish_run(standin_host(engine), collected, plan)
    assert doc is not None
    plan["model"] = 2**64
    doc = table_document(collected, plan, results)
    assert doc["source"]["model"] is None
    assert doc["source"]["plan_sha256"] == plan["plan_sha256"]
