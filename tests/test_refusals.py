"""The command line under mistakes and abuse (fpmcore issue 13): each finding, its exit code and message class.

Inputs go through the one strict reader (:mod:`fpmcore.documents.jsonio`), outputs
through the one output rule (:mod:`fpmcore.documents.output_files`): every refusal below is
one line naming its rule, the file and the value; never ``internal error``,
never a traceback, never a file written where it should not be.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.probe import dry_run as dryprobe
from fpmcore.probe import live as host_probe
from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "probes"
GLM_EVIDENCE = EXAMPLES / "glm53flash-tp4"
SLIDING = EXAMPLES / "sliding-window"
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
TRACE = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
MODELS = ROOT / "tools" / "probe_models"


class FakeRuntime:
    """A runtime plugin whose dry probe writes the committed sliding-window example through
    :func:`fpmcore.probe.dry_run.evidence_files` and :func:`fpmcore.probe.dry_run.write_files`, in place of vLLM's planning."""

    PIN = "vllm==9.9.9"

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="fake_runtime", kind="runtime", targets=(self.PIN,), api_version=API_VERSION)

    @hookimpl
    def fpm_dry_probe(self, runtime, model_path, out_dir, tp, caching, configuration):
        index = json.loads((SLIDING / "observations.json").read_bytes())
        ((label, config),) = index["configurations"].items()
        (attempt,) = config["attempts"]
        phases = {}
        for phase, entry in attempt["phases"].items():
            manifest = json.loads((SLIDING / entry["launch_manifest"]["path"]).read_bytes())
            records = [json.loads((SLIDING / a["path"]).read_bytes()) for a in entry["artifacts"]
                       if a["kind"] == "observation"]  # fmt: skip
            phases[phase] = (manifest, records)
        files = dryprobe.evidence_files(
            configuration=label, attempt=attempt["attempt_id"], launch=config["launch"],
            model_config=(SLIDING / dryprobe.MODEL_CONFIG).read_bytes(), phases=phases,
        )  # fmt: skip
        dryprobe.write_files(Path(out_dir), files)
        return {"configuration": label, "attempt_id": attempt["attempt_id"], "phases": {}}


@pytest.fixture(scope="module")
def host():
    return make_host(FakeRuntime(), entry_points=("vllm_027", "vllm_033", "glm53flash"))


def _model_json() -> Path:
    """The MODEL.json the sliding-window example was planned from (its attempt id names the hash)."""
    index = json.loads((SLIDING / "observations.json").read_bytes())
    (config,) = index["configurations"].values()
    short = config["active_attempt_id"].rsplit("-", 1)[1]
    (path,) = [p for p in MODELS.glob("*.json") if hashlib.sha256(p.read_bytes()).hexdigest().startswith(short)]
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _clean(res) -> None:
    """No traceback, no internal error, one line on stderr at most."""
    assert "Traceback" not in res.stdout + res.stderr
    assert "internal error" not in res.stdout + res.stderr
    assert res.stderr.count("\n") <= 1, res.stderr


def _evidence(tmp_path: Path, src: Path = GLM_EVIDENCE, name: str = "ev") -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _repin(folder: Path, edit_index=None, edits=None) -> None:
    """Apply ``edits`` (relative path -> fn(document)) to files of an evidence folder and pin their new hashes."""
    index = json.loads((folder / "observations.json").read_bytes())
    if edit_index is not None:
        edit_index(index)
    for rel, fn in (edits or {}).items():
        doc = json.loads((folder / rel).read_bytes())
        fn(doc)
        (folder / rel).write_text(json.dumps(doc, indent=1) + "\n")
    for conf in index["configurations"].values():
        for attempt in conf["attempts"]:
            for phase in attempt["phases"].values():
                for ref in [phase["launch_manifest"], *phase["artifacts"]]:
                    ref["sha256"] = hashlib.sha256((folder / ref["path"]).read_bytes()).hexdigest()
    (folder / "observations.json").write_text(json.dumps(index, indent=1) + "\n")


def _records(folder: Path, kind: str = "observation") -> list[str]:
    index = json.loads((folder / "observations.json").read_bytes())
    return [a["path"] for c in index["configurations"].values() for at in c["attempts"]
            for ph in at["phases"].values() for a in ph["artifacts"] if a["kind"] == kind]  # fmt: skip


