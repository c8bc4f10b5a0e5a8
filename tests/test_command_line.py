"""The command line's own contract under mistakes (issue 13 §3, §4, §5, §7, §8, §14, §15).

Each example of the issue with its exact exit code and message class:
plugin selections that name no plugin, the ``--json`` error document of
every subcommand, a subcommand's own usage, the one bounded integer type of
every integer option, and output that never wraps a value when piped and
reads at 80 columns on a terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.cli.command_line import build_parser
from fpmcore.cli.options import MAX_INTEGER
from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
TRACE = ROOT / "examples" / "traces" / "glm-one-request.jsonl"
GLM_EVIDENCE = ROOT / "examples" / "probes" / "glm53flash-tp4"
ALL = ("vllm_027", "vllm_032", "vllm_033", "glm53flash", "dsv41")


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=ALL)


def _fpm(*argv: str, env: dict[str, str] | None = None, columns: int | None = None) -> subprocess.CompletedProcess:
    """``fpm`` in a child process with stdout and stderr on pipes (never a terminal)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FPM_")}
    environ.update(env or {})
    if columns is not None:
        environ["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "fpmcore", *argv], capture_output=True, text=True, env=environ,
                          timeout=120, check=False)  # fmt: skip


# --------------------------------------------------------------------------
# §3 plugin selections that name no plugin
# --------------------------------------------------------------------------


def test_plugin_flag_naming_no_plugin_warns_with_the_installed_ones():
    res = _fpm("--plugin", "nosuch", "plugins", "--json")
    assert res.returncode == 0
    installed = ", ".join(r["id"] for r in json.loads(res.stdout)["plugins"])
    assert res.stderr == f"fpm: warning: --plugin names no installed plugin 'nosuch'; installed plugins: {installed}\n"


def test_an_allow_list_naming_no_plugin_says_every_plugin_is_disabled():
    res = _fpm("plugins", "--json", env={"FPM_PLUGINS": "nosuch"})
    assert res.returncode == 0
    records = json.loads(res.stdout)["plugins"]
    assert records and {r["status"] for r in records} == {"disabled"}
    ids = ", ".join(r["id"] for r in records)
    assert res.stderr == (f"fpm: warning: FPM_PLUGINS names no installed plugin 'nosuch' (so every plugin is "
                          f"disabled); installed plugins: {ids}\n")  # fmt: skip


def test_disable_plugin_naming_no_plugin_warns_and_known_ids_do_not():
    res = _fpm("--disable-plugin", "vllm_33", "--plugin", "glm53flash", "plugins", "--json")
    assert res.returncode == 0
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("fpm: warning: --disable-plugin or FPM_DISABLE_PLUGINS names no installed plugin "
                                 "'vllm_33'; installed plugins: ")  # fmt: skip


# --------------------------------------------------------------------------
# §4 a disabled plugin is named as disabled
# --------------------------------------------------------------------------


def test_import_with_the_runtime_plugin_disabled_says_it_is_disabled(tmp_path):
    host = make_host(entry_points=("vllm_033", "glm53flash"), disable=("vllm_033",))
    res = run_fpm("import", str(GLM_EVIDENCE), "-o", str(tmp_path / "p.json"), "--json", host=host)
    assert res.exit_code == 1
    first = json.loads(res.stdout)["diagnostics"][0]
    assert first["rule"] == "I-22"
    assert first["message"] == ("hybrid cache evidence requires a runtime plugin that imports it; none is installed; "
                                "the record names vLLM 0.33.0; not loaded: vllm_033 (disabled: disabled by "
                                "FPM_DISABLE_PLUGINS or --disable-plugin)")  # fmt: skip
    assert not (tmp_path / "p.json").exists()


def test_a_disabled_model_plugin_is_named_when_selected(tmp_path):
    host = make_host(entry_points=("vllm_033", "glm53flash"), disable=("glm53flash",))
    res = run_fpm("plan", str(PROFILE), "--model", "glm53flash", host=host)
    assert res.exit_code == 2
    assert res.stderr == (
        f"fpm: {PROFILE}: model plugin 'glm53flash' is disabled: disabled by FPM_DISABLE_PLUGINS "
        "or --disable-plugin [plugins]\n"
    )  # never the model-agnostic grid in its place


