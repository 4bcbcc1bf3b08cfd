"""NPU thermal trip soak (claim 8): trip at 72 °C, layers migrate to the CPU, the process survives,
long dialogs succeed.

The soak pins the NPU at its burst clock (`npu.perf_profile = burst`, the thermal worst case a
lab uses to reach the trip at room ambient) and runs long dialogs back to back. For each dialog:
the runtime's streamed thermal events (migrate / restore, with the NPU temperature it acted on),
whether it completed (a killed process ends the stream with exit 137), the bench's own reading
of the NPU, CPU and skin thermal zones, and a status read (layers on the CPU, the process id: a
new pid is a restarted, i.e. killed, runtime).

- Trip temperature, taken by the bench: before the soak an approach phase runs short inferences
  and reads the phone's NPU thermal zone itself (sysfs over the shell, bench/phone/device_state.py)
  before and after each, sizing each call so the NPU rises about APPROACH_STEP_C per call. The
  call in which the runtime first migrates layers brackets the trip coarsely (a long call can
  peak between the bench's readings). The phone then rests until the NPU is REFINE_BELOW_C under
  that bracket and climbs back with one-token inferences: the trip lies above the lowest reading
  around the last call that did not trip and at most the highest around the call that did. (If
  refining fails, the coarse bracket stands: from the reading before the tripping call to that
  plus the previous call's rise scaled to its length.) The verdict's value is the bracket's middle,
  its half-width an uncertainty component. The runtime's own `npu_c` in the migrate event is a
  report: it must lie in the bracket (within REPORT_TOLERANCE_C), or the verdict fails. With a
  thermal instrument wired, the hottest back-cover probe at the trip is a lower bound for the die:
  a zone reading below it is not credible (invalid). No trip in the approach makes the value
  missing: the claim was not shown (invalid).
- The zone is the phone's word, like the event: a phone whose every NPU reading is 7 degC high
  tells one consistent story. The instrument that decides is a thermocouple on the SoC's shield
  (station file: `shield_channel`). Right after the trip the phone rests SHIELD_SETTLE_S, with no
  heat flowing out of the idle die its temperature is the shield's plus a small per-model
  correction (ShieldRelation, identified by identify_shield_relation from power steps on a
  teardown unit with a thermocouple on the die: the calibration record in the profile entry's
  parameters). The bench reads the zone, scans the shield, reads the zone again: the zone must
  agree with the die the shield implies within the expanded uncertainty (thermocouple accuracy,
  the relation's residuals, the zone's drift during the scan), else FAIL. Agreement makes the
  verdict corroborated; without a shield channel the trip rests on the phone's zone: reported,
  never a PASS.
- At rest the die has cooled to near its shield, so a zone that lies only while the die is hot
  (an offset growing with temperature) reads true there. So the zone is also compared right after
  the tripping call, with no rest: zone, shield scan, zone, through the relation identified under
  load on the teardown unit (`ShieldRelation.under_load`: readings 0.1-0.3 s after decode work,
  die 42-75 degC; the die sheds its heat through the shield, so it runs hotter than the shield by
  a share of the shield-to-cover gradient: gain ~0.09 against ~0.035 at rest). A disagreement
  beyond the expanded uncertainty fails the verdict; without that record the detail says the
  zone was not compared while hot.
- The migration must show where the phone says it happened: at each trip in the soak's dialogs
  the host's token gaps after the migrate event must be at least MIGRATION_MIN_SLOWDOWN longer
  than before it (layers on the CPU decode slower); a reported migration the token rate does not
  show fails the trip verdict.
- Long-dialog success, from what the host sees: a dialog succeeds only if its whole token stream is
  the bench's reference output for its prompt and seed (drawn for this soak, phonebench.bench.specs.reference_model)
  and arrived without a break the host observed (a gap between token arrivals longer than
  BREAK_FACTOR x the dialog's median gap and BREAK_MIN_S: a restarted runtime reloads its model for
  seconds). Exit status, done line and pid are the phone's word and only ever count against it.
- Process kills: the largest of: dialogs with a host-observed break, streams that died (exit
  137/143), pid changes between status reads.
Without arrivals on the station clock (or without a reference for the model) a restart patched over
by the phone cannot be seen: the kill count and the success rate are then the phone's word
(self-reported), never a PASS where the profile requires measurement.

Afterwards the perf profile is restored and, when another test follows on the phone, the phone
rests until it is near its starting temperatures, so the next check does not inherit a hot phone.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import CheckResult, Tick, VerdictData, no_tick
from .chamber_hold import ChamberStopped
from .tokens import PROMPT_SEEDS, PROMPT_TOKENS, TokenRuns, draw_runs, generate_case
from ..phone.device_state import read_thermal_zones, zone_celsius
from ..specs.sla import SlaEntry
from phonebench.core import judge
from phonebench.core.verdict import (Evidence, Finding, FindingKind, PlotHint, Uncertainty, UncertaintyComponent,
                                     Verdict)
from phonebench.drivers.chamber import ChamberAlarm
from phonebench.drivers.runtime import Generation, RuntimeClient

log = logging.getLogger(__name__)

SOAK_PROFILE = "burst"
DIALOG_TOKENS = 128
COOL_STEP_S = 300.0
COOL_MAX_S = 3600.0
COOL_MARGIN_C = 1.5
NPU_ZONE = "npu"
# The soak's long dialogs cycle a few fresh cases: its claim is survival and success (every token
# still the reference's), and a case per dialog would put the reference's cost on every one of 373.
SOAK_PROMPT_CASES = 4
APPROACH_STEP_C = 0.5        # wanted NPU rise per approach call: the bracket's width
APPROACH_TOKENS = (4, 128)   # shortest and longest approach call
APPROACH_MAX_CALLS = 1500
REPORT_TOLERANCE_C = 1.0     # the runtime's reported trip temperature may sit this far outside the bracket
COVER_TOLERANCE_C = 1.0      # a die reading may sit this far below the hottest cover probe (probe accuracy)
REFINE_BELOW_C = 4.0         # cool this far below the coarse bracket (past the runtime's hysteresis) to refine
REFINE_COOL_STEP_S = 2.0
REFINE_COOL_MAX_S = 600.0
REFINE_MAX_CALLS = 3000
BREAK_FACTOR = 5.0           # a token gap this many times the dialog's median gap ...
# ... and at least this long is a break in the stream. A restart reloads the model (seconds; the
# emulated runtime's 1.5 s); an honest runtime's decode stalls (scheduler, DVFS, memory) are far
# shorter but many: ~94 in a soak's 47k steps on the emulated nominal runtime, and at 0.3 s one
# soak in about 110 broke on a stall alone (EMU0004's 0.315 s step on seed 2256554040).
BREAK_MIN_S = 1.0

SHIELD_SETTLE_S = 5.0        # rest after the trip before the shield comparison: the idle die settles on its shield
SHIELD_PROBE_ACCURACY_C = 1.1  # type K special limits of error, degC (rectangular): the shield thermocouple
SHIELD_DEFAULT_FIT_U_C = 0.5  # the relation's standard uncertainty when the profile gives no calibration record
MIGRATION_MIN_SLOWDOWN = 0.10  # token gaps after a trip's migrate event at least this much longer than before
MIGRATION_WINDOW = 8          # token gaps either side of the event

CoverProbe = Callable[[], float]  # hottest back-cover probe reading now, degC


@dataclass(frozen=True)
class ShieldReading:
    """One scan of the thermal instrument: the SoC's shield and the hottest cover probe, degC."""

    shield_c: float
    cover_c: float | None = None


