"""report.html: summary first, per-check statistics and plots drawn from the raw data with the
limit and bound, one self-contained file, every device or instrument string escaped."""
from __future__ import annotations

from phonebench.bench.store.sink import StoreSink

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from phonebench.bench.report import ReportError, render_html, render_run
from tests.report_example import ExampleDut, ExampleRun, write_example_run
from phonebench.core.records import TestRecord
from phonebench.bench.results.run_record import RunRecorder
from phonebench.bench.store import open_store
from phonebench.core.verdict import Outcome, PlotHint
from phonebench.core.judge import compare

XSS_DUT = "<script>alert(1)</script>"
XSS_MICROCODE = 'mc "quoted" & <b>amp</b> \'single\''
XSS_INSTRUMENT = '<img src=x onerror="alert(2)">'


class Page(HTMLParser):
    """Every tag and attribute of a page, and its text, as a browser's parser would see them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    @property
    def all_text(self) -> str:
        return "".join(self.text)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reports")
    duts = [ExampleDut(), ExampleDut(name=XSS_DUT, serial="EMU2", microcode=XSS_MICROCODE, fingerprint="mismatch",
                                     rule="wrap", latency_ok=False)]
    rec = write_example_run(folder, "r1", ExampleRun(duts=duts))
    data = json.loads(rec.results_path.read_text())
    data["instruments"]["scope"]["identity"]["model"] = XSS_INSTRUMENT
    rec.results_path.write_text(json.dumps(data))
    render_run(rec.run_dir)
    return rec.run_dir


def test_claims_come_first_then_counts_per_dut_and_check(hostile_run):
    html = (hostile_run / "report.html").read_text()
    assert html.index('id="claims"') < html.index('id="claim-plots"') < html.index('id="summary"') \
        < html.index('id="checks"') < html.index('id="fingerprints"') < html.index('id="tests"')
    assert "Checks failed" in html
    text = Page(html).all_text
    assert "Per DUT" in text and "Per check" in text
    assert "voice_latency_p99" in text and "sustained_power_mean" in text


def test_every_plot_is_drawn_inline_with_its_limit_and_bound(hostile_run):
    html = (hostile_run / "report.html").read_text()
    page = Page(html)
    figures = [a.get("class", "") for t, a in page.tags if t == "figure"]
    raw = ["plot plot-samples", "plot plot-samples", "plot plot-trace", "plot plot-trace", "plot plot-sweep"] * 2
    claims = ["plot claim-plot"] * 6  # claims 1, 6, 7, 8, 9, 10 judged a number
    assert sorted(figures) == sorted(raw + claims)
    assert page.count("svg") == 16
    assert "limit ≤ 410 ms" in html  # the latency limit in the samples plot's legend
    assert "bound @ 95%" in html
    assert "sustained average" in html
    assert "redundancy on" in html
    assert "hotspot A" in html and "hotspot B" in html
    ids = [a["id"] for _, a in page.tags if a.get("id")]
    assert len(ids) == len(set(ids)), "SVG ids must not collide between plots"


def test_the_report_is_self_contained(hostile_run):
    html = (hostile_run / "report.html").read_text()
    page = Page(html)
    assert page.count("script") == 0 and page.count("link") == 0 and page.count("img") == 0
    for tag, attrs in page.tags:
        for name in ("src", "href", "xlink:href"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), f"<{tag} {name}={value!r}> loads something"
    assert "http://" not in html and "https://" not in html
    assert html.count("url(") == html.count("url(#")  # only references inside the page
    assert any(a.get("http-equiv") == "Content-Security-Policy" for t, a in page.tags if t == "meta")


def test_device_and_instrument_strings_are_escaped(hostile_run):
    html = (hostile_run / "report.html").read_text()
    page = Page(html)
    assert XSS_DUT not in html and XSS_INSTRUMENT not in html and XSS_MICROCODE not in html
    assert page.count("script") == 0 and page.count("img") == 0 and page.count("b") == 0
    assert not [a for _, attrs in page.tags for a in attrs if a.startswith("on")]
    text = page.all_text
    assert XSS_DUT in text and XSS_MICROCODE in text and XSS_INSTRUMENT in text  # shown, literally


def test_fingerprint_table_shows_rule_width_profile_adapter_and_bit_exactness(hostile_run):
    html = (hostile_run / "report.html").read_text()
    section = html[html.index('id="fingerprints"'):html.index('id="station"')]
    text = Page(section).all_text
    for expected in ("saturate", "wrap", "20 bits", "npu-mc 4.2.1-MP", "known", "mismatch", "pass"):
        assert expected in text


def test_an_unfinished_run_says_so(tmp_path):
    rec = write_example_run(tmp_path, "r1", ExampleRun(finish=False))
    html = render_run(rec.run_dir).read_text()
    assert "did not finish (running)" in html


def test_missing_or_misplaced_raw_data_is_named_not_fatal(tmp_path):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    outside = tmp_path / "outside.npz"
    np.savez(outside, samples=np.arange(10.0))
    rec.add_test(TestRecord("t::a", None, "passed", 0.1, verdicts=[
        compare("voice_latency_p99", 1.0, "ms", 2.0, raw=["raw/gone.npz"], plot=PlotHint("samples")),
        compare("x", 1.0, "ms", 2.0, raw=["../outside.npz"], plot=PlotHint("samples")),
        compare("y", 1.0, "ms", 2.0, plot=PlotHint("spiral")),
    ]))
    rec.finish()
    html = render_run(rec.run_dir).read_text()
    assert "raw/gone.npz (missing)" in html
    assert "../outside.npz (outside the run folder, not read)" in html
    assert "unknown plot kind &#39;spiral&#39;" in html
    assert "<svg" not in html


def test_long_traces_are_thinned_but_keep_their_peaks(tmp_path):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    t = np.arange(200_000) / 5000.0
    y = np.full(t.size, 4.0)
    y[123_457] = 9.75  # one spike in 200 k samples: the envelope must keep it
    raw = rec.save_raw("t::a", "power", {"t": t, "y": y})
    rec.add_test(TestRecord("t::a", None, "passed", 0.1, verdicts=[
        compare("power_peak", 9.75, "W", 10.0, raw=[raw], plot=PlotHint("trace"))]))
    rec.finish()
    html = render_run(rec.run_dir).read_text()
    assert len(html) < 400_000
    from phonebench.bench.report.plots import _envelope
    _, kept = _envelope(t, y)
    assert kept.max() == 9.75 and kept.size <= 2000
    y[1000:9000] = np.nan  # a gap in the recording (whole buckets of it) does not hide the spike either
    _, kept = _envelope(t, y)
    assert np.nanmax(kept) == 9.75 and kept.size <= 2000
    assert _envelope(t[:2001], y[:2001])[1].size <= 2000  # just over the limit: padded buckets drop out


def test_the_store_renders_the_same_report_as_the_folder(tmp_path):
    store = open_store(tmp_path / "r.sqlite")
    rec = write_example_run(tmp_path, "r1", ExampleRun(duts=[ExampleDut(), ExampleDut(name="bay2", serial="B")]),
                            sinks=[StoreSink(store, tmp_path)])
    stored = store.load_run("r1")
    from_folder = render_html(json.loads(rec.results_path.read_text()), rec.run_dir)
    assert render_html(stored.data, stored.run_dir) == from_folder


def test_a_run_folder_without_results_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="results.json does not exist"):
        render_run(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(ReportError, match="cannot be read"):
        render_run(tmp_path)


# --------------------------------------------------------------------------- the SVG writer

def test_plot_texts_from_the_run_are_escaped(tmp_path):
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    raw = rec.save_raw("t::a", "trace", {"t": np.arange(5.0), "y": np.arange(5.0)})
    rec.add_test(TestRecord("t::a", None, "passed", 0.1, verdicts=[
        compare("x", 1.0, "<b>W</b>", 9.0, raw=[raw], plot=PlotHint("trace", labels=(XSS_DUT,),
                                                                          x_label=XSS_INSTRUMENT))]))
    rec.finish()
    svg = render_html(json.loads(rec.results_path.read_text()), rec.run_dir)
    page = Page(svg)
    assert page.count("script") == 0 and page.count("img") == 0 and page.count("b") == 0
    assert XSS_DUT in page.all_text and XSS_INSTRUMENT in page.all_text and "<b>W</b>" in page.all_text


def test_axes_get_round_ticks_linear_and_log():
    from phonebench.bench.report.svg import Scale

    assert [v for v, _ in Scale(23.2, 42.5).ticks(5)] == [25, 30, 35, 40]
    assert [label for _, label in Scale(0.0, 1.02).ticks(5)] == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert [label for _, label in Scale(1e-6, 1.3e-5, log=True).ticks()] == ["1e-6", "2e-6", "5e-6", "1e-5"]
    assert [label for _, label in Scale(1e-9, 1.0, log=True).ticks()][-2:] == ["0.001", "0.1"]
    assert Scale(3.0, 3.0).ticks()  # a flat series still gets an axis


def test_a_gap_in_a_trace_breaks_its_line_and_a_log_axis_drops_what_it_cannot_show():
    from phonebench.bench.report.svg import Panel, Scale, Style

    panel = Panel(0, 0, 100, 100, Scale(0, 4), Scale(1, 100, log=True))
    panel.line(np.arange(5.0), np.array([1.0, 10.0, np.nan, 10.0, 0.0]), Style("#000"))
    path = panel.render("c")
    segments = path[path.index('<g clip-path'):].split('d="')[1].split('"')[0]
    assert segments.count("M") == 2 and segments.count("L") == 1  # 1-10, then 10 alone; 0 is off a log axis
    panel.rule(0.0, Style("#000"), "limit 0", vertical=False)
    assert panel.render("c") == path  # no line (a NaN in a path is a browser error), no legend entry for it


def test_the_legend_goes_to_the_corner_with_the_least_data():
    from phonebench.bench.report.svg import Panel, Scale, Style

    panel = Panel(0, 0, 400, 200, Scale(0, 1), Scale(0, 1))
    x = np.linspace(0, 1, 200)
    panel.line(x, x, Style("#000"), "rising")  # through the lower left and upper right corners
    legend = panel.render("c")
    box = legend[legend.rindex("<rect"):]
    x0, y0 = float(box.split('x="')[1].split('"')[0]), float(box.split('y="')[1].split('"')[0])
    assert x0 < 200 and y0 < 100  # upper left, not the first choice (upper right): that one has data


def test_reported_values_are_shown_apart_from_the_verdicts(tmp_path):
    """The phone's word (evidence reported) is listed in a section of its own, never counted as a pass."""
    rec = write_example_run(tmp_path, "r1")
    results = rec.run_dir / "results.json"
    data = json.loads(results.read_text())
    said = compare("counters_kv_cache_miss_rate", 0.112, "fraction", 0.12, evidence="reported", claim=14)
    assert said.outcome is Outcome.INFO  # the judge: the phone's word alone is never a PASS
    data["tests"][0]["verdicts"].append(json.loads(json.dumps(said.to_dict(), default=str)))
    results.write_text(json.dumps(data))
    html = render_run(rec.run_dir).read_text()
    section = html[html.index('id="reported"'):html.index('id="checks"')]
    assert "0.112" in Page(section).all_text
    assert "first_token" not in section and "npu_trip" not in section  # verdicts stay verdicts
