"""Voltage redundancy under supply ripple (claim 10), with the battery emulator's ARB sine ripple.

Nothing here rests on the runtime's word alone: the ripple is what the digitizer measures at the
phone's supply terminals (a sine fitted at the ripple frequency to the voltage channel), and
whether redundancy is engaged is judged by what the unit computes.

- `ripple_sweep_check`: ripple 0 -> 60 -> 0 mV in steps (the entry's parameters). At each step
  the bench measures the ripple and runs probe dot products whose exact answer it knows
  (alternating +-1 runs short enough that no accumulator of 16 bits or more wraps: the answer is
  0) in the configured auto mode (a quarter as long, so a vote converges), and on the way up
  again with redundancy forced off (the raw
  INT4 MAC error rate: a probe that came back wrong took >= 1 MAC error, rate = -ln(1 -
  wrong/probes) / MACs per probe). That rate says how many auto-mode probes would come back
  wrong if the unit computed once; a step is engaged by behaviour when at most a quarter of
  that many did (a vote leaves only the rare cases of two copies wrong alike), not engaged
  otherwise. Only where fewer than MIN_EXPECTED_WRONG are expected does the runtime's status
  flag decide. Engage threshold = midpoint of the measured ripple between the last step without
  and the first step with redundancy on the way up; release likewise on the way down, where no
  probes run (the flag decides; info). A unit that never engages fails. Wrong auto-mode results
  at steps not engaged by behaviour, above the claimed trigger (+ tolerance) of measured ripple,
  fail `redundancy_unprotected_errors`; the 50 mV error ratio's exact interval must reach the
  claimed 12x (within the target's tolerance).
- `bit_exact_check`: tokens at +-50 mV in auto mode must equal the unit's own tokens on a clean
  supply; with redundancy forced off the same runs must show errors (else the stress did not
  take and "bit-exact" proves nothing). The ripple condition is the measured one.
- `slowdown_check`: paired runs with redundancy forced on and off on a clean supply, alternating
  the order; slowdown = 100 x (1 - rate on / rate off), timed on the bench's clock `now` around
  each call (else the device's token timestamps: self-reported). Dual compute must cost
  something: a lower bound under MIN_SLOWDOWN_PCT means no second compute ran (fail).

`redundancy_at(supply, runtime, amplitude_mv)` measures one amplitude (production calibration
uses it to place a unit's trigger). Every function leaves the ripple off and the redundancy mode
as it found it.
"""
from __future__ import annotations

import logging
import math
import secrets
from dataclasses import asdict, dataclass
from typing import cast

from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from . import CheckResult, Tick, no_tick
from .tokens import PROMPT_SEEDS, PROMPT_TOKENS
from ..stats.verdicts import clopper_pearson
from phonebench.core.errors import InvalidMeasurement, UnsupportedCapability
from phonebench.core import judge
from phonebench.core.verdict import Evidence, Finding, FindingKind, Outcome, PlotHint, Verdict
from phonebench.drivers.device import Device
from ..specs.sla import SlaEntry
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.runtime import Probe, ProbeResult, RuntimeClient, encode_runs

log = logging.getLogger(__name__)

SUPPLY_V = 3.85
SUPPLY_R_OHM = 0.08
RIPPLE_HZ = 217.0
SETTLE_S = 0.5         # device time for the runtime to sense a new ripple level
PROBES = 256
PROBE_MACS = 20_000_000
MIN_EXPECTED_WRONG = 4.0  # unprotected wrong probes a step must expect for its results to tell
VOTED_FRACTION = 0.25     # a voting unit leaves at most this share of the unprotected errors
AUTO_PROBE_DIVISOR = 4  # auto-mode probes are this much shorter (see redundancy_at)
PROBE_RUN = 1 << 14    # no partial sum of a known-answer probe leaves +-this (16-bit accumulators hold it)
RUN_LENGTH = (2048, 4096)  # MACs per run of a known-answer probe vector
DISTINCT_VECTORS = 8   # vector pairs drawn per probe batch (each probe picks one, under a random id)
DIGITIZER_POINTS = 1024
DIGITIZER_INTERVAL_S = 50e-6  # 51 ms: eleven 217 Hz periods
VOLTAGE_HINT = "the digitizer was armed for voltage: check the analyzer's channel wiring and its firmware's trace"
CLAIMED_TRIGGER_MV = 30.0
RIPPLE_TOLERANCE_MV = 2.0  # digitizer accuracy plus the supply-to-sensor difference
MIN_SLOWDOWN_PCT = 5.0     # dual compute costs at least this; less means it did not run
RATIO_CONFIDENCE = 0.95
BIT_EXACT_RUNS = 2
BIT_EXACT_TOKENS = 48
SLOWDOWN_TOKENS = 32
SLOWDOWN_PAIRS = 40  # pairs scatter ~5.5 points (each run's level varies ~3.5 %): 20 left a nominal unit (19.4 %) failing the 23 % bound ~1 run in 6; 40 pass it 99 %
MODE = "redundancy.mode"
OFF_ROUNDS = 3  # forced-off generation rounds until the stress shows (bit_exact_check)


