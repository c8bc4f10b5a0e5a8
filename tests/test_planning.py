"""The host side of ``fpm plan`` (04 G-9, G-20, G-24, G-25): limits, the hook, the plan file, the CLI.

The host knows no model: the tests that need a real point list use the
installed ``glm53flash`` plugin through a :class:`~fpmcore.host.plugins.PluginHost`;
the others use a small model plugin defined here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore import API_VERSION, PlanLimits, PluginInfo, PointPlan, hookimpl
from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import digest
from fpmcore.documents.profile import load_profile, parse_profile
from fpmcore.plan.command import plan_command
from fpmcore.plan.planning import growth_block, plan_document, resolve_limits, write_plan
from fpmcore.testing import make_host, run_fpm

PROFILE = Path(__file__).resolve().parents[1] / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
GLM_DIGEST = "9957b8429d4864bd851daf48b557c3ee4c01ff982d04af7619a514f6e036850e"


class PlanCli:
    """Registers ``fpm plan`` (until fpmcore's built-in commands carry it, the first one wins)."""

    @hookimpl
    def fpm_plugin_info(self) -> PluginInfo:
        return PluginInfo(id="plan-cli", kind="model", targets=("none",), api_version=API_VERSION)

    @hookimpl
    def fpm_cli_commands(self):
        return [plan_command()]


class TinyModel:
    """A model plugin with one point, to test the host without any model rule."""

    seen: list = []

    @hookimpl
    def fpm_plugin_info(self) -> PluginInfo:
        return PluginInfo(id="tiny", kind="model", targets=("tiny",), api_version=API_VERSION)

    @hookimpl
    def fpm_generate_points(self, model, profile, deployment, limits):
        if model != "tiny":
            return None
        self.seen.append(limits)
        point = {"benchmark_id": 1, "phase": "decode", "batch_size": 1, "context_tokens": 4}
        return PointPlan(
            points=[point], counts={"prefill": 0, "decode": 1}, dropped={"rule": 2}, digest="0" * 64, smoke=[point]
        )


@pytest.fixture
def glm_host():
    pytest.importorskip("fpmcore_glm53flash")
    return make_host(PlanCli(), entry_points=("glm53flash",))


@pytest.fixture
def tiny_host():
    TinyModel.seen = []
    return make_host(PlanCli(), TinyModel())


def test_limits_default_to_the_profile_g9() -> None:
    """Budget = max_num_tokens, max_model_len of the runtime memory, block and hash block 2,176."""
    profile = load_profile(PROFILE)
    assert resolve_limits(profile) == PlanLimits(8192, 1048576, 2176, 2176)
    assert growth_block(profile.deployments[0]) == 2176  # the 4-token ring (a state group) is not the block


def test_flags_override_the_limits_g9() -> None:
    profile = load_profile(PROFILE)
    assert resolve_limits(profile, token_budget=4096, max_model_len=65543) == PlanLimits(4096, 65543, 2176, 2176)


def test_limits_refusals() -> None:
    profile = load_profile(PROFILE)
    with pytest.raises(FpmError) as info:
        resolve_limits(profile, 1)
    assert (info.value.rule, info.value.message) == ("G-9", "the profile has no deployment 1; it has 1")
    with pytest.raises(FpmError) as info:
        resolve_limits(profile, token_budget=0)
    assert info.value.message == "--token-budget must be positive; got 0"


def test_linear_layout_has_no_block() -> None:
    data = json.loads(PROFILE.read_text())
    res = data["deployments"][0]["resources"]
    del res["cache_groups"]
    res.update(cache_layout="linear", kv_bytes_per_token=1024)
    with pytest.raises(FpmError) as info:
        resolve_limits(parse_profile(json.dumps(data)))
    assert info.value.message == "planning needs a grouped cache layout: the deployment has no cache groups"
    assert info.value.where == "deployments[0].resources.cache_groups"


def test_hash_block_falls_back_to_the_block() -> None:
    data = json.loads(PROFILE.read_text())
    del data["deployments"][0]["resources"]["runtime_memory"]["hash_block_size_tokens"]
    assert resolve_limits(parse_profile(json.dumps(data))).hash_block_size == 2176


def test_host_passes_resolved_limits_to_the_plugin(tiny_host, tmp_path: Path) -> None:
    result = run_fpm("plan", str(PROFILE), "--model", "tiny", "--token-budget", "4096", "--json", host=tiny_host)
    assert result.exit_code == 0, result.stderr
    assert TinyModel.seen == [PlanLimits(4096, 1048576, 2176, 2176)]
    assert result.json() == {
        "schema": 1,
        "points": [{"benchmark_id": 1, "phase": "decode", "batch_size": 1, "context_tokens": 4}],
        "counts": {"prefill": 0, "decode": 1},
        "dropped": {"rule": 2},
        "digest": "0" * 64,
        "smoke": [{"benchmark_id": 1, "phase": "decode", "batch_size": 1, "context_tokens": 4}],
    }


def test_plan_file_without_a_plan_record(tiny_host, tmp_path: Path) -> None:
    out = tmp_path / "tiny.plan.json"
    assert run_fpm("plan", str(PROFILE), "--model", "tiny", "-o", str(out), host=tiny_host).exit_code == 0
    doc = json.loads(out.read_text())
    assert "options" not in doc and doc["origin"] is None
    body = {k: v for k, v in doc.items() if k not in ("plan_sha256", "stage")}
    assert doc["plan_sha256"] == digest(body)


def test_a_model_no_plugin_plans_gets_the_grid(glm_host) -> None:
    """Without a model plugin for the profile's own model the model-agnostic grid plans it; glm53flash keeps its
    own list."""
    grid = run_fpm("plan", str(PROFILE), "--json", host=make_host(PlanCli()))
    assert grid.exit_code == 0, grid.stderr
    own = run_fpm("plan", str(PROFILE), "--model", "glm53flash", "--json", host=glm_host).json()
    assert own["digest"] == GLM_DIGEST
    assert grid.json()["digest"] != GLM_DIGEST
    assert list(grid.json()["dropped"]) == ["max_model_len", "max_num_seqs", "token_budget", "align_split", "capacity"]


def test_a_model_no_plugin_claims_is_refused_naming_the_installed_ones(glm_host, tmp_path: Path) -> None:
    """``--model glm53flsh`` (a typo) or ``nosuch``: exit 2, the installed model plugins named, the closest one
    suggested, no plan written; never the grid under another name."""
    out = tmp_path / "plan.json"
    typo = run_fpm("plan", str(PROFILE), "--model", "glm53flsh", "-o", str(out), host=glm_host)
    assert (typo.exit_code, typo.stdout) == (2, "")
    (line,) = typo.stderr.strip().splitlines()
    assert "--model glm53flsh: no installed model plugin claims it; installed model plugins and their models: " in line
    assert "glm53flash" in line and "did you mean 'glm53flash'?" in line and line.endswith("[plugins]")
    assert not out.exists()
    nosuch = run_fpm("plan", str(PROFILE), "--model", "nosuch", "--json", host=glm_host)
    assert nosuch.exit_code == 2 and "did you mean" not in nosuch.stderr


def test_missing_profile(glm_host, tmp_path: Path) -> None:
    result = run_fpm("plan", str(tmp_path / "none.json"), host=glm_host)
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_json_output_glm(glm_host) -> None:
    """``--json``: the documented keys; 577 points (496 + 81), drops per rule, the digest, 5 smoke points."""
    result = run_fpm("plan", str(PROFILE), "--model", "glm53flash", "--json", host=glm_host)
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert list(doc) == ["schema", "points", "counts", "dropped", "digest", "smoke"]
    assert doc["counts"] == {"prefill": 496, "decode": 81}
    assert len(doc["points"]) == 577
    assert doc["dropped"] == {"align_split": 0, "token_budget": 16, "capacity": 0}
    assert doc["digest"] == GLM_DIGEST
    assert len(doc["smoke"]) == 5


def test_model_defaults_to_the_profile_model(glm_host) -> None:
    result = run_fpm("plan", str(PROFILE), "--json", host=glm_host)
    assert result.exit_code == 0, result.stderr
    assert result.json()["digest"] == GLM_DIGEST


def test_refusal_exits_2_with_the_rule(glm_host) -> None:
    result = run_fpm("plan", str(PROFILE), "--token-budget", "8190", host=glm_host)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"fpm: {PROFILE}: glm-5.3-flash collection requires max_num_batched_tokens to be a multiple of 4: "
        "found 8190 [G-12]"
    )