@pytest.mark.parametrize(("content", "message"), [
    (b'{"request_id": "A", "arrival_step": 0, "prom',
     "trace line 1: not a json object: invalid JSON: Unterminated string starting at column 40 "
     "(the line ends before its JSON value does: truncated?) [R-33]"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe", "no trace format claims this file (a binary file, not a trace); "
     "installed: sched-json, mooncake, burstgpt, azure, fpmcore (name one with --trace-format) [T-1]"),
])  # fmt: skip
def test_a_truncated_or_binary_trace_says_so(tmp_path, host, content, message):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(content)
    res = run_fpm("replay", str(PROFILE), "--trace", str(trace), host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == f"fpm: {trace}: {message}\n"


# --------------------------------------------------------------------------
# §5 --json: exactly one JSON document, errors included
# --------------------------------------------------------------------------


def _error_cases(tmp: Path) -> list[tuple[list[str], str]]:
    missing = str(tmp / "missing.json")
    return [
        (["plugins", "show", "nosuch", "--json"], "plugins"),
        (["profile", "check", missing, "--json"], "JSON"),
        (["import", str(tmp / "no-folder"), "--json"], "usage"),
        (["probe", "--dry-run", missing, "-o", str(tmp / "ev"), "--json"], "JSON"),
        (["plan", missing, "--json"], "JSON"),
        (["validate", str(tmp / "no-run"), "--plan", missing, "--json"], "input"),
        (["replay", missing, "--trace", missing, "--json"], "JSON"),
        (["sweep", missing, "-o", str(tmp / "r.jsonl"), "--json"], "sweep"),
        (["collect", missing, "--model-dir", str(tmp), "-o", str(tmp / "run"), "--json"], "JSON"),
        (["publish", str(tmp / "no-run"), "--plan", missing, "-o", str(tmp / "t.json"), "--json"], "JSON"),
        (["assess", str(tmp / "no-run"), "--plan", missing, "-o", str(tmp / "a.json"), "--json"], "JSON"),
        (["onboard", str(tmp / "no-model"), "-o", str(tmp / "campaign"), "--json"], "collect"),
        (["finalize", str(tmp / "no-campaign"), "--json"], "F-1"),
        (["verify", str(tmp / "no-campaign"), "--json"], "V-2"),
        (["explain", "NO-1", "--json"], "explain"),
        (["trace", "stats", missing, "--json"], "R-33"),
        (["profile", "check", missing, "--bogus", "--json"], "usage"),
        (["replay", str(PROFILE), "--trace", str(TRACE), "--max-num-seqs", str(2**63), "--json"], "usage"),
        # vllm_032's commands: a folder that is not a model, an output folder that is not empty
        (["live-steps", str(tmp), "--json"], "live-steps"),
        (["tiny-model", "llama", "-o", str(PROFILE.parent), "--json"], "O-2"),
    ]


def test_every_subcommand_prints_one_json_document_on_exit_2(tmp_path, host):
    commands = set(build_parser(host)._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    cases = _error_cases(tmp_path)
    assert {argv[0] for argv, _ in cases} >= commands - {"schema"}  # every subcommand with --json
    for argv, rule_class in cases:
        res = run_fpm(*argv, host=host)
        assert res.exit_code == 2, (argv, res.stderr)
        doc = json.loads(res.stdout)  # one document: json.loads refuses a second one
        assert doc["schema"] == 1 and doc["status"] == "error", (argv, doc)
        assert len(doc["diagnostics"]) >= 1 and all(set(d) == {"rule", "message", "where"} for d in doc["diagnostics"])
        assert doc["diagnostics"][0]["rule"] == rule_class, (argv, doc["diagnostics"][0]["rule"])
        assert res.stderr.strip(), argv  # the human line stays on stderr


def test_the_syntax_error_example_of_the_issue(tmp_path, host):
    bad = tmp_path / "syntax.json"
    bad.write_bytes(b'{"a":\n')
    res = run_fpm("profile", "check", str(bad), "--json", host=host)
    assert res.exit_code == 2
    assert json.loads(res.stdout) == {
        "schema": 1,
        "status": "error",
        "diagnostics": [
            {"rule": "JSON", "message": "invalid JSON: Expecting value at line 2 column 1", "where": str(bad)}
        ],
    }


@pytest.mark.parametrize("content, message", [
    (b'{\n"a": 1,\n"b": "abc\n}\n', "invalid JSON: Invalid control character at line 3 column 10"),
    (b'{\n"a": 1,\n"b": "abc', "invalid JSON: Unterminated string starting at line 3 column 6"),
])  # fmt: skip
def test_a_json_syntax_error_says_at_once(tmp_path, host, content, message):
    """Python's own "... starting at" and "... character at" read with the place once, never "at at line 34"."""
    bad = tmp_path / "p.json"
    bad.write_bytes(content)
    res = run_fpm("profile", "check", str(bad), host=host)
    assert (res.exit_code, res.stderr) == (2, f"fpm: {bad}: {message} [JSON]\n")


# --------------------------------------------------------------------------
# §8 a subcommand's own usage
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "usage"), [
    (["profile", "check", "X", "--bogus"], "usage: fpm profile check [-h] [--json] FILE\n"),
    (["plan", "X", "--bogus"], "usage: fpm plan "),
    (["replay", "X", "--trace", "T", "--bogus"], "usage: fpm replay "),
])  # fmt: skip
def test_an_unknown_argument_shows_the_subcommands_usage(host, argv, usage):
    res = run_fpm(*argv, host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr.startswith(usage)
    assert res.stderr.endswith("fpm: error: unrecognized arguments: --bogus\n")  # every diagnostic starts "fpm:"
    assert "COMMAND" not in res.stderr


def test_a_misspelt_option_is_named_before_the_required_one_it_stands_for(host):
    """``--tarce x``: the unknown option, with the closest known one, not the ``--trace`` it leaves missing;
    an abbreviation argparse accepts (``--trac``) is no unknown option."""
    res = run_fpm("replay", "X", "--tarce", "T", host=host)
    assert res.exit_code == 2
    assert res.stderr.endswith("fpm: error: unrecognized arguments: --tarce (did you mean --trace?)\n")
    missing = run_fpm("replay", "X", host=host)
    assert missing.exit_code == 2 and "the following arguments are required: --trace" in missing.stderr
    bad = run_fpm("replay", "X", "--trac", "T", "--max-num-seqs", "0", host=host)
    assert bad.exit_code == 2 and "unrecognized" not in bad.stderr and "--max-num-seqs" in bad.stderr
    grouped = run_fpm("replay", "X", "--trace", "T", "--trace-fromat", "mooncake", host=host)  # an option of a group
    assert grouped.stderr.endswith("unrecognized arguments: --trace-fromat mooncake (did you mean --trace-format?)\n")
    nested = run_fpm("trace", "stats", "T", "--rat", "2", "--time-scael", "2", host=host)  # a group's exclusive group
    assert nested.stderr.endswith("unrecognized arguments: --time-scael 2 (did you mean --time-scale?)\n")


# --------------------------------------------------------------------------
# §14 every integer option is bounded, by one type
# --------------------------------------------------------------------------


def _integer_options(host) -> list[tuple[list[str], str]]:
    """``(subcommand path, option)`` of every option whose type is an integer type, in every subcommand."""
    import argparse

    found = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.option_strings and action.type is not None:
                func = parser._registry_get("type", action.type, action.type)
                if getattr(func, "__name__", "") == "integer" or action.type is int:
                    found.append((path, action.option_strings[-1]))

    walk(build_parser(host), [])
    return found


def test_every_integer_option_reads_through_the_one_integer_type(host):
    options = _integer_options(host)
    names = {(" ".join(p), o) for p, o in options}
    assert {("replay", "--max-num-seqs"), ("replay", "--max-num-batched-tokens"), ("plan", "--token-budget"),
            ("probe", "--tp"), ("sweep", "--workers"), ("collect", "--repetitions")} <= names  # fmt: skip
    for path, option in options:
        for value in (str(2**63), "1" + "0" * 5000, "1e999"):
            res = run_fpm(*path, option, value, host=host)
            assert (res.exit_code, res.stdout) == (2, ""), (path, option, res.stderr)
            last = res.stderr.splitlines()[-1]
            assert last.startswith(f"fpm: error: argument {option}: must be an integer from "), last
            assert f" to {MAX_INTEGER:,}" in last or " to 4,294,967,295" in last, last
            assert len(last) < 200 and "Traceback" not in res.stderr


@pytest.mark.parametrize(("option", "value"), [
    ("--max-num-seqs", "9223372036854775808"),
    ("--max-num-batched-tokens", "1099511627777"),
])  # fmt: skip
def test_the_replay_overflows_of_the_issue(host, option, value):
    res = run_fpm("replay", str(PROFILE), "--trace", str(TRACE), option, value, host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-1] == (f"fpm: error: argument {option}: must be an integer from 1 to "
                                           f"1,099,511,627,776; got '{value}'")  # fmt: skip


def test_number_options_refuse_nan_and_infinity(host, tmp_path):
    for value in ("nan", "inf", "1e999", "-1"):
        res = run_fpm("collect", str(tmp_path / "p.json"), "--model-dir", str(tmp_path), "-o", str(tmp_path / "r"),
                      "--spacing", value, host=host)  # fmt: skip
        assert res.exit_code == 2
        assert res.stderr.splitlines()[-1].startswith("fpm: error: argument --spacing: must be a number from 0")


# --------------------------------------------------------------------------
# §7, §15 piped output never wraps; 80 columns read well
# --------------------------------------------------------------------------


def test_piped_output_never_wraps_a_value():
    res = _fpm("profile", "check", str(PROFILE), columns=80)
    assert res.returncode == 0
    first = res.stdout.splitlines()[0]
    assert first.startswith("valid ") and first.endswith(" profile_sha256 " + first.split()[-1])
    assert len(first.split()[-1]) == 64  # the digest on the line that names it
    assert all(line == line.rstrip() for line in res.stdout.splitlines())  # no trailing spaces


def test_piped_diagnostics_stay_one_line(tmp_path):
    """A diagnostic longer than 160 columns is one line on a pipe (§15)."""
    trace = tmp_path / ("t" * 150 + ".jsonl")
    trace.write_text('{"request_id": "A", "arrival_step": 0, "prompt_len": 1, "output_len": 1, "bogus": 1}\n')
    res = _fpm("replay", str(PROFILE), "--trace", str(trace), columns=80)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and len(res.stderr) > 200
    assert res.stderr == f"fpm: {trace}: trace line 1: unknown field bogus [R-33]\n"
    res = _fpm("import", str(tmp_path / ("x" * 200)), columns=80)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and len(res.stderr) > 200


def test_eighty_columns_on_a_terminal_break_no_word(host):
    """``fpm plugins`` and ``fpm profile check`` at 80 columns: no line wider, no word cut (§7)."""
    import io

    from rich.console import Console

    from fpmcore.cli.context import Context

    expected = {"plugins": ("distribution", "fpmcore-glm53flash", "deepseek-ai/DeepSeek-V4.1", "measurement_driver"),
                "profile": ("runtime_group_0", "checkpoint", "13,516,800", "ee1b2e6fcc941447a19229af9200477cc380af11"
                            "28db99166037d1ded96e3a25")}  # fmt: skip
    for argv in (["plugins"], ["profile", "check", str(PROFILE)]):
        buf = io.StringIO()
        ctx = Context(host, json=False, debug=False)
        ctx._out = Console(file=buf, width=80, force_terminal=True, color_system=None)
        args = build_parser(host).parse_args(argv)
        assert args._run(args, ctx) == 0
        text = buf.getvalue()
        assert max(len(line) for line in text.splitlines()) <= 80, text
        words = set(text.replace("│", " ").replace(",", " ").replace(":", " ").split())
        for word in expected[argv[0]]:
            assert word in words or word in text.split(), (word, text)
        assert "…" not in text


def test_the_replay_summary_at_eighty_columns_cuts_no_name_and_parts_no_label_from_its_value(host):
    """The replay's summary on an 80-column terminal: every quantity's name whole, each latency statistic in its
    own column beside its metric (``ttft_s`` … ``0.2``-style values on the metric's row)."""
    import io

    from rich.console import Console

    from fpmcore.cli.context import Context

    buf = io.StringIO()
    ctx = Context(host, json=False, debug=False)
    ctx._out = Console(file=buf, width=80, force_terminal=True, color_system=None)
    args = build_parser(host).parse_args(["replay", str(PROFILE), "--trace", str(TRACE)])
    assert args._run(args, ctx) == 0
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "align_peak_request_bytes_at_max_model_len" in text and "…" not in text
    header = next(line for line in text.splitlines() if "latency" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["latency", "mean", "p50", "p90", "p99", "max"], header
    for metric in ("ttft_s", "e2e_s"):  # one request: its TTFT and E2E on every statistic
        row = next(line for line in text.splitlines() if f" {metric} " in line)
        cells = [c.strip() for c in row.split("│")[1:-1]]
        assert cells[0] == metric and len(cells) == 6 and len(set(cells[1:])) == 1 and float(cells[1]) > 0, row


@pytest.mark.parametrize("columns", [80, 72])
def test_the_progress_bar_keeps_its_counts_and_times_whole_on_a_narrow_terminal(columns):
    """The one progress bar of the command line at 80 and 72 columns: ``done/total``, the steps and the times
    whole; only the description is shortened."""
    import io

    from rich.console import Console

    from fpmcore.cli.context import progress_bar

    console = Console(file=io.StringIO(), width=columns, force_terminal=True, color_system=None)
    bar = progress_bar(console, "requests", steps=True)
    task = bar.add_task("replaying a-trace-with-a-long-name-0123456789.jsonl", total=12_000, steps=1_234_567)
    bar.update(task, completed=11_999)
    console.print(bar.make_tasks_table(bar.tasks))
    (line,) = console.file.getvalue().splitlines()
    assert len(line) <= columns
    for whole in ("11999/12000 requests", "· 1,234,567 steps ·", "0:00:00 ETA"):
        assert whole in line, line
    assert line.startswith("repl") and "…" in line.split("11999")[0]


# --------------------------------------------------------------------------
# found by the campaign: a table count beyond the C library's bound
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["batch_size", "total_prefill_tokens", "total_kv_read_tokens"])
def test_a_table_count_beyond_the_replay_limit_is_r27(tmp_path, host, key):
    doc = json.loads((ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json").read_bytes())
    doc["rows"][0][key] = 2**63
    table = tmp_path / "table.json"
    table.write_text(json.dumps(doc))
    res = run_fpm("replay", str(PROFILE), "--trace", str(TRACE), "--fpm-table", str(table), host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == f"fpm: {table}: latency table row 0: {key} {2**63} exceeds the replay limit {2**40} [R-27]\n"


# --------------------------------------------------------------------------
# §14 stdout on a full device
# --------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["plugins"], ["schema", "profile"], ["profile", "check", str(PROFILE), "--json"],
                                  ["plugins", "show", "glm53flash", "--json"]])  # fmt: skip
def test_stdout_on_a_full_device_is_o5_not_an_internal_error(argv):
    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "fpmcore", *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                             timeout=120, check=False)  # fmt: skip
    assert res.returncode == 2
    assert res.stderr == "fpm: stdout: cannot write the output: No space left on device [O-5]\n"


# --------------------------------------------------------------------------
# found by the campaign: an arrival time near the largest double
# --------------------------------------------------------------------------


@pytest.mark.parametrize("arrival", ["1e308", "1.7976931348623157e308", "1e20"])
def test_an_arrival_far_beyond_the_limit_is_refused_at_once(tmp_path, host, arrival):
    """It was a hang: the step search stepped down one by one where a double cannot tell k from k - 1 (§12)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(f'{{"request_id": "a", "arrival_time": {arrival}, "prompt_len": 3000, "output_len": 4}}\n')
    res = run_fpm("replay", str(PROFILE), "--trace", str(trace), host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    last = res.stderr.splitlines()[-1]  # after the no-table note
    assert last.startswith(f"fpm: {trace}: trace line 1: arrival at step ")  # the file, as every refusal names it
    assert last.endswith(
        " is beyond the last arrival step a trace may have, 50,000,000 (a limit of arrivals, apart "
        "from --max-steps, which bounds the steps run) [R-32]"
    )


def test_a_grid_naming_a_file_too_long_for_the_file_system_is_refused(tmp_path, host):
    """Found by the campaign: an input name of 300 characters was an internal error (ENAMETOOLONG)."""
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"profiles": ["x" * 300], "traces": [str(TRACE)]}))
    res = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), host=host)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == f"fpm: {grid}: cannot use the name {'x' * 80!r}: File name too long [sweep]\n"
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("command", [["plan", str(PROFILE)], ["replay", str(PROFILE), "--trace", str(TRACE), "--json"]],
                         ids=["plan", "replay-json"])  # fmt: skip
def test_a_reader_that_stops_reading_is_no_verdict(command):
    """``fpm plan … | head -2`` and ``fpm replay … --json | head -c 100``: the reader closes the pipe after a
    little output; fpm ends with exit 0 and no error on stderr (not exit 1, the negative-verdict code)."""
    proc = subprocess.Popen([sys.executable, "-m", "fpmcore", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert [line for line in err.decode().splitlines() if not line.startswith("fpm: note:")] == []


def test_a_document_of_another_kind_is_named_for_what_it_is(tmp_path):
    """A plan or a table given as the profile, a table or a profile given as the trace: the refusal says what the
    file is and which command reads it (not its first unknown field, nor "truncated?")."""
    table = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"
    plan = tmp_path / "plan.json"
    assert run_fpm("plan", str(PROFILE), "-o", str(plan)).exit_code == 0
    cases = [
        (("replay", str(plan), "--trace", str(TRACE)), f"fpm: {plan}: this is a plan of fpm plan (fpm collect reads "
                                                       "it), not an FPM profile [P-S1]"),
        (("replay", str(table), "--trace", str(TRACE)), f"fpm: {table}: this is an FPM latency table (fpm replay "
                                                        "reads it with --fpm-table), not an FPM profile [P-S1]"),
        (("replay", str(PROFILE), "--trace", str(table)), f"fpm: {table}: this is an FPM latency table (fpm replay "
                                                          "reads it with --fpm-table), not a request trace [R-33]"),
        (("replay", str(PROFILE), "--trace", str(PROFILE)), f"fpm: {PROFILE}: this is an FPM profile (fpm replay and "
                                                            "fpm plan read it), not a request trace [R-33]"),
    ]  # fmt: skip
    for argv, line in cases:
        res = run_fpm(*argv)
        assert (res.exit_code, res.stderr.strip().splitlines()[-1]) == (2, line)


def test_prefix_caching_is_one_switch_with_two_spellings():
    """``--caching`` (probe, onboard) and ``--prefix-caching`` (replay) name one switch: each command takes both."""
    parser = build_parser(make_host())
    for argv, dest in (
        (["probe", "--dry-run", "d", "-o", "e", "--prefix-caching", "off"], "caching"),
        (["onboard", "m", "-o", "c", "--prefix-caching", "off"], "caching"),
        (["replay", "p", "--trace", "t", "--caching", "off"], "prefix_caching"),
    ):
        assert getattr(parser.parse_args(argv), dest) in ("off", False), argv


def test_a_table_too_wide_for_the_terminal_prints_one_block_per_row():
    import io

    from rich.console import Console
    from rich.table import Table

    from fpmcore.cli.context import print_table

    table = Table(title="T")
    for header in ("name", "a long header", "another long header"):
        table.add_column(header)
    table.add_row("first", "a-value-that-is-one-word", "b")
    table.add_row("second", "c", "d")
    out = io.StringIO()
    print_table(Console(file=out, width=30), table)
    assert out.getvalue().splitlines() == [
        "T", "first", "  a long header: ", "a-value-that-is-one-word", "  another long header: b",
        "second", "  a long header: c", "  another long header: d",
    ]  # fmt: skip


def test_a_named_command_is_the_only_subcommand_built(host):
    """``fpm replay …`` builds the replay's parser only; no name, or a name that is no command, lists every
    subcommand (argparse's choice check and ``fpm --help``), configuring none."""
    every = set(build_parser(host, only="")._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {"replay", "plugins", "import", "explain"} <= every
    named = build_parser(host, only="replay")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(named) == ["replay"]
    assert "--trace" in named["replay"].option_strings()
    unknown = build_parser(host, only="replya")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(unknown) == every and all(p.option_strings() == [] for p in unknown.values())
    res = run_fpm("replya", host=host)
    assert res.exit_code == 2 and "invalid choice: 'replya'" in res.stderr and "replay" in res.stderr
