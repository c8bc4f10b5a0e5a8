"""The ``fpm_trace_formats`` hook: a plugin's format is read, a wrong answer costs the plugin its formats only."""

from __future__ import annotations

import types

from fpmcore import API_VERSION, PluginInfo, SkippedRow, TraceFormat, TraceRequest, hookimpl
from fpmcore.host.conformance import check_plugin
from fpmcore.testing import make_host, run_fpm


def _plugin(name: str, formats) -> types.ModuleType:  # noqa: ANN001
    mod = types.ModuleType(name)
    mod.fpm_plugin_info = hookimpl(lambda: PluginInfo(id=name, kind="model", targets=(f"{name}-model",),
                                                      api_version=API_VERSION))  # fmt: skip
    mod.fpm_trace_formats = hookimpl(lambda: formats)
    return mod


def _read_tsv(source):  # noqa: ANN001, ANN202
    for n, text in source.lines():
        t, prompt, output = text.split("\t")
        yield (
            SkippedRow("no output")
            if output == "0"
            else TraceRequest(request_id=f"q{n}", arrival_time=float(t), prompt_len=int(prompt), output_len=int(output))
        )


TSV = TraceFormat(name="tsv", summary="arrival, prompt, output; tab-separated", sniff=lambda h: b"\t" in h[:80],
                  read=_read_tsv)  # fmt: skip


def test_a_plugins_format_is_sniffed_after_the_hosts_and_before_the_jsonl(tmp_path):
    host = make_host(_plugin("tabs", [TSV]))
    trace = tmp_path / "t.tsv"
    trace.write_text("0.0\t10\t2\n1.5\t20\t0\n2.0\t30\t3\n")
    out = tmp_path / "o.jsonl"
    r = run_fpm("trace", "convert", str(trace), "-o", str(out), "--json", host=host)
    assert r.exit_code == 0, r.stderr
    assert r.json()["trace"]["format"] == "tsv" and r.json()["trace"]["rows_skipped"] == {"no output": 1}
    assert [line[:20] for line in out.read_text().splitlines()] == ['{"request_id":"q1","', '{"request_id":"q3","']


def test_a_plugin_reader_that_yields_a_broken_request_is_refused_naming_it(tmp_path):
    bad = TraceFormat(name="dup", summary="", sniff=lambda h: h.startswith(b"dup"),
                      read=lambda s: iter([TraceRequest(request_id="a", prompt_len=1, output_len=1, arrival_time=0.0)] * 2))  # fmt: skip
    host = make_host(_plugin("dups", [bad]))
    trace = tmp_path / "t.dup"
    trace.write_text("dup\n")
    r = run_fpm("trace", "stats", str(trace), host=host)
    assert (r.exit_code, r.stderr) == (2, f"fpm: {trace}: request 2: duplicate request_id a [T-2]\n")


def test_a_wrong_answer_fails_the_plugin_not_the_command_line(tmp_path):
    host = make_host(_plugin("broken", ["not a format"]))
    r = run_fpm("plugins", "show", "fpmcore", "--json", host=host)
    assert r.exit_code == 0 and len(r.json()["plugin"]["trace_formats"]) == 5
    record = next(rec for rec in host.records if rec.id == "broken")
    assert record.status == "failed" and "fpm_trace_formats" in record.error and "expected TraceFormat" in record.error


def test_the_conformance_suite_asks_each_sniff_of_odd_heads():
    def sniff(head: bytes) -> bool:
        return head.decode("utf-8").startswith("x")  # raises on bytes that are not UTF-8

    plugin = _plugin("sniffy", [TraceFormat(name="sniffy", summary="", sniff=sniff, read=_read_tsv)])
    problems = [p for p in check_plugin(plugin) if p.startswith("fpm_trace_formats")]
    assert problems == [
        "fpm_trace_formats: sniffy: sniff(b'\\xff\\xfe\\x00') raised UnicodeDecodeError: 'utf-8' codec can't decode "
        "byte 0xff in position 0: invalid start byte"
    ]
    assert [p for p in check_plugin(_plugin("tabs", [TSV])) if p.startswith("fpm_trace_formats")] == []


def test_a_plugin_request_arriving_at_a_negative_time_is_refused(tmp_path):
    early = TraceFormat(name="early", summary="", sniff=lambda h: h.startswith(b"early"),
                        read=lambda s: iter([TraceRequest(request_id="a", prompt_len=1, output_len=1,
                                                          arrival_time=float("nan"))]))  # fmt: skip
    trace = tmp_path / "t.early"
    trace.write_text("early\n")
    r = run_fpm("trace", "stats", str(trace), host=make_host(_plugin("early", [early])))
    assert (r.exit_code, r.stderr) == (2, f"fpm: {trace}: request 1 of format early: arrival_time must be a finite "
                                          "number >= 0, found nan [T-2]\n")  # fmt: skip
