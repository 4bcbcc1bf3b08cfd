"""Acceptance verdicts are recorded without a plot hint (a plot per unit would cost the line takt):
the redundancy test strips the hint before recording, not on a copy it then drops."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from phonebench.bench.checks import CheckResult
from phonebench.bench.specs.sla import load_profile
from phonebench.core.verdict import PlotHint, Verdict
from phonebench.core.judge import compare
from phonebench.drivers.power import SupplyFeatures
from phonebench.fixtures.verdicts import Record
import suites.test_acceptance as acceptance


class FakeRecord:
    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def __call__(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict

    def check(self, name: str, value: Any, unit: str, limit: Any, comparator: str = "<=", **kw: Any) -> Verdict:
        return self(compare(name, value, unit, limit, comparator, **kw))

    judge = Record.judge  # the plugin's own: the profile's entry, then this record

    def raw(self, name: str, data: Any) -> str:
        return f"raw/{name}.npz"


def test_redundancy_verdicts_are_recorded_without_a_plot(monkeypatch):
    plotted = compare("acceptance_redundancy_mismatches", 0, "tokens", 0, plot=PlotHint("sweep"), raw=("sweep",))
    result = CheckResult([plotted], raw={"sweep": {"x": [0.0], "y": [0.0]},
                                         "bit_exact": {"engaged": True}})
    monkeypatch.setattr(acceptance, "bit_exact_check", lambda *a, **k: result)
    profile = load_profile("acceptance")
    record = FakeRecord()
    supply = SimpleNamespace(features=SupplyFeatures(ripple=True, series_resistance=True))
    acceptance.test_redundancy_at_one_ripple_amplitude(None, supply, profile, record)
    recorded = {v.name: v for v in record.verdicts}
    assert "acceptance_redundancy_mismatches" in recorded
    assert all(v.plot is None for v in record.verdicts)
    assert recorded["acceptance_redundancy_mismatches"].raw == ("raw/sweep.npz",)  # raw data still kept


def test_the_negative_control_a_plotted_verdict_is_seen():
    record = FakeRecord()
    CheckResult([compare("x", 0, "", 0, plot=PlotHint("sweep"))]).record_into(record)
    assert record.verdicts[0].plot is not None
