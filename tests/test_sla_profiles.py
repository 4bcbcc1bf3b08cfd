"""phonebench.bench.specs.sla: the default profile holds the product's targets; lab profiles extend it; bad ones say why."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from phonebench.core.errors import ConfigError
from phonebench.bench.specs.sla import PROFILE_DIR, available_profiles, load_profile
from phonebench.core import judge
from phonebench.core.verdict import Evidence, Finding, FindingKind, Outcome, Uncertainty, UncertaintyComponent, Verdict


def _measured(standard: float) -> dict:
    """What an instrument check passes: guarded entries decide on the value's uncertainty."""
    return {"evidence": Evidence.MEASURED, "uncertainty": Uncertainty.combine([UncertaintyComponent("u", standard)])}


@pytest.fixture(scope="module")
def default():
    return load_profile("default")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the default profile

PRODUCT_TARGETS = {  # issue 5, "What to build" 1
    "voice_latency_p99": ("percentile", "<=", 410, "ms"),
    "voice_latency_std": ("std", "<=", 87, "ms"),
    "dialog_time_p99": ("percentile", "<=", 3.8, "s"),
    "first_token_p99": ("percentile", "<", 300, "ms"),
    "token_latency_std": ("std", "<=", 23, "ms"),
    "token_latency_p95_gpu_load": ("percentile", "<", 150, "ms"),
    "sustained_power_mean": ("mean", "<=", 4.2, "W"),
    "energy_per_dialog": ("mean", "<=", 8 / 27, "% of battery capacity"),
    "back_cover_temperature_max": ("max", "<=", 41.7, "degC"),
    "cover_temp_spread": ("max", "<=", 3.0, "degC"),  # "heat spread evenly": the bench's reading
    "npu_trip_temperature": ("value", "==", 72, "degC"),
    "npu_process_kills": ("count", "<=", 0, "kills"),
    "long_dialog_success": ("proportion", ">=", 0.992, "fraction"),
    "redundancy_engage_threshold": ("value", "<=", 35, "mV"),
    "redundancy_token_mismatches": ("count", "<=", 0, "tokens"),
    "redundancy_slowdown": ("mean", "<=", 23, "%"),
    "weight_page_read_errors": ("count", "<=", 0, "pages"),
    "merkle_spot_check_time": ("percentile", "<", 100, "ms"),
}


def test_default_profile_holds_the_product_targets(default):
    assert default.name == "default" and "default" in available_profiles()
    assert {e.metric for e in default} == set(PRODUCT_TARGETS)
    for metric, (statistic, comparator, limit, unit) in PRODUCT_TARGETS.items():
        entry = default.get(metric)
        assert (entry.statistic, entry.comparator, entry.unit) == (statistic, comparator, unit), metric
        assert entry.limit == pytest.approx(limit), metric
        assert entry.claim is not None and entry.description, metric
        if statistic in ("percentile", "std", "mean", "proportion"):
            assert 0 < entry.confidence < 1, metric


def test_default_profile_details(default):
    p99 = default.get("voice_latency_p99")
    assert (p99.p, p99.confidence, p99.n_required) == (0.99, 0.95, 299)
    assert default.get("token_latency_p95_gpu_load").p == 0.95
    assert default.get("token_latency_p95_gpu_load").conditions["gpu_load_min"] == 0.70
    assert default.get("token_latency_p95_gpu_load").independence == "run"
    assert default.get("token_latency_std").independence == "block"
    assert default.get("token_latency_std").n_required == 1000
    assert default.get("long_dialog_success").n_required == 373
    assert default.get("npu_trip_temperature").tolerance == 2.0


# --------------------------------------------------------------------------- evaluate