# --------------------------------------------------------------------------
# §4 misleading messages
# --------------------------------------------------------------------------


def test_import_of_an_empty_folder_names_the_missing_index(tmp_path, host):
    res = run_fpm("import", str(tmp_path), host=host)
    assert res.exit_code == 2
    assert res.stdout == f"-: -/-: runtime observation index is missing: {tmp_path / 'observations.json'} [I-1]\n"
    _clean(res)


def test_an_unreadable_index_is_named_before_the_output_kind(tmp_path, host):
    """Without a readable index the import cannot tell a file output from a folder: I-1 is reported, nothing written."""
    (tmp_path / "out").mkdir()
    res = run_fpm("import", str(tmp_path), "-o", str(tmp_path / "out"), host=host)
    assert res.exit_code == 2
    assert res.stdout == f"-: -/-: runtime observation index is missing: {tmp_path / 'observations.json'} [I-1]\n"
    assert list((tmp_path / "out").iterdir()) == []
    res = run_fpm("import", str(tmp_path), "-o", str(tmp_path / "no" / "p.json"), host=host)
    assert res.exit_code == 2 and res.stderr.endswith(" [O-1]\n")


def test_probe_of_a_missing_model_json_says_so_before_the_runtime(tmp_path, host, monkeypatch):
    def no_runtime_lookup(framework="vllm"):
        raise AssertionError("the runtime is looked for after the inputs are checked")

    monkeypatch.setattr(host_probe, "installed_runtime", no_runtime_lookup)
    missing = tmp_path / "nonexistent.json"
    res = run_fpm("probe", "--dry-run", str(missing), "-o", str(tmp_path / "ev"), host=host)
    assert (res.exit_code, res.stderr) == (2, f"fpm: {missing}: cannot read: No such file or directory [JSON]\n")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"layers": [], "layers": []}')
    res = run_fpm("probe", "--dry-run", str(bad), "-o", str(tmp_path / "ev"), host=host)
    assert (res.exit_code, res.stderr) == (
        2,
        f"fpm: {bad}: duplicate key 'layers' at layers, line 1 column 16 [JSON]\n",
    )
    assert not (tmp_path / "ev").exists()


# --------------------------------------------------------------------------
# §1, §10, §14: output paths, checked before the work
# --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["import", "plan"])
def test_output_path_refusals(tmp_path, host, command):
    inp = _evidence(tmp_path) if command == "import" else PROFILE
    before = _tree(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "fifo").touch()
    cases = [
        (tmp_path / "nonexistent" / "dir" / "x.json", "O-1",
         f"the folder {tmp_path / 'nonexistent' / 'dir'} does not exist; fpm never creates missing folders (create it first)"),
        (tmp_path / "adir", "O-2", "the output exists and is a directory, not a regular file"),
        (Path("/dev/null"), "O-2", "the output exists and is a character device, not a regular file"),
        (Path("/proc/fpm-out.json"), "O-4", "cannot write in the folder /proc: "),
    ]  # fmt: skip
    if command == "import":
        cases.append(
            (
                inp / "observations.json",
                "O-3",
                f"the output is the input {inp / 'observations.json'}; give another output path",
            )
        )
    else:
        cases.append((PROFILE, "O-3", f"the output is the input {PROFILE}; give another output path"))
    for target, rule, message in cases:
        args = [command, str(inp), "-o", str(target)] + (["--model", "glm53flash"] if command == "plan" else [])
        res = run_fpm(*args, host=host)
        assert res.exit_code == 2, (target, res.stdout, res.stderr)
        prefix = "fpm: "
        assert res.stderr.startswith(f"{prefix}{target}: {message}") and res.stderr.endswith(f" [{rule}]\n"), res.stderr
        assert ".tmp" not in res.stderr and res.stdout == ""  # nothing ran, no temporary name leaks
        _clean(res)
    assert not (tmp_path / "nonexistent").exists()
    assert Path("/dev/null").is_char_device()
    assert {k: v for k, v in _tree(tmp_path).items() if k != "fifo"} == before  # every input unchanged


