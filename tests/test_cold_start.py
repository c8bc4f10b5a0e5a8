"""``fpm`` starts without the work its command does not need: the guards, none of them timed.

``fpm --help``, ``fpm plugins`` and a one-request ``fpm replay`` each run in a
fresh interpreter; what each imported (``sys.modules``) and which functions
were generated (attrs and cattrs keep their generated source in
``linecache``) are read at its end.  A command must not import the pipelines
it does not run, the plugins' observers and dry probes (a runtime plugin's
hooks import them), the record converter or the validation rules; no cattrs
structure function is generated before a document is read, and none for a
profile (a replay does not import cattrs).  The speed these
guard is measured by ``make bench`` (``tests/test_bench_cli.py``) and
reported in docs/performance.md.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.cli.commands import PIPELINE_COMMANDS, pipeline_command

ROOT = Path(__file__).resolve().parents[1]
PROFILE = str(ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json")
TRACE = str(ROOT / "examples" / "traces" / "glm-one-request.jsonl")
TABLE = str(ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json")
REPLAY = ("replay", PROFILE, "--trace", TRACE, "--fpm-table", TABLE)

#: Runs ``fpm`` with argv[2:] in this interpreter, then writes what it imported and generated to argv[1].
_PROBE = """
import contextlib, io, json, linecache, sys
from fpmcore.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[2:])
generated = [k for k in linecache.cache if k.startswith("<attrs generated") or k.startswith("<cattrs generated")]
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules), "generated": generated, "stdout": out.getvalue()}, f)
"""


def _started(tmp_path: Path, *argv: str) -> dict:
    """What a fresh ``fpm *argv`` imported and generated, its exit code and its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPM_")}
    report = tmp_path / "started.json"
    subprocess.run([sys.executable, "-c", _PROBE, str(report), *argv], env=env, check=True, timeout=120)
    found: dict = json.loads(report.read_text(encoding="utf-8"))
    return found


#: Imported by no command of the three: the plugins' observers and dry probes, the work of their commands (the
#: tiny model writer and the live engine of ``vllm_032``), the record classes and their converter, the
#: measurement's store and contention, the validation rules, the planner, the sweep, the campaign finalization
#: (read only when an input lies in a finalized campaign), the rule catalogue (``fpm explain``), shutil (argparse's formatter imports it for the
#: terminal's width: fpmcore.host.command_parser.HelpFormatter).
NEVER = (
    "fpmcore.documents.record", "fpmcore_vllm_support.observe", "fpmcore_vllm_support.dryprobe", "fpmcore.probe.dry_run",
    "fpmcore_vllm032.tiny_models", "fpmcore_vllm032.engine", "fpmcore_vllm032.steps",
    "fpmcore.collect.contract", "fpmcore.collect.run", "fpmcore.collect.store", "fpmcore.collect.contention",
    "fpmcore.campaign.finalize", "fpmcore.validate.integers", "fpmcore.validate.reader",
    "fpmcore.plan.planning", "fpmcore.plan.point_grid", "fpmcore.sweep.command", "fpmcore.sweep.engines", "fpmcore.verify.command",
    "fpmcore.importer", "fpmcore.cli.explain", "fpmcore.verify.compare", "tomllib", "numpy",
    "importlib.metadata", "email", "ctypes", "secrets", "calendar", "csv", "gzip", "shutil",
    "fpmcore.documents.rules_catalogue",
)  # fmt: skip
#: Besides :data:`NEVER`, what a replay without ``--out``, ``--plot``, ``--json`` or a terminal does not need:
#: the Python reference engine, the plot, cattrs (a profile is built from its fields' specs), pathlib (files are
#: named by fpmcore.documents.paths), orjson (``--json`` only), rich (its summary tables are written as rich
#: would print them into a pipe, fpmcore.cli.tables), the output folder and the record lines of ``--out``, a
#: digest (the example's table names no profile), the engine drivers of ``fpm collect`` and ``fpm verify``.
NO_REPLAY_EXTRAS = ("fpmcore.replay.reference", "fpmcore.replay.plot", "rich", "cattrs", "pathlib", "orjson",
                    "fpmcore.documents.output_files", "fpmcore.replay.record_lines", "hashlib",
                    "fpmcore.host.engine_drivers")  # fmt: skip
