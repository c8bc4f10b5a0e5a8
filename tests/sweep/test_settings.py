"""The sweep's settings are the replay's declared settings, fpm replay's options; bad ones are refused before any run."""

from __future__ import annotations

import argparse

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.sweep import settings as S
from fpmcore.sweep.grid import build_config, expand, rules_key
from fpmcore.testing import run_fpm
from tests.sweep.support import GLM, GLM_TRACE, write_grid


def _replay_dests() -> set[str]:
    from fpmcore.replay.command import configure

    p = argparse.ArgumentParser(add_help=False)
    configure(p)
    return {a.dest for a in p._actions if a.option_strings}


def test_every_replay_option_is_a_setting_or_an_axis_or_an_output():
    names = set(S.replay_settings())
    assert names == _replay_dests() - S.NOT_SETTINGS
    assert {"max_num_seqs", "max_num_batched_tokens", "prefix_caching", "reserve_full_isl", "deployment"} <= names


def test_a_declared_setting_is_a_sweep_setting_and_reaches_the_config(tmp_path):
    """Each setting of :data:`fpmcore.replay.settings.SETTINGS` is settable and reaches the config."""
    settings = S.replay_settings()
    assert settings["prefill_schedule_interval"].kind == "value" and settings["watermark"].kind == "value"
    grid = write_grid(
        tmp_path / "g.json",
        {
            "profiles": [str(GLM)],
            "traces": [str(GLM_TRACE)],
            "settings": {"prefill_schedule_interval": [1, 2], "watermark": [0, 0.25]},
        },
    )
    sweep = expand(grid)
    cfgs = [
        build_config(
            sweep.inputs[t.profile].value, None, t.settings, sweep.settings, sweep.inputs[rules_key(t.profile)].value
        )
        for t in sweep.tasks
    ]
    assert sorted((c.prefill_schedule_interval, c.watermark) for c in cfgs) == [
        (1, 0.0),
        (1, 0.25),
        (2, 0.0),
        (2, 0.25),
    ]
    # R-3 is checked before any run: a watermark of 1 is refused with the replay's own diagnostic
    write_grid(grid, {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)], "settings": {"watermark": [0.5, 1]}})
    with pytest.raises(FpmError, match=r"watermark .*must be a number in \[0, 1\), got '1'"):
        expand(grid)


@pytest.mark.parametrize("name,value,message", [
    ("max_num_seqs", 8.0, "setting max_num_seqs (--max-num-seqs): must be an integer from 1 to 1,099,511,627,776; got '8.0', found 8.0"),
    ("max_num_seqs", "8", "setting max_num_seqs (--max-num-seqs) takes a number, found \"8\""),
    ("max_num_seqs", True, "setting max_num_seqs (--max-num-seqs): bad value true"),
    ("max_num_seqs", 0, "setting max_num_seqs (--max-num-seqs): must be an integer from 1 to 1,099,511,627,776; got '0', found 0"),
    ("prefix_caching", True, 'setting prefix_caching (--prefix-caching) must be one of "on", "off", found true'),
    ("prefix_caching", "yes", 'setting prefix_caching (--prefix-caching) must be one of "on", "off", found "yes"'),
    ("reserve_full_isl", 1, "setting reserve_full_isl (--scheduler-reserve-full-isl) takes true or false, found 1"),
    ("deployment", [0], "setting deployment (--deployment): bad value [0]"),
])  # fmt: skip
def test_a_bad_value_is_refused_in_one_line_before_any_run(tmp_path, name, value, message):
    grid = write_grid(
        tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)], "settings": {name: [value]}}
    )
    out = tmp_path / "r.jsonl"
    r = run_fpm("sweep", str(grid), "-o", str(out))
    assert r.exit_code == 2
    assert r.stderr == f"fpm: {grid}: {message} [sweep]\n"
    assert not out.exists()


def test_an_unknown_setting_names_the_known_ones(tmp_path):
    grid = write_grid(
        tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)], "settings": {"max_num_seq": [8]}}
    )
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1
    assert "unknown setting 'max_num_seq'; fpm replay's settings are: deployment, max_num_seqs," in r.stderr


def test_settings_map_to_the_config_as_fpm_replay_maps_its_options(tmp_path):
    grid = write_grid(tmp_path / "g.json", {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)], "runs": [
        {"max_num_seqs": 5, "max_num_batched_tokens": 2048, "prefix_caching": "on", "reserve_full_isl": False},
        {"prefix_caching": "off"},
    ]})  # fmt: skip
    sweep = expand(grid)
    a, b = (
        build_config(
            sweep.inputs[t.profile].value, None, t.settings, sweep.settings, sweep.inputs[rules_key(t.profile)].value
        )
        for t in sweep.tasks
    )
    assert (a.max_num_seqs, a.max_num_batched_tokens, a.prefix_caching, a.reserve_full_isl) == (5, 2048, True, False)
    # unset options keep fpm replay's defaults: the profile's max_batch_size and max_num_tokens, the gate on
    profile = sweep.inputs[sweep.tasks[1].profile].value
    res = profile.deployments[0].resources
    assert (b.max_num_seqs, b.max_num_batched_tokens, b.prefix_caching, b.reserve_full_isl) == (
        res.max_batch_size,
        res.max_num_tokens,
        False,
        True,
    )
    assert a.hash_block_size == 2176  # RV-8: the GLM TP 4 attention block, with prefix caching on


def test_a_setting_may_be_spelt_as_its_option(tmp_path):
    """``--scheduler-reserve-full-isl``'s setting is ``reserve_full_isl``; ``scheduler_reserve_full_isl`` names it
    too (in ``settings`` and in ``runs``), and giving both is refused; ``no_…`` is no alias of the setting."""
    from fpmcore.sweep.settings import setting_aliases

    aliases = setting_aliases()
    assert aliases["scheduler_reserve_full_isl"] == "reserve_full_isl"
    assert "no_scheduler_reserve_full_isl" not in aliases
    base = {"profiles": [str(GLM)], "traces": [str(GLM_TRACE)]}
    by_alias = write_grid(tmp_path / "a.json", {**base, "settings": {"scheduler_reserve_full_isl": [True, False]}})
    by_name = write_grid(tmp_path / "n.json", {**base, "settings": {"reserve_full_isl": [True, False]}})
    a = run_fpm("sweep", str(by_alias), "-o", str(tmp_path / "a.jsonl"), "--engine", "serial", "--json")
    n = run_fpm("sweep", str(by_name), "-o", str(tmp_path / "n.jsonl"), "--engine", "serial", "--json")
    assert a.exit_code == n.exit_code == 0, a.stderr
    assert [r["settings"] for r in a.json()["rows"]] == [r["settings"] for r in n.json()["rows"]]
    assert [r["settings"] for r in a.json()["rows"]] == [{"reserve_full_isl": True}, {"reserve_full_isl": False}]
    both = write_grid(tmp_path / "b.json", {**base, "runs": [{"scheduler_reserve_full_isl": True,
                                                                "reserve_full_isl": False}]})  # fmt: skip
    r = run_fpm("sweep", str(both), "-o", str(tmp_path / "b.jsonl"))
    assert r.exit_code == 2 and "settings scheduler_reserve_full_isl and reserve_full_isl are one setting" in r.stderr