@dataclass
class RipplePoint:
    amplitude_mv: float          # the generator's setpoint
    reported_active: bool | None  # redundancy engaged according to status, in the configured mode
    mode: str | None
    sensed_mv: float | None      # what the runtime says it senses
    measured_mv: float | None = None  # the digitizer's amplitude at the phone's terminals
    probes: int = 0
    probes_wrong: int | None = None  # with redundancy forced off
    probes_wrong_auto: int | None = None  # in the configured mode
    macs_per_probe: int = PROBE_MACS
    mac_error_rate: float | None = None
    votes_detected: int | None = None  # vote mismatches the runtime counted during this point

    @property
    def expected_unprotected(self) -> float | None:
        """Wrong auto-mode probes to expect if it computed once, from the forced-off error rate."""
        if self.mac_error_rate is None or self.probes_wrong_auto is None:
            return None
        return self.probes * -math.expm1(-self.mac_error_rate * self.macs_per_probe / AUTO_PROBE_DIVISOR)

    @property
    def behaviour(self) -> bool | None:
        """Engaged as the results show it (None: too few errors expected for the results to tell).

        A vote leaves far fewer wrong results than single compute (two copies wrong alike are
        rare), so: engaged when at most VOTED_FRACTION of the unprotected expectation erred."""
        expected = self.expected_unprotected
        # expected is None without probes_wrong_auto; testing both lets the type checker see it
        if expected is None or self.probes_wrong_auto is None or expected < MIN_EXPECTED_WRONG:
            return None
        return self.probes_wrong_auto <= VOTED_FRACTION * expected

    @property
    def active(self) -> bool:
        """Engaged: by behaviour where the results tell, else by the runtime's flag."""
        shown = self.behaviour
        return bool(self.reported_active) if shown is None else shown

    @property
    def x_mv(self) -> float:
        return self.amplitude_mv if self.measured_mv is None else self.measured_mv


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


def measure_ripple_mv(supply: PowerAnalyzer, hz: float = RIPPLE_HZ) -> float:
    """Ripple amplitude at the phone's terminals: a sine at `hz` least-squares fitted to the
    digitizer's voltage channel (the fit rejects the meter's noise and the load's own steps)."""
    trace = supply.digitize(DIGITIZER_POINTS, DIGITIZER_INTERVAL_S, quantities=("voltage",)).require_valid()
    if trace.voltage_v is None:
        raise InvalidMeasurement(f"{supply.name}: the digitized trace has no voltage", hint=VOLTAGE_HINT)
    t, v = trace.t, trace.voltage_v.astype(np.float64)
    design = np.column_stack([np.sin(2 * np.pi * hz * t), np.cos(2 * np.pi * hz * t), np.ones_like(t)])
    (a, b, _), *_ = np.linalg.lstsq(design, v, rcond=None)
    return 1000.0 * math.hypot(a, b)


@dataclass(frozen=True)
class KnownAnswers:
    """A batch of probe dot products drawn for one call, and the exact answer of each (by id)."""

    probes: list[Probe]
    answers: dict[str, int]

    def wrong(self, results: list[ProbeResult]) -> int:
        """Probes not answered with their exact result (a missing or unknown id counts as wrong)."""
        got = {r.id: r.result for r in results}
        return sum(got.get(ident) != answer for ident, answer in self.answers.items())