def test_plan_file_g25(glm_host, tmp_path: Path) -> None:
    """The plan file: origin, drops, digest, the G-25 record; smoke staged under the same plan hash (G-24)."""
    full, smoke = tmp_path / "full.json", tmp_path / "smoke.json"
    assert run_fpm("plan", str(PROFILE), "-o", str(full), host=glm_host).exit_code == 0
    assert run_fpm("plan", str(PROFILE), "--smoke", "-o", str(smoke), host=glm_host).exit_code == 0
    a, b = json.loads(full.read_text()), json.loads(smoke.read_text())
    assert (a["stage"], b["stage"]) == ("full", "smoke")
    assert (
        a["plan_sha256"]
        == b["plan_sha256"]
        == digest({k: v for k, v in a.items() if k not in ("plan_sha256", "stage")})
    )
    assert a["origin"] == "glm53flash_grid_v1"
    assert a["dropped"] == {"align_split": 0, "token_budget": 16, "capacity": 0}
    assert a["digest"] == GLM_DIGEST
    rec = a["options"]["benchmark_points"]
    assert rec["manifest_sha256"] == digest(rec["manifest"]) == GLM_DIGEST
    assert rec["planned_point_count"] == 577
    assert a["profile"]["profile_sha256"] == "ee1b2e6fcc941447a19229af9200477cc380af1128db99166037d1ded96e3a25"
    assert full.read_bytes().endswith(b"}\n") and b'\n  "model": ' in full.read_bytes()