def test_evaluate_dispatches_by_statistic(default):
    rng = np.random.default_rng(0)
    ok = default.get("voice_latency_p99").evaluate(rng.normal(300, 30, 400), **_measured(1.0))
    assert isinstance(ok, Verdict) and ok.outcome is Outcome.PASS and ok.statistic == "p99"
    assert ok.name == "voice_latency_p99" and ok.profile == "default" and ok.claim == 1
    slow = default.get("voice_latency_p99").evaluate(rng.normal(390, 30, 400), **_measured(1.0))  # negative control
    assert slow.outcome is Outcome.FAIL
    assert default.get("voice_latency_std").evaluate(rng.normal(300, 100, 400), **_measured(1.0)).outcome \
        is Outcome.FAIL
    assert default.get("long_dialog_success").evaluate((400, 400)).outcome is Outcome.PASS
    assert default.get("long_dialog_success").evaluate(np.r_[np.ones(390, bool), np.zeros(10, bool)]).outcome \
        is Outcome.FAIL
    measured = Evidence.MEASURED  # these entries require the bench's own measurement
    assert default.get("npu_process_kills").evaluate(0, evidence=measured).outcome is Outcome.PASS
    assert default.get("npu_process_kills").evaluate(1, evidence=measured).outcome is Outcome.FAIL
    assert default.get("npu_trip_temperature").evaluate(71.0, evidence=measured).outcome is Outcome.PASS
    assert default.get("npu_trip_temperature").evaluate(65.0, evidence=measured).outcome is Outcome.FAIL  # CPU's trip
    skin = default.get("back_cover_temperature_max")
    assert skin.evaluate(np.full(60, 41.0), ambient_c=25.0, **_measured(0.2)).outcome is Outcome.PASS
    assert skin.evaluate(np.r_[np.full(59, 41.0), 52.3], ambient_c=25.0, **_measured(0.2)).outcome is Outcome.FAIL
    assert skin.evaluate(np.full(10, 41.0), ambient_c=25.0, **_measured(0.2)).outcome is Outcome.INSUFFICIENT
    # Guarded: without an uncertainty, or within it of the limit, the claim is not shown either way.
    assert skin.evaluate(np.full(60, 41.0), ambient_c=25.0).outcome is Outcome.INCONCLUSIVE
    assert skin.evaluate(np.full(60, 41.5), ambient_c=25.0, **_measured(0.2)).outcome is Outcome.INCONCLUSIVE


def test_evaluate_runs_and_block(default):
    rng = np.random.default_rng(1)
    runs = [rng.normal(100, 10, 60) for _ in range(20)]
    v = default.get("token_latency_p95_gpu_load").evaluate(runs, evidence=Evidence.MEASURED, gpu_load=0.82)
    assert v.outcome is Outcome.PASS and v.extra["runs"] == 20 and v.extra["context"] == {"gpu_load": 0.82}
    few = default.get("token_latency_p95_gpu_load").evaluate(runs[:5], gpu_load=0.82)
    assert few.outcome is Outcome.INSUFFICIENT
    jitter = default.get("token_latency_std").evaluate(rng.normal(100, 30, 1000))  # the old +-142 ms class
    assert jitter.outcome is Outcome.FAIL


def test_conditions_must_be_shown(default):
    entry = default.get("token_latency_p95_gpu_load")
    runs = [np.full(60, 100.0) + np.arange(60) % 7 for _ in range(20)]
    missing = entry.evaluate(runs)
    assert missing.outcome is Outcome.INVALID and "gpu_load" in missing.explanation
    idle = entry.evaluate(runs, gpu_load=0.35)
    assert idle.outcome is Outcome.INVALID and "not met" in idle.explanation
    assert entry.evaluate(runs, evidence=Evidence.MEASURED, gpu_load=0.9).outcome is Outcome.PASS
    mism = default.get("redundancy_token_mismatches")
    assert mism.evaluate(0, evidence=Evidence.MEASURED, ripple_mv=50.4).outcome is Outcome.PASS
    assert mism.evaluate(0, evidence=Evidence.MEASURED, ripple_mv=20.1).outcome is Outcome.INVALID
    assert mism.evaluate(3, evidence=Evidence.MEASURED, ripple_mv=50.4).outcome is Outcome.FAIL



def test_a_check_gives_findings_never_an_outcome(default):
    """Negative control: a check cannot hand evaluate() an outcome, and no finding makes a PASS."""
    entry = default.get("redundancy_token_mismatches")
    with pytest.raises(TypeError, match="findings"):
        entry.evaluate(3, evidence=Evidence.REPORTED, ripple_mv=50.4, outcome=Outcome.PASS)
    with pytest.raises(TypeError, match="judge"):
        entry.evaluate(3, ripple_mv=50.4).but(outcome=Outcome.PASS)
    found = entry.evaluate(0, evidence=Evidence.MEASURED, ripple_mv=50.4,
                           findings=[Finding(FindingKind.CONTRADICTED, "the flag says off")])
    assert found.outcome is Outcome.FAIL and found.explanation.startswith("the flag says off")
    assert {judge.decide(found.but(detail=d)).outcome for d in ("a", "b")} == {Outcome.FAIL}

# --------------------------------------------------------------------------- lab profiles

