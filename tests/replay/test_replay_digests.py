"""``tools/replay_digests.py``, the check that a change leaves every replay as it was: its cases hold every
kind it promises, and a comparison finds a changed output (against a saved file and between two files)."""

from __future__ import annotations

import json

from tests.support.tools import load_tool

#: One replay with both outputs, default settings: the prefix of its ``--json``, ``--out`` and ``--out`` with
#: ``--json`` cases.
ONE_REPLAY = "plain-llama8b-like|glm-one-request.jsonl|plain-llama8b-like.json|on||"


def test_the_cases_hold_every_kind():
    digests = load_tool("replay_digests")
    names = [name for name, _, _ in digests.cases()]
    assert len(names) == len(set(names))
    outputs = {name.rsplit("|", 1)[1] for name in names if not name.startswith("mooncake|")}
    assert outputs == {"json", "out", "out+json"}
    settings = {name.split("|")[4] for name in names if not name.startswith("mooncake|")}
    assert {"", "--max-num-queued-reqs 6", "--max-steps 40"} <= settings
    assert {" ".join(t) for t in digests.TRANSFORMS} <= settings
    assert {name.split("|")[2] for name in names} >= {"-", "plain-llama8b-like.json", "glm53flash-tp4.json"}
    if digests.MOONCAKE.exists():
        assert {f"mooncake|3000|on|out-{fmt}" for fmt in digests.OUT_FORMATS} <= set(names)
        assert "mooncake|whole|off|json" in names


def test_a_saved_digest_file_finds_a_changed_output(tmp_path, capsys):
    digests = load_tool("replay_digests")
    saved = tmp_path / "before.json"
    assert digests.main(["--only", ONE_REPLAY, "--write", str(saved)]) == 0
    found = json.loads(saved.read_text())
    assert sorted(found) == [ONE_REPLAY + o for o in ("json", "out", "out+json")]
    assert {"replay-steps.jsonl.gz", "replay-requests.jsonl.gz"} <= found[ONE_REPLAY + "out"].keys()
    assert digests.main(["--only", ONE_REPLAY, "--compare", str(saved)]) == 0  # the runs are reproducible
    assert "3 / 3 cases" in capsys.readouterr().out
    found[ONE_REPLAY + "out"]["replay-steps.jsonl.gz"] = "0" * 64  # as if a step record had changed
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(found))
    assert digests.main(["--only", ONE_REPLAY, "--compare", str(changed)]) == 1
    assert digests.main(["--compare", str(saved), str(changed)]) == 1
    out = capsys.readouterr().out
    assert out.count(f"differs: {ONE_REPLAY}out\n") == 2 and "1 differ" in out
