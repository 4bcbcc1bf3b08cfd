"""One sustained-use study, many claims: spoken dialogs watched by every instrument, heat spent once.

Claims 1-2 (voice latency and dialog time), claim 6's energy per dialog and claim 7 (back cover in
sustained use) are about the same thing: a phone answering spoken questions one after another.
Measured apart they cost three dialog loops: 299 voice trials, 27 energy dialogs, and a cover loop
that warmed the phone for 10+ minutes before its 60 readings. Here one study runs them, every
instrument a monitor on the dialogs (OpenHTF's idea), and each claim declares which dialogs it
takes and under which conditions (docs/labtime.md):

1. Voice phase: the trials claims 1-2 ask for, one scope record each (phonebench.bench.checks.voice), the
   hottest cover probe read after each. Its dialogs are the voice claims' samples: they are the
   voice study's trials as before (one per record, 4.6 s apart, a phone not pinned hot), now
   counted by their effective sample size (independence "block": a warming phone's trials may
   drift together). The planned trials are an internal pilot: when they are worth fewer
   independent trials than a claim needs (a p99 from exactly its 299 has no slack, and the
   autocorrelation of its ~3 exceedances reads as dependence on about one phone-night in 140 even from
   independent trials), the phase takes the trials still needed, once, up to as many again, and
   every claim is judged on all of them. The dependence decides the top-up, never the
   exceedances, so the test's error rates stay where they were. The cover's range over the trials
   is stated on each voice verdict: the condition they were taken in.
   With the power analyzer on the phone, its digitizer watches the phase's first dialogs too
   (claim 6, energy per dialog: the profile's 27), each swept from just before the stimulus until
   the phone is idle again (phonebench.bench.checks.power), exactly as the energy study swept its own
   dialogs: the next trial starts only then, so every dialog starts from idle.
2. Cover phase: the cover study's own loop (phonebench.bench.checks.thermal.run_dialog_loop, a dialog every
   3 s: the phone talks most of the time), which needs the phone steady *at that workload*. The
   voice phase is its warm-up's first part: its time counts toward `warmup_s`, but steadiness is
   judged on the loop's own readings only (a full stability window at 3 s), so the cover verdicts
   rest on exactly the readings the separate study took. The 4.6 s voice cadence alone leaves the
   cover ~4.5 degC cooler than the 3 s loop: it cannot stand in for claim 7's workload (a hot
   phone would pass it).

Time here is the bench's: each trial's record length (plus the settle wait after an answer that
outlasted it), the loop's periods, which on hardware take that long too.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from . import CheckResult
from . import power as power_check
from . import thermal as thermal_check
from . import voice as voice_check
from .chamber_hold import ChamberStopped
# The per-claim checks' judgement of their own measurement, shared with this study's dialogs: private
# to the checks package, so a suite still gets these verdicts from a check (tests/test_check_shape.py).
from .power import _energy_verdicts
from .thermal import _thermal_verdicts
from .voice import _voice_verdicts as _voice_trial_verdicts
from phonebench.core.verdict import Outcome, Verdict
from phonebench.core.errors import InvalidMeasurement
from ..specs.sla import SlaEntry
from ..stats.uncertainty import calibration_of
from phonebench.drivers.device import Device
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.scope import Oscilloscope
from phonebench.drivers.stimulus import AudioStimulus
from phonebench.drivers.thermal import ThermalProbe

log = logging.getLogger(__name__)

# The first sweep spans the trial's record: it is usually idle again by then, so one fetch suffices.
ENERGY_SWEEP = power_check.EnergySweep(chunk_s=voice_check.VoiceSetup().post_s + 0.5)
# sustained_use_check's entries and the metric ids that hold them (profile.pick(**ENTRIES)); the
# energy entry (power_check.ENERGY) only with a power analyzer.
ENTRIES = {**voice_check.METRICS, **thermal_check.ENTRIES}
CONDITION = "voice trials back to back, one per 4.6 s record, the study's first phase"


@dataclass
class SustainedRun:
    """The voice phase's trials (with the cover read after each) and the cover phase's loop."""

    trials: voice_check.VoiceTrials
    energy: power_check.DialogEnergy | None  # the first dialogs' energy (None: no analyzer on the phone)
    cover_during_trials: list[float]  # hottest cover probe after each trial, degC
    voice_s: float  # bench time of the voice phase
    thermal: thermal_check.ThermalRun | None  # None: no probes on this phone (or the loop was stopped)
    stopped: ChamberStopped | None = None  # a chamber alarm stopped the cover loop (its readings in it)


def run_sustained_use(scope: Oscilloscope | None, stimulus: AudioStimulus, thermal: ThermalProbe | None,
                      device: Device, trials: int, readings: int, *, fixture_delay_s: float = 0.0,
                      fixture_calibrated: bool | None = None, voice: voice_check.VoiceSetup = voice_check.VoiceSetup(),
                      setup: thermal_check.ThermalSetup = thermal_check.ThermalSetup(),
                      supply: PowerAnalyzer | None = None, energy_dialogs: int = 0,
                      capacity_wh: float | None = None, watch: thermal_check.Watch | None = None,
                      more_trials: Callable[[voice_check.VoiceTrials], int] | None = None) -> SustainedRun:
    """`trials` voice trials (the first `energy_dialogs` of them swept by the supply's digitizer),
    then the cover loop until `readings` readings after warm-up. Without a scope the study is the
    cover loop alone; without probes, the voice trials alone. A chamber alarm in the loop (`watch`)
    ends the study there: the voice phase is kept whole, the loop's readings in `stopped`.
    `more_trials`: how many trials the ones taken still need (an internal pilot, asked once after
    the planned trials; module docstring), at most `trials` more."""
    missing = [] if thermal is None else \
        [c for c in (*setup.cover_channels, setup.ambient_channel) if c and c not in thermal.channels]
    if thermal is not None and missing:  # refused before any dialog: the voice phase would be wasted
        raise InvalidMeasurement(f"thermal probe has no channel(s) {missing}; it has {thermal.channels}",
                                 hint="name the cover and ambient channels of this station's probe")
    calibrated = fixture_calibrated if fixture_calibrated is not None else fixture_delay_s != 0.0
    result = voice_check.VoiceTrials(fixture_delay_s, calibrated, voice.sample_rate_hz,
                                     calibration=None if scope is None else calibration_of(scope))
    cover: list[float] = []
    elapsed = 0.0
    energy = None if supply is None or scope is None or not energy_dialogs else \
        power_check.new_dialog_energy(supply, capacity_wh or 0.0)
    if scope is not None:
        voice_check.configure(scope, stimulus, voice)
        keeper, on_scope = voice_check.WaveformKeeper(), scope

        def take(index: int) -> None:
            nonlocal elapsed
            swept = supply is not None and energy is not None and index < energy_dialogs
            if swept and supply is not None:
                power_check.start_dialog_sweep(supply, ENERGY_SWEEP)
            status = voice_check.take_trial(on_scope, stimulus, device, result, index, voice, keeper)
            if swept and supply is not None and energy is not None:
                power_check.finish_dialog_sweep(supply, ENERGY_SWEEP, energy)
            elapsed += voice.pre_s + voice.post_s + (voice.settle_s if status == "open-ended" else 0.0)
            if thermal is not None:
                reading = thermal.read().celsius
                cover.append(max((reading.get(c, math.nan) for c in setup.cover_channels), default=math.nan))

        for index in range(trials):
            take(index)
        extra = min(trials, max(0, more_trials(result))) if more_trials is not None else 0
        if extra:
            log.info("sustained use: the %d trials are worth fewer independent ones; %d more, once", trials, extra)
        for index in range(trials, trials + extra):
            take(index)
    run, stopped = None, None
    if thermal is not None:
        voice_check.arm_stimulus(stimulus)  # the loop fires without the scope (same clip, same level)
        # The voice phase is warm-up time; steadiness is still shown on the loop's own readings.
        loop_setup = replace(setup, warmup_s=max(0.0, setup.warmup_s - elapsed))
        try:
            run = thermal_check.run_dialog_loop(thermal, stimulus, device, readings, loop_setup, watch)
        except ChamberStopped as stop:
            stopped = stop
    log.info("sustained use: %d voice trials (%.0f s), then %d loop readings", len(result), elapsed,
             0 if run is None else len(run.t_s))
    return SustainedRun(result, energy, cover, elapsed, run, stopped)


def _sustained_voice_verdicts(run: SustainedRun, *, latency_p99: SlaEntry, latency_std: SlaEntry,
                              dialog_p99: SlaEntry, raw: Sequence[str] = ()) -> list[Verdict]:
    """Claims 1-2 over the voice phase's trials, counted by effective sample size, conditions stated;
    each points at its own samples, then the raw data named `raw`."""
    block = {name: _as_block(entry) for name, entry in
             (("latency_p99", latency_p99), ("latency_std", latency_std), ("dialog_p99", dialog_p99))}
    cover = np.asarray(run.cover_during_trials, dtype=float)
    span = (float(np.nanmin(cover)), float(np.nanmax(cover))) if np.isfinite(cover).any() else (None, None)
    condition = (f"{CONDITION}; back cover {span[0]:.1f}..{span[1]:.1f} degC over the trials"
                 if span[0] is not None else CONDITION)
    return _voice_trial_verdicts(run.trials, **block, raw=raw, note=condition,
                                 extra={"conditions_measured": condition, "cover_c_during_trials": span})


def _as_block(entry: SlaEntry) -> SlaEntry:
    # Trials from a warming phone may drift together: their autocorrelation sets the effective
    # sample size (independent trials give n back, so nothing is lost when there is no drift).
    return replace(entry, independence="block") if entry.statistic in ("percentile", "std") else entry


def sustained_use_check(scope: Oscilloscope | None, stimulus: AudioStimulus, thermal: ThermalProbe | None,
                        device: Device, supply: PowerAnalyzer | None = None, *, latency_p99: SlaEntry,
                        latency_std: SlaEntry, dialog_p99: SlaEntry, cover_max: SlaEntry, cover_spread: SlaEntry,
                        energy: SlaEntry | None = None, fixture_delay_s: float = 0.0,
                        fixture_calibrated: bool | None = None, trials: int | None = None,
                        readings: int | None = None, setup: thermal_check.ThermalSetup | None = None,
                        watch: thermal_check.Watch | None = None) -> CheckResult:
    """Claims 1, 2 (with a scope), 6's energy per dialog (with a scope, the power analyzer, its
    battery emulation set up, and the `energy` entry) and 7 (with probes) from one study; counts
    default to what the entries need (ENTRIES: the metric ids that usually hold them). `watch`
    looks at the chamber in the cover loop: an alarm there is a ChamberStopped carrying the voice
    phase's verdicts and the loop's readings."""
    voice = {"latency_p99": latency_p99, "latency_std": latency_std, "dialog_p99": dialog_p99}
    if setup is None:
        setup = thermal_check.setup_for(cover_max)
    count = trials if trials is not None else voice_check.trials_needed(*voice.values())
    needed = readings if readings is not None else max(cover_max.n_required, cover_spread.n_required)
    energy_entry = energy if supply is not None and scope is not None else None

    def more_trials(taken: voice_check.VoiceTrials) -> int:
        """The internal pilot: trials the claims still need at the effective size of those taken."""
        judged = _voice_trial_verdicts(taken, latency_p99=_as_block(latency_p99), latency_std=_as_block(latency_std),
                                       dialog_p99=_as_block(dialog_p99))
        return max(((v.n_required or 0) - (v.n or 0) for v in judged if v.outcome is Outcome.INSUFFICIENT),
                   default=0)

    run = run_sustained_use(scope, stimulus, thermal, device, count, needed, fixture_delay_s=fixture_delay_s,
                            fixture_calibrated=fixture_calibrated, setup=setup, supply=supply,
                            energy_dialogs=power_check.energy_dialogs(energy_entry) if energy_entry else 0,
                            capacity_wh=power_check.battery_capacity_wh(energy_entry) if energy_entry else None,
                            watch=watch, more_trials=more_trials if trials is None else None)
    raw: dict = {}
    dialog_v: list[Verdict] = []
    if scope is not None:
        dialog_v = _sustained_voice_verdicts(run, **voice, raw=("voice-trials", "voice-waveforms"))
        raw.update({"voice-trials": {**run.trials.raw(), "cover_c": np.asarray(run.cover_during_trials)},
                    "voice-waveforms": run.trials.raw_waveforms(),
                    **{v.name: {"samples": voice_check.verdict_samples(run.trials, v)} for v in dialog_v}})
    if run.energy is not None and energy_entry is not None:  # swept only when the entry asks for it
        n = len(run.energy.energy_j)
        dialog_v += _energy_verdicts(run.energy, energy_entry, raw=("dialog-energy",),
                                                note=f"the study's first {n} voice trials, each swept until the "
                                                     f"phone was idle again")
        raw["dialog-energy"] = run.energy.raw()
    if run.stopped is not None:  # what the voice phase measured is judged and travels with the stop
        run.stopped.partial = CheckResult(dialog_v, {**raw, **run.stopped.partial.raw}, measurement=run)
        raise run.stopped
    cover_v: list[Verdict] = []
    if run.thermal is not None:
        before = f"after {len(run.trials)} voice trials ({run.voice_s:.0f} s, the warm-up's first part)"
        cover_v = _thermal_verdicts(run.thermal, cover_max=cover_max, cover_spread=cover_spread,
                                                 note=before if scope is not None else "")
        raw.update({"cover-temperature": run.thermal.raw(), "cover-spread": run.thermal.raw_spread()})
    return CheckResult([*dialog_v, *cover_v], raw, measurement=run)
