"""One vocabulary for the replay's rules and settings.

The switches of :class:`~fpmcore.replay.rules.ReplayRules` are the fields of
the C library's ``fpm_replay_rules``: the same names, in the same order, with
the same polarity (off is the reference runtime in both), so the binding copies
them one for one.  The replay's settings are declared once
(:data:`fpmcore.replay.settings.SETTINGS`) and ``fpm replay``'s options, the
sweep's settings and the config's fields follow from the declaration.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import attrs
import pytest

from fpmcore.documents.profile import RUNTIME_SETTINGS, FpmResourceProfile
from fpmcore.replay._native import ffi
from fpmcore.replay.model import ReplayConfig
from fpmcore.replay.rules import SCHEDULER_SETTINGS, SWITCHES, ReplayRules, default_rules
from fpmcore.replay.settings import DEFAULTS, SETTINGS

CSRC = Path(__file__).resolve().parents[2] / "csrc"


def _header_switches() -> list[str]:
    header = (CSRC / "fpm_replay.h").read_text()
    end = header.index("} fpm_replay_rules;")
    body = header[header.rindex("typedef struct {", 0, end) : end]
    text = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"int32_t\s+(\w+)\s*;", text)


def test_the_switches_are_named_as_the_c_library_names_them():
    assert list(SWITCHES) == _header_switches()
    assert [name for name, _ in ffi.typeof("fpm_replay_rules").fields] == list(SWITCHES)


def test_every_switch_is_off_in_the_reference_runtime():
    rules = default_rules()
    assert len(SWITCHES) == 13
    assert not any(getattr(rules, name) for name in SWITCHES)
    assert rules.settings == SCHEDULER_SETTINGS
    assert {f.name for f in attrs.fields(ReplayRules)} == {"runtime", "settings", *SWITCHES}


def test_the_binding_copies_each_switch_as_it_is():
    from fpmcore.replay.cengine import _marshal
    from fpmcore.replay.config import make_config
    from fpmcore.replay.model import KIND_FULL, GroupSpec

    for name in SWITCHES:
        rules = ReplayRules(**{name: True})
        cfg = make_config([GroupSpec("a", KIND_FULL, 4, 4)], 64, max_num_batched_tokens=8, max_num_seqs=2,
                          max_model_len=64, rules=rules)  # fmt: skip
        c, _, _ = _marshal(ffi, cfg, [], 0)
        assert {s: getattr(c.rules, s) for s in SWITCHES} == {s: int(s == name) for s in SWITCHES}


def test_each_config_setting_is_a_field_of_the_config_with_the_declared_default():
    fields = {f.name: f for f in attrs.fields(ReplayConfig)}
    for s in SETTINGS:
        if not s.config_field:
            continue
        assert s.name in fields, s.name
        default = fields[s.name].default
        if default is not attrs.NOTHING and s.name != "prefix_caching":
            assert default == s.default, s.name
    # the settings a release may lack are vLLM's scheduler settings
    assert SCHEDULER_SETTINGS == {s.release_name for s in SETTINGS if s.release_name}
    assert "scheduler_reserve_full_isl" in SCHEDULER_SETTINGS


def test_fpm_replay_has_an_option_for_each_setting_and_no_other_setting():
    from fpmcore.replay.command import configure
    from fpmcore.sweep.settings import NOT_SETTINGS, replay_settings

    p = argparse.ArgumentParser(add_help=False)
    configure(p)
    dests = {a.dest for a in p._actions if a.option_strings}
    assert dests - NOT_SETTINGS == {s.name for s in SETTINGS}
    assert list(replay_settings()) == [s.name for s in SETTINGS]


def test_config_from_profile_takes_exactly_the_declared_settings():
    from fpmcore.documents.profile import load_profile
    from fpmcore.replay import config_from_profile

    profile = load_profile(
        Path(__file__).resolve().parents[2] / "examples/profiles/plain-llama8b-like.fpm-profile.json"
    )
    cfg = config_from_profile(profile)
    res = profile.deployments[0].resources
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (res.max_batch_size, res.max_num_tokens)
    assert {k: getattr(cfg, k) for k in DEFAULTS if DEFAULTS[k] is not None} == {
        k: v for k, v in DEFAULTS.items() if v is not None
    }
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_num_seq'"):
        config_from_profile(profile, max_num_seq=8)


def test_the_profile_names_the_runtime_settings_in_one_place():
    assert RUNTIME_SETTINGS == {"max_num_batched_tokens": "max_num_tokens", "max_num_seqs": "max_batch_size"}
    fields = {f.name for f in attrs.fields(FpmResourceProfile)}
    assert set(RUNTIME_SETTINGS.values()) <= fields