def _bounded_walk(macs: int, rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """Runs (value, length) of two vectors with the same boundaries, and their exact dot product.
    Each run's products (INT4 values in +-1, +-2, so |product| <= 4) pull the running sum back
    towards 0, so no partial sum leaves +-PROBE_RUN: no accumulator of 16 bits or more wraps or
    saturates, whatever the order of accumulation within a run."""
    # Every draw at once (at most one run per RUN_LENGTH[0] MACs), then the walk over plain ints:
    # a draw per run from the generator cost the sweep ~40 s of host CPU on 20M-MAC probes.
    runs = macs // RUN_LENGTH[0] + 1
    xs, ys = rng.integers(1, 3, runs).tolist(), rng.integers(1, 3, runs).tolist()
    lengths = rng.integers(RUN_LENGTH[0], RUN_LENGTH[1] + 1, runs).tolist()
    signs_a = (2 * rng.integers(0, 2, runs) - 1).tolist()
    a: list[tuple[int, int]] = []
    b: list[tuple[int, int]] = []
    total = done = 0
    for x, y, drawn, ya in zip(xs, ys, lengths, signs_a):
        if done >= macs:
            break
        length = min(drawn, PROBE_RUN // (x * y), macs - done)
        sign = -1 if total > 0 else 1
        a.append((x * ya, length))
        b.append((y * ya * sign, length))
        total += sign * x * y * length
        done += length
    return a, b, total


def known_answer_batch(macs: int, n: int, *, distinct: int = DISTINCT_VECTORS,
                       rng: np.random.Generator | None = None) -> KnownAnswers:
    """n probes of `macs` MACs over `distinct` vector pairs drawn now (each with a non-zero answer the
    bench computes), in a random order under random ids: nothing in a batch can be answered
    without computing it."""
    rng = rng or np.random.default_rng(secrets.randbits(128))
    vectors: list[tuple[str, str, int]] = []  # (a, b, exact answer)
    while len(vectors) < min(distinct, n):
        a, b, answer = _bounded_walk(macs, rng)
        if answer != 0:
            vectors.append((encode_runs(a), encode_runs(b), answer))
    probes, answers = [], {}
    for k in rng.integers(0, len(vectors), n):
        ident = secrets.token_hex(6)
        a_text, b_text, answer = vectors[int(k)]
        probes.append(Probe(ident, a_text, b_text))
        answers[ident] = answer
    return KnownAnswers(probes, answers)


def probe_reference(runtime: RuntimeClient, probes: int = PROBES, macs: int = PROBE_MACS) -> bool:
    """Whether the unit answers fresh known-answer probes right on the current (clean) supply: a unit
    that does not cannot be judged by them (its results are wrong without any ripple)."""
    batch = known_answer_batch(macs, min(probes, 16))
    wrong = batch.wrong(runtime.probe(batch.probes))
    if wrong:
        log.warning("%s: %d of %d known-answer probes wrong on a clean supply", runtime.device.name, wrong,
                    len(batch.probes))
    return wrong == 0


def _error_rate(wrong: float, probes: int, macs: int) -> float:
    wrong = min(wrong, probes - 0.5)  # all wrong: a lower bound
    return -math.log1p(-wrong / probes) / macs


def _rate_bounds(wrong: int, probes: int, macs: int, confidence: float) -> tuple[float, float]:
    """Two-sided exact bounds on the per-MAC rate from the wrong-probe count."""
    one_sided = 1.0 - (1.0 - confidence) / 2.0
    lo = clopper_pearson(wrong, probes, one_sided, "lower")
    hi = clopper_pearson(wrong, probes, one_sided, "upper")
    return -math.log1p(-lo) / macs, (-math.log1p(-hi) / macs if hi < 1.0 else math.inf)


def redundancy_at(supply: PowerAnalyzer, runtime: RuntimeClient | Device, amplitude_mv: float, *,
                  reference: bool = False, probes: int = PROBES, macs: int = PROBE_MACS,
                  settle_s: float = SETTLE_S) -> RipplePoint:
    """Ripple at one amplitude: the digitizer's amplitude, the runtime's flag and sensed ripple,
    and (reference: the unit answers known-answer probes right on a clean supply) fresh
    known-answer probes in the configured mode and with redundancy forced off (the raw MAC error
    rate)."""
    client = _client(runtime)
    apply_ripple(supply, amplitude_mv)
    client.device.run(["sleep", f"{settle_s:g}"])
    measured = measure_ripple_mv(supply)
    before = client.status()
    sensed = before.redundancy.get("sensed_mv") if isinstance(before.redundancy, dict) else None
    point = RipplePoint(amplitude_mv, before.redundancy_active, before.redundancy_mode, sensed, measured)
    if reference:
        # Shorter probes in auto mode: a vote needs two agreeing copies, which long probes at
        # +-50 mV rarely give (the runtime votes on short critical paths too).
        auto = known_answer_batch(macs // AUTO_PROBE_DIVISOR, probes)
        point.probes_wrong_auto = auto.wrong(client.probe(auto.probes))
        mode = client.config_get(MODE)
        client.config_set(MODE, "off")
        forced_off = known_answer_batch(macs, probes)
        try:
            results = client.probe(forced_off.probes)
        finally:
            client.config_set(MODE, mode)
        point.probes = probes
        point.macs_per_probe = macs
        point.probes_wrong = forced_off.wrong(results)
        point.mac_error_rate = _error_rate(point.probes_wrong, probes, macs)
    after = client.status()
    if before.mac_errors_detected is not None and after.mac_errors_detected is not None:
        point.votes_detected = after.mac_errors_detected - before.mac_errors_detected
    return point


def _sweep_amplitudes(entry: SlaEntry) -> list[float]:
    lo, hi = entry.parameters.get("sweep_mv", [0, 60])
    step = float(entry.parameters.get("step_mv", 5))
    return [float(a) for a in np.arange(float(lo), float(hi) + step / 2, step)]


def _threshold(points: list[RipplePoint], engaged_first: bool, trust_flag: bool = True) -> float | None:
    """Midpoint of the measured ripple where the engaged state flips along the sweep (None: never).
    trust_flag False (the flag contradicted the results somewhere): only steps whose results tell."""
    states = [(p.x_mv, p.active if trust_flag else p.behaviour) for p in points]
    states = [(x, state) for x, state in states if state is not None]
    for (x0, prev), (x1, cur) in zip(states, states[1:]):
        if prev != engaged_first and cur == engaged_first:
            return (x0 + x1) / 2.0
    return None


def _ratio_at_50(up: list[RipplePoint], confidence: float) -> tuple[float | None, float, float, str]:
    """Rate at the 50 mV step over the rate at the lowest erring step, with exact bounds."""
    erring = [p for p in up if p.probes_wrong]
    at_50 = next((p for p in up if p.amplitude_mv == 50.0 and p.probes_wrong), None)
    if not erring or at_50 is None or erring[0] is at_50:
        return None, math.nan, math.nan, "no MAC errors below the 50 mV step to compare with"
    low = erring[0]
    # Both steps erred (the filters above), and redundancy_at sets the MAC error rate with the count.
    wrong_50, wrong_low = cast(int, at_50.probes_wrong), cast(int, low.probes_wrong)
    # Bonferroni: each rate's two-sided interval at half the miss probability.
    each = 1.0 - (1.0 - confidence) / 2.0
    lo50, hi50 = _rate_bounds(wrong_50, at_50.probes, at_50.macs_per_probe, each)
    lo, hi = _rate_bounds(wrong_low, low.probes, low.macs_per_probe, each)
    ratio = cast(float, at_50.mac_error_rate) / cast(float, low.mac_error_rate)
    return ratio, lo50 / hi, (hi50 / lo if lo > 0 else math.inf), \
        f"error rate at 50 mV / at {low.x_mv:.1f} mV measured, the lowest erring step (claimed 12x over onset)"


def require_ripple(supply: PowerAnalyzer) -> None:
    """Claim 10's stimulus is a ripple on the supply's output: a supply without an arbitrary-
    waveform source (an Otii) cannot run these checks, and says so instead of failing them."""
    if not supply.features.ripple:
        raise UnsupportedCapability(f"{supply.name}: no ripple source on its output; claim 10's checks need a supply "
                                    "with an arbitrary-waveform source (e.g. keysight-n6705c) on this bay")


def ripple_sweep_check(supply: PowerAnalyzer, runtime: RuntimeClient | Device, *, engage_threshold: SlaEntry,
                       unprotected_errors: SlaEntry, error_ratio: SlaEntry | None = None, probes: int = PROBES,
                       macs: int = PROBE_MACS, tick: Tick = no_tick) -> CheckResult:
    """Engage threshold, wrong results above the claimed trigger (unprotected_errors), the 50 mV
    MAC error ratio (error_ratio; None: recorded, not judged), release threshold and the MAC error
    rate curve."""
    client = _client(runtime)
    amplitudes = _sweep_amplitudes(engage_threshold)
    mode = client.config_get(MODE)
    power_up(supply)
    up: list[RipplePoint] = []
    down: list[RipplePoint] = []
    try:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, "auto")
        clean = probe_reference(client, probes, macs)
        for amplitude in amplitudes:
            up.append(redundancy_at(supply, client, amplitude, reference=True, probes=probes, macs=macs))
            tick(1)
        for amplitude in reversed(amplitudes[:-1]):
            down.append(redundancy_at(supply, client, amplitude))
            tick(1)
    finally:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, mode)
    sweep = [*up, *down]
    spoke = [p for p in sweep if p.behaviour is not None]
    contradicted = [p.x_mv for p in spoke if p.behaviour != bool(p.reported_active)]
    # A flag its own results contradict cannot decide the steps where the results do not tell.
    engage = _threshold(up, engaged_first=True, trust_flag=not contradicted)
    release = _threshold([up[-1], *down], engaged_first=False)
    raw = {"x": np.array([p.x_mv for p in sweep]),
           "y": np.array([np.nan if p.mac_error_rate is None else p.mac_error_rate for p in sweep]),
           "state": np.array([float(p.active) for p in sweep]),
           "direction": np.array([1.0] * len(up) + [-1.0] * len(down))}
    plot = PlotHint("sweep", x_label="ripple amplitude at the terminals (mV, digitizer)",
                    y_label="INT4 MAC error rate (per MAC, redundancy off)",
                    state_label="redundancy engaged (auto; by results where they tell)", limit_axis="x", log_y=True)
    evidence = Evidence.CORROBORATED if spoke else Evidence.REPORTED
    # What the numbers cannot show, for the judge: probes wrong on a clean supply, or no engagement.
    findings = [Finding(FindingKind.CONTRADICTED, text) for text, found in (
        ("fail: known-answer probes drawn for this run come back wrong on a clean supply: the unit does not "
         "compute them", not clean),
        (f"fail: redundancy never engaged up to {up[-1].x_mv:.1f} mV measured", engage is None)) if found]
    engage_v = engage_threshold.evaluate(
        engage, evidence=evidence, name="redundancy_engage_threshold", raw="ripple_sweep", plot=plot,
        extra={"flag_contradicted_at_mv": contradicted}, findings=findings,
        detail="" if engage is None else None,
        detail_prefix=f"the runtime's flag disagrees with its results at {contradicted} mV, so only the results "
                      f"place the threshold" if contradicted else "")
    claimed = float(engage_threshold.parameters.get("claimed_mv", CLAIMED_TRIGGER_MV))
    tolerance = float(engage_threshold.parameters.get("ripple_tolerance_mv", RIPPLE_TOLERANCE_MV))
    unprotected = [p for p in up if p.probes_wrong_auto and p.behaviour is False and p.x_mv > claimed + tolerance]
    wrong = sum(p.probes_wrong_auto or 0 for p in unprotected)
    unprotected_v = unprotected_errors.evaluate(
        wrong, evidence=Evidence.MEASURED, name="redundancy_unprotected_errors", raw="ripple_sweep",
        extra={"steps_mv": [round(p.x_mv, 2) for p in unprotected]},
        n=sum(p.probes for p in up if p.x_mv > claimed + tolerance),
        detail=f"{wrong} wrong known-answer probes in auto mode, not voted, above {claimed + tolerance:g} mV measured"
               + (f" (at {[round(p.x_mv, 1) for p in unprotected]} mV)" if unprotected else ""))
    sensed = [(p.x_mv, p.sensed_mv) for p in sweep if p.sensed_mv is not None and p.x_mv > 5.0]
    sense_ratio = float(np.median([s_ / x for x, s_ in sensed])) if sensed else None
    verdicts = [
        engage_v,
        unprotected_v,
        judge.recorded("redundancy_release_threshold", release, "mV", statistic="value",
                       raw=("ripple_sweep",), detail="midpoint of the measured ripple where the down sweep first "
                                                     "finds redundancy released (the runtime's flag: no probes on "
                                                     "the way down)",
                       evidence=Evidence.REPORTED,
                       extra={"engage_mv": engage,
                              "hysteresis_mv": None if engage is None or release is None else engage - release}),
        _ratio_verdict(error_ratio, up),
        judge.recorded("redundancy_sensed_over_measured", sense_ratio, "x", statistic="median",
                       raw=("ripple_sweep",), evidence=Evidence.CORROBORATED,
                       detail="the runtime's sensed ripple over the digitizer's, median over the steps with ripple"),
    ]
    return CheckResult(verdicts, {"ripple_sweep": raw, "ripple_points": [asdict(p) for p in sweep]})


def _ratio_verdict(entry: SlaEntry | None, up: list[RipplePoint]) -> Verdict:
    """The measured ratio's exact interval must reach the claimed ratio's tolerance band."""
    confidence = float(entry.parameters.get("interval_confidence", RATIO_CONFIDENCE)) if entry else RATIO_CONFIDENCE
    ratio, lo, hi, detail = _ratio_at_50(up, confidence)
    detail = f"{detail}; {confidence:.0%} interval {lo:.3g}..{hi:.3g}"
    if entry is None:
        return judge.recorded("redundancy_mac_error_ratio_50mv", ratio, "x", statistic="ratio",
                              raw=("ripple_sweep",), evidence=Evidence.MEASURED, confidence=confidence,
                              detail=detail, extra={"interval": [lo, hi]})
    verdict = entry.evaluate(ratio, evidence=Evidence.MEASURED, name="redundancy_mac_error_ratio_50mv",
                             raw="ripple_sweep", extra={"interval": [lo, hi]},
                             detail=detail if ratio is None else None)
    if ratio is None:
        return verdict
    tolerance = entry.tolerance or 0.0
    band = (entry.limit - tolerance, entry.limit + tolerance)
    inside = lo <= band[1] and hi >= band[0]
    # The claim's own statistic: the exact interval must reach the claimed band (the judge's rules
    # then run over it, as over any decided verdict).
    return judge.rebased(verdict, judge.census(inside), bound=lo, confidence=confidence,
                         detail=f"claimed {band[0]:g}..{band[1]:g}x {'meets' if inside else 'misses'} the interval; "
                                f"{detail}")


def _generate_set(client: RuntimeClient, runs: int, tokens: int) -> list[list[int]]:
    return [client.generate(tokens, seed=PROMPT_SEEDS[i % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS).tokens
            for i in range(runs)]


def _mismatches(got: list[list[int]], reference: list[list[int]]) -> int:
    return sum(sum(a != b for a, b in zip(g, r)) + abs(len(g) - len(r)) for g, r in zip(got, reference))


def bit_exact_check(supply: PowerAnalyzer, runtime: RuntimeClient | Device, *, token_mismatches: SlaEntry,
                    off_token_mismatches: SlaEntry, amplitude_mv: float = 50.0, runs: int = BIT_EXACT_RUNS,
                    tokens: int = BIT_EXACT_TOKENS, tick: Tick = no_tick) -> CheckResult:
    """Tokens at +-amplitude_mv: bit-exact in auto mode (redundancy must engage), wrong with it forced off."""
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
        measured = measure_ripple_mv(supply)
        before = client.status()
        engaged = _generate_set(client, runs, tokens)
        after = client.status()
        tick(1)
        client.config_set(MODE, "off")
        # The stress must show: forced off, the same generations again until a token differs, at
        # most OFF_ROUNDS times. One round missed every MAC error on ~1 nominal unit in 6 (an error
        # anywhere in a generation is needed), which failed good units on the line; three miss it
        # on ~1 in 200, and a unit whose first round errs (most) spends no more time than before.
        forced_off = []
        for _ in range(OFF_ROUNDS):
            forced_off += _generate_set(client, runs, tokens)
            if _mismatches(forced_off, reference * (len(forced_off) // runs)):
                break
        tick(1)
    finally:
        apply_ripple(supply, 0.0)
        client.config_set(MODE, mode)
    flag = bool(before.redundancy_active and after.redundancy_active)
    n = runs * tokens
    wrong_auto = _mismatches(engaged, reference)
    wrong_off = _mismatches(forced_off, reference * (len(forced_off) // runs))
    n_off = len(forced_off) * tokens
    on_v = _counted(token_mismatches.evaluate(
        wrong_auto, evidence=Evidence.MEASURED, name="redundancy_token_mismatches", raw="bit_exact", n=n,
        extra={"tokens": n, "reported_active": flag,
               "votes_detected": _delta(before.mac_errors_detected, after.mac_errors_detected)},
        ripple_mv=measured), f"{wrong_auto} of {n} tokens differ from the clean-supply tokens at {measured:.1f} mV "
                             f"measured, auto mode")
    off_v = _counted(off_token_mismatches.evaluate(
        wrong_off, evidence=Evidence.MEASURED, name="redundancy_off_token_mismatches", raw="bit_exact", n=n_off,
        extra={"tokens": n_off, "rounds": len(forced_off) // runs}, ripple_mv=measured),
                     f"{wrong_off} of {n_off} tokens differ with redundancy forced off "
                     f"({len(forced_off) // runs} of at most {OFF_ROUNDS} rounds)")
    raw = {"amplitude_mv": amplitude_mv, "measured_mv": measured, "reference": reference,
           "redundancy_auto": engaged, "redundancy_off": forced_off,
           "engaged": flag}  # the runtime's flag (the production line records it); the tokens judge
    return CheckResult([on_v, off_v], {"bit_exact": raw})


def _counted(verdict: Verdict, counted: str) -> Verdict:
    """The count says it all, unless the verdict is INVALID: then it keeps why (a rule on the
    decided outcome, so after evaluation)."""
    return verdict.but(detail=f"{counted}; {verdict.detail}" if verdict.outcome is Outcome.INVALID else counted)


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def _decode_rate(client: RuntimeClient, tokens: int, seed: int, now: Callable[[], float] | None) -> float:
    """Tokens per second of one generate: on the bench's clock around the call, else the device's
    token timestamps."""
    start = now() if now is not None else None
    gen = client.generate(tokens, seed=seed, prompt_tokens=PROMPT_TOKENS)
    if start is not None and now is not None:
        return len(gen.tokens) / (now() - start)
    return (len(gen.token_times) - 1) / (gen.token_times[-1] - gen.token_times[0])


def slowdown_check(runtime: RuntimeClient | Device, *, slowdown: SlaEntry, pairs: int | None = None,
                   tokens: int = SLOWDOWN_TOKENS, now: Callable[[], float] | None = None,
                   now_evidence: Evidence = Evidence.MEASURED, tick: Tick = no_tick) -> CheckResult:
    """Speed lost to redundancy: paired runs forced on / off on a clean supply.

    now: the bench's clock (None: the device's token timestamps, self-reported); now_evidence:
    what that clock is."""
    client = _client(runtime)
    pairs = max(pairs or SLOWDOWN_PAIRS, slowdown.n_required, 2)
    mode = client.config_get(MODE)
    slowdowns, flags = [], []
    try:
        for i in range(pairs):
            seed = PROMPT_SEEDS[i % len(PROMPT_SEEDS)]
            rate = {}
            for setting in (("on", "off") if i % 2 == 0 else ("off", "on")):
                client.config_set(MODE, setting)
                if setting == "on":
                    flags.append(bool(client.status().redundancy_active))
                rate[setting] = _decode_rate(client, tokens, seed, now)
            slowdowns.append(100.0 * (1.0 - rate["on"] / rate["off"]))
            tick(1)
    finally:
        client.config_set(MODE, mode)
    samples = np.asarray(slowdowns)
    evidence = now_evidence if now is not None else Evidence.REPORTED
    confidence = slowdown.confidence or 0.95
    half_width = sps.t.ppf(confidence, samples.size - 1) * samples.std(ddof=1) / np.sqrt(samples.size)
    lower = float(samples.mean() - half_width)
    idle = lower < MIN_SLOWDOWN_PCT  # too cheap for a second compute: redundancy did not really engage
    verdict = slowdown.evaluate(
        samples, evidence=evidence, name="redundancy_slowdown", raw="redundancy_slowdown", plot="samples",
        extra={"reported_on": flags.count(True), "reported_runs": len(flags),
               "definition": "100 x (1 - decode rate with redundancy / without), paired runs, clean supply"},
        findings=[Finding(FindingKind.CONTRADICTED,
                          f"fail: mode=on costs {samples.mean():.3g} % ({confidence:.0%} lower bound {lower:.3g} %), "
                          f"under the {MIN_SLOWDOWN_PCT:g} % a second compute costs: redundancy did not really "
                          f"engage (the runtime said on in {flags.count(True)} of {len(flags)} runs)")] if idle else [])
    return CheckResult([verdict], {"redundancy_slowdown": {"samples": samples}})