def test_write_plan_is_the_file_form(tmp_path: Path) -> None:
    """The orjson bytes equal ``json.dumps(indent=2, ensure_ascii=False)`` plus a newline (01 §9.1)."""
    doc = {"b": [1, [2, 3]], "a": {"é": None, "t": True}, "e": [], "o": {}}
    write_plan(tmp_path / "p.json", doc)
    assert (tmp_path / "p.json").read_bytes() == (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def test_summary(glm_host) -> None:
    """The rich summary: counts per phase, drops per rule, digest, smoke subset, capacity needed; each count once,
    the model once (fpmcore issue 13 §8); the plugin's G-20 lines with ``--verbose``, on stderr."""
    result = run_fpm("plan", str(PROFILE), "--smoke", host=glm_host)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    for needle in (
        "prefill │        496 │    496",
        "decode  │         97 │     81",
        "token_budget │      16 │ 593",
        f"digest {GLM_DIGEST}",
        "smoke: 5 points, digest 5fe3d7e281abbfdd…",
        "capacity needed: estimate 2,240 blocks, exact holding 2,240 blocks, free 13,696 blocks",
    ):
        assert needle in text, needle
    assert text.splitlines()[0] == "plan zai-org/GLM-5.3-Flash @ 04c4e9e95c5d, deployment 0, origin glm53flash_grid_v1"
    assert text.count("16 of 593") == 0 and text.count("│      16 │") == 1  # the drop counts once
    assert "glm-5.3-flash point list" not in text + result.stderr
    assert result.stderr == "fpm: note: the plan was not saved (give -o PLAN to write the plan file)\n"
    verbose = run_fpm("plan", str(PROFILE), "--verbose", host=glm_host)
    assert verbose.exit_code == 0 and verbose.stdout == run_fpm("plan", str(PROFILE), host=glm_host).stdout
    assert verbose.stderr.splitlines()[:3] == [
        "glm-5.3-flash point list: align_split dropped 0 of 496 candidates",
        "glm-5.3-flash point list: token_budget dropped 16 of 593 candidates",
        "glm-5.3-flash point list: capacity dropped 0 of 577 candidates",
    ]


def test_plan_document_pure() -> None:
    """plan_document without the CLI: the plugin's record goes under options.benchmark_points."""
    profile = load_profile(PROFILE)
    point = {"benchmark_id": 1, "phase": "decode", "batch_size": 1, "context_tokens": 4}
    plan = PointPlan(
        points=[point],
        counts={"decode": 1},
        dropped={},
        digest="1" * 64,
        smoke=[],
        report={"origin": "x", "plan_record": {"origin": "x"}},
    )
    doc = plan_document(model="m", profile=profile, deployment=0, limits=PlanLimits(4, 8, 16, 16), plan=plan)
    assert doc["options"] == {"benchmark_points": {"origin": "x"}}
    assert doc["limits"] == {"token_budget": 4, "max_model_len": 8, "block_size": 16, "hash_block_size": 16}
    assert list(doc)[-2:] == ["plan_sha256", "stage"]


def test_benchmark_fpm_plan_json(benchmark, glm_host) -> None:
    """``fpm plan --json`` on the GLM example profile (target: < 20 ms)."""
    result = benchmark(run_fpm, "plan", str(PROFILE), "--json", host=glm_host)
    assert result.exit_code == 0


def test_benchmark_fpm_plan_summary(benchmark, glm_host) -> None:
    """``fpm plan`` with the rich summary on the GLM example profile (target: < 20 ms)."""
    result = benchmark(run_fpm, "plan", str(PROFILE), host=glm_host)
    assert result.exit_code == 0
