"""Reading and expanding a sweep grid: inputs, campaign folders, generated traces, keys, refusals."""

from __future__ import annotations

import json
import os
import shutil
import statistics

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import parse_trace_lines
from fpmcore.sweep import traces as gen
from fpmcore.sweep.grid import expand, task_key
from fpmcore.testing import run_fpm
from tests.sweep.support import ACCEPTANCE, GLM, GLM_TABLE, GLM_TRACE, ISSUE_GRID, PLAIN, ROOT, write_grid


def test_the_issue_grid_expands_as_written(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # its paths are relative to the grid file, like every shipped grid's
    sweep = expand(ISSUE_GRID)
    assert [dict(t.settings) for t in sweep.tasks] == [
        {"max_num_seqs": s, "max_num_batched_tokens": b} for s in (8, 16, 32) for b in (4096, 8192)
    ]
    assert sweep.axes == ("max_num_seqs", "max_num_batched_tokens")
    assert len({t.key for t in sweep.tasks}) == 6
    assert {t.table for t in sweep.tasks} == {None}


def test_the_acceptance_grid_is_profiles_x_traces_x_settings(tmp_path):
    sweep = expand(write_grid(tmp_path / "g.json", ACCEPTANCE))
    assert len(sweep.tasks) == 24
    assert sweep.axes == ("profile", "trace", "max_num_seqs", "max_num_batched_tokens")
    first = sweep.tasks[0]
    assert (sweep.label(first.profile), sweep.label(first.trace)) == (str(GLM), str(GLM_TRACE))
    assert sweep.label(sweep.tasks[12].profile) == str(PLAIN)  # settings vary fastest, then traces, then profiles


def test_keys_are_the_digests_of_the_inputs_not_their_names(tmp_path):
    """Copies of the inputs under other names give the same keys (what --resume skips by)."""
    for src in (GLM, GLM_TRACE, GLM_TABLE):
        shutil.copy(src, tmp_path / src.name)
    grid = {
        "profiles": [GLM.name],
        "traces": [GLM_TRACE.name],
        "tables": [GLM_TABLE.name],
        "settings": {"max_num_seqs": [8]},
    }
    a = expand(write_grid(tmp_path / "g.json", grid)).tasks[0]
    b = expand(write_grid(tmp_path / "h.json", {**grid, "profiles": [str(GLM)]})).tasks[0]
    assert a.key == b.key
    from fpmcore.documents.profile import load_profile, profile_digest

    assert a.profile == profile_digest(load_profile(GLM))
    assert a.key == task_key(a.profile, a.trace, a.table, {"max_num_seqs": 8})
    c = expand(write_grid(tmp_path / "i.json", {**grid, "settings": {"max_num_seqs": [9]}})).tasks[0]
    assert c.key != a.key


def test_relative_paths_are_found_next_to_the_grid_first(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    shutil.copy(GLM, tmp_path / "sub" / "p.json")
    grid = write_grid(tmp_path / "sub" / "g.json", {"profiles": ["p.json"], "traces": [str(GLM_TRACE)]})
    monkeypatch.chdir(tmp_path)
    assert expand(grid).tasks[0].table is None
    with pytest.raises(FpmError, match="no such file or folder: missing.json"):
        expand(write_grid(tmp_path / "sub" / "g.json", {"profiles": ["missing.json"], "traces": [str(GLM_TRACE)]}))


def test_a_campaign_folder_gives_its_profile_and_table(tmp_path):
    camp = tmp_path / "campaign"
    camp.mkdir()
    shutil.copy(GLM, camp / "profile.json")
    shutil.copy(GLM_TABLE, camp / "table.json")
    sweep = expand(write_grid(tmp_path / "g.json", {"profiles": ["campaign"], "traces": [str(GLM_TRACE)]}))
    (task,) = sweep.tasks
    assert sweep.label(task.profile) == "campaign" and sweep.label(task.table) == "campaign/table.json"
    # the grid's tables win over the campaign's; null is "no table"
    sweep = expand(
        write_grid(tmp_path / "g.json", {"profiles": ["campaign"], "traces": [str(GLM_TRACE)], "tables": [None]})
    )
    assert sweep.tasks[0].table is None
    (camp / "profile.json").unlink()
    with pytest.raises(FpmError, match="campaign folder campaign has no profile.json"):
        expand(tmp_path / "g.json")


def test_runs_list_a_subset(tmp_path):
    sweep = expand(
        write_grid(
            tmp_path / "g.json",
            {
                "profiles": [str(GLM)],
                "traces": [str(GLM_TRACE)],
                "runs": [{"max_num_seqs": 8}, {"max_num_batched_tokens": 4096}],
            },
        )
    )
    assert [dict(t.settings) for t in sweep.tasks] == [{"max_num_seqs": 8}, {"max_num_batched_tokens": 4096}]


def test_toml_and_json_grids_are_the_same_sweep(tmp_path):
    toml = tmp_path / "g.toml"
    toml.write_text(f'profiles = ["{GLM}"]\ntraces = ["{GLM_TRACE}"]\n[settings]\nmax_num_seqs = [8, 16]\n')
    js = write_grid(
        tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)], "settings": {"max_num_seqs": [8, 16]}}
    )
    assert [t.key for t in expand(toml).tasks] == [t.key for t in expand(js).tasks]