#: Besides :data:`NEVER`, what listing the commands or the plugins does not need: any pipeline, the
#: profile and its converter, the replay engine and its C library, the values of the pipeline stages' hooks
#: and the runtime plugins' rules, class tables and replay rules (imported when a hook asks for them).
NO_PIPELINE = (
    "fpmcore.replay.command", "fpmcore.replay.model", "fpmcore.documents.profile", "fpmcore.documents.schema", "cattrs",
    "fpmcore.replay.native", "cffi", "fpmcore.campaign.finalize", "fpmcore.validate.command",
    "fpmcore.host.stage_hooktypes", "fpmcore_vllm_support.rules", "fpmcore_vllm_support.classes",
    "fpmcore_vllm027.rules", "fpmcore_vllm027.replay", "fpmcore_vllm033.rules", "fpmcore_vllm033.classes",
    "fpmcore_vllm033.replay", "fpmcore_vllm032.rules", "fpmcore_vllm032.classes", "fpmcore_vllm032.envelope",
)  # fmt: skip
#: Besides :data:`NO_REPLAY_EXTRAS`, what the replay of a vLLM 0.33.0 profile does not need: the other releases'
#: rules, class tables and replay rules.
OTHER_RELEASES = ("fpmcore_vllm027.rules", "fpmcore_vllm027.replay", "fpmcore_vllm032.rules",
                  "fpmcore_vllm032.classes", "fpmcore_vllm032.envelope")  # fmt: skip
#: Besides :data:`NO_REPLAY_EXTRAS`, what a replay in C does not need: the values of the pipeline stages' hooks
#: (the align stop is the C library's; its query is made only for a plugin's own rule or the Python reference)
#: and the release's import rules and class table.
NOT_IN_A_C_REPLAY = ("fpmcore.host.stage_hooktypes", "fpmcore_vllm033.rules", "fpmcore_vllm033.classes")


#: Besides :data:`NO_PIPELINE`, what a command that reads and writes no JSON and no file does not need: the JSON
#: reader and writer (jsonio, orjson), pathlib, the trace formats (a hook's answer is checked against them when
#: the hook is called).
NO_DOCUMENTS = ("fpmcore.documents.jsonio", "orjson", "pathlib", "fpmcore.traces.format")


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        (
            ("--help",),
            NEVER + NO_PIPELINE + NO_DOCUMENTS + ("rich", "hashlib", "fractions", "fpmcore.host.engine_drivers"),
        ),
        (("plugins",), NEVER + NO_PIPELINE + NO_DOCUMENTS + ("rich", "fpmcore.host.engine_drivers")),
        (("plugins", "--json"), NEVER + NO_PIPELINE + ("rich",)),
        (REPLAY, NEVER + NO_REPLAY_EXTRAS + OTHER_RELEASES + NOT_IN_A_C_REPLAY),
    ],
    ids=["help", "plugins", "plugins-json", "replay"],
)
def test_a_command_imports_only_what_it_uses(tmp_path, argv, absent):
    started = _started(tmp_path, *argv)
    assert started["code"] == 0
    imported = set(started["modules"])
    assert sorted(m for m in absent if m in imported) == []
    # what the command did need was there (the probe sees imports at all)
    assert {"fpmcore.host.hooktypes", "fpmcore.host.plugins", "fpmcore_vllm033", "fpmcore_glm53flash"} <= imported


def test_the_replay_runs_on_what_it_imports(tmp_path):
    """The one-request replay of the guard is a whole replay: the engine ran and printed its summary."""
    started = _started(tmp_path, *REPLAY, "--json")
    assert started["code"] == 0
    summary = json.loads(started["stdout"])["summary"]
    assert (summary["requests"], summary["finished"], summary["steps"]) == (1, 1, 4)
    assert {
        "fpmcore.replay.model",
        "fpmcore.documents.profile",
        "fpmcore.replay.native",
        "fpmcore_vllm033.replay",
    } <= set(started["modules"])


@pytest.mark.parametrize("argv", [("--help",), ("plugins",)], ids=["help", "plugins"])
def test_no_converter_code_is_generated_before_a_document_is_read(tmp_path, argv):
    generated = _started(tmp_path, *argv)["generated"]
    assert [k for k in generated if k.startswith("<cattrs generated")] == []
    assert any(k.startswith("<attrs generated") for k in generated)  # the probe sees generated code at all


