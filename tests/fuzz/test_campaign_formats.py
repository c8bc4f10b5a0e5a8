"""The mutation campaign over the oracle's SCHED.json traces, sweep grids of generated traces and plans through
``fpm publish`` (``tests/fuzz/README.md``).

* a SCHED.json trace (``fpm replay PROFILE --trace SCHED.json --json``);
* a sweep grid whose traces are generated (``{"generate": "poisson", …}``): rate, requests, seed, the length
  distributions and their parameters (``fpm sweep GRID -o RESULTS --json``), and grids too large for the
  bounds of a sweep, which are refused before anything is generated;
* the plan (or a file of the run) of ``examples/artifacts/glm53flash`` through ``fpm validate`` and then
  ``fpm publish -o TABLE``: a run that validate accepts publishes a whole table or refuses with a rule.

Every input asserts what :func:`tests.fuzz.running.run_json` asserts (exit 0, 1 or 2, no traceback, one JSON
document, named rules, no hang), the inputs unchanged, nothing written but the output and the output absent
or whole.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from fpmcore.sweep import traces as generated
from fpmcore.testing import make_host
from tests.fuzz.conftest import count, work_dir
from tests.fuzz.mutations import encode, mutate_bytes, mutate_document, repin_plan, snapshot
from tests.fuzz.running import BATCH, SEED, campaign, run_json

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
PROFILE = EX / "profiles" / "glm53flash-tp4.fpm-profile.json"
TABLE = EX / "fpm_tables" / "glm53flash-tp4.json"
ARTIFACTS = EX / "artifacts" / "glm53flash"
PRODUCER = EX / "artifacts" / "producer"

#: The oracle's SCHED.json: requests keyed by id, a step of arrival, a prefix taken from an earlier request.
SCHED = {"requests": {
    "a": {"prompt_len": 3000, "seed": 1, "max_tokens": 4, "arrival_step": 0},
    "b": {"prompt_len": 5000, "seed": 2, "max_tokens": 3, "arrival_step": 2, "prefix_from": "a", "prefix_len": 2176},
    "c": {"prompt_len": 700, "seed": 3, "max_tokens": 5, "arrival_step": 3, "priority": 1},
}}  # fmt: skip

#: A grid of two generators (every distribution, a list of rates and one rate), small enough to replay at once.
GENERATED_GRID = {
    "profiles": ["p.fpm-profile.json"],
    "traces": [
        {"generate": "poisson", "rate": [1.0, 4.0], "requests": 4, "seed": 7, "name": "mixed",
         "prompt_len": {"dist": "lognormal", "median": 3000, "sigma": 0.8, "min": 64, "max": 60000},
         "output_len": {"dist": "uniform", "min": 2, "max": 6}},
        {"generate": "poisson", "rate": 2, "requests": 3, "prompt_len": {"dist": "choice", "values": [700, 2176]},
         "output_len": 3},
    ],
    "tables": ["table.json"],
    "settings": {"max_num_seqs": [8]},
}  # fmt: skip


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_033", "glm53flash"))


@seed(SEED)
@campaign("sched")
@given(data=st.data())
def test_mutated_sched_json_traces(host, data):
    """``fpm replay PROFILE --trace SCHED.json --json`` on a mutated SCHED.json."""
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        trace = Path(tmp) / "SCHED.json"
        for _ in range(BATCH):
            doc = mutate_document(data, SCHED)
            trace.write_bytes(mutate_bytes(data, encode(doc).encode("utf-8", "surrogatepass")))
            before = snapshot(Path(tmp))
            run_json("replay", str(PROFILE), "--trace", str(trace), "--json", host=host)
            assert snapshot(Path(tmp)) == before
            count("sched traces")


def _oversized(data) -> tuple[dict, str]:
    """A grid past one of the bounds of a sweep, and the words of its refusal."""
    grid = json.loads(json.dumps(GENERATED_GRID))
    gen = grid["traces"][0]
    which = data.draw(st.sampled_from(["one trace", "all traces", "tasks"]), label="oversize")
    if which == "one trace":  # one generated trace of more requests than a trace may hold
        gen["requests"] = data.draw(st.sampled_from([generated.MAX_REQUESTS + 1, 10**12, 2**63]))
        return grid, f"requests must be an integer from 1 to {generated.MAX_REQUESTS:,}"
    if which == "all traces":  # each trace allowed, together more than a grid may generate
        gen["requests"] = generated.MAX_REQUESTS
        gen["rate"] = [1.0 + i for i in range(data.draw(st.integers(11, 40), label="rates"))]
        return grid, f"the limit is {generated.MAX_GENERATED_REQUESTS:,}"
    grid["settings"] = {"max_num_seqs": list(range(1, 1001)), "max_num_batched_tokens": list(range(4096, 4096 + 101))}
    return grid, "tasks"


@seed(SEED)
@campaign("generated")
@given(data=st.data())
def test_mutated_generated_grids(host, data):
    """``fpm sweep GRID -o RESULTS --json`` on a grid of mutated trace generators: results absent or whole rows,
    and a grid past the bounds refused before any trace is generated."""
    from fpmcore.sweep.results import read_rows

    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        shutil.copy(PROFILE, root / "p.fpm-profile.json")
        shutil.copy(TABLE, root / "table.json")
        grid = root / "grid.json"
        (root / "out").mkdir()
        out = root / "out" / "r.jsonl"
        for _ in range(BATCH):
            refusal = None
            if data.draw(st.integers(0, 9), label="oversize?") == 0:
                doc, refusal = _oversized(data)
                raw = encode(doc).encode("utf-8")
            else:
                i = data.draw(st.integers(0, 1), label="generator")
                mutated = mutate_document(data, GENERATED_GRID["traces"][i])
                doc = {**GENERATED_GRID, "traces": [mutated if j == i else t for j, t in
                                                    enumerate(GENERATED_GRID["traces"])]}  # fmt: skip
                raw = mutate_bytes(data, encode(doc).encode("utf-8", "surrogatepass"))
            grid.write_bytes(raw)
            before = snapshot(root)
            res, out_doc = run_json("sweep", str(grid), "-o", str(out), "--engine", "serial", "--workers", "1",
                                    "--json", host=host)  # fmt: skip
            if refusal is not None:
                assert res.exit_code == 2 and refusal in res.stderr, res.stderr
                assert not out.exists()
            assert snapshot(root, skip=out) == before  # the inputs unchanged, nothing else written
            if out.exists():
                _rows, keep = read_rows(out)  # whole rows only
                assert keep == out.stat().st_size
                out.unlink()
            assert list((root / "out").iterdir()) == []
            count("generated grids")


def _mutated_file(data, target: Path, run: Path | None = None) -> bytes:
    """``target`` mutated; a plan (``run`` given) re-pinned to its new content three times in four."""
    raw = target.read_bytes()
    if target.suffix == ".jsonl":
        lines = raw.decode("utf-8").splitlines()
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        lines[i] = encode(mutate_document(data, json.loads(lines[i])))
        new = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    else:
        new = encode(mutate_document(data, json.loads(raw))).encode("utf-8", "surrogatepass")
        if run is not None and data.draw(st.integers(0, 3), label="repin") > 0:
            new = repin_plan(new, run)
    return mutate_bytes(data, new)


@seed(SEED)
@campaign("publish")
@given(data=st.data(), what=st.sampled_from(["plan", "plan", "plan", "run"]))
def test_mutated_plans_through_publish(host, data, what):
    """``fpm validate`` then ``fpm publish RUN --plan PLAN -o TABLE --json`` on a mutated plan (or run file):
    a refused run publishes nothing, an accepted one a table the replay reads, or a refusal naming its rule."""
    from fpmcore.replay import load_table
    from fpmcore.replay.table import table_rows

    env = {"FPM_GLM53FLASH_PRODUCER_DIR": str(PRODUCER)}
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        shutil.copytree(ARTIFACTS, root / "a", symlinks=True)
        plan, run = root / "a" / "plan.json", root / "a" / "run"
        if what == "plan":
            target = plan
        else:
            files = sorted(p for p in run.rglob("*") if p.is_file())
            target = files[data.draw(st.integers(0, len(files) - 1), label="file")]
        target.write_bytes(_mutated_file(data, target, run if what == "plan" else None))
        (root / "out").mkdir()
        table = root / "out" / "table.json"
        before = snapshot(root, skip=table)
        checked, _ = run_json("validate", str(run), "--plan", str(plan), "--json", host=host, env=env)
        res, doc = run_json("publish", str(run), "--plan", str(plan), "-o", str(table), "--json", host=host, env=env)
        assert snapshot(root, skip=table) == before  # the plan and the run unchanged, nothing else written
        if checked.exit_code != 0:  # a run validate refuses publishes nothing
            assert res.exit_code != 0 and not table.exists(), (checked.exit_code, res.exit_code)
        if table.exists():
            assert res.exit_code == 0 and doc["rows"] == len(table_rows(load_table(table)))
        else:
            assert res.exit_code != 0
        assert [p.name for p in (root / "out").iterdir()] in ([], ["table.json"])
    count("published plans" if what == "plan" else "published runs")