@pytest.mark.parametrize("grid,message", [
    ({"profiles": [], "traces": ["x"]}, "grid profiles must be a non-empty list, found []"),
    ({"traces": ["x"]}, "grid has no profiles"),
    ({"profiles": ["P"], "traces": ["T"], "setting": {}}, "unknown grid key 'setting'; grid keys are: profiles, traces, tables, settings, runs"),
    ({"profiles": ["P"], "traces": ["T"], "settings": {}, "runs": []}, "grid gives both settings and runs; give one"),
    ({"profiles": ["P"], "traces": ["T"], "settings": {"max_num_seqs": []}}, "setting max_num_seqs has an empty list of values"),
    ({"profiles": ["P"], "traces": [7]}, "grid traces[0] must be a path or a generator object, found 7"),
    ({"profiles": ["P"], "traces": ["T"], "settings": {"deployment": [1]}}, "profile P with settings {\"deployment\": 1}: profile has no deployment 1 [R-1]"),
])  # fmt: skip
def test_grid_refusals(tmp_path, grid, message):
    grid = json.loads(json.dumps(grid).replace('"P"', json.dumps(str(GLM))).replace('"T"', json.dumps(str(GLM_TRACE))))
    path = write_grid(tmp_path / "g.json", grid)
    r = run_fpm("sweep", str(path), "-o", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 2
    assert r.stderr == f"fpm: {path}: {message.replace('profile P', f'profile {GLM}')} [sweep]\n"


def test_a_grid_with_duplicate_keys_or_nan_is_refused(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('{"profiles": ["a"], "profiles": ["b"]}')
    r = run_fpm("sweep", str(path), "-o", str(tmp_path / "r.jsonl"))
    assert (r.exit_code, r.stderr) == (
        2,
        f"fpm: {path}: grid is not strict JSON: duplicate key 'profiles' at profiles, line 1 column 21 [sweep]\n",
    )


# -- generated traces -------------------------------------------------------------------------------


SPEC = {
    "generate": "poisson",
    "rate": [2, 8],
    "requests": 4000,
    "seed": 11,
    "prompt_len": {"dist": "lognormal", "median": 3000, "sigma": 0.5, "min": 100, "max": 20000},
    "output_len": {"dist": "uniform", "min": 16, "max": 256},
}


def test_generated_traces_are_poisson_at_the_given_rates_with_the_given_lengths():
    specs = gen.check_generator(SPEC, "g")
    assert [s["rate"] for s in specs] == [2, 8]
    for spec in specs:
        trace = parse_trace_lines(gen.generate_lines(spec))
        times = [r.arrival_time for r in trace.requests]
        gaps = [b - a for a, b in zip([0.0] + times, times)]
        # exponential gaps: mean 1/rate, standard deviation 1/rate (4,000 samples: within 5 %)
        assert statistics.fmean(gaps) == pytest.approx(1 / spec["rate"], rel=0.05)
        assert statistics.pstdev(gaps) == pytest.approx(1 / spec["rate"], rel=0.05)
        prompts = [r.prompt_len for r in trace.requests]
        assert min(prompts) >= 100 and max(prompts) <= 20000
        assert statistics.median(prompts) == pytest.approx(3000, rel=0.05)
        outs = [r.output_len for r in trace.requests]
        assert (min(outs), max(outs)) == (16, 256)
        assert statistics.fmean(outs) == pytest.approx(136, rel=0.03)


def test_generated_traces_are_seeded():
    a = gen.generate_lines(gen.check_generator(SPEC, "g")[0])
    assert a == gen.generate_lines(gen.check_generator(SPEC, "g")[0])
    assert a != gen.generate_lines(gen.check_generator({**SPEC, "seed": 12}, "g")[0])
    # a generated trace in another worker process is the same trace: the key is its digest
    script = (
        "import json,sys; from fpmcore.sweep import traces as g; "
        "print(json.dumps(g.generate_lines(g.check_generator(json.loads(sys.argv[1]), 'g')[0])))"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script, json.dumps(SPEC)], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONHASHSEED": "123"})  # fmt: skip
    assert json.loads(out.stdout) == a


def test_generated_traces_in_a_grid(tmp_path):
    spec = {**SPEC, "requests": 50, "rate": [1, 4]}
    sweep = expand(write_grid(tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [spec]}))
    assert [sweep.label(t.trace) for t in sweep.tasks] == [
        "poisson(rate=1,requests=50,seed=11)",
        "poisson(rate=4,requests=50,seed=11)",
    ]
    assert sweep.axes == ("trace",)


@pytest.mark.parametrize("change,message", [
    ({"generate": "uniform"}, 'a generated trace needs "generate": "poisson", found "uniform"'),
    ({"rate": 0}, "generated trace: rate must be a positive number or a list of them, found 0"),
    ({"requests": 0}, "generated trace: requests must be an integer from 1 to 1,000,000 (the limit of a generated trace; "
                     "a longer trace is a file), found 0"),
    ({"prompt_len": {"dist": "uniform", "min": 5}}, "prompt_len: a uniform distribution needs min and max"),
    ({"prompt_len": {"dist": "uniform", "min": 9, "max": 5}}, "prompt_len: min 9 exceeds max 5"),
    ({"output_len": {"dist": "choice", "values": []}}, "output_len: values must be a non-empty list of integers from 1 to 2**40, found []"),
    ({"output_len": 0}, "output_len must be an integer from 1 to 2**40 (1099511627776), found 0"),
    ({"burst": 1}, "generated trace: unknown field burst"),
    ({"requests": 10**9}, "generated trace: requests must be an integer from 1 to 1,000,000 (the limit of a generated "
                          "trace; a longer trace is a file), found 1000000000"),
    ({"requests": 2**31 - 1}, "generated trace: requests must be an integer from 1 to 1,000,000"),
    ({"requests": 2**40 + 10}, "generated trace: requests must be an integer from 1 to 1,000,000"),
    ({"prompt_len": {"dist": "lognormal", "median": 4000, "sigma": 1000}},
     "prompt_len: sigma must be a number from 0 to 10, found 1000"),
    ({"prompt_len": {"dist": "lognormal", "median": 1e300, "sigma": 1}},
     "prompt_len: median must be a number > 0 and <= 2**40, found 1e+300"),
    ({"prompt_len": {"dist": "uniform", "min": 1, "max": 2**40 + 1}},
     "prompt_len: max must be an integer from 1 to 2**40 (1099511627776), found 1099511627777"),
    ({"output_len": 2**40 + 1}, "output_len must be an integer from 1 to 2**40 (1099511627776), found 1099511627777"),
])  # fmt: skip
def test_generator_refusals(change, message):
    with pytest.raises(FpmError) as exc:
        gen.check_generator({**SPEC, **change}, "g")
    assert exc.value.message.startswith(message) and exc.value.rule == "sweep"


@pytest.mark.parametrize("change, message", [
    ({"rate": 10**400}, "generated trace: rate must be a positive number or a list of them, found 1000"),
    ({"rate": [1, 10**400]}, "generated trace: rate must be a positive number or a list of them, found [1, 1000"),
    ({"prompt_len": {"dist": ["lognormal"], "median": 100, "sigma": 1}},
     'prompt_len: dist must be uniform, lognormal or choice, found ["lognormal"]'),
    ({"prompt_len": {"dist": {"a": 1}, "median": 100, "sigma": 1}},
     'prompt_len: dist must be uniform, lognormal or choice, found {"a": 1}'),
    ({"prompt_len": {"dist": "lognormal", "median": 10**400, "sigma": 1}},
     "prompt_len: median must be a number > 0 and <= 2**40, found 1000"),
    ({"prompt_len": {"dist": "lognormal", "median": 4000, "sigma": 10**400}},
     "prompt_len: sigma must be a number from 0 to 10, found 1000"),
])  # fmt: skip
def test_a_generator_value_of_another_kind_is_refused_not_an_internal_error(tmp_path, change, message):
    """A rate, median or sigma of 10**400 (an integer no double holds), a distribution named by a list or an object:
    exit 2, one ``sweep`` line naming the field, never ``internal error`` (OverflowError, TypeError: found by the
    mutation campaign)."""
    profile = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"profiles": [str(profile)], "traces": [{**SPEC, **change}]}))
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"fpm: {grid}: traces[0]: {message}") and r.stderr.endswith("[sweep]\n"), r.stderr
    assert "internal error" not in r.stderr and not (tmp_path / "r.jsonl").exists()