@pytest.mark.parametrize("command", ["import", "plan"])
def test_outputs_are_written_with_the_mode_of_ordinary_files(tmp_path, host, command):
    """``import -o`` and ``plan -o`` write 0666 less the umask (0644 under 022), as ``replay --out`` does."""
    inp = _evidence(tmp_path) if command == "import" else PROFILE
    out = tmp_path / "out.json"
    old = os.umask(0o022)
    try:
        res = run_fpm(command, str(inp), "-o", str(out), host=host)
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ev") == ["out.json"]


# --------------------------------------------------------------------------
# §9: names from input never become paths outside the output
# --------------------------------------------------------------------------


@pytest.mark.parametrize("label, reason", [
    ("../../escaped/pwn", "it holds a path separator"),
    ("/tmp/fpm-absolute-pwn", "it holds a path separator (an absolute path)"),
    ("..", "it is '..'"),
    ("a\x00b", "it holds a NUL character"),
])  # fmt: skip
def test_a_configuration_label_that_is_a_path_is_refused(tmp_path, host, label, reason):
    ev = _evidence(tmp_path / "in")
    index = json.loads((ev / "observations.json").read_bytes())
    (conf,) = index["configurations"].values()
    index["configurations"] = {"glm53flash-tp4": conf, label: conf}
    (ev / "observations.json").write_text(json.dumps(index))
    out = tmp_path / "in" / "x" / "out"
    out.parent.mkdir()
    before = _tree(tmp_path)
    res = run_fpm("import", str(ev), "-o", str(out), host=host)
    assert res.exit_code == 2
    shown = json.dumps(label)
    assert res.stderr == f"fpm: configuration label {shown} cannot name a file: {reason} [O-6]\n"
    assert _tree(tmp_path) == before and not out.exists()
    assert not Path("/tmp/fpm-absolute-pwn.fpm-profile.json").exists()
    # without -o no label is a path: the import runs and judges each configuration
    res = run_fpm("import", str(ev), "--json", host=host)
    assert res.exit_code == 1 and [r["configuration"] for r in res.json()["results"]] == sorted(
        ["glm53flash-tp4", label]
    )


def test_several_configurations_publish_one_folder(tmp_path, host):
    ev = _evidence(tmp_path)
    index = json.loads((ev / "observations.json").read_bytes())
    (conf,) = index["configurations"].values()
    index["configurations"] = {"glm53flash-tp4": conf, "other": conf}
    (ev / "observations.json").write_text(json.dumps(index))
    out = tmp_path / "profiles"
    for _ in range(2):  # the second run replaces the first run's folder
        res = run_fpm("import", str(ev), "-o", str(out), host=host)
        assert res.exit_code == 1  # 'other' is incomplete (its manifests name another configuration, I-11)
        assert sorted(p.name for p in out.iterdir()) == ["fpm-manifest.json", "glm53flash-tp4.fpm-profile.json"]
    manifest = json.loads((out / "fpm-manifest.json").read_bytes())
    profile = (out / "glm53flash-tp4.fpm-profile.json").read_bytes()
    assert manifest["files"] == {"glm53flash-tp4.fpm-profile.json": hashlib.sha256(profile).hexdigest()}
    (out / "notes.txt").write_text("mine")
    res = run_fpm("import", str(ev), "-o", str(out), host=host)
    assert res.exit_code == 2 and res.stderr == (
        f"fpm: {out}: the output folder exists and holds files fpm did not write; "
        "give a new or an empty folder [O-2]\n")  # fmt: skip
    assert (out / "notes.txt").read_text() == "mine"
    res = run_fpm("import", str(ev), "-o", str(ev), host=host)
    assert res.exit_code == 2 and "[O-3]" in res.stderr


# --------------------------------------------------------------------------
# probe -o: the evidence folder published at once
# --------------------------------------------------------------------------