ShieldProbe = Callable[[], ShieldReading]


@dataclass(frozen=True)
class ShieldRelation:
    """The die's temperature from its shield's, for one phone model, with the die idle:
    die = shield + offset_c + gain x (shield - cover). `fit_u_c`: the standard uncertainty of one
    estimate (the fit's residuals and parameters); `source`: where it was identified."""

    offset_c: float = 0.0
    gain: float = 0.0
    fit_u_c: float = SHIELD_DEFAULT_FIT_U_C
    n: int = 0
    source: str = "no calibration record: die = shield at rest"

    def die_c(self, reading: ShieldReading) -> float:
        spread = 0.0 if reading.cover_c is None else reading.shield_c - reading.cover_c
        return reading.shield_c + self.offset_c + self.gain * spread

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> ShieldRelation:
        """The calibration record an SLA entry carries (shield_offset_c, shield_gain, shield_fit_u_c, shield_n)."""
        return cls._record(parameters, "shield_") or cls()

    @classmethod
    def under_load(cls, parameters: Mapping[str, Any]) -> ShieldRelation | None:
        """The relation right after load (shield_load_offset_c, ...): the die still hot and shedding
        heat through the shield, read 0.1-0.3 s after the work (zone, scan, zone). None: no such record."""
        return cls._record(parameters, "shield_load_")

    @classmethod
    def _record(cls, parameters: Mapping[str, Any], prefix: str) -> ShieldRelation | None:
        if f"{prefix}offset_c" not in parameters:
            return None
        return cls(float(parameters[f"{prefix}offset_c"]), float(parameters.get(f"{prefix}gain", 0.0)),
                   float(parameters.get(f"{prefix}fit_u_c", SHIELD_DEFAULT_FIT_U_C)),
                   int(parameters.get(f"{prefix}n", 0)),
                   str(parameters.get(f"{prefix}source", "the profile's calibration record")))