def test_a_lognormal_draw_is_clamped_to_the_replay_bound():
    spec = {**SPEC, "rate": 1.0, "requests": 200, "prompt_len": {"dist": "lognormal", "median": 2**40, "sigma": 10}}
    (one,) = gen.check_generator(spec, "g")
    lengths = [json.loads(line)["prompt_len"] for line in gen.generate_lines(one)]
    assert max(lengths) == 2**40 and min(lengths) >= 1


@pytest.mark.parametrize("grid, message", [
    ({"settings": {"max_num_seqs": list(range(1, 1001)), "max_num_batched_tokens": list(range(1, 1001)),
                   "long_prefill_token_threshold": list(range(1, 1001))}},
     "the grid makes 1,000,000,000 tasks (profiles x traces x tables x settings: 1 x 1 x 1 x 1,000,000,000); "
     "the limit is 100,000 (split the sweep, or list the combinations to run under runs)"),
    ({"traces": [{**SPEC, "rate": [1.0] * 20, "requests": 1_000_000}]},
     "the grid's generated traces hold 20,000,000 requests; the limit is 10,000,000 "
     "(split the sweep, or give long traces as files)"),
    ({"profiles": ["p"] * 400, "traces": ["t"] * 400},
     "the grid makes 160,000 tasks (profiles x traces x tables x settings: 400 x 400 x 1 x 1)"),
])  # fmt: skip
def test_the_size_of_a_sweep_is_refused_before_anything_is_read(tmp_path, grid, message):
    """Nothing named by the grid exists: the size is refused first, from the lists' lengths."""
    path = write_grid(tmp_path / "grid.json", {"profiles": ["missing.json"], "traces": ["missing.jsonl"], **grid})
    r = run_fpm("sweep", str(path), "-o", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 2 and r.stderr.startswith(f"fpm: {path}: {message}") and r.stderr.endswith(" [sweep]\n")
    assert r.stderr.count("\n") == 1


def test_a_profile_whose_runtime_has_no_replay_semantics_is_refused(tmp_path):
    """R-1, as ``fpm replay``: the replay rules come from the runtime plugin of the profile's backend_version."""
    from fpmcore.testing import make_host

    grid = write_grid(
        tmp_path / "g.json", {"profiles": [str(PLAIN)], "traces": [str(GLM_TRACE)], "settings": {"max_num_seqs": [8]}}
    )
    host = make_host(entry_points=("vllm_027",))
    with pytest.raises(FpmError) as e:
        expand(grid, replay_rules=host.hooks.replay_rules)
    assert e.value.message == (
        f'profile {PLAIN} with settings {{"max_num_seqs": 8}}: no installed runtime plugin gives replay semantics '
        "for vllm==0.33.0; runtimes with replay semantics: vllm==0.27.0 [R-1]"
    )
    r = run_fpm("sweep", str(grid), "--output", str(tmp_path / "out.jsonl"), host=make_host())
    assert r.exit_code == 2
    assert r.stderr.endswith("runtimes with replay semantics: none [R-1] [sweep]\n"), r.stderr


def test_a_missing_input_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    grid = write_grid(tmp_path / "g.json", {"profiles": ["nope/p.json"], "traces": [str(GLM_TRACE)]})
    with pytest.raises(FpmError) as e:
        expand(grid)
    assert e.value.message == (f"no such file or folder: nope/p.json (looked next to the grid, {tmp_path}/nope/p.json, "
                               f"and in the current folder, {tmp_path}/nope/p.json)")  # fmt: skip


def test_the_shipped_grids_name_their_inputs_relative_to_themselves(monkeypatch, tmp_path):
    """Run from any folder, every grid of examples/sweeps/ finds its inputs."""
    monkeypatch.chdir(tmp_path)
    for grid in sorted((ROOT / "examples" / "sweeps").iterdir()):
        assert expand(grid).tasks, grid


def test_a_grid_reads_every_installed_trace_format(tmp_path):
    """A trace file of a grid is read as ``fpm replay --trace`` reads it, its format sniffed: the Mooncake
    excerpt, a BurstGPT and an Azure CSV are each the trace ``fpm trace convert`` makes of them (one digest)."""
    mooncake = ROOT / "examples" / "traces" / "public" / "mooncake-conversation-40.jsonl"
    burstgpt = tmp_path / "burst.csv"
    burstgpt.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                        "5,ChatGPT,472,18,490,Conversation log\n7,GPT-4,1087,0,1087,Conversation log\n"
                        "9,GPT-4,20,230,250,API log\n")  # fmt: skip
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n")  # fmt: skip
    files = [mooncake, burstgpt, azure]
    sweep = expand(write_grid(tmp_path / "g.json", {"profiles": [str(PLAIN)], "traces": [str(f) for f in files]}))
    assert len(sweep.tasks) == 3
    for task, trace in zip(sweep.tasks, files):
        converted = tmp_path / f"{trace.stem}.jsonl"
        assert run_fpm("trace", "convert", str(trace), "-o", str(converted)).exit_code == 0
        again = expand(write_grid(tmp_path / "h.json", {"profiles": [str(PLAIN)], "traces": [str(converted)]}))
        assert task.trace == again.tasks[0].trace, trace.name
    assert sweep.inputs[sweep.tasks[0].trace].value.requests[1].hash_ids[:2] == (0, 14)


def test_a_sweep_of_the_mooncake_excerpt_equals_its_replay(tmp_path):
    """``fpm sweep`` replays the unconverted Mooncake file as ``fpm replay`` does (block-hash sharing included)."""
    mooncake = ROOT / "examples" / "traces" / "public" / "mooncake-conversation-40.jsonl"
    grid = write_grid(tmp_path / "g.json", {"profiles": [str(PLAIN)], "traces": [str(mooncake)],
                                            "settings": {"max_num_seqs": [16]}})  # fmt: skip
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--json")
    assert r.exit_code == 0, r.stderr
    (row,) = r.json()["rows"]
    replay = run_fpm("replay", str(PLAIN), "--trace", str(mooncake), "--max-num-seqs", "16", "--json")
    assert replay.exit_code == 0, replay.stderr
    summary = replay.json()["summary"]
    assert summary["prefix_hit_tokens"] > 0
    for key in ("finished", "steps", "preemptions_total", "prefix_hit_tokens", "e2e_s"):
        assert row["summary"][key] == summary[key], key