def test_lab_profile_extends_and_tightens(tmp_path, caplog):
    path = write(tmp_path, "lab.toml", """
name = "lab"
extends = "default"

[metrics.voice_latency_p99]
limit = 380
confidence = 0.99

[metrics.token_latency_p95_gpu_load.conditions]
gpu_load_min = 0.8

[metrics.fan_noise]
statistic = "max"
comparator = "<="
limit = 30
unit = "dBA"
""")
    with caplog.at_level(logging.WARNING, logger="phonebench.bench.specs.sla"):
        lab = load_profile(path)
    assert lab.name == "lab" and len(lab) == len(PRODUCT_TARGETS) + 1
    p99 = lab.get("voice_latency_p99")
    assert (p99.limit, p99.confidence, p99.p, p99.unit) == (380, 0.99, 0.99, "ms")
    assert p99.source == str(path) and p99.n_required == 459
    assert lab.get("token_latency_p95_gpu_load").conditions["gpu_load_min"] == 0.8
    assert lab.get("voice_latency_std").limit == 87  # inherited
    assert lab.chain[0] == (PROFILE_DIR / "default.toml").resolve() and lab.chain[-1] == path.resolve()
    assert lab.loosened == () and not caplog.records
    rng = np.random.default_rng(2)
    # 400 trials: enough for the default (299) but not for the lab's 99 % confidence (459)
    assert lab.get("voice_latency_p99").evaluate(rng.normal(300, 20, 400)).outcome is Outcome.INSUFFICIENT


def test_loosening_is_allowed_but_logged(tmp_path, caplog):
    path = write(tmp_path, "loose.toml", 'extends = "default"\n[metrics.voice_latency_p99]\nlimit = 500\n')
    with caplog.at_level(logging.WARNING, logger="phonebench.bench.specs.sla"):
        loose = load_profile(path)
    assert loose.loosened == ("voice_latency_p99: limit 410 -> 500",)
    assert "loosens" in caplog.text


def test_lab_profile_by_name_in_a_search_dir(tmp_path):
    write(tmp_path, "line7.toml", 'extends = "default"\n[metrics.weight_page_read_errors]\nlimit = 0\n')
    assert load_profile("line7", search=(tmp_path,)).name == "line7"
    # a lab copy called default.toml that extends "default" reaches the shipped one, not itself
    write(tmp_path, "default.toml", 'name = "default-lab"\nextends = "default"\n')
    assert load_profile(tmp_path / "default.toml").name == "default-lab"


# --------------------------------------------------------------------------- bad profiles

def expect_error(path: Path, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return info.value


GOOD = """
[metrics.x]
statistic = "percentile"
p = 0.99
comparator = "<="
limit = 410
unit = "ms"
confidence = 0.95
"""


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.toml", GOOD.replace('unit = "ms"', "unit = ms"))
    expect_error(path, str(path), "TOML syntax error", "line 7")


@pytest.mark.parametrize("replace,fragments", [
    (('limit = 410', 'limt = 410'), ("field 'limt'", "known fields")),
    (('limit = 410', 'limit = "410"'), ("field 'limit'", "a number", "'410'")),
    (('confidence = 0.95', 'confidence = 95'), ("field 'confidence'", "between 0 and 1", "95")),
    (('p = 0.99', ''), ("field 'p'", "p99")),
    (('statistic = "percentile"', 'statistic = "median"'), ("field 'statistic'", "percentile, std")),
    (('comparator = "<="', 'comparator = "=<"'), ("field 'comparator'",)),
    (('comparator = "<="', 'comparator = "=="'), ("one-sided comparator",)),
    (('unit = "ms"', ''), ("field 'unit'", "required")),
    (('p = 0.99', 'p = 0.99\nindependence = "tokens"'), ("field 'independence'", "sample, block, run")),
    (('p = 0.99', 'p = 0.99\nmin_samples = -3'), ("field 'min_samples'", ">= 0")),
    (('p = 0.99', 'p = 0.99\nmin_runs = 3'), ("field 'min_runs'", "independence")),
])
def test_bad_field_names_file_entry_field_and_expectation(tmp_path, replace, fragments):
    path = write(tmp_path, "bad.toml", GOOD.replace(*replace))
    err = expect_error(path, str(path), "entry 'x'", *fragments)
    assert "hint" in str(err)


def test_bad_field_hint_points_at_the_line(tmp_path):
    path = write(tmp_path, "bad.toml", GOOD.replace("confidence = 0.95", "confidence = 1.5"))
    err = expect_error(path, "field 'confidence'")
    assert err.hint == f"see {path}:8"


def test_other_bad_profiles(tmp_path):
    expect_error(write(tmp_path, "a.toml", 'extends = "nope"\n'), "no SLA profile named 'nope'", "available")
    expect_error(write(tmp_path, "b.toml", 'colour = "red"\n'), "unknown top-level field", "colour")
    write(tmp_path, "c1.toml", 'extends = "c2"\n')
    expect_error(write(tmp_path, "c2.toml", 'extends = "c1"\n'), "loops back")
    prop = GOOD.replace('statistic = "percentile"\np = 0.99', 'statistic = "proportion"').replace(
        'comparator = "<="', 'comparator = ">="').replace("limit = 410", "limit = 99.2")
    expect_error(write(tmp_path, "d.toml", prop), "fraction between 0 and 1")
    value = 'extends = "default"\n[metrics.npu_trip_temperature]\nconfidence = 0.9\n'
    expect_error(write(tmp_path, "e.toml", value), "e.toml", "'npu_trip_temperature'", "no confidence")
    expect_error(write(tmp_path, "f.toml", GOOD.replace("[metrics.x]", "[metrics.X-1]")), "lower_snake_case")
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="no metric 'nope'"):
        load_profile("default").get("nope")


