"""Voltage redundancy under supply ripple (claim 10), with the battery emulator's ARB sine ripple.

- `ripple_sweep_check`: ripple 0 -> 60 -> 0 mV in steps (the entry's parameters). At each step
  the runtime senses the ripple; `llmrt status` says whether redundancy is engaged (auto mode).
  On the way up the raw INT4 MAC error rate is measured too: a batch of long probe dot products
  with redundancy forced off, compared with the unit's own results on a clean supply (a probe
  that came back different took >= 1 MAC error; rate = -ln(1 - wrong/probes) / MACs per probe).
  Engage threshold = midpoint between the last step without and the first step with redundancy
  on the way up; release threshold likewise on the way down (hysteresis).
- `bit_exact_check`: tokens at +-50 mV with redundancy engaged must equal the unit's own tokens on
  a clean supply; with redundancy forced off the same runs must show errors (else the stress
  did not take and "bit-exact" proves nothing).
- `slowdown_check`: paired runs with redundancy forced on and off on a clean supply (so the
  ratio is redundancy's cost alone), alternating the order; slowdown = speed lost,
  100 x (1 - decode rate on / decode rate off), "costing ~23 % speed".

`redundancy_at(supply, runtime, amplitude_mv)` measures one amplitude (production calibration
uses it to place a unit's trigger). Every function leaves the ripple off and the redundancy mode
as it found it.
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass

import numpy as np

from bench.checks import CheckResult, Tick, named, no_tick
from bench.checks.tokens import PROMPT_SEEDS, PROMPT_TOKENS
from bench.sla import SlaEntry
from bench.core.verdict import Outcome, Verdict
from drivers.device import Device
from drivers.power import PowerAnalyzer
from drivers.runtime import Probe, RuntimeClient

log = logging.getLogger(__name__)

SUPPLY_V = 3.85
SUPPLY_R_OHM = 0.08
RIPPLE_HZ = 217.0
SETTLE_S = 0.5         # device time for the runtime to sense a new ripple level
PROBES = 256
PROBE_MACS = 20_000_000
BIT_EXACT_RUNS = 2
BIT_EXACT_TOKENS = 48
SLOWDOWN_TOKENS = 32
SLOWDOWN_PAIRS = 20   # the per-run level varies a few %: pairs enough for a bound clear of noise
MODE = "redundancy.mode"


@dataclass
class RipplePoint:
    amplitude_mv: float
    active: bool | None          # redundancy engaged (status), in the configured mode
    mode: str | None
    sensed_mv: float | None      # what the runtime says it senses
    probes: int = 0
    probes_wrong: int | None = None  # with redundancy forced off
    macs_per_probe: int = PROBE_MACS
    mac_error_rate: float | None = None
    votes_detected: int | None = None  # vote mismatches the runtime counted during this point


def _client(runtime: RuntimeClient | Device) -> RuntimeClient:
    return runtime if isinstance(runtime, RuntimeClient) else RuntimeClient(runtime)


def power_up(supply: PowerAnalyzer, volts: float = SUPPLY_V, ohms: float = SUPPLY_R_OHM) -> None:
    """Power the phone from the battery emulator (an aged cell's resistance)."""
    supply.battery_emulation(True)
    supply.set_voltage(volts)
    supply.set_current_limit(3.0)
    supply.set_output_resistance(ohms)
    supply.output(True)


def apply_ripple(supply: PowerAnalyzer, amplitude_mv: float, hz: float = RIPPLE_HZ) -> None:
    if amplitude_mv <= 0:
        supply.stop_ripple()
        return
    supply.set_ripple(amplitude_mv / 1000.0, hz)
    supply.start_ripple()


def _probe_batch(macs: int, n: int) -> list[Probe]:
    return [Probe(f"r{i}", f"1x{macs}", f"1x{macs}") for i in range(n)]


def probe_reference(runtime: RuntimeClient, probes: int = PROBES, macs: int = PROBE_MACS) -> int:
    """The unit's own result for the error probe on the current (clean) supply."""
    results = [r.result for r in runtime.probe(_probe_batch(macs, min(probes, 16)))]
    values, counts = np.unique(results, return_counts=True)
    return int(values[np.argmax(counts)])


def _error_rate(wrong: int, probes: int, macs: int) -> float:
    wrong = min(wrong, probes - 0.5)  # all wrong: a lower bound
    return -math.log1p(-wrong / probes) / macs


def redundancy_at(supply: PowerAnalyzer, runtime: RuntimeClient | Device, amplitude_mv: float, *,
                  reference: int | None = None, probes: int = PROBES, macs: int = PROBE_MACS,
                  settle_s: float = SETTLE_S) -> RipplePoint:
    """Ripple at one amplitude: is redundancy engaged, and (given the clean-supply `reference`
    probe result) the raw MAC error rate with redundancy forced off for one probe batch."""
    client = _client(runtime)
    apply_ripple(supply, amplitude_mv)
    client.device.run(["sleep", f"{settle_s:g}"])
    before = client.status()
    sensed = before.redundancy.get("sensed_mv") if isinstance(before.redundancy, dict) else None
    point = RipplePoint(amplitude_mv, before.redundancy_active, before.redundancy_mode, sensed)
    if reference is not None:
        mode = client.config_get(MODE)
        client.config_set(MODE, "off")
        try:
            results = client.probe(_probe_batch(macs, probes))
        finally:
            client.config_set(MODE, mode)
        point.probes = probes
        point.macs_per_probe = macs
        point.probes_wrong = sum(r.result != reference for r in results)
        point.mac_error_rate = _error_rate(point.probes_wrong, probes, macs)
    after = client.status()
    if before.mac_errors_detected is not None and after.mac_errors_detected is not None:
        point.votes_detected = after.mac_errors_detected - before.mac_errors_detected
    return point


def _sweep_amplitudes(entry: SlaEntry) -> list[float]:
    lo, hi = entry.parameters.get("sweep_mv", [0, 60])
    step = float(entry.parameters.get("step_mv", 5))
    return [float(a) for a in np.arange(float(lo), float(hi) + step / 2, step)]


def _threshold(points: list[RipplePoint], engaged_first: bool) -> float | None:
    """Midpoint where the engaged state flips along the sweep (None: it never does)."""
    for prev, cur in zip(points, points[1:]):
        if bool(prev.active) != engaged_first and bool(cur.active) == engaged_first:
            return (prev.amplitude_mv + cur.amplitude_mv) / 2.0
    return None


def ripple_sweep_check(supply: PowerAnalyzer, runtime: RuntimeClient | Device, entry: SlaEntry, *,
                       probes: int = PROBES, macs: int = PROBE_MACS, tick: Tick = no_tick) -> CheckResult:
    """Engage threshold (the entry), release threshold and the MAC error rate curve (info)."""
    client = _client(runtime)
    amplitudes = _sweep_amplitudes(entry)
    mode = client.config_get(MODE)
    power_up(supply)
    up: list[RipplePoint] = []
    down: list[RipplePoint] = []
    try:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, "auto")
        reference = probe_reference(client, probes, macs)
        for amplitude in amplitudes:
            up.append(redundancy_at(supply, client, amplitude, reference=reference, probes=probes, macs=macs))
            tick(1)
        for amplitude in reversed(amplitudes[:-1]):
            down.append(redundancy_at(supply, client, amplitude))
            tick(1)
    finally:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, mode)
    engage = _threshold(up, engaged_first=True)
    release = _threshold([up[-1], *down], engaged_first=False)
    sweep = [*up, *down]
    raw = {"x": np.array([p.amplitude_mv for p in sweep]),
           "y": np.array([np.nan if p.mac_error_rate is None else p.mac_error_rate for p in sweep]),
           "state": np.array([np.nan if p.active is None else float(p.active) for p in sweep]),
           "direction": np.array([1.0] * len(up) + [-1.0] * len(down))}
    labels = dict(x_label="ripple amplitude (mV)", y_label="INT4 MAC error rate (per MAC, redundancy off)",
                  state_label="redundancy engaged (auto)", limit_axis="x", log_y=True)
    engage_v = named(entry.evaluate(engage), "redundancy_engage_threshold", raw="ripple_sweep", plot="sweep",
                     **labels)
    if engage is None:
        engage_v.detail = f"redundancy never engaged up to {amplitudes[-1]:g} mV; {engage_v.detail}"
    erring = [p for p in up if p.mac_error_rate]
    ratio = None
    at_50 = next((p for p in up if p.amplitude_mv == 50.0), None)
    if erring and at_50 is not None and at_50.mac_error_rate:
        ratio = at_50.mac_error_rate / erring[0].mac_error_rate
    unprotected = [p.amplitude_mv for p in up if p.mac_error_rate and not p.active]
    verdicts = [
        engage_v,
        Verdict("redundancy_release_threshold", release, "mV", Outcome.INFO, statistic="value",
                raw=["ripple_sweep"], detail="midpoint where the down sweep first finds redundancy released",
                extra={"engage_mv": engage, "hysteresis_mv": None if None in (engage, release) else engage - release}),
        Verdict("redundancy_mac_error_ratio_50mv", ratio, "x", Outcome.INFO, statistic="ratio",
                raw=["ripple_sweep"],
                detail=(f"error rate at 50 mV / at {erring[0].amplitude_mv:g} mV, the lowest erring step "
                        "(claimed 12x over just above onset)") if erring else "no MAC errors measured"),
        Verdict("redundancy_unprotected_steps", float(len(unprotected)), "steps", Outcome.INFO, statistic="count",
                raw=["ripple_sweep"], detail=f"steps with MAC errors while auto mode had not engaged: {unprotected}"),
    ]
    return CheckResult(verdicts, {"ripple_sweep": raw, "ripple_points": [asdict(p) for p in sweep]})


