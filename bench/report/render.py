"""reports/<run-id>/report.html: one self-contained file (inline CSS and SVG, no script, no URL)
from results.json and the raw data beside it. The verdicts are read back typed
(core.verdict.verdicts_of) and rendered from their fields: the outcome is the one the judge
decided, the detail shown its explanation (the judge's notes, then the check's). Every string is
escaped by Jinja2's autoescape."""
from __future__ import annotations

import errno
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..results import display
from ..specs.claims import NOT_MEASURED, claims_grid
from phonebench.core import files
from phonebench.core.errors import BenchError
from phonebench.core.verdict import BAD_OUTCOMES, Evidence, Outcome, TestOutcome, severity_of, verdicts_of
from .claim_plot import claim_plot
from .plots import Plot, plot_for

log = logging.getLogger(__name__)

VERDICT_OUTCOMES = ("pass", "fail", "inconclusive", "insufficient-samples", "invalid", "info")
TEST_OUTCOMES = tuple(o.value for o in TestOutcome)


class ReportError(BenchError):
    """A report could not be read or written."""


@dataclass
class DutSummary:
    name: str
    identity: dict[str, Any]
    tests: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.identity.get("error") and not (self.tests["failed"] or self.tests["error"]) \
            and not any(self.verdicts[o] for o in BAD_OUTCOMES)


@dataclass
class CheckSummary:
    name: str
    unit: str
    outcomes: Counter = field(default_factory=Counter)
    per_dut: dict[str, str] = field(default_factory=dict)  # DUT -> worst outcome

    @property
    def ok(self) -> bool:
        return not any(self.outcomes[o] for o in BAD_OUTCOMES)




def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("phonebench.bench.report", "templates"),
                             autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = format_number
    env.filters["unit"] = display.unit
    env.filters["prose"] = display.prose
    env.filters["check"] = display.check_name
    env.filters["limit"] = display.limit_text
    env.filters["value_text"] = display.value_text
    env.filters["expanded"] = display.expanded
    env.filters["duration"] = display.duration_text
    env.filters["pct"] = lambda v: "" if v is None else f"{v:.0%}"
    return env


format_number = display.number


def summarize(data: dict[str, Any]) -> tuple[list[DutSummary], list[CheckSummary]]:
    duts: dict[str, DutSummary] = {name: DutSummary(name, ident) for name, ident in data.get("duts", {}).items()}
    checks: dict[str, CheckSummary] = {}
    for test in data.get("tests", []):
        dut = test.get("dut") or "(no DUT)"
        summary = duts.setdefault(dut, DutSummary(dut, {}))
        summary.tests[test["outcome"]] += 1
        for v in verdicts_of(test):
            outcome = v.outcome.value
            summary.verdicts[outcome] += 1
            name = display.check_name(v)
            check = checks.setdefault(name, CheckSummary(name, display.unit(v.unit)))
            check.outcomes[outcome] += 1
            previous = check.per_dut.get(dut)
            if previous is None or v.outcome.severity > severity_of(previous, 0):
                check.per_dut[dut] = outcome
    return list(duts.values()), sorted(checks.values(), key=lambda c: (c.ok, c.name))


def fingerprint_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per DUT that has a fingerprint verdict, with its bit-exactness verdict."""
    from ..results.matrix import FINGERPRINT_NAMES, column_of, fingerprint_fields

    rows: dict[str, dict[str, Any]] = {}
    bit_exact: dict[str, str] = {}
    for test in data.get("tests", []):
        for v in verdicts_of(test):
            dut = test.get("dut") or "(no DUT)"
            if v.name in FINGERPRINT_NAMES:
                ident = data.get("duts", {}).get(dut, {})
                fp = fingerprint_fields(dict(v.extra), v.outcome.value)
                rows[dut] = {**fp, "dut": dut, "soc": fp["soc"] or ident.get("soc_model"),
                             "microcode": fp["microcode"] or ident.get("microcode"), "outcome": v.outcome.value}
            elif column_of(v.name) == "bit_exact":
                bit_exact[dut] = v.outcome.value
    for dut, row in rows.items():
        row["bit_exact"] = bit_exact.get(dut, "not measured")
    return list(rows.values())


def build_context(data: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    duts, checks = summarize(data)
    plot_index = 0
    tests = []
    for index, test in enumerate(data.get("tests", [])):
        verdicts = []
        for v in verdicts_of(test):
            plot: Plot | None = plot_for(v, run_dir, salt=f"p{plot_index}")
            plot_index += plot is not None
            verdicts.append({"v": v, "plot": plot})
        tests.append({"index": index, "t": test, "verdicts": verdicts})
    # The phone's word apart from the verdicts: what only the phone says is never a pass (docs/evidence.md).
    reported = [{"dut": test.get("dut") or "(no DUT)", "v": v} for test in data.get("tests", [])
                for v in verdicts_of(test) if v.evidence is Evidence.REPORTED and v.outcome is not Outcome.FAIL]
    summary = data.get("summary") or {}
    grid = claims_grid(data)
    claim_plots = [(row, claim_plot(row, salt=f"c{row.claim.number}")) for row in grid.rows if row.measured]
    return {"grid": grid, "claim_plots": [(row, svg) for row, svg in claim_plots if svg],
            "not_measured": NOT_MEASURED, "run": data, "station": data.get("station") or {}, "duts": duts, "checks": checks,
            "fingerprints": fingerprint_rows(data), "tests": tests, "reported": reported,
            "instruments": data.get("instruments") or {},
            "test_counts": [(o, summary.get(o, 0)) for o in TEST_OUTCOMES],
            "verdicts_failed": summary.get("verdicts_failed", 0),
            "plots": plot_index, "verdict_outcomes": VERDICT_OUTCOMES,
            "ok": data.get("status") == "complete" and all(d.ok for d in duts) and all(c.ok for c in checks)}


def render_html(data: dict[str, Any], run_dir: Path | None) -> str:
    return _environment().get_template("report.html.j2").render(build_context(data, run_dir))


def render_data(data: dict[str, Any], run_dir: Path | None, output: Path) -> Path:
    """Render a results.json-shaped record (raw files under run_dir) to `output`, atomically."""
    html = render_html(data, run_dir)
    write_atomically(output, html)
    log.info("report written: %s", output)
    return output


def render_run(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Read <run_dir>/results.json (and raw data), write <run_dir>/report.html; returns its path."""
    run_dir = Path(run_dir)
    results = run_dir / "results.json"
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{results} does not exist", hint="give a run folder, e.g. reports/latest") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{results} cannot be read: {exc}") from None
    return render_data(data, run_dir, Path(output) if output else run_dir / "report.html")


def write_atomically(path: Path, text: str) -> None:
    """All of the report or none of it: a full disk leaves the previous file (or none), and says so."""
    try:
        files.write_atomically(path, text)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ReportError(f"disk full writing {path}: it was not written ({len(text.encode()) // 1024} KiB "
                              f"needed); everything else is unchanged (results.json, raw data, an earlier copy)",
                              hint="free space, then run the command again (`bench report RUN_ID` re-renders "
                                   "a run's report)") from None
        raise ReportError(f"cannot write {path}: {exc}") from None