def test_error_in_base_profile_names_the_base_file(tmp_path):
    base = write(tmp_path, "base.toml", GOOD.replace("limit = 410", 'limit = "fast"'))
    lab = write(tmp_path, "lab.toml", 'extends = "base"\n[metrics.x]\nunit = "s"\n')
    expect_error(lab, str(base), "field 'limit'")


# --------------------------------------------------------------------------- evidence and decision rules

def _entry_profile(tmp_path: Path, extra: str) -> object:
    path = write(tmp_path, "lab", f'''
name = "lab"
[metrics.first_token_p99]
statistic = "max"
comparator = "<="
limit = 300
unit = "ms"
{extra}
''')
    return load_profile(path).get("first_token_p99")


def test_a_pass_on_weaker_evidence_than_required_is_inconclusive(tmp_path):
    from phonebench.core.verdict import Evidence

    entry = _entry_profile(tmp_path, 'evidence = "corroborated"')
    said = entry.evaluate([120.0, 130.0], evidence=Evidence.SELF_REPORTED)
    unstated = entry.evaluate([120.0, 130.0])
    checked = entry.evaluate([120.0, 130.0], evidence=Evidence.CORROBORATED)
    measured = entry.evaluate([120.0, 130.0], evidence=Evidence.MEASURED)
    assert said.outcome is Outcome.INCONCLUSIVE and "never a PASS" in said.explanation
    assert unstated.outcome is Outcome.INCONCLUSIVE and "unstated evidence" in unstated.explanation
    assert checked.outcome is Outcome.PASS and checked.evidence is Evidence.CORROBORATED
    assert measured.outcome is Outcome.PASS
    slow = entry.evaluate([120.0, 330.0], evidence=Evidence.SELF_REPORTED)  # a self-reported miss still fails
    assert slow.outcome is Outcome.FAIL
    lenient = _entry_profile(tmp_path, 'evidence = "any"')  # the phone's word alone: reported, never a PASS
    assert lenient.evaluate([120.0, 130.0], evidence=Evidence.REPORTED).outcome is Outcome.INFO
    assert Evidence("self-reported") is Evidence.REPORTED  # results stored before the rename


def test_guarded_decision_needs_the_uncertainty_clear_of_the_limit(tmp_path):
    from phonebench.core.verdict import Evidence, Uncertainty, UncertaintyComponent

    entry = _entry_profile(tmp_path, 'decision_rule = "guarded"\nevidence = "measured"')
    u = Uncertainty.combine([UncertaintyComponent("sample interval", 2.5), UncertaintyComponent("jitter", 0.0, "A")])
    assert u.expanded == pytest.approx(5.0)
    clear = entry.evaluate([250.0], evidence=Evidence.MEASURED, uncertainty=u)
    close = entry.evaluate([297.0], evidence=Evidence.MEASURED, uncertainty=u)
    over = entry.evaluate([302.0], evidence=Evidence.MEASURED, uncertainty=u)
    far = entry.evaluate([306.0], evidence=Evidence.MEASURED, uncertainty=u)
    bare = entry.evaluate([250.0], evidence=Evidence.MEASURED)  # no uncertainty: never a guarded pass
    assert clear.outcome is Outcome.PASS and clear.decision_rule.value == "guarded"
    assert close.outcome is Outcome.INCONCLUSIVE and over.outcome is Outcome.INCONCLUSIVE
    assert far.outcome is Outcome.FAIL
    assert bare.outcome is Outcome.INCONCLUSIVE and "without an uncertainty" in bare.explanation