def _generate_set(client: RuntimeClient, runs: int, tokens: int) -> list[list[int]]:
    return [client.generate(tokens, seed=PROMPT_SEEDS[i % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS).tokens
            for i in range(runs)]


def _mismatches(got: list[list[int]], reference: list[list[int]]) -> int:
    return sum(sum(a != b for a, b in zip(g, r)) + abs(len(g) - len(r)) for g, r in zip(got, reference))


def bit_exact_check(supply: PowerAnalyzer, runtime: RuntimeClient | Device, entry: SlaEntry, off_entry: SlaEntry,
                    *, amplitude_mv: float = 50.0, runs: int = BIT_EXACT_RUNS, tokens: int = BIT_EXACT_TOKENS,
                    tick: Tick = no_tick) -> CheckResult:
    """Tokens at +-amplitude_mv: bit-exact with redundancy engaged (auto), wrong with it forced off."""
    client = _client(runtime)
    mode = client.config_get(MODE)
    power_up(supply)
    try:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, "auto")
        reference = _generate_set(client, runs, tokens)
        tick(1)
        apply_ripple(supply, amplitude_mv)
        client.device.run(["sleep", f"{SETTLE_S:g}"])
        before = client.status()
        engaged = _generate_set(client, runs, tokens)
        after = client.status()
        tick(1)
        client.config_set(MODE, "off")
        forced_off = _generate_set(client, runs, tokens)
        tick(1)
    finally:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, mode)
    active = bool(before.redundancy_active and after.redundancy_active)
    n = runs * tokens
    on_v = named(entry.evaluate(_mismatches(engaged, reference), ripple_mv=amplitude_mv,
                                redundancy="on" if active else "off"), "redundancy_token_mismatches", raw="bit_exact",
                 tokens=n, votes_detected=_delta(before.mac_errors_detected, after.mac_errors_detected))
    on_v.n = n
    off_v = named(off_entry.evaluate(_mismatches(forced_off, reference), ripple_mv=amplitude_mv),
                  "redundancy_off_token_mismatches", raw="bit_exact", tokens=n)
    off_v.n = n
    raw = {"amplitude_mv": amplitude_mv, "reference": reference, "redundancy_auto": engaged,
           "redundancy_off": forced_off, "engaged": active}
    return CheckResult([on_v, off_v], {"bit_exact": raw})


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def slowdown_check(runtime: RuntimeClient | Device, entry: SlaEntry, *, pairs: int | None = None,
                   tokens: int = SLOWDOWN_TOKENS, tick: Tick = no_tick) -> CheckResult:
    """Speed lost to redundancy: paired runs forced on / off on a clean supply."""
    client = _client(runtime)
    pairs = max(pairs or SLOWDOWN_PAIRS, entry.n_required, 2)
    mode = client.config_get(MODE)
    slowdowns, engaged = [], []
    try:
        for i in range(pairs):
            seed = PROMPT_SEEDS[i % len(PROMPT_SEEDS)]
            rate = {}
            for setting in (("on", "off") if i % 2 == 0 else ("off", "on")):
                client.config_set(MODE, setting)
                if setting == "on":
                    engaged.append(bool(client.status().redundancy_active))
                gen = client.generate(tokens, seed=seed, prompt_tokens=PROMPT_TOKENS)
                rate[setting] = (len(gen.token_times) - 1) / (gen.token_times[-1] - gen.token_times[0])
            slowdowns.append(100.0 * (1.0 - rate["on"] / rate["off"]))
            tick(1)
    finally:
        client.config_set(MODE, mode)
    samples = np.asarray(slowdowns)
    verdict = named(entry.evaluate(samples), "redundancy_slowdown", raw="redundancy_slowdown", plot="samples",
                    definition="100 x (1 - decode rate with redundancy / without), paired runs, clean supply")
    if not all(engaged):
        verdict.outcome = Outcome.INVALID
        verdict.detail = (f"invalid: redundancy did not engage with mode=on in {engaged.count(False)} of "
                          f"{len(engaged)} runs, so there is no cost to measure; {verdict.detail}")
    return CheckResult([verdict], {"redundancy_slowdown": {"samples": samples}})

