"""Every hookspec: documented, and called through the host's typed facade."""

from __future__ import annotations

import doctest
import inspect
import io
import types
from pathlib import Path

import pytest

from fpmcore import (
    API_VERSION,
    AlignStopQuery,
    CliCommand,
    Diagnostic,
    ExecutionIdentity,
    HashBlockQuery,
    PlanLimits,
    PluginInfo,
    PointPlan,
    ProducerContract,
    SpecClassification,
    hookimpl,
    hookspecs,
)
from fpmcore.documents.errors import FpmError, PluginError
from fpmcore.documents.profile import load_profile
from fpmcore.testing import run_fpm

SPECS = sorted(n for n, f in vars(hookspecs).items() if n.startswith("fpm_") and callable(f))


def _plugin(plugin_id: str, kind: str = "model", targets: tuple[str, ...] = ("m",), **hooks: object):
    mod = types.ModuleType(plugin_id)
    info = PluginInfo(id=plugin_id, kind=kind, targets=targets, api_version=API_VERSION)
    mod.fpm_plugin_info = hookimpl(lambda: info)
    for name, fn in hooks.items():
        setattr(mod, name, hookimpl(fn))
    return mod


# ---------------------------------------------------------------------------
# documentation
# ---------------------------------------------------------------------------


#: Hookspec examples that run the real runtime (``tox -e vllm033-real``).
REAL_EXAMPLES = {"fpm_dry_probe"}
ROOT = Path(__file__).resolve().parents[1]


def _example(name: str) -> str:
    """The ``Example`` block of a hookspec's docstring (everything after its heading)."""
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    _, found, example = doc.partition("\nExample")
    assert found, f"{name} has no Example"
    return example