def test_reading_a_profile_generates_attrs_code_and_no_converter_code(tmp_path):
    """A profile is built from its fields' specs (fpmcore.documents.schema.structure): reading one imports no
    cattrs and generates no structure function, while the profile's classes are made (attrs code)."""
    started = _started(tmp_path, "profile", "check", PROFILE)
    assert started["code"] == 0
    assert [k for k in started["generated"] if k.startswith("<cattrs generated")] == []
    assert any("FpmCacheGroup" in k for k in started["generated"])
    assert "cattrs" not in started["modules"]


def test_the_record_converter_and_the_integer_checks_wait_for_their_first_use():
    code = """
import linecache
import fpmcore.documents.record, fpmcore.validate.integers as integers
generated = [k for k in linecache.cache if k.startswith("<cattrs generated")]
print(len(generated), "_checks" in vars(integers.RANK_INTEGERS))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["0", "False"]


def test_the_record_converter_and_the_integer_checks_built_on_first_use_are_as_strict():
    from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

    from fpmcore.documents.record import Rank
    from fpmcore.documents.schema import converter
    from fpmcore.validate.integers import RANK_INTEGERS, IntegerSchema

    assert converter.structure({"dp": 0, "tp": 1, "pp": None}, Rank) == Rank(dp=0, tp=1, pp=None)
    with pytest.raises(ClassValidationError) as info:
        converter.structure({"dp": 0, "tp": 1, "pp": 0, "surplus": 1}, Rank)
    assert [type(e) for e in info.value.exceptions] == [ForbiddenExtraKeysError]
    with pytest.raises(ClassValidationError):
        converter.structure({"dp": 0.5, "tp": 1, "pp": 0}, Rank)
    fresh = IntegerSchema(RANK_INTEGERS.schema)
    assert fresh.first_non_integer({"dp": {"rank": 0, "size": 2.0}}) == ("dp.size", 2.0)
    assert fresh.passes({"dp": {"rank": 0, "size": 2}}) is True


@pytest.mark.parametrize(
    ("name", "help", "module", "factory"), PIPELINE_COMMANDS, ids=[c[0] for c in PIPELINE_COMMANDS]
)
def test_a_listed_command_is_the_command_its_pipeline_defines(name, help, module, factory):  # noqa: A002
    """``fpm --help`` lists a pipeline's command from :data:`PIPELINE_COMMANDS` without importing it: the
    name and help listed are the ones the pipeline's own factory gives."""
    command = pipeline_command(module, factory)
    assert (command.name, command.help) == (name, help)
    assert importlib.import_module(module)  # the pipeline imports once configured or run


#: Runs ``fpm`` as the process's own command line (``main()``, argv from ``sys.argv``) and prints whether the
#: garbage collector was on while the command ran, whether objects were frozen, and whether it is on after.
_COLLECTOR = """
import contextlib, gc, io, sys
from fpmcore.cli import main
from fpmcore.cli.commands import _run_plugins
import fpmcore.cli.commands as commands
seen = []
def spy(args, ctx):
    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
    return _run_plugins(args, ctx)
commands._run_plugins = spy
sys.argv = ["fpm", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()):
    code = main()
print(code, *seen[0], gc.isenabled())
"""


def test_the_collector_is_paused_while_the_command_line_starts():
    """``fpm`` (``main()`` on the process's command line) starts with the garbage collector paused and runs its
    command with it on, start-up's objects frozen out of its collections; an in-process call with an argv
    leaves the collector alone (as on, and with nothing frozen)."""
    out = subprocess.run([sys.executable, "-c", _COLLECTOR, "plugins"], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.split() == ["0", "True", "True", "True"]
    in_process = _COLLECTOR.replace("code = main()", "code = main(sys.argv[1:])")
    out = subprocess.run([sys.executable, "-c", in_process, "plugins"], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.split() == ["0", "True", "False", "True"]


def test_a_usage_error_leaves_the_collector_on():
    code = """
import contextlib, gc, io, sys
from fpmcore.cli import main
sys.argv = ["fpm", "replay", "--no-such-option"]
with contextlib.redirect_stderr(io.StringIO()):
    print(main(), gc.isenabled())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["2", "True"]