def identify_shield_relation(rows: list[tuple[float, float, float]], source: str = "power steps") -> ShieldRelation:
    """Least squares over (die, shield, cover) readings taken at rest after power steps on a unit
    with a thermocouple on its die: die - shield = offset + gain x (shield - cover)."""
    data = np.asarray(rows, dtype=float)
    if data.ndim != 2 or data.shape[0] < 4:
        raise ValueError("identify_shield_relation needs at least 4 (die, shield, cover) rows")
    die, shield, cover = data.T
    x = np.column_stack([np.ones_like(shield), shield - cover])
    coef, *_ = np.linalg.lstsq(x, die - shield, rcond=None)
    residual = die - shield - x @ coef
    dof = len(residual) - 2
    s2 = float(residual @ residual) / dof if dof > 0 else float(residual @ residual)
    # One new estimate: residual scatter plus the parameters' own uncertainty at the data's mean.
    fit_u = float(np.sqrt(s2 * (1.0 + 1.0 / len(residual))))
    return ShieldRelation(float(coef[0]), float(coef[1]), fit_u, len(residual), source)


@dataclass(frozen=True)
class ShieldCheck:
    """The phone's NPU zone against the die its shield implies, with the die idle after the trip."""

    zone_before_c: float
    zone_after_c: float
    reading: ShieldReading
    relation: ShieldRelation

    @property
    def zone_c(self) -> float:
        return (self.zone_before_c + self.zone_after_c) / 2.0

    @property
    def die_c(self) -> float:
        return self.relation.die_c(self.reading)

    @property
    def zone_offset_c(self) -> float:
        """How far the phone's zone reads above the die the bench infers."""
        return self.zone_c - self.die_c

    @property
    def uncertainty(self) -> Uncertainty:
        return Uncertainty.combine([
            UncertaintyComponent("shield thermocouple", SHIELD_PROBE_ACCURACY_C / np.sqrt(3.0), "B",
                                 "type K special limits of error, rectangular"),
            UncertaintyComponent("shield-to-die relation", self.relation.fit_u_c, "A", self.relation.source),
            UncertaintyComponent("zone drift during the scan", abs(self.zone_after_c - self.zone_before_c) / 2.0
                                 / np.sqrt(3.0), "B", "the zone read before and after the scan, rectangular")])

    @property
    def agrees(self) -> bool:
        return abs(self.zone_offset_c) <= self.uncertainty.expanded

    def to_dict(self) -> dict[str, Any]:
        return {"zone_c": self.zone_c, "zone_before_c": self.zone_before_c, "zone_after_c": self.zone_after_c,
                "shield_c": self.reading.shield_c, "cover_c": self.reading.cover_c, "die_c": self.die_c,
                "zone_offset_c": self.zone_offset_c, "tolerance_c": self.uncertainty.expanded,
                "relation": {"offset_c": self.relation.offset_c, "gain": self.relation.gain,
                             "fit_u_c": self.relation.fit_u_c, "n": self.relation.n, "source": self.relation.source}}


def instrument_shield(probe: Any, channel: str, cover_channels: tuple[str, ...] = ("T1", "T2")) -> ShieldProbe:
    """A ShieldProbe over a thermal instrument driver (phonebench.drivers.thermal: `read()` -> ThermalReading):
    `channel` is the one the station file names as the shield's (`shield_channel`)."""
    def scan() -> ShieldReading:
        reading = probe.read()
        covers = [reading.celsius[c] for c in cover_channels if c in reading.celsius]
        return ShieldReading(reading[channel], max(covers) if covers else None)
    return scan


def measure_shield(runtime: RuntimeClient, shield: ShieldProbe, relation: ShieldRelation,
                   rest_s: float = SHIELD_SETTLE_S) -> ShieldCheck:
    """Rest the phone (none: the comparison while hot, right after the trip), then zone, shield
    scan, zone (module docstring)."""
    if rest_s > 0:
        runtime.device.run(["sleep", f"{rest_s:g}"], timeout_s=rest_s + 60.0)
    before = _npu_zone(runtime)
    reading = shield()
    return ShieldCheck(before, _npu_zone(runtime), reading, relation)


@dataclass
class TripBracket:
    """Where the trip happened, from the bench's own NPU zone readings around the call."""

    low_c: float  # below every temperature the runtime acted on without tripping
    high_c: float  # at least the temperature it tripped at
    reported_c: float | None  # the runtime's npu_c in its migrate event
    calls: int  # approach calls it took
    tokens: int  # length of the tripping call
    cover_c: float | None = None  # hottest cover probe at the trip
    shield: ShieldCheck | None = None  # the zone against the shield thermocouple, at rest after the trip
    hot_shield: ShieldCheck | None = None  # the same, right after the tripping call, through the under-load relation

    @property
    def value_c(self) -> float:
        return (self.low_c + self.high_c) / 2.0

    @property
    def half_width_c(self) -> float:
        return (self.high_c - self.low_c) / 2.0


