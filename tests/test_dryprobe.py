"""``fpmcore.probe.dry_run``: MODEL.json and the evidence folder of a dry probe (02 §2), without any runtime.

The evidence writer is checked against the committed examples of
``examples/probes/`` (written by the real vLLM 0.33.0 and 0.27.0 through the
runtime plugins): fed the committed launch manifests and records,
:func:`fpmcore.probe.dry_run.evidence_files` must give every file of the example
again, byte for byte: the index (02 §2.1), the launch manifests (02 §2.2),
the staged model configuration and the records under their 02 §2.3 names.
The planning loop that feeds it is tested with the vLLM support library
(``plugins/vllm_support/tests/test_dryprobe.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fpmcore.documents.output_files import OutputError
from fpmcore.probe import dry_run as dryprobe
from fpmcore.probe.dry_run import ModelJsonError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "probes"
MODELS = ROOT / "tools" / "probe_models"
EXAMPLE_NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/observations.json"))


def _write(tmp_path: Path, document: object, name: str = "m.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


# --------------------------------------------------------------------------
# MODEL.json
# --------------------------------------------------------------------------


BASE = {"max_model_len": 4096, "available_memory_bytes": 1 << 30, "layers": []}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "MODEL.json must be an object with a 'layers' list"),
        ({**BASE, "layers": {"a": 1}}, "MODEL.json must be an object with a 'layers' list"),
        ({k: v for k, v in BASE.items() if k != "layers"}, "MODEL.json must be an object with a 'layers' list"),
        ({**BASE, "max_model_len": True}, "'max_model_len' must be an integer; got True"),
        ({**BASE, "max_model_len": 4096.0}, "'max_model_len' must be an integer; got 4096.0"),
        ({**BASE, "available_memory_bytes": "1GiB"}, "'available_memory_bytes' must be an integer; got '1GiB'"),
        (
            {k: v for k, v in BASE.items() if k != "available_memory_bytes"},
            "'available_memory_bytes' must be an integer; got None",
        ),
    ],
)
def test_read_model_refusals_name_file_key_and_value(tmp_path, document, message):
    path = _write(tmp_path, document)
    with pytest.raises(ModelJsonError) as info:
        dryprobe.read_model(path, path.read_bytes())
    assert str(info.value) == f"{path}: {message}"


def test_read_model_returns_the_object(tmp_path):
    path = _write(tmp_path, {**BASE, "configuration": "x"})
    assert dryprobe.read_model(path, path.read_bytes()) == {**BASE, "configuration": "x"}


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({"names": ["a", "b"], "name": "ignored.{i}", "count": 5}, ["a", "b"]),
        ({"name": "model.layers.{i}.attn", "indices": [3, 7, 11]},
         ["model.layers.3.attn", "model.layers.7.attn", "model.layers.11.attn"]),
        ({"name": "l.{i}", "range": [1, 10, 4]}, ["l.1", "l.5", "l.9"]),
        ({"name": "l.{i}", "range": [2, 4]}, ["l.2", "l.3"]),
        ({"name": "l.{i}", "count": 3}, ["l.0", "l.1", "l.2"]),
        ({"name": "l.{i}", "indices": [1], "range": [5, 7], "count": 9}, ["l.1"]),
        ({"name": "lm_head.cache"}, ["lm_head.cache"]),
    ],
)  # fmt: skip
def test_layer_name_expansion(entry, names):
    assert dryprobe.layer_names(entry) == names


def test_layer_specs_register_by_layer_index_then_entry():
    """Names sort by the ``layers.<n>.`` number, then entry order, then order in the entry; each spec is built once."""
    model = {
        "layers": [
            {"name": "model.layers.{i}.self_attn.attn", "range": [0, 4, 2], "spec": {"type": "A"}},
            {"name": "model.layers.{i}.mixer", "indices": [3, 1], "spec": {"type": "M"}},
            {"names": ["model.layers.0.indexer", "extra.cache"], "spec": {"type": "I"}},
        ]
    }
    built = []

    def build(spec_json):
        built.append(spec_json["type"])
        return spec_json["type"]

    specs = dryprobe.layer_specs(model, build)
    assert built == ["A", "M", "I"]
    assert list(specs.items()) == [
        ("model.layers.0.self_attn.attn", "A"),
        ("model.layers.0.indexer", "I"),
        ("model.layers.1.mixer", "M"),
        ("model.layers.2.self_attn.attn", "A"),
        ("model.layers.3.mixer", "M"),
        ("extra.cache", "I"),
    ]
    unsorted = dryprobe.layer_specs({**model, "sort_by_layer_index": False}, build)
    assert list(unsorted) == ["model.layers.0.self_attn.attn", "model.layers.2.self_attn.attn", "model.layers.3.mixer",
                              "model.layers.1.mixer", "model.layers.0.indexer", "extra.cache"]  # fmt: skip


def test_duplicate_layer_name_is_refused():
    model = {"layers": [{"name": "model.layers.{i}.attn", "count": 2, "spec": {}},
                        {"names": ["model.layers.1.attn"], "spec": {}}]}  # fmt: skip
    with pytest.raises(ModelJsonError) as info:
        dryprobe.layer_specs(model, lambda spec: object())
    assert str(info.value) == "duplicate layer name model.layers.1.attn"


def test_merge():
    """MODEL.json's ``launch`` merges over the runtime's defaults: objects key by key, anything else replaced."""
    base = {"a": {"b": 1, "c": 2}, "d": [1], "e": 5}
    assert dryprobe.merge(base, {"a": {"c": 3, "x": 4}, "d": {"k": 1}, "e": {"f": 6}}) == {
        "a": {"b": 1, "c": 3, "x": 4}, "d": {"k": 1}, "e": {"f": 6}}  # fmt: skip
    assert base == {"a": {"b": 1, "c": 2}, "d": [1], "e": 5}


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------


def test_dumps_form():
    assert dryprobe.dumps({"a": [1, "é"], "b": None}) == b'{\n "a": [\n  1,\n  "\xc3\xa9"\n ],\n "b": null\n}\n'
    with pytest.raises(ValueError):
        dryprobe.dumps({"x": float("nan")})


def test_write_files_publishes_the_folder_at_once_and_never_overwrites(tmp_path):
    """The evidence folder is published whole (fpmcore.documents.output_files.publish_folder); an occupied folder is refused
    before anything is written, and the old files stay (02 §2.3: a probe never overwrites evidence)."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "second").write_bytes(b"old")
    files = {Path("first"): b"1", Path("x/second"): b"2", Path("observations.json"): b"3"}
    with pytest.raises(OutputError) as info:
        dryprobe.write_files(tmp_path / "x", files)
    assert (info.value.rule, info.value.message) == (
        "O-2",
        "the output folder exists and is not empty; a probe never overwrites evidence",
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["second", "x"]
    dryprobe.write_files(tmp_path / "ev", files)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "ev",
        "ev/first",
        "ev/observations.json",
        "ev/x",
        "ev/x/second",
        "x",
        "x/second",
    ]
    assert (tmp_path / "ev" / "first").stat().st_mode & 0o777 == 0o666 & ~_umask()
    with pytest.raises(OutputError, match="a probe never overwrites evidence"):
        dryprobe.write_files(tmp_path / "ev", {Path("first"): b"one"})
    assert (tmp_path / "ev" / "first").read_bytes() == b"1"


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@pytest.mark.parametrize(
    ("record", "name"),
    [
        (
            {"binding": {"kind": "worker", "rank": {"dp": 0, "tp": 3, "pp": 1}}},
            "runtime-observation-worker-dp0-tp3-pp1.json",
        ),
        ({"binding": {"kind": "scheduler", "rank": {"dp": 2}}}, "runtime-observation-scheduler-dp2.json"),
    ],
)
def test_record_file_names(record, name):
    """02 §2.3 file names."""
    assert dryprobe.record_file_name(record) == name