def test_probe_publishes_a_complete_folder_and_never_overwrites(tmp_path, host, monkeypatch):
    monkeypatch.setattr(host_probe, "installed_runtime", lambda framework="vllm": "9.9.9")
    model = _model_json()
    out = tmp_path / "ev"
    res = run_fpm("probe", "--dry-run", str(model), "-o", str(out), "--json", host=host)
    assert res.exit_code == 0, res.stderr
    assert _tree(out) == _tree(SLIDING)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev"]  # no temporary sibling left
    again = run_fpm("probe", "--dry-run", str(model), "-o", str(out), host=host)
    assert again.exit_code == 2 and again.stderr == (
        f"fpm: {out}: the output folder exists and is not empty; a probe never overwrites evidence [O-2]\n"
    )
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("x")
    res = run_fpm("probe", "--dry-run", str(model), "-o", str(busy), host=host)
    assert res.exit_code == 2 and "[O-2]" in res.stderr and _tree(busy) == {"notes.txt": b"x"}
    res = run_fpm("probe", "--dry-run", str(model), "-o", str(tmp_path / "no" / "ev"), host=host)
    assert res.exit_code == 2 and "[O-1]" in res.stderr and not (tmp_path / "no").exists()
    assert run_fpm("import", str(out), host=host).exit_code == 0


# --------------------------------------------------------------------------
# §12: work bounded by the input
# --------------------------------------------------------------------------


def test_an_enormous_topology_is_refused_by_its_ranks_not_built(tmp_path, host):
    """tp 10**8 in the launch: the manifests list 4 workers, so I-11 refuses without building 10**8 ranks."""
    ev = _evidence(tmp_path)

    def huge(launch):
        launch["topology"]["tp"] = 10**8

    manifests = {str(m.relative_to(ev)): lambda m: huge(m["launch"]) for m in ev.rglob("launch-manifest.json")}
    _repin(ev, lambda index: huge(index["configurations"]["glm53flash-tp4"]["launch"]), manifests)
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == (
        "glm53flash-tp4: -/-: runtime launch manifest of prefill differs from its configuration: expected_ranks [I-11]"
    )


def test_plan_limits_above_the_profile_range_are_refused(host):
    res = run_fpm("plan", str(PROFILE), "--token-budget", "17179869184", host=host)
    assert (res.exit_code, res.stderr) == (
        2,
        "fpm: --token-budget must be at most 4294967295 (a count of the profile, 01 §1.1); got 17179869184 [G-9]\n",
    )


def test_plan_work_follows_the_list_not_the_budget():
    """The largest budget a profile can hold plans the same shapes as any budget above the measured context."""
    from fpmcore_glm53flash.planner import prefill_candidates, prefill_shapes

    context = 131065
    assert prefill_shapes(4294967292, 2176, 32, max_new_tokens=context) == prefill_shapes(
        1 << 23, 2176, 32, max_new_tokens=context
    )
    assert prefill_candidates(4294967292, 2176, context, 32) == prefill_candidates(1 << 23, 2176, context, 32)


# --------------------------------------------------------------------------
# §13: invalid inputs accepted
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["tp", "dp", "moe_tp", "moe_ep"])
def test_a_profile_with_a_zero_topology_count_is_invalid(tmp_path, host, key):
    doc = json.loads(PROFILE.read_bytes())
    doc["deployments"][0][key] = 0
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    res = run_fpm("profile", "check", str(path), "--json", host=host)
    assert res.exit_code == 1
    assert res.json()["diagnostics"] == [{"rule": "P-S4", "message": f"{key} is out of range; got 0",
                                          "where": "deployments[0]"}]  # fmt: skip


