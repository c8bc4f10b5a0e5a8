"""The mutation campaign over traces, latency tables, sweep grids, plans and artifact runs (``tests/fuzz/README.md``).

Each example mutates a committed input and runs the command that reads it:

* a trace (``fpm replay PROFILE --trace T --json``),
* an FPM latency table (``fpm replay … --fpm-table TABLE --json``),
* a sweep grid (``fpm sweep GRID -o RESULTS --json``),
* a plan or a file of an artifact run (``fpm validate RUN --plan PLAN --json``),

and asserts what issue 13 asks of every input: exit 0, 1 or 2 and never a
traceback or ``internal error``; one JSON document on stdout whose error
diagnostics name their rule; no hang (each run under a minute); the inputs
unchanged, nothing written but the output, and the output absent or
complete.  ``FPM_FUZZ_EXAMPLES`` and ``FPM_FUZZ_SEED`` as in
:mod:`tests.fuzz.test_campaign`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from fpmcore.testing import make_host
from tests.fuzz.conftest import count, work_dir
from tests.fuzz.mutations import encode, mutate_bytes, mutate_document, snapshot
from tests.fuzz.running import BATCH, SEED, campaign, run_json

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
PROFILE = EX / "profiles" / "glm53flash-tp4.fpm-profile.json"
TABLE = EX / "fpm_tables" / "glm53flash-tp4.json"
ARTIFACTS = EX / "artifacts" / "glm53flash"
PRODUCER = EX / "artifacts" / "producer"
#: A short trace that touches the rules of R-32/R-33: the three prefix kinds, several requests.
TRACE_LINES = [
    {"request_id": "a", "arrival_time": 0.0, "prompt_len": 3000, "output_len": 4, "shared_prefix_id": "sys",
     "shared_prefix_len": 2176},
    {"request_id": "b", "arrival_time": 0.01, "prompt_len": 5000, "output_len": 3, "prefix_of": "a", "prefix_of_len": 2176},
    {"request_id": "c", "arrival_time": 0.02, "prompt_len": 700, "output_len": 5},
    {"request_id": "d", "arrival_time": 0.03, "prompt_len": 1100, "output_len": 2, "hash_ids": [7, 8, 9],
     "hash_block_tokens": 512},
    {"request_id": "e", "arrival_time": 0.04, "prompt_len": 1500, "output_len": 2, "hash_ids": [7, 8, 4],
     "hash_block_tokens": 512},
]  # fmt: skip


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_033", "glm53flash"))


def _lines_doc(data) -> bytes:
    lines = [dict(x) for x in TRACE_LINES]
    op = data.draw(st.sampled_from(["line"] * 6 + ["swap", "repeat", "drop", "blank", "crlf"]), label="trace op")
    if op == "line":
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        text = [json.dumps(x) for x in lines]
        text[i] = encode(mutate_document(data, lines[i]))
    else:
        text = [json.dumps(x) for x in lines]
        if op == "swap":
            text[0], text[1] = text[1], text[0]
        elif op == "repeat":
            text.append(text[data.draw(st.integers(0, len(text) - 1))])
        elif op == "drop":
            del text[0]
        elif op == "blank":
            text.insert(1, "")
        elif op == "crlf":
            text = [t + "\r" for t in text]
    return mutate_bytes(data, ("\n".join(text) + "\n").encode("utf-8", "surrogatepass"))


@seed(SEED)
@campaign("traces")
@given(data=st.data())
def test_mutated_traces(host, data):
    """``fpm replay PROFILE --trace T --json`` on a mutated trace."""
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        trace = Path(tmp) / "t.jsonl"
        for _ in range(BATCH):
            trace.write_bytes(_lines_doc(data))
            before = snapshot(Path(tmp))
            run_json("replay", str(PROFILE), "--trace", str(trace), "--json", host=host)
            assert snapshot(Path(tmp)) == before
            count("traces")


@seed(SEED)
@campaign("tables")
@given(data=st.data())
def test_mutated_tables(host, data):
    """``fpm replay PROFILE --trace T --fpm-table TABLE --json`` on a mutated latency table."""
    base = json.loads(TABLE.read_bytes())
    base["rows"] = base["rows"][:6] + base["rows"][-6:]  # both phases, fewer rows to walk
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        (root / "t.jsonl").write_text("\n".join(json.dumps(x) for x in TRACE_LINES) + "\n")
        table = root / "table.json"
        for _ in range(BATCH):
            table.write_bytes(mutate_bytes(data, encode(mutate_document(data, base)).encode("utf-8", "surrogatepass")))
            before = snapshot(root)
            run_json("replay", str(PROFILE), "--trace", str(root / "t.jsonl"), "--fpm-table", str(table), "--json",
                 host=host)  # fmt: skip
            assert snapshot(root) == before
            count("tables")


GRID = {"profiles": ["p.fpm-profile.json"], "traces": ["t.jsonl"], "tables": ["table.json"],
        "settings": {"max_num_seqs": [1, 8], "prefix_caching": ["off"]}}  # fmt: skip


@seed(SEED)
@campaign("grids")
@given(data=st.data())
def test_mutated_grids(host, data):
    """``fpm sweep GRID -o RESULTS --json`` on a mutated grid: results absent (refused before any run) or whole rows."""
    from fpmcore.sweep.results import read_rows

    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        shutil.copy(PROFILE, root / "p.fpm-profile.json")
        shutil.copy(TABLE, root / "table.json")
        (root / "t.jsonl").write_text("\n".join(json.dumps(x) for x in TRACE_LINES) + "\n")
        grid = root / "grid.json"
        (root / "out").mkdir()
        out = root / "out" / "r.jsonl"
        for _ in range(BATCH):
            grid.write_bytes(mutate_bytes(data, encode(mutate_document(data, GRID)).encode("utf-8", "surrogatepass")))
            before = snapshot(root)
            res, _doc = run_json("sweep", str(grid), "-o", str(out), "--engine", "serial", "--workers", "1", "--json",
                             host=host)  # fmt: skip
            assert snapshot(root, skip=out) == before  # the inputs unchanged, nothing else written
            if out.exists():
                _rows, keep = read_rows(out)  # whole rows only: a torn or corrupt row is refused
                assert keep == out.stat().st_size
                out.unlink()
            assert list((root / "out").iterdir()) == []
            count("grids")


def _run_files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file())


@seed(SEED)
@campaign("plans")
@given(data=st.data(), what=st.sampled_from(["plan", "plan", "run"]))
def test_mutated_plans_and_runs(host, data, what):
    """``fpm validate RUN --plan PLAN --json`` on a mutated plan or a mutated file of the artifact run."""
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        shutil.copytree(ARTIFACTS, root / "a", symlinks=True)
        plan, run = root / "a" / "plan.json", root / "a" / "run"
        if what == "plan":
            target = plan
        else:
            files = _run_files(run)
            target = files[data.draw(st.integers(0, len(files) - 1), label="file")]
        raw = target.read_bytes()
        if target.suffix == ".jsonl":
            lines = raw.decode("utf-8").splitlines()
            i = data.draw(st.integers(0, len(lines) - 1), label="line")
            lines[i] = encode(mutate_document(data, json.loads(lines[i])))
            new = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
        else:
            new = encode(mutate_document(data, json.loads(raw))).encode("utf-8", "surrogatepass")
        target.write_bytes(mutate_bytes(data, new))
        before = snapshot(root)
        res, doc = run_json("validate", str(run), "--plan", str(plan), "--json", host=host,
                        env={"FPM_GLM53FLASH_PRODUCER_DIR": str(PRODUCER)})  # fmt: skip
        if res.exit_code == 1:
            assert doc.get("diagnostics") or any(c.get("diagnostics") for c in doc.get("cells", [])), doc
        assert snapshot(root) == before  # validation writes nothing
    count("plans" if what == "plan" else "artifact runs")