def test_launch_manifest_and_index():
    launch = {"topology": {"tp": 2}}
    manifest = dryprobe.launch_manifest("att", "cfg", "decode", launch, 2)
    assert manifest == {
        "schema_version": "fpmcore-runtime-probe-launch/v1",
        "attempt_id": "att",
        "configuration": "cfg",
        "phase": "decode",
        "launch": launch,
        "expected_ranks": {
            "workers": [{"dp_rank": 0, "tp_rank": 0, "pp_rank": 0}, {"dp_rank": 0, "tp_rank": 1, "pp_rank": 0}],
            "schedulers": [{"dp_rank": 0}],
        },
    }
    index = dryprobe.observations_index("cfg", launch, "att", {"prefill": {}})
    assert index == {
        "schema_version": "fpmcore-runtime-observations/v1",
        "configurations": {"cfg": {"launch": launch, "active_attempt_id": "att",
                                   "attempts": [{"attempt_id": "att", "phases": {"prefill": {}}}]}},
    }  # fmt: skip


# --------------------------------------------------------------------------
# the committed examples, written again
# --------------------------------------------------------------------------


def test_the_six_examples_are_there():
    """A moved or missing example folder fails (it does not skip)."""
    assert EXAMPLE_NAMES == sorted(["gdn-hybrid-tp4", "glm53flash-tp4", "glm53flash-tp4-no-checkpoint",
                                    "plain-dense-tp4", "sliding-window", "vllm-0.27.0-plain"])  # fmt: skip


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_evidence_files_reproduce_the_committed_example(tmp_path, name):
    """The committed manifests and records, given to the writer, give every file of the example again, byte for byte."""
    folder = EXAMPLES / name
    index = json.loads((folder / "observations.json").read_bytes())
    ((configuration, config),) = index["configurations"].items()
    (attempt,) = config["attempts"]
    phases = {}
    for phase, entry in attempt["phases"].items():
        manifest = json.loads((folder / entry["launch_manifest"]["path"]).read_bytes())
        records = [
            json.loads((folder / a["path"]).read_bytes()) for a in entry["artifacts"] if a["kind"] == "observation"
        ]
        phases[phase] = (manifest, records)
    files = dryprobe.evidence_files(
        configuration=configuration, attempt=attempt["attempt_id"], launch=config["launch"],
        model_config=(folder / dryprobe.MODEL_CONFIG).read_bytes(), phases=phases,
    )  # fmt: skip
    assert list(files)[-1] == Path("observations.json")  # the index is written last
    out = tmp_path / "ev"
    dryprobe.write_files(out, files)
    written = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    committed = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert sorted(written) == sorted(committed)
    assert [k for k in written if written[k] != committed[k]] == []
