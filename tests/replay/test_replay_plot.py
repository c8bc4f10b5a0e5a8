"""``fpm replay --plot`` (issue 12 §6, issue 13 §1, §15): checked before the replay, written or exit 2, downsampled
while the records stream."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from fpmcore.replay.plot import MAX_BUCKETS, PlotData
from fpmcore.testing import run_fpm

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "examples" / "profiles" / "plain-llama8b-like.fpm-profile.json"
TABLE = ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json"
TRACE = ROOT / "examples" / "traces" / "plain-poisson-300.jsonl"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("target,rule,message", [
    ("/nonexistent/dir/x.png", "O-1", "the folder /nonexistent/dir does not exist; fpm never creates missing folders"),
    ("DIR", "O-2", "the output exists and is a directory, not a regular file"),
    ("/dev/full", "O-2", "the output exists and is a character device, not a regular file"),
    ("x.txt", "R-35", "--plot: '.txt' is not an image format matplotlib writes; use one of "),
    ("noext", "R-35", "--plot: the file name has no image extension; use one of "),
    ("PROFILE", "O-3", "the output is the input"),
])  # fmt: skip
def test_bad_plot_paths_are_refused_before_the_replay(tmp_path, monkeypatch, target, rule, message):
    """Exit 2 with one line naming the rule; nothing ran (no summary, no --out folder), never `internal error`."""
    monkeypatch.chdir(tmp_path)
    target = {"DIR": str(tmp_path), "PROFILE": str(PLAIN)}.get(target, target)
    r = run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--plot", target, "--out", str(tmp_path / "out"))
    assert r.exit_code == 2
    assert r.stderr.startswith(f"fpm: {target}: ") and message in r.stderr and r.stderr.endswith(f" [{rule}]\n")
    assert r.stderr.count("\n") == 1 and r.stdout == ""
    assert not (tmp_path / "out").exists() and not Path("/nonexistent").exists()


def test_plot_inside_the_out_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--out", str(out), "--plot", str(out / "p.png"))
    assert r.exit_code == 2 and "[O-3]" in r.stderr and "inside the --out folder" in r.stderr


def test_a_failed_plot_write_is_exit_2(tmp_path, monkeypatch):
    """A write that fails (no space, as on /dev/full) is exit 2 naming O-5, never exit 0 having written nothing."""
    import errno

    from fpmcore.documents import output_files as outputs

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs, "_write_new", full)
    target = tmp_path / "p.png"
    r = run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--plot", str(target))
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1] == (
        f"fpm: {target}: cannot write the output: No space left on device; nothing was replaced [O-5]"
    )
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_the_plot_has_a_latency_panel_with_a_table_and_says_where_it_wrote(tmp_path):
    with_table, without = tmp_path / "t.png", tmp_path / "n.png"
    r = run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--fpm-table", str(TABLE), "--plot", str(with_table))
    assert r.exit_code == 0, r.stderr
    size = with_table.stat().st_size
    assert f"fpm: wrote the plot {with_table} ({size:,} bytes)" in r.stderr
    r2 = run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--plot", str(without), "--json")
    assert r2.exit_code == 0 and r2.json()["plot"] == str(without)
    (_, h1), (_, h2) = png_size(with_table.read_bytes()), png_size(without.read_bytes())
    assert h1 > h2 * 1.3  # three panels against two
    svg = tmp_path / "p.svg"
    assert run_fpm("replay", str(PLAIN), "--trace", str(TRACE), "--plot", str(svg)).exit_code == 0
    text = svg.read_text()
    assert "example/plain-llama8b-like" in text or "plain-llama8b-like" in text  # the title names the model
    assert text.lstrip().startswith("<?xml")


def _step(k: int, running: int, waiting: int, preempted: list[str], held: dict[str, list[int]]) -> dict:
    return {"step": k, "running": running, "waiting": waiting, "preempted": preempted,
            "used_blocks_scheduled": sum(sum(v) for v in held.values()) + 1, "used_bytes_scheduled": 0,
            "used_bytes_end": 0, "held_blocks_end": held}  # fmt: skip


def test_downsampling_keeps_peaks_and_preemptions():
    """10⁵ steps into at most MAX_BUCKETS buckets: the maximum of each series and every preemption are kept."""
    data = PlotData(["full", "swa"], capacity=1000, block_mode=True)
    n = 100_000
    for start in range(0, n, 1024):
        chunk = []
        for k in range(start, min(start + 1024, n)):
            peak = k == 77_777
            chunk.append(_step(k, 500 if peak else k % 7, 3 * (k % 11), ["a", "b"] if k % 1000 == 0 else [],
                               {"a": [k % 5, 1], "b": [400 if peak else 2, 3]}))  # fmt: skip
        data.add(chunk, [])
    assert len(data.running) <= MAX_BUCKETS and data.width == 32
    assert max(data.running) == 500 and max(data.waiting) == 30
    assert sum(data.preempted) == 2 * 100
    # group 0 of step 77,777: 77,777 % 5 = 2 blocks of "a" and 400 of "b"; group 1: 1 + 3 at every step
    assert max(data.group_use[0]) == (2 + 400) / 1000 and max(data.group_use[1]) == 4 / 1000
    assert max(data.peak_use) == (402 + 4 + 1) / 1000
    assert data.steps == n


def test_plot_of_a_long_replay_is_drawn_from_bounded_series(tmp_path, monkeypatch):
    """The plot of a replay with more steps than MAX_BUCKETS draws at most MAX_BUCKETS points per series."""
    t = tmp_path / "t.jsonl"
    t.write_text("".join(json.dumps({"request_id": f"r{i}", "arrival_step": 3 * i, "prompt_len": 32,
                                     "output_len": 40}) + "\n" for i in range(3000)))  # fmt: skip
    out = tmp_path / "p.png"
    drawn = []
    real = PlotData.render

    def render(self, *a, **k):
        drawn.append((self.width, len(self.running), self.steps))
        return real(self, *a, **k)

    monkeypatch.setattr(PlotData, "render", render)
    r = run_fpm("replay", str(PLAIN), "--trace", str(t), "--plot", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    steps = r.json()["summary"]["steps"]
    assert steps > MAX_BUCKETS
    ((width, points, seen),) = drawn
    assert width == 4 and points <= MAX_BUCKETS and points == -(-steps // width) and seen == steps
    assert png_size(out.read_bytes())[0] > 800


def _drawn_figures(monkeypatch) -> list:
    """The figures ``fpm`` saves, kept for reading their axes."""
    from matplotlib.figure import Figure

    drawn: list = []
    save = Figure.savefig

    def keep(self, *args, **kwargs):  # noqa: ANN001, ANN202
        drawn.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return drawn


def test_the_replay_plot_reads_as_the_newcomer_asked(tmp_path, monkeypatch):
    """The plot of ``make demo``'s replay: p99 drawn as markers (visible where it equals p90), whole counts on the
    request axis, the latency intervals' length stated, one time axis under every panel, and more than two labelled
    ticks on the log axis."""
    glm = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
    trace = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
    table = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"
    drawn = _drawn_figures(monkeypatch)
    png = tmp_path / "r.png"
    r = run_fpm("replay", str(glm), "--trace", str(trace), "--fpm-table", str(table), "--plot", str(png))
    assert r.exit_code == 0 and png.stat().st_size > 0, r.stderr
    fig = drawn[0]
    pool, requests, latency = [ax for ax in fig.axes if ax.get_title(loc="left")]
    labels = {ax.get_xlabel() for ax in (pool, requests, latency)}
    assert len(labels) == 1 and labels.pop().startswith("replayed time (s) — "), labels  # one time axis, below each
    one = ROOT / "examples" / "traces" / "glm-one-request.jsonl"  # a count of 0 or 1: ticks of 0.2 by default
    assert run_fpm("replay", str(glm), "--trace", str(one), "--plot", str(tmp_path / "one.png")).exit_code == 0
    counted = [ax for ax in drawn[1].axes if ax.get_ylabel().endswith("requests")]  # running, and waiting
    assert len(counted) == 2 and all(float(t).is_integer() for ax in counted for t in ax.get_yticks())
    assert counted[0].get_xlabel() == "step" and all(float(t).is_integer() for t in counted[0].get_xticks())
    title = latency.get_title(loc="left")
    assert " s of replayed time (" in title and " intervals; p99 as markers" in title, title
    p99 = [line for line in latency.get_lines() if line.get_label().endswith("p99")]
    assert len(p99) == 2 and all(line.get_marker() == "v" and line.get_linestyle() == "None" for line in p99)
    fig.canvas.draw()
    low, high = latency.get_ylim()
    shown = [t for t in latency.yaxis.get_major_ticks() if t.label1.get_text() and low <= t.get_loc() <= high]
    assert len(shown) > 2, [t.label1.get_text() for t in shown]