@pytest.mark.parametrize("content, message", [
    (b"", "staged model configuration differs from launch.model_config.sha256: model-config.json: expected {pin}, "
          "found e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    (None, "staged model configuration is missing: model-config.json"),
])  # fmt: skip
def test_the_staged_model_config_is_compared_with_the_launch(tmp_path, host, content, message):
    ev = _evidence(tmp_path)
    pin = json.loads((ev / "observations.json").read_bytes())["configurations"]["glm53flash-tp4"]["launch"][
        "model_config"
    ]["sha256"]
    if content is None:
        (ev / "model-config.json").unlink()
        strip = lambda index: [ph["artifacts"].__setitem__(slice(None), [a for a in ph["artifacts"] if a["kind"] == "observation"])  # noqa: E731
                               for c in index["configurations"].values() for at in c["attempts"] for ph in at["phases"].values()]  # fmt: skip
        _repin(ev, strip)
    else:
        (ev / "model-config.json").write_bytes(content)
        _repin(ev)  # the index pins the new bytes; the launch still pins the staged configuration
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == f"glm53flash-tp4: -/-: {message.format(pin=pin)} [I-114]"


def test_a_corrupt_staged_config_pinned_everywhere_is_refused(tmp_path, host):
    ev = _evidence(tmp_path)
    bad = b'{"architectures": ["x"], "architectures": []}\n'
    (ev / "model-config.json").write_bytes(bad)
    sha = hashlib.sha256(bad).hexdigest()
    launch_pin = lambda doc: doc["launch"]["model_config"].__setitem__("sha256", sha)  # noqa: E731
    model_pin = lambda doc: (launch_pin(doc), doc["model"].__setitem__("config_sha256", sha))  # noqa: E731
    edits = {p: model_pin for p in _records(ev)}
    edits.update({str(m.relative_to(ev)): launch_pin for m in ev.rglob("launch-manifest.json")})
    _repin(ev, lambda index: launch_pin(index["configurations"]["glm53flash-tp4"]), edits)
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == (
        "glm53flash-tp4: -/-: staged model configuration is not strict JSON: model-config.json: "
        "duplicate object key 'architectures' at 1:26 (architectures) [I-114]"
    )


def test_booleans_are_not_integers_in_records(tmp_path, host):
    """``dp_rank: false`` in the manifests (I-11) and a layer spec's ``block_size: false`` (I-44) are refused."""
    ev = _evidence(tmp_path / "a")
    falsify = lambda m: [w.__setitem__("dp_rank", False) for w in m["expected_ranks"]["workers"]]  # noqa: E731
    _repin(ev, edits={str(m.relative_to(ev)): falsify for m in ev.rglob("launch-manifest.json")})
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1 and res.stdout.splitlines()[-1] == (
        "glm53flash-tp4: -/-: runtime launch manifest of prefill differs from its configuration: expected_ranks [I-11]"
    )
    ev = _evidence(tmp_path / "b")

    def block_false(rec):
        for g in rec["cache"]["groups"]:
            for spec in (g.get("layer_specs") or {}).values():
                spec["fields"]["block_size"] = False

    _repin(ev, edits={p: block_false for p in _records(ev) if "worker" in p})
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1
    assert (
        "cache group 0 geometry contradicts its layer specs: block_size_tokens 2176, layer specs give false [I-44]"
        in res.stdout
    )


def test_a_duplicate_key_in_a_trace_line_is_refused(tmp_path, host):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2, "prompt_len": 4}\n')
    res = run_fpm("replay", str(PROFILE), "--trace", str(trace), host=host)
    assert res.exit_code == 2
    assert res.stderr == (
        f"fpm: {trace}: trace line 1: not a json object: duplicate key 'prompt_len' at prompt_len, column 74 [R-33]\n"
    )


# --------------------------------------------------------------------------
# §14: named diagnostics, never an internal error
# --------------------------------------------------------------------------


def _profile_with(tmp_path: Path, old: bytes, new: bytes) -> Path:
    raw = PROFILE.read_bytes()
    assert old in raw
    path = tmp_path / "p.json"
    path.write_bytes(raw.replace(old, new, 1))
    return path


@pytest.mark.parametrize("old, new, code, message", [
    (b'"model": "zai-org/GLM-5.3-Flash"', b'"model": "\\ud800"', 2,
     "{path}: lone surrogate \\ud800 in a string at model, line 3 column 12 [JSON]"),
    (b'"num_experts": 288', b'"num_experts": ' + b"1" * 4301, 2,
     "{path}: integer of 4301 digits exceeds the 4300-digit limit at num_experts, line 7 column 18 [JSON]"),
    (b'"gpu_memory_utilization": 0.9', b'"gpu_memory_utilization": 1' + b"0" * 309, 1,
     "deployments[0].resources.runtime_memory: gpu_memory_utilization must be a number; got 1" + "0" * 309 + " [P-S3]"),
    (b'"gpu_memory_utilization": 0.9', b'"gpu_memory_utilization": 1e999', 2,
     "{path}: number 1e999 is out of range of a double at "
     "deployments[0].resources.runtime_memory.gpu_memory_utilization, line 32 column 37 [JSON]"),
])  # fmt: skip
def test_profile_values_beyond_the_reader(tmp_path, host, old, new, code, message):
    path = _profile_with(tmp_path, old, new)
    res = run_fpm("profile", "check", str(path), "--json", host=host)
    assert res.exit_code == code, res.stdout + res.stderr
    expected = message.format(path=path)
    if code == 2:
        assert res.stderr == f"fpm: {expected}\n"
    else:
        (d,) = res.json()["diagnostics"]
        assert f"{d['where']}: {d['message']} [{d['rule']}]" == expected
    _clean(res)