def _npu_zone(runtime: RuntimeClient) -> float:
    value = zone_celsius(read_thermal_zones(runtime.device), NPU_ZONE)
    return float("nan") if value is None else value


def _generate_and_read(runtime: RuntimeClient, tokens: int, call: int, tick: Tick) -> tuple[Generation, float]:
    """One short inference, then the bench's own read of the NPU zone right after it."""
    gen = runtime.generate(tokens, seed=PROMPT_SEEDS[call % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS,
                           allow_incomplete=True)
    after = _npu_zone(runtime)
    tick(1)
    return gen, after


def _trip_event(gen: Generation, layers_on_cpu: int) -> dict[str, Any] | None:
    """The migrate event that started from all layers on the NPU, if this call has one."""
    for event in gen.thermal_events:
        if event.get("action") == "migrate" and layers_on_cpu == 0:
            return event
        layers_on_cpu = int(event.get("layers_on_cpu", layers_on_cpu))
    return None


def approach_trip(runtime: RuntimeClient, *, max_calls: int = APPROACH_MAX_CALLS, cover: CoverProbe | None = None,
                  shield: ShieldProbe | None = None, relation: ShieldRelation = ShieldRelation(),
                  hot_relation: ShieldRelation | None = None, tick: Tick = no_tick) -> TripBracket | None:
    """Find the trip, then refine it; None if the runtime never migrates (or is killed). The
    cover is read once, after the trip: it changes over minutes, and reading a scanning
    instrument between the calls would let the die cool between the bench's readings. With a
    shield and an under-load relation, the zone is compared with the shield right after the
    tripping call, while the die is hot; the comparison at rest comes last (module docstring)."""
    at_trip = (lambda: measure_shield(runtime, shield, hot_relation, rest_s=0.0)) \
        if shield is not None and hot_relation is not None else None
    coarse = _approach(runtime, max_calls=max_calls, at_trip=at_trip, tick=tick)
    if coarse is None:
        return None
    bracket = _refine(runtime, coarse, at_trip=at_trip, tick=tick) or coarse
    if cover is not None:
        bracket = replace(bracket, cover_c=cover())
    return replace(bracket, shield=measure_shield(runtime, shield, relation)) if shield is not None else bracket


def _approach(runtime: RuntimeClient, *, max_calls: int, at_trip: Callable[[], ShieldCheck] | None,
              tick: Tick) -> TripBracket | None:
    """Inferences sized to heat the NPU ~APPROACH_STEP_C each, until the first migration."""
    tokens, previous = 16, None  # previous: (tokens, rise) of the last call that did not trip
    layers = int(runtime.status().thermal.get("layers_on_cpu", 0))
    before = _npu_zone(runtime)
    for call in range(1, max_calls + 1):
        gen, after = _generate_and_read(runtime, tokens, call, tick)
        if not gen.completed:
            return None
        event = _trip_event(gen, layers)
        if event is not None:
            if previous is None:  # tripped in the first call: it may have started above the trip
                log.warning("%s: tripped in the first approach call; no lower bound", runtime.device.name)
                return None
            hot = at_trip() if at_trip is not None else None
            rise = max(previous[1], 0.0) * tokens / previous[0]
            reported = float(event["npu_c"]) if "npu_c" in event else None
            return TripBracket(before, max(before + rise, after), reported, call, tokens, hot_shield=hot)
        layers = _layers_after(gen, layers)
        rise = after - before
        previous = (tokens, rise)
        wanted = tokens * APPROACH_STEP_C / rise if rise > 1e-3 else APPROACH_TOKENS[1]
        tokens = int(np.clip(round(wanted), *APPROACH_TOKENS))
        before = after
    return None


def _refine(runtime: RuntimeClient, coarse: TripBracket, *, at_trip: Callable[[], ShieldCheck] | None,
            tick: Tick) -> TripBracket | None:
    """Let the NPU cool below the coarse bracket, then climb back with one-token inferences, the
    shortest there are: the die moves little within one, so the readings between them bracket
    the trip closely (a long call can peak between the bench's readings)."""
    rested = 0.0
    while _npu_zone(runtime) > coarse.low_c - REFINE_BELOW_C:
        if rested >= REFINE_COOL_MAX_S:
            return None
        runtime.device.run(["sleep", f"{REFINE_COOL_STEP_S:g}"], timeout_s=REFINE_COOL_STEP_S + 60.0)
        rested += REFINE_COOL_STEP_S
    layers = int(runtime.status().thermal.get("layers_on_cpu", 0))
    low = before = _npu_zone(runtime)
    for call in range(1, REFINE_MAX_CALLS + 1):
        gen, after = _generate_and_read(runtime, 1, call, tick)
        if not gen.completed:
            return None
        event = _trip_event(gen, layers)
        if event is not None and layers == 0 and call > 1:
            hot = at_trip() if at_trip is not None else coarse.hot_shield
            reported = float(event["npu_c"]) if "npu_c" in event else None
            return TripBracket(low, max(before, after), reported, coarse.calls + call, 1, hot_shield=hot)
        layers = _layers_after(gen, layers)
        # The last call without a trip ran through temperatures from before to after.
        low = min(before, after)
        before = after
    return None


def _layers_after(gen: Generation, layers: int) -> int:
    return int(gen.thermal_events[-1].get("layers_on_cpu", layers)) if gen.thermal_events else layers


@dataclass
class SoakLog:
    t: list[float] = field(default_factory=list)
    npu_c: list[float] = field(default_factory=list)
    cpu_c: list[float] = field(default_factory=list)
    skin_c: list[float] = field(default_factory=list)
    layers_on_cpu: list[int] = field(default_factory=list)
    pids: list[int | None] = field(default_factory=list)
    completed: list[bool] = field(default_factory=list)  # the host's judgement of each dialog (module docstring)
    killed: int = 0
    breaks: list[float | None] = field(default_factory=list)  # each dialog's longest break the host saw, s
    gaps: list[dict[str, float | int] | None] = field(default_factory=list)  # each dialog's arrival_gaps
    events: list[dict[str, Any]] = field(default_factory=list)
    dialogs: TokenRuns = field(default_factory=TokenRuns)

    @property
    def host_observed(self) -> bool:
        """Whether success and kills rest on the host: arrivals stamped and tokens checked."""
        return self.dialogs.observed and self.dialogs.reference is not None

    def add_dialog(self, gen: Generation, tokens: int) -> None:
        index = len(self.dialogs.generations) - 1
        broken = stream_break(gen)
        self.breaks.append(broken)
        self.gaps.append(arrival_gaps(gen))
        self.completed.append(gen.completed and len(gen.tokens) == tokens and broken is None
                              and self.dialogs.first_wrong(index) is None)
        self.killed += int(not gen.completed)
        self.events.extend(gen.thermal_events)

    def read_status(self, runtime: RuntimeClient) -> None:
        """The bench's own zone readings (the trace) and the runtime's status (layers, pid)."""
        zones = read_thermal_zones(runtime.device)
        status = runtime.status()
        self.t.append(status.t)
        for series, zone in ((self.npu_c, NPU_ZONE), (self.cpu_c, "cpu0"), (self.skin_c, "skin")):
            value = zone_celsius(zones, zone)
            series.append(np.nan if value is None else value)
        self.layers_on_cpu.append(int(status.thermal.get("layers_on_cpu", 0)))
        self.pids.append(status.pid)

    @property
    def broken(self) -> int:
        return sum(b is not None for b in self.breaks)

    @property
    def pid_changes(self) -> int:
        known = [p for p in self.pids if p is not None]
        return sum(a != b for a, b in zip(known, known[1:]))

    @property
    def trip_temperatures(self) -> list[float]:
        """The runtime's reported NPU temperature at each trip (a migration from no layers on the CPU)."""
        trips, on_cpu = [], 0
        for event in self.events:
            if event.get("action") == "migrate" and on_cpu == 0 and "npu_c" in event:
                trips.append(float(event["npu_c"]))
            on_cpu = int(event.get("layers_on_cpu", on_cpu))
        return trips


def soak(runtime: RuntimeClient, dialogs: int, *, tokens: int = DIALOG_TOKENS, perf_profile: str = SOAK_PROFILE,
         cover: CoverProbe | None = None, shield: ShieldProbe | None = None,
         relation: ShieldRelation = ShieldRelation(), hot_relation: ShieldRelation | None = None,
         approach_calls: int = APPROACH_MAX_CALLS, cool_down: bool = True,
         tick: Tick = no_tick, into: SoakLog | None = None) -> tuple[SoakLog, TripBracket | None]:
    """Approach the trip, run the soak and leave the phone as found: its perf profile restored and,
    with `cool_down`, rested near its starting temperature (a test follows that needs it so).
    `into`: the log to fill (the caller keeps what was measured if the soak is stopped)."""
    log_ = into if into is not None else SoakLog()
    previous = runtime.config_get("npu.perf_profile")
    log_.read_status(runtime)
    start_npu, start_skin = log_.npu_c[0], log_.skin_c[0]
    runtime.config_set("npu.perf_profile", perf_profile)
    try:
        bracket = approach_trip(runtime, max_calls=approach_calls, cover=cover, shield=shield, relation=relation,
                                hot_relation=hot_relation, tick=tick)
        log_.dialogs = draw_runs(runtime, cycled=SOAK_PROMPT_CASES)
        for i in range(dialogs):
            log_.add_dialog(generate_case(runtime, log_.dialogs, i, tokens, allow_incomplete=True), tokens)
            log_.read_status(runtime)
            tick(1)
    finally:
        runtime.config_set("npu.perf_profile", previous)
        if cool_down:
            _cool_down(runtime, start_npu, start_skin)
    return log_, bracket


def arrival_gaps(gen: Generation) -> dict[str, float | int] | None:
    """A dialog's longest gap between token arrivals (s), the token it came after, and the median
    gap (None without three stamped arrivals): kept for every dialog in the soak's raw data, so a
    break, or a stream that came near one, can be read afterwards."""
    if gen.arrivals is None or len(gen.arrivals.token_times) < 3:
        return None
    gaps = np.diff(np.asarray(gen.arrivals.token_times))
    k = int(gaps.argmax())
    return {"longest_s": float(gaps[k]), "after_token": k, "median_s": float(np.median(gaps))}


def stream_break(gen: Generation) -> float | None:
    """The longest gap between token arrivals if the host saw the stream break (module docstring)."""
    gaps = arrival_gaps(gen)
    if gaps is None:
        return None
    longest = float(gaps["longest_s"])
    return longest if longest > max(BREAK_FACTOR * float(gaps["median_s"]), BREAK_MIN_S) else None


def _cool_down(runtime: RuntimeClient, npu_c: float, skin_c: float) -> None:
    rested = 0.0
    while rested < COOL_MAX_S:
        zones = read_thermal_zones(runtime.device)
        npu_now, skin_now = zone_celsius(zones, NPU_ZONE), zone_celsius(zones, "skin")
        if (npu_now is None or npu_now <= npu_c + COOL_MARGIN_C) and \
                (skin_now is None or skin_now <= skin_c + COOL_MARGIN_C):
            return
        runtime.device.run(["sleep", f"{COOL_STEP_S:g}"], timeout_s=COOL_STEP_S + 60.0)
        rested += COOL_STEP_S
    log.warning("%s: still warm after resting %.0f s", runtime.device.name, rested)


def migration_slowdowns(log_: SoakLog) -> list[float]:
    """At each trip in the soak's dialogs (a migrate event from all layers on the NPU), the host's
    median token gap after the event over the median before it; only trips with MIGRATION_WINDOW
    gaps either side and arrivals on the station clock count. Where the event sits in the stream
    is the phone's word (its `t` among its token times): the host's gaps test that word."""
    ratios = []
    for gen in log_.dialogs.generations:
        if gen.arrivals is None or not gen.completed:
            continue
        layers = 0
        for event in gen.thermal_events:
            if event.get("action") == "migrate" and layers == 0 and "t" in event:
                index = int(np.searchsorted(np.asarray(gen.token_times), float(event["t"])))
                gaps = np.diff(np.asarray(gen.arrivals.token_times))
                before, after = gaps[max(0, index - 1 - MIGRATION_WINDOW):max(0, index - 1)], \
                    gaps[index:index + MIGRATION_WINDOW]
                if before.size == MIGRATION_WINDOW and after.size == MIGRATION_WINDOW and np.median(before) > 0:
                    ratios.append(float(np.median(after) / np.median(before)))
            layers = int(event.get("layers_on_cpu", layers))
    return ratios


def _trip_verdict(trip: SlaEntry, bracket: TripBracket | None, log_: SoakLog, facts: dict[str, Any]) -> Verdict:
    reported = log_.trip_temperatures
    own = VerdictData(name="npu_trip_temperature", raw="soak_trace",
                      plot=PlotHint("trace", labels=("NPU", "CPU"), y_label="degC", x_label="soak time (s)"))
    if bracket is None:
        hottest = np.nanmax(log_.npu_c)
        return trip.evaluate(None, evidence=Evidence.MEASURED, **own,
                             extra={**facts, "reported_trips_c": reported[:50]},
                             detail=f"no thermal trip in the approach (max NPU zone {hottest:.1f} degC in the soak)")
    u = Uncertainty.combine([UncertaintyComponent(
        "trip bracket", bracket.half_width_c / np.sqrt(3.0), "B",
        "uniform over the zone readings around the call that tripped")])
    shield = bracket.shield
    # The zone is the phone's: only the shield thermocouple makes the bracket more than its word.
    evidence = Evidence.REPORTED if shield is None else Evidence.CORROBORATED
    slowdowns = migration_slowdowns(log_)
    detail = f"NPU zone bracket {bracket.low_c:.2f}..{bracket.high_c:.2f} degC after {bracket.calls} approach calls"
    problems = []
    if shield is None:
        detail = f"the zone is the phone's word (no shield thermocouple: station file shield_channel); {detail}"
    elif not shield.agrees:
        problems.append(f"the NPU zone reads {shield.zone_c:.2f} degC at rest, but the shield thermocouple "
                        f"({shield.reading.shield_c:.2f} degC) puts the die at {shield.die_c:.2f} degC: the zone is "
                        f"{shield.zone_offset_c:+.2f} degC off (tolerance {shield.uncertainty.expanded:.2f}), so the "
                        f"trip was really near {bracket.value_c - shield.zone_offset_c:.1f} degC")
    else:
        detail = (f"zone corroborated by the shield thermocouple ({shield.zone_offset_c:+.2f} degC, within "
                  f"{shield.uncertainty.expanded:.2f}); {detail}")
    hot = bracket.hot_shield
    if shield is not None and hot is None:
        detail = f"not compared while hot (no under-load shield relation in the profile); {detail}"
    elif hot is not None and not hot.agrees:
        problems.append(f"right after the trip the NPU zone reads {hot.zone_c:.2f} degC, but the shield "
                        f"({hot.reading.shield_c:.2f} degC) puts the hot die at {hot.die_c:.2f} degC: the zone is "
                        f"{hot.zone_offset_c:+.2f} degC off while hot (tolerance {hot.uncertainty.expanded:.2f}), "
                        f"so the trip was really near {bracket.value_c - hot.zone_offset_c:.1f} degC")
    elif hot is not None:
        detail = (f"and while hot ({hot.zone_offset_c:+.2f} degC, within {hot.uncertainty.expanded:.2f}); {detail}")
    if slowdowns and float(np.median(slowdowns)) < 1.0 + MIGRATION_MIN_SLOWDOWN:
        problems.append(f"the migrations the phone reports do not show in the token rate (median gap ratio "
                        f"{float(np.median(slowdowns)):.3f} over {len(slowdowns)} trips, at least "
                        f"{1.0 + MIGRATION_MIN_SLOWDOWN:.2f} expected)")
    if bracket.reported_c is None:
        problems.append("the runtime's migrate event carries no temperature")
    elif not bracket.low_c - REPORT_TOLERANCE_C <= bracket.reported_c <= bracket.high_c + REPORT_TOLERANCE_C:
        problems.append(f"the runtime reports its trip at {bracket.reported_c:.2f} degC, outside the bench's "
                        f"bracket: its report is wrong")
    # What the bench found wrong fails the verdict; a zone it cannot credit makes it INVALID (core/judge.py).
    findings = [Finding(FindingKind.CONTRADICTED, problem) for problem in problems]
    if bracket.cover_c is not None and bracket.high_c < bracket.cover_c - COVER_TOLERANCE_C:
        findings.append(Finding(FindingKind.INVALID, f"invalid: the NPU zone reads {bracket.high_c:.2f} degC, "
                                                     f"below the back cover's {bracket.cover_c:.2f} degC: the zone "
                                                     f"is not credible"))
    return trip.evaluate(
        bracket.value_c, evidence=evidence, uncertainty=u, **own, findings=findings, detail_prefix=detail,
        extra={**facts, "bracket_c": [bracket.low_c, bracket.high_c], "runtime_reported_c": bracket.reported_c,
               "approach_calls": bracket.calls, "cover_c": bracket.cover_c, "reported_trips_c": reported[:50],
               "shield": None if shield is None else shield.to_dict(),
               "hot_shield": None if hot is None else hot.to_dict(),
               "migration_slowdowns": [round(r, 4) for r in slowdowns[:50]]})


def thermal_trip_check(runtime: RuntimeClient, cover: CoverProbe | None = None, shield: ShieldProbe | None = None, *,
                       trip: SlaEntry, kills: SlaEntry, success: SlaEntry, dialogs: int | None = None,
                       tokens: int = DIALOG_TOKENS, approach_calls: int = APPROACH_MAX_CALLS,
                       cool_down: bool = True, tick: Tick = no_tick,
                       watch: Callable[[], None] | None = None) -> CheckResult:
    """cover: the hottest back-cover probe reading, when a thermal instrument is wired (a bound);
    shield: a scan of the shield thermocouple (and the cover), the trip's independent side, held
    against the trip entry's calibration record (ShieldRelation.from_parameters);
    approach_calls: at most this many short inferences to find the trip;
    cool_down: rest the phone afterwards (False when no test follows on it: no wait without a reason);
    watch: a look at the chamber after each approach call and dialog (bench/checks/chamber_hold.py):
    an alarm stops the soak, a ChamberStopped carrying its trace and dialogs so far."""
    dialogs = max(dialogs or 0, success.n_required)
    log_ = SoakLog()

    def step(n: int) -> None:
        tick(n)
        if watch is not None:
            watch()
    try:
        log_, bracket = soak(runtime, dialogs, tokens=tokens, cover=cover, shield=shield,
                             relation=ShieldRelation.from_parameters(trip.parameters),
                             hot_relation=ShieldRelation.under_load(trip.parameters), approach_calls=approach_calls,
                             cool_down=cool_down, tick=step, into=log_)
    except ChamberAlarm as alarm:  # nothing is judged from a soak whose air was lost; its data is kept
        raise ChamberStopped(alarm, CheckResult([], _soak_raw(log_, None, tokens)),
                             f"the soak after {len(log_.completed)} of {dialogs} dialogs") from None
    trip_v = _trip_verdict(trip, bracket, log_, {"trips": len(log_.trip_temperatures),
                                                 "cpu_c_at_trips": [e["cpu_c"] for e in log_.events
                                                                    if e.get("action") == "migrate"
                                                                    and "cpu_c" in e][:50]})
    kill_count = max(log_.killed, log_.pid_changes, log_.broken)
    seen = Evidence.MEASURED if log_.host_observed else Evidence.REPORTED
    ok = np.asarray(log_.completed, dtype=bool)
    wrong = len(log_.dialogs.fabricated)
    why = "no station clock on the stream" if not log_.dialogs.observed else "no reference for the model"
    word_only = "" if log_.host_observed else f"the phone's word only ({why}): a restart it patched over cannot be seen"
    kills_v = kills.evaluate(kill_count, evidence=seen, name="npu_trip_process_kills", raw="soak_events",
                             extra={"killed_streams": log_.killed, "pid_changes": log_.pid_changes,
                                    "host_observed_breaks": log_.broken}, detail_prefix=word_only)
    success_v = success.evaluate(
        ok, evidence=seen, name="npu_trip_long_dialog_success", raw="soak_events",
        extra={"tokens": tokens, "dialogs_not_the_models_output": wrong, "dialogs_broken": log_.broken},
        detail_prefix=word_only or (f"{wrong} dialogs streamed tokens that are not the model's, {log_.broken} broke "
                                    f"on the host" if wrong or log_.broken else ""))
    migrations = sum(1 for e in log_.events if e.get("action") == "migrate")
    info = [
        judge.recorded("thermal_throttle_events", float(migrations), "events", statistic="count", n=dialogs,
                       raw=("soak_events",), detail=f"{len(log_.trip_temperatures)} trips, {migrations} migration "
                                                     "steps to the CPU (the runtime's events)",
                       evidence=Evidence.REPORTED),
        judge.recorded("thermal_soak_npu_max", float(np.nanmax(log_.npu_c)), "degC", statistic="max",
                       n=len(log_.npu_c), raw=("soak_trace",),
                       detail="hottest NPU zone reading between dialogs (the phone's own sensor: recorded, not "
                              "judged)", evidence=Evidence.REPORTED),
    ]
    return CheckResult([trip_v, kills_v, success_v, *info], _soak_raw(log_, bracket, tokens))


def _soak_raw(log_: SoakLog, bracket: TripBracket | None, tokens: int) -> dict[str, Any]:
    """The soak's trace and events as the verdicts' raw data (also a stopped soak's, so far)."""
    t = np.asarray(log_.t) - (log_.t[0] if log_.t else 0.0)
    trace = {"t": t, "y": np.asarray(log_.npu_c), "y2": np.asarray(log_.cpu_c),
             "layers_on_cpu": np.asarray(log_.layers_on_cpu, dtype=float), "skin": np.asarray(log_.skin_c)}
    return {"soak_trace": trace,
            "soak_events": {"events": log_.events, "completed": log_.completed, "pids": log_.pids,
                            "killed_streams": log_.killed, "dialog_tokens": tokens, "breaks_s": log_.breaks,
                            "arrival_gaps": log_.gaps,
                            "prompts": log_.dialogs.prompts(),
                            "not_the_models_output": [list(w) for w in log_.dialogs.fabricated],
                            "trip_bracket": None if bracket is None else {
                                "low_c": bracket.low_c, "high_c": bracket.high_c, "reported_c": bracket.reported_c,
                                "calls": bracket.calls, "tokens": bracket.tokens, "cover_c": bracket.cover_c,
                                "shield": None if bracket.shield is None else bracket.shield.to_dict()}}}