def test_evidence_and_rule_fields_are_validated(tmp_path):
    with pytest.raises(ConfigError, match="evidence"):
        _entry_profile(tmp_path, 'evidence = "hearsay"')
    with pytest.raises(ConfigError, match="decision_rule"):
        _entry_profile(tmp_path, 'decision_rule = "lenient"')


def test_a_verdict_round_trips_through_its_dict():
    from phonebench.core.verdict import Evidence, PlotHint, Uncertainty, UncertaintyComponent

    v = Verdict("x", 1.5, "ms", Outcome.PASS, limit=2.0, evidence=Evidence.CORROBORATED, claim=3,
                uncertainty=Uncertainty.combine([UncertaintyComponent("a", 0.1, "A")]),
                plot=PlotHint("samples", labels=("a",)), raw=("raw/x.npz",), extra={"k": 1})
    assert Verdict.from_dict(v.to_dict()) == v
    with pytest.raises(Exception):
        v.value = 3.0  # frozen


def test_a_check_whose_metric_the_profile_lacks_names_both(tmp_path):
    from phonebench.bench.checks import voice

    lab = load_profile(write(tmp_path, "lab", '''
name = "lab"
[metrics.first_token_p99]
statistic = "max"
comparator = "<="
limit = 300
unit = "ms"
'''))
    with pytest.raises(ConfigError, match=r"'lab'.*no metric 'voice_latency_p99'"):
        voice.trials_needed(*lab.pick(**voice.METRICS).values())


# --------------------------------------------------------------------------- outside input

@pytest.mark.parametrize("key, value", [("comparator", '["<="]'), ("unit", "{ name = \"ms\" }"),
                                        ("statistic", "[1]"), ("evidence", "[\"instrument\"]")])
def test_an_array_or_table_where_text_belongs_names_the_file_and_entry(tmp_path: Path, key: str, value: str) -> None:
    fields = {"statistic": '"max"', "comparator": '"<="', "limit": "410", "unit": '"ms"', key: value}
    body = "\n".join(f"{k} = {v}" for k, v in fields.items())
    path = write(tmp_path, "odd.toml", f"[metrics.voice_latency_max]\n{body}\n")
    with pytest.raises(ConfigError) as refused:
        load_profile(path)
    assert str(path) in str(refused.value) and "'voice_latency_max'" in str(refused.value)
    assert f"field {key!r}: expected a string" in str(refused.value)


def test_an_unknown_profile_name_lists_profiles_not_station_files(tmp_path: Path) -> None:
    write(tmp_path, "line1.toml", '[station]\nname = "line1"\n[[dut]]\nname = "bay1"\nadb = "10.0.0.2:5555"\n')
    write(tmp_path, "strict.toml", 'extends = "default"\n[metrics.voice_latency_p99]\nlimit = 300\n')
    with pytest.raises(ConfigError) as refused:
        load_profile("nosuch", search=(tmp_path,))
    listed = refused.value.hint.split(";")[0]
    assert "strict" in listed and "default" in listed and "acceptance" in listed
    assert "line1" not in listed  # a station file beside the profiles is not a profile


@pytest.mark.parametrize("outcome, decision, held", [
    (Outcome.PASS, "fail", Outcome.FAIL),  # a decided FAIL fails even below the entry's count
    (Outcome.INSUFFICIENT, "fail", Outcome.FAIL),
    (Outcome.PASS, "continue", Outcome.INSUFFICIENT),  # stopped undecided: never a pass
    (Outcome.FAIL, "continue", Outcome.FAIL),
    (Outcome.PASS, "pass", Outcome.PASS),
    (Outcome.INSUFFICIENT, "pass", Outcome.INSUFFICIENT),  # the entry's own count still holds
])
def test_a_sequential_verdict_is_held_to_its_rule_s_decision(outcome, decision, held):
    verdict = Verdict(name="acceptance_power_mean", value=3.9, unit="W", outcome=outcome, limit=4.5)
    assert judge.sequential(verdict, decision).outcome is held