@pytest.mark.parametrize("edit, message", [
    (lambda rec: rec["model"].__setitem__("revision", "\ud800"), "lone surrogate \\ud800 in a string at {at}"),
    (lambda rec: rec["cache"].__setitem__("num_blocks", 10**4301), "integer of 4302 digits exceeds the 4300-digit limit at {at}"),
])  # fmt: skip
def test_record_values_beyond_the_reader_are_i10(tmp_path, host, edit, message):
    """In evidence these were ``I-0 … import failed unexpectedly``; now I-10 names the artifact and the place."""
    import sys

    ev = _evidence(tmp_path)
    rel = _records(ev)[0]
    doc = json.loads((ev / rel).read_bytes())
    edit(doc)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # to write the 4,302-digit integer
    try:
        (ev / rel).write_bytes(json.dumps(doc, indent=1, ensure_ascii=True).encode())
    finally:
        sys.set_int_max_str_digits(limit)
    _repin(ev)
    res = run_fpm("import", str(ev), host=host)
    assert res.exit_code == 1
    last = res.stdout.splitlines()[-1]
    assert last.startswith(
        f"glm53flash-tp4: prefill/{rel.rsplit('/', 1)[1]}: runtime artifact is not strict JSON: {rel}: "
    )
    assert last.endswith("[I-10]") and message.split(" at ")[0] in last and "I-0" not in res.stdout
    _clean(res)


def test_numbers_beyond_a_double_in_traces_and_tables(tmp_path, host):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"request_id": "a", "arrival_time": 1' + "0" * 400 + ', "prompt_len": 8, "output_len": 2}\n')
    res = run_fpm("replay", str(PROFILE), "--trace", str(trace), host=host)
    assert res.exit_code == 2
    assert (
        res.stderr
        == f"fpm: {trace}: trace line 1: arrival_time must be a finite number >= 0, found 1{'0' * 400} [R-33]\n"
    )
    table = tmp_path / "table.json"
    table.write_text('[{"phase": "decode", "batch_size": 1, "total_kv_read_tokens": 0, "wall_time_seconds": 1e999}]')
    res = run_fpm("replay", str(PROFILE), "--trace", str(TRACE), "--fpm-table", str(table), host=host)
    assert res.exit_code == 2
    assert res.stderr == (
        f"fpm: {table}: latency table is not strict JSON: number 1e999 is out of range of a double "
        "at [0].wall_time_seconds, line 1 column 87 [R-27]\n"
    )


# --------------------------------------------------------------------------
# §8: plan
# --------------------------------------------------------------------------


def test_a_plan_with_no_point_is_a_negative_verdict(tmp_path, host):
    out = tmp_path / "plan.json"
    res = run_fpm("plan", str(PROFILE), "--max-model-len", "10", "-o", str(out), host=host)
    assert res.exit_code == 1
    assert res.stderr == (
        f"fpm: {PROFILE}: no benchmark points: --max-model-len 10 leaves no candidate point; "
        "the profile's max_model_len 1,048,576 gives 577 (raise --max-model-len) [G-9]\n"
    )
    assert not out.exists()  # a negative verdict writes no plan


def test_values_from_input_are_never_read_as_markup(tmp_path, host):
    """A model name or a group name such as ``[/bold]`` is printed as it is (it was ``internal error: MarkupError``)."""
    doc = json.loads(PROFILE.read_bytes())
    doc["model"] = "[/bold]zz"
    doc["deployments"][0]["resources"]["cache_groups"][0]["name"] = "[/x]"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    res = run_fpm("profile", "check", str(path), host=host)
    assert res.exit_code == 0 and "[/bold]zz @ 04c4e9e95c5d" in res.stdout and "[/x]" in res.stdout
    _clean(res)
    res = run_fpm("plan", str(path), "--model", "glm53flash", host=host)
    assert res.exit_code == 0 and res.stdout.splitlines()[0].startswith("plan glm53flash: [/bold]zz @ 04c4e9e95c5d")
    _clean(res)