def _run_example(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a hookspec's example as a doctest, with a host of the installed plugins as ``host``."""
    import fpmcore
    from fpmcore.host.build import build_host

    monkeypatch.chdir(ROOT)
    globs = {n: getattr(fpmcore, n) for n in fpmcore.__all__}
    globs.update(host=build_host(), tmp=tmp_path,
                 p=load_profile(ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"))  # fmt: skip
    test = doctest.DocTestParser().get_doctest(_example(name), globs, name, hookspecs.__file__, 0)
    assert test.examples, f"{name}: the example has no >>> lines to run"
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=out.write)
    assert runner.failures == 0, out.getvalue()


@pytest.mark.parametrize("name", [n for n in SPECS if n not in REAL_EXAMPLES])
def test_every_hookspec_example_runs(name, tmp_path, monkeypatch):
    """The examples in hookspecs.py are doctests: they run against the installed plugins (issue: no drift)."""
    _run_example(name, tmp_path, monkeypatch)


@pytest.mark.real
@pytest.mark.parametrize("name", sorted(REAL_EXAMPLES))
def test_hookspec_examples_with_the_real_runtime_run(name, tmp_path, monkeypatch):
    _run_example(name, tmp_path, monkeypatch)


def test_the_hooks_the_design_card_names_exist():
    assert {"fpm_plugin_info", "fpm_observe_cache_groups", "fpm_normalize_record", "fpm_classify_spec",
            "fpm_align_stop", "fpm_validate_artifact", "fpm_choose_producer_contract",
            "fpm_generate_points", "fpm_cli_commands"} <= set(SPECS)  # fmt: skip


@pytest.mark.parametrize("name", SPECS)
def test_every_hookspec_is_documented_and_typed(name):
    fn = getattr(hookspecs, name)
    doc = inspect.getdoc(fn) or ""
    assert doc, f"{name} has no docstring"
    first_result = fn.fpmcore_spec.get("firstresult", False)
    assert ("*First-result*" in doc) == first_result, f"{name}: docstring must say first-result / collecting"
    assert ("*Collecting*" in doc) == (not first_result)
    assert "\nExample" in doc and ">>> " in doc, f"{name}: the example must be a doctest"
    assert ":returns:" in doc
    sig = inspect.signature(fn)
    assert sig.return_annotation is not inspect.Signature.empty
    for param in sig.parameters.values():
        assert param.default is inspect.Parameter.empty, f"{name}({param.name}) has a default"
        assert param.annotation is not inspect.Parameter.empty
        assert f":param {param.name}:" in doc, f"{name} does not document {param.name}"


def test_a_hookspec_without_docstring_would_fail(monkeypatch):
    def fpm_undocumented() -> None:
        pass

    monkeypatch.setattr(hookspecs, "fpm_undocumented", fpm_undocumented, raising=False)
    with pytest.raises(AssertionError):
        test_every_hookspec_is_documented_and_typed("fpm_undocumented")


# ---------------------------------------------------------------------------
# each hook through the host
# ---------------------------------------------------------------------------


def test_plugin_info_fills_the_record(fpm_host):
    host = fpm_host(entry_points=("vllm_033",))
    rec = host.record("vllm_033")
    assert (rec.kind, rec.targets, rec.status) == ("runtime", ("vllm==0.33.0",), "ok")
    assert {"fpm_plugin_info", "fpm_classify_spec"} <= set(rec.hooks)
    assert rec.summary.startswith("vLLM 0.33.0")


def test_observe_cache_groups(fpm_host):
    seen = {}

    def observe(runtime, source, phase, rank):
        seen.update(runtime=runtime, phase=phase, rank=rank)
        return {"schema_version": "fpmcore-runtime-observation/v1", "groups": len(source["kv_cache_config"])}

    host = fpm_host(_plugin("obs", "runtime", ("vllm==9.9.9",), fpm_observe_cache_groups=observe),
                    _plugin("quiet", "runtime", ("vllm==8.8.8",)))  # fmt: skip
    rec = host.hooks.runtime("vllm==9.9.9").observe_cache_groups(source={"kv_cache_config": [1, 2]},
                                                                 phase="decode", rank=3)  # fmt: skip
    assert rec["groups"] == 2 and seen == {"runtime": "vllm==9.9.9", "phase": "decode", "rank": 3}
    with pytest.raises(
        FpmError,
        match=r"no runtime plugin for vllm==1\.0\.0; installed runtime plugins: "
        r"obs \(vllm==9\.9\.9\), quiet \(vllm==8\.8\.8\)",
    ):
        host.hooks.runtime("vllm==1.0.0")
    with pytest.raises(
        FpmError, match="runtime plugin 'quiet' does not implement fpm_observe_cache_groups for vllm==8.8.8"
    ):
        host.hooks.runtime("vllm==8.8.8").observe_cache_groups(source={}, phase="decode", rank=0)


def test_runtime_hooks_reach_only_the_selected_plugin(fpm_host):
    """Selected once from the pin: another runtime plugin's implementation is never called."""
    calls = []

    def classify(plugin_id):
        def fn(runtime, spec_class, spec):
            calls.append((plugin_id, runtime))
            return SpecClassification("attention")

        return fn

    host = fpm_host(_plugin("a", "runtime", ("vllm==1.0.0",), fpm_classify_spec=classify("a")),
                    _plugin("b", "runtime", ("vllm==2.0.0", "vllm==2.0.1"), fpm_classify_spec=classify("b")))  # fmt: skip
    runtime = host.hooks.runtime("vllm==2.0.1")
    assert (runtime.plugin, runtime.pin, runtime.version) == ("b", "vllm==2.0.1", "2.0.1")
    assert runtime.classify_spec(spec_class="X", spec={}) == SpecClassification("attention")
    host.hooks.runtime("vllm==1.0.0").classify_spec(spec_class="X", spec={})
    assert calls == [("b", "vllm==2.0.1"), ("a", "vllm==1.0.0")]


def test_normalize_record_and_wrong_return_type_names_the_plugin(fpm_host):
    good = _plugin("good", "runtime", ("vllm==9.9.9",), fpm_normalize_record=lambda record: {**record, "n": 1})
    bad = _plugin("bad", "runtime", ("vllm==8.8.8",), fpm_normalize_record=lambda record: [record])
    plain = _plugin("plain", "runtime", ("vllm==7.7.7",))
    host = fpm_host(good, bad, plain)
    assert host.hooks.runtime("vllm==9.9.9").normalize_record(record={"a": 0}) == {"a": 0, "n": 1}
    record = {"a": 0}
    default = host.hooks.runtime("vllm==7.7.7").normalize_record(record=record)  # no implementation: the default
    assert default == record and default is not record
    with pytest.raises(PluginError) as info:
        host.hooks.runtime("vllm==8.8.8").normalize_record(record={})
    assert info.value.message == "plugin 'bad' returned list from fpm_normalize_record; expected dict"


def test_a_plugin_exception_is_wrapped_with_its_name(fpm_host):
    def boom(runtime, spec_class, spec):
        raise KeyError("fields")

    host = fpm_host(_plugin("boom", "runtime", ("vllm==9.9.9",), fpm_classify_spec=boom))
    with pytest.raises(PluginError) as info:
        host.hooks.runtime("vllm==9.9.9").classify_spec(spec_class="X", spec={})
    assert info.value.message == "plugin 'boom' failed in fpm_classify_spec: KeyError: 'fields'"


def test_classify_spec_through_the_runtime_plugins(fpm_host):
    host = fpm_host(entry_points=("vllm_027", "vllm_033"))
    mamba = "vllm.v1.kv_cache_interface.MambaSpec"
    new = host.hooks.runtime("vllm==0.33.0").classify_spec(spec_class=mamba, spec={})
    assert new == SpecClassification("state")
    old = host.hooks.runtime("vllm==0.27.0").classify_spec(spec_class=mamba, spec={})
    assert old.kind == "unsupported"
    with pytest.raises(FpmError, match=r"no runtime plugin for vllm==0\.33\.1; installed runtime plugins: "):
        host.hooks.runtime("vllm==0.33.1")


def _rules_plugin(plugin_id: str, pin: str, rules: object):
    return _plugin(plugin_id, "runtime", (pin,), fpm_runtime_rules=lambda: rules)


def test_runtime_rules_through_the_host(fpm_host):
    """A plugin's rules come back with its data; omitted rules keep the documented defaults."""
    from fpmcore.host.hooktypes import ImportRules, StartupLimits

    rules = ImportRules(
        version="9.9.9", hybrid_evidence=True, kv_dtype_labels={"fp9": "fp8"},
        state_family=lambda cls: "ring" if cls.endswith(".Ring") else None,
        startup_blocks=lambda cls, fields, block, lim: (-(-lim.max_model_len // block), f"cdiv({lim.max_model_len}, {block})"),
    )  # fmt: skip
    host = fpm_host(_rules_plugin("rt", "vllm==9.9.9", rules), _plugin("bare", "runtime", ("vllm==1.0.0",)))
    got = host.hooks.runtime("vllm==9.9.9").rules()
    assert (got.version, got.hybrid_evidence, dict(got.kv_dtype_labels)) == ("9.9.9", True, {"fp9": "fp8"})
    assert (got.state_family("m.Ring"), got.state_family("m.Full")) == ("ring", None)
    assert got.startup_blocks("m.Full", {}, 16, StartupLimits(1000, 8192)) == (63, "cdiv(1000, 16)")
    assert got.classify_plain is None and got.prefix_cacheable("m.Full", {}) is True
    # the defaults of the omitted rules: C-2 one batch per stage, I-97 the scheduler block, no nullable setting
    assert got.in_flight_batches(2, True, "v2") == 2 and got.nullable_settings == frozenset()
    query = HashBlockQuery((16, 32), (True, True), (), 32, True, None)
    assert got.hash_block_size(query) == 32
    # a runtime plugin that gives no rules is read with the defaults
    assert host.hooks.runtime("vllm==1.0.0").rules() == ImportRules(version="1.0.0")
    with pytest.raises(ValueError, match="version must be a non-blank string"):
        ImportRules(version=" ")


def test_runtime_rules_are_checked_and_name_the_plugin(fpm_host):
    """A wrong answer, or a wrong answer of one of the rules' functions, names the plugin."""
    from fpmcore.host.hooktypes import ImportRules, StartupLimits

    host = fpm_host(
        _rules_plugin("dicty", "vllm==1.0.0", {"version": "1.0.0"}),
        _rules_plugin("elsewhere", "vllm==2.0.0", ImportRules(version="2.0.1")),
        _rules_plugin("labels", "vllm==3.0.0", ImportRules(version="3.0.0", kv_dtype_labels={"fp8": 8})),
        _rules_plugin("loose", "vllm==4.0.0", ImportRules(
            version="4.0.0", state_family=lambda cls: "conv", prefix_cacheable=lambda cls, fields: 1,
            startup_blocks=lambda cls, fields, block, lim: 5, classify_plain=lambda cls: "attention",
            in_flight_batches=lambda pp, asynchronous, runner: 0, hash_block_size=lambda query: 16.0)),
        _rules_plugin("nulls", "vllm==5.0.0", ImportRules(version="5.0.0", nullable_settings={"a.b.c"})),
    )  # fmt: skip
    cases = [
        ("vllm==1.0.0", "plugin 'dicty' returned dict from fpm_runtime_rules; expected ImportRules"),
        ("vllm==2.0.0", "plugin 'elsewhere' returned rules for version 2.0.1 from fpm_runtime_rules; expected 2.0.0"),
        ("vllm==3.0.0", "plugin 'labels' returned a non-string KV dtype label from fpm_runtime_rules: 'fp8': 8"),
        ("vllm==5.0.0", "plugin 'nulls' returned a nullable setting that is not '<section>.<key>' or '<key>' "
                        "from fpm_runtime_rules: 'a.b.c'"),
    ]  # fmt: skip
    for pin, message in cases:
        with pytest.raises(PluginError) as info:
            host.hooks.runtime(pin).rules()
        assert info.value.message == message
    loose = host.hooks.runtime("vllm==4.0.0").rules()
    calls = [
        (lambda: loose.state_family("m.X"), "returned str from fpm_runtime_rules.state_family; expected 'mamba', 'ring' or None"),
        (lambda: loose.prefix_cacheable("m.X", {}), "returned int from fpm_runtime_rules.prefix_cacheable; expected bool"),
        (lambda: loose.startup_blocks("m.X", {}, 16, StartupLimits(1, 1)),
         "returned int from fpm_runtime_rules.startup_blocks; expected (int, str) or None"),
        (lambda: loose.classify_plain("m.X"), "returned str from fpm_runtime_rules.classify_plain; expected SpecClassification"),
        (lambda: loose.in_flight_batches(1, False, None), "returned 0 from fpm_runtime_rules.in_flight_batches; expected a positive int"),
        (lambda: loose.hash_block_size(HashBlockQuery((16,), (True,), (), 16, True, None)),
         "returned float from fpm_runtime_rules.hash_block_size; expected int or str"),
    ]  # fmt: skip
    for call, message in calls:
        with pytest.raises(PluginError) as info:
            call()
        assert info.value.message == f"plugin 'loose' {message}"


def test_runtime_rules_of_the_runtime_plugins(fpm_host):
    """Only vLLM 0.33.0 imports hybrid evidence (02 §4); its C-1 gives the GLM KDA group's 3 blocks (02 §11)."""
    from fpmcore.host.hooktypes import StartupLimits

    host = fpm_host(entry_points=("vllm_027", "vllm_033"))
    new = host.hooks.runtime("vllm==0.33.0").rules()
    old = host.hooks.runtime("vllm==0.27.0").rules()
    assert (new.version, new.hybrid_evidence, old.version, old.hybrid_evidence) == ("0.33.0", True, "0.27.0", False)
    mamba = "vllm.v1.kv_cache_interface.MambaSpec"
    fields = {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 1}
    limits = StartupLimits(1048576, 8192, mamba_cache_mode="align")
    assert new.startup_blocks(mamba, fields, 2176, limits) == (3, "align mode: 2 + 0 speculative + 1 checkpoint")
    assert old.startup_blocks(mamba, fields, 2176, limits) is None
    assert (new.state_family(mamba), old.state_family(mamba)) == ("mamba", None)
    with pytest.raises(FpmError, match=r"no runtime plugin for vllm==0\.33\.1"):
        host.hooks.runtime("vllm==0.33.1").rules()


def test_align_stop_range_is_checked(fpm_host):
    q = AlignStopQuery(start=0, num_new_tokens=100, prompt_len=100, num_tokens=100, block_size=16,
                       hash_block_size=16, max_num_batched_tokens=100, checkpoint_alignment=None)  # fmt: skip
    host = fpm_host(
        _plugin("good", targets=("good",),
                fpm_align_stop=lambda runtime, query: 96 if runtime == "vllm==9.9.9" else None),
        _plugin("greedy", targets=("greedy",), fpm_align_stop=lambda query: 101),
        _plugin("boolish", targets=("boolish",), fpm_align_stop=lambda query: True),
    )  # fmt: skip
    assert host.hooks.model("good").align_stop(runtime="vllm==9.9.9", query=q) == 96
    with pytest.raises(
        FpmError,
        match=r"no model plugin implements the align-stop rule for 'good' on vllm==1\.0\.0 "
        r"\(model plugin 'good' gives none\)",
    ):
        host.hooks.model("good").align_stop(runtime="vllm==1.0.0", query=q)
    with pytest.raises(PluginError, match=r"plugin 'greedy' returned 101 from fpm_align_stop; expected 0..100"):
        host.hooks.model("greedy").align_stop(runtime="vllm==9.9.9", query=q)
    with pytest.raises(PluginError, match="plugin 'boolish' returned bool from fpm_align_stop; expected int"):
        host.hooks.model("boolish").align_stop(runtime="vllm==9.9.9", query=q)
    with pytest.raises(
        FpmError,
        match="no model plugin implements the align-stop rule for 'other' on vllm==9.9.9: no model plugin for 'other'",
    ):
        host.hooks.model("other").align_stop(runtime="vllm==9.9.9", query=q)


def test_generate_points(fpm_host):
    profile = load_profile("examples/profiles/glm53flash-tp4.fpm-profile.json")

    def points(model, profile, deployment, limits):
        n = profile.deployments[deployment].resources.max_num_tokens // limits.block_size
        return PointPlan(points=[{"n": n, "model": model}], counts={"prefill": 1, "decode": 0}, dropped={},
                         digest="0" * 64, smoke=[])  # fmt: skip

    host = fpm_host(_plugin("toy", targets=("toy", "acme/Toy-1"), fpm_generate_points=points))
    plan = host.hooks.model("acme/Toy-1").generate_points(profile=profile, deployment=0,
                                                          limits=PlanLimits(8192, 1_048_576, 2048, 2048))  # fmt: skip
    assert plan.points == ({"n": 4, "model": "acme/Toy-1"},)
    with pytest.raises(FpmError, match="no model plugin generates points for 'nobody': no model plugin for 'nobody'"):
        host.hooks.model("nobody").generate_points(profile=profile, deployment=0,
                                                   limits=PlanLimits(8192, 1_048_576, 2048, 2048))  # fmt: skip


def test_choose_producer_contract_through_the_model_plugins(fpm_host):
    host = fpm_host(entry_points=("glm53flash", "dsv41"))
    glm = ExecutionIdentity("a" * 64, "full", "none", "text")
    v41 = ExecutionIdentity("b" * 64, "full", "hbm_tp_sharded", "text")
    plugin, contract = host.hooks.choose_producer_contract(identity=glm)
    assert (plugin, contract.name, contract.execution_mode) == (
        "glm53flash",
        "glm53flash_native_graph_policy",
        "native_graph_policy",
    )
    plugin, contract = host.hooks.choose_producer_contract(identity=v41)
    assert (plugin, contract.name, contract.execution_mode) == ("dsv41", "dsv41_eager", "eager")
    # no configuration-bound identity: general rules only
    assert host.hooks.choose_producer_contract(identity=ExecutionIdentity("", "full", "none", "text")) is None
    with pytest.raises(FpmError) as info:
        host.hooks.choose_producer_contract(identity=ExecutionIdentity("c" * 64, "full", "host_offload", "text"),
                                            where="r0.json")  # fmt: skip
    assert (info.value.rule, str(info.value)) == (
        "A-14",
        "r0.json: native execution identity cell has no audited producer contract: host_offload",
    )


def test_two_plugins_claiming_a_residency_conflict(fpm_host):
    rival = _plugin(
        "rival",
        fpm_choose_producer_contract=lambda identity: (
            ProducerContract("rival_graph", "native_graph_policy", "none")
            if identity.engram_residency == "none"
            else None
        ),
    )
    host = fpm_host(rival, entry_points=("glm53flash",))
    with pytest.raises(FpmError) as info:
        host.hooks.choose_producer_contract(identity=ExecutionIdentity("a" * 64, "full", "none", "text"))
    assert info.value.message == "producer contract for engram residency none is registered twice: glm53flash, rival"


def test_validate_artifact(fpm_host):
    contract = ProducerContract("toy_eager", "eager", "toy")

    def validate(contract, cell, files, plan):
        if contract.name != "toy_eager":
            return None
        return [Diagnostic("A-20", f"expected 10 raw samples, found {len(files['r0.json'])}", "r0.json")]

    host = fpm_host(_plugin("toy", fpm_validate_artifact=validate))
    diags = host.hooks.validate_artifact(contract=contract, cell={}, files={"r0.json": [1] * 9}, plan={})
    assert diags == [Diagnostic("A-20", "expected 10 raw samples, found 9", "r0.json")]
    other = ProducerContract("nobody", "eager", "x")
    with pytest.raises(FpmError, match="no model plugin validates artifacts of contract nobody"):
        host.hooks.validate_artifact(contract=other, cell={}, files={}, plan={})


def test_cli_commands_from_a_plugin(fpm_host):
    def configure(p):
        p.add_argument("who")

    def run(args, ctx):
        ctx.out.print(f"hello {args.who}")
        return 0

    host = fpm_host(_plugin("hello", fpm_cli_commands=lambda: [CliCommand("hello", "say hello", configure, run)]))
    result = run_fpm("hello", "world", host=host)
    assert (result.exit_code, result.stdout.strip()) == (0, "hello world")
    names = [c.name for _, c in host.hooks.cli_commands()]
    assert names[:3] == ["plugins", "profile", "schema"] and "hello" in names


def test_broken_cli_commands_cost_the_plugin_not_the_cli(fpm_host):
    host = fpm_host(_plugin("broken", fpm_cli_commands=lambda: ["not a command"]))
    result = run_fpm("plugins", "--json", host=host)
    assert result.exit_code == 0
    row = {p["id"]: p for p in result.json()["plugins"]}["broken"]
    assert row["status"] == "failed"
    assert row["error"] == (
        "fpm_cli_commands: PluginError: plugin 'broken' returned str from fpm_cli_commands; expected CliCommand"
    )


def test_dry_probe(fpm_host, tmp_path):
    def probe(runtime, model_path, out_dir, tp, caching, configuration):
        return {"ranks": tp, "caching": caching, "configuration": configuration or Path(model_path).stem}

    from pathlib import Path

    host = fpm_host(_plugin("prober", "runtime", ("vllm==9.9.9",), fpm_dry_probe=probe),
                    _plugin("noprobe", "runtime", ("vllm==0.33.1",)))  # fmt: skip
    summary = host.hooks.runtime("vllm==9.9.9").dry_probe(model_path="m/glm.json", out_dir=str(tmp_path), tp=4,
                                                          caching=False, configuration=None)  # fmt: skip
    assert summary == {"ranks": 4, "caching": False, "configuration": "glm"}
    with pytest.raises(FpmError, match="runtime plugin 'noprobe' does not implement fpm_dry_probe for vllm==0.33.1"):
        host.hooks.runtime("vllm==0.33.1").dry_probe(model_path="m.json", out_dir=str(tmp_path), tp=1,
                                                     caching=True, configuration=None)  # fmt: skip


def test_producer_contract_registrations(fpm_host):
    host = fpm_host(entry_points=("glm53flash", "dsv41"))
    contracts = {p: c for p, c in host.hooks.producer_contracts()}
    assert contracts["glm53flash"].residency == "none"
    assert contracts["dsv41"].residency == "hbm_tp_sharded"
    owner = host.hooks.protocol_owner("glm53flash_prefix_scheduler")
    assert (owner.name, owner.label) == ("glm53flash_native_graph_policy", "glm-5.3-flash")
    assert host.hooks.protocol_owner("someone_else") is None


def test_a_second_registration_of_a_residency_fails_that_plugin(fpm_host):
    rival = _plugin(
        "rival",
        fpm_producer_contracts=lambda: [
            ProducerContract("rival_graph", "native_graph_policy", "none", execution_profile="full")
        ],
    )
    host = fpm_host(rival, entry_points=("glm53flash",))  # rival registers first: glm53flash is the second
    rec = host.record("glm53flash")
    assert rec.status == "failed"
    assert rec.error == "producer contract for engram residency none is registered twice: rival, glm53flash"
    assert host.record("rival").status == "ok"


def test_a_contract_key_is_residency_and_execution_profile(fpm_host):
    """05 §10: residency none holds GLM-5.3-Flash's contract (profile full) and fpm collect's (engine_steps);
    a contract of residency none for every profile overlaps both and fails its plugin."""
    host = fpm_host(entry_points=("glm53flash",))
    keys = {c.name: (c.residency, c.execution_profile) for _, c in host.hooks.producer_contracts()}
    assert keys == {
        "fpmcore_engine_steps": ("none", "engine_steps"),
        "glm53flash_native_graph_policy": ("none", "full"),
    }
    for profile, name in (("full", "glm53flash_native_graph_policy"), ("engine_steps", "fpmcore_engine_steps")):
        _, contract = host.hooks.choose_producer_contract(
            identity=ExecutionIdentity("ab" * 32, profile, "none", "text")
        )
        assert contract.name == name
    anyone = _plugin("anyone", fpm_producer_contracts=lambda: [ProducerContract("any_graph", "graph", "none")])
    host = fpm_host(anyone)
    assert (
        host.record("anyone").error == "producer contract for engram residency none is registered twice: "
        "fpmcore, anyone"
    )


# ---------------------------------------------------------------------------
# pluggy's wrappers and tracing see the facade's calls
# ---------------------------------------------------------------------------


class _Wrapper:
    """A model plugin that only wraps: a new-style wrapper of a runtime hook, an old-style one of a model hook."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="wrap", kind="model", targets=("wrap",), api_version=API_VERSION)

    @hookimpl(wrapper=True)
    def fpm_classify_spec(self, spec_class):
        result = yield
        return SpecClassification("attention", windowed=True) if spec_class.endswith("Window") else result

    @hookimpl(hookwrapper=True)
    def fpm_align_stop(self, query):
        outcome = yield
        outcome.force_result(min(outcome.get_result(), query.block_size * 4))


def test_wrappers_run_around_the_selected_plugin(fpm_host):
    """``wrapper=True`` and ``hookwrapper=True`` implementations of another plugin wrap the bound call."""
    q = AlignStopQuery(start=0, num_new_tokens=100, prompt_len=100, num_tokens=100, block_size=16,
                       hash_block_size=16, max_num_batched_tokens=100, checkpoint_alignment=None)  # fmt: skip
    host = fpm_host(_Wrapper(), _plugin("good", targets=("good",), fpm_align_stop=lambda query: 96),
                    entry_points=("vllm_033",))  # fmt: skip
    assert host.record("wrap").status == "ok"
    assert host.hooks.implementers("fpm_classify_spec") == ["vllm_033"]  # a wrapper is not an implementation
    runtime = host.hooks.runtime("vllm==0.33.0")
    mamba, window = "vllm.v1.kv_cache_interface.MambaSpec", "vllm.v1.kv_cache_interface.Window"
    assert runtime.classify_spec(spec_class=mamba, spec={}) == SpecClassification("state")
    # vLLM 0.33.0 has no class named Window (unsupported); the wrapper rewrites the answer
    assert runtime.classify_spec(spec_class=window, spec={}) == SpecClassification("attention", windowed=True)
    assert host.hooks.model("good").align_stop(runtime="vllm==0.33.0", query=q) == 64  # 96 clipped to 4 x 16


def test_tracing_and_call_monitoring_see_the_calls(fpm_host):
    """``pm.enable_tracing`` writes each call; ``add_hookcall_monitoring`` sees the one plugin it is bound to."""
    host = fpm_host(entry_points=("vllm_027", "vllm_033"))
    lines: list[str] = []
    seen: list[tuple[str, list[str], str]] = []
    host.pm.trace.root.setwriter(lines.append)
    undo_trace = host.pm.enable_tracing()
    undo_monitor = host.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.append((name, [i.plugin_name for i in impls], kwargs.get("runtime"))),
        lambda outcome, name, impls, kwargs: None,
    )
    try:
        rules = host.hooks.runtime("vllm==0.27.0").rules()
    finally:
        undo_monitor()
        undo_trace()
    assert rules.version == "0.27.0" and rules.hybrid_evidence is False
    assert seen == [("fpm_runtime_rules", ["vllm_027"], "vllm==0.27.0")]
    text = "".join(lines)
    assert "fpm_runtime_rules" in text and "finish fpm_runtime_rules -->" in text


def test_replay_rules_of_another_runtime_name_the_plugin():
    """fpm_replay_rules must answer with the rules of the pin it was asked for."""
    from fpmcore.replay.rules import ReplayRules
    from fpmcore.testing import make_host

    class Wrong:
        @hookimpl
        def fpm_plugin_info(self):
            return PluginInfo(id="wrong", kind="runtime", targets=("vllm==9.9.9",), api_version=API_VERSION)

        @hookimpl
        def fpm_replay_rules(self, runtime):
            return ReplayRules(runtime="vllm==9.9.8")

    host = make_host(Wrong())
    with pytest.raises(PluginError) as e:
        host.hooks.replay_rules("vllm==9.9.9")
    assert (
        e.value.message
        == "plugin 'wrong' returned replay rules of vllm==9.9.8 from fpm_replay_rules; expected vllm==9.9.9"
    )
    with pytest.raises(FpmError) as e:
        host.hooks.replay_rules("vllm==9.9.7")
    assert e.value.rule == "R-1"
    assert e.value.message.startswith("no installed runtime plugin gives replay semantics for vllm==9.9.7")
