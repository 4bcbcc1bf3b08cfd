"""The A/B on a station: each unit a phone in its bay, its builds installed by the catalogue's
installer, one fixed workload per segment measured through the checks' own measurement functions.

A segment is short and always the same (`Workload`), so two builds' segments differ only by the
build and by noise:

- inferences: `inferences` generates of `tokens` tokens, each on a fresh prompt case, their
  tokens checked against the bench's reference (bench.checks.tokens.run_inferences); first token
  is the median of the judged first tokens (request to the first correct token's arrival), token
  median the median gap between arrivals. Host arrivals on the station clock only: a phone whose
  output the host does not see is refused, its own timestamps are never a measurement.
- generate: one fixed generate of `generate_tokens` digitized whole, its window's mean V x I
  (bench.checks.power.measure_sustained_power, after a short warm-up generate that sizes the sweep).
- dialogs: `dialogs` spoken questions through the stimulus, each swept from the stimulus until the
  phone is idle again (bench.checks.power.measure_dialog_energy); their mean energy (J) and mean
  window (s) go to the segment's raw record, from which the runner states energy per dialog at the
  A/B's reference length and dialog length (bench/ab/dialogs.py).

Before its first segment each unit is put in its shipped numerics (the overflow adapter its
fingerprint assigns, as the runtime suite does: its tokens can then be checked) with its supply
as its battery and the stimulus armed; an install that drops the adapter gets it back. All of
it is on the unit's station clock, so it is lab time.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phonebench.core import signing
from phonebench.core.errors import InvalidMeasurement, UnsupportedCapability, UsageError
from phonebench.core.station import StationConfig
from phonebench.drivers.device import Device
from phonebench.drivers.runtime import RuntimeClient
from ..checks import power, tokens, voice
from ..phone.adapters import shipped_numerics
from ..results.builds import phone_model
from ..specs.profiles import ProfileLibrary, load_library
from ..specs.sla import load_profile
from ..station.owner import StationOwner
from .dialogs import dialog_raw
from .gates import FIRST_TOKEN, GATES, SUSTAINED_POWER, TOKEN_MEDIAN
from .protocol import Measured
from .records import Installed, Unit

log = logging.getLogger(__name__)

Installer = Callable[[Device, RuntimeClient, str], Installed]  # puts a build on a phone (bench/ab/install.py)
SWEEP_CHUNK_S = 4.5  # a dialog's first sweep: about one answer (the energy check's 8 s would idle 3 s a dialog)


@dataclass(frozen=True)
class Workload:
    """One segment's fixed work (docs/ab-and-bisect.md: why these sizes)."""

    inferences: int = 100  # first token's block spread ~1.1 % on the emulated fleet: 3 % in <= 10 blocks
    tokens: int = 6
    generate_tokens: int = 48  # sustained power's spread is ~0.03 %: a short generate is plenty
    dialogs: int = 1  # at a fixed length one dialog's energy scatters ~0.1 %; one keeps the plan within 30 lab min


@dataclass
class _Bay:
    unit: Unit
    device: Device
    client: RuntimeClient
    supply: Any | None
    stimulus: Any | None
    library: ProfileLibrary  # the signed firmware profiles its adapter comes from
    adapter: str | None = None  # the active adapter of its shipped numerics


class StationBench:
    """bench/ab/protocol.AbBench over a station's phones."""

    def __init__(self, bays: Sequence[_Bay], installer: Installer, workload: Workload = Workload()) -> None:
        self._bays = {b.unit.name: b for b in bays}
        self.installer, self.workload = installer, workload
        self.capacity_wh = power.battery_capacity_wh(load_profile("default").get(power.ENERGY))

    def units(self) -> Sequence[Unit]:
        return [b.unit for b in self._bays.values()]

    def now(self, unit: str) -> float:
        clock = self._bays[unit].client.clock
        assert clock is not None  # open_bench refuses a unit without one
        return clock.now()

    def install(self, unit: str, build: str) -> Installed:
        bay = self._bays[unit]
        installed = self.installer(bay.device, bay.client, build)
        if bay.adapter is not None and _active_adapter(bay.client) != bay.adapter:
            log.info("%s: build %s dropped the adapter; its shipped numerics again", unit, build)
            _numerics(bay)
        return installed

    def segment(self, unit: str, metrics: Sequence[str]) -> Measured:
        bay, work = self._bays[unit], self.workload
        parts = {GATES[m].part for m in metrics}
        values: dict[str, float] = {}
        samples: dict[str, int] = {}
        findings: list[str] = []
        raw: dict[str, float] = {}
        if "inferences" in parts:
            runs = tokens.run_inferences(bay.client, work.inferences, work.tokens)
            if not runs.observed:
                raise InvalidMeasurement(f"{unit}: the host saw none of the tokens arrive (only the phone's own "
                                         "timestamps): an A/B needs the station clock and a streaming transport")
            first, gaps = runs.first_token_ms, np.concatenate(runs.gaps_ms) if runs.gaps_ms else np.empty(0)
            values[FIRST_TOKEN], samples[FIRST_TOKEN] = _median(first, unit, FIRST_TOKEN), int(first.size)
            values[TOKEN_MEDIAN], samples[TOKEN_MEDIAN] = _median(gaps, unit, TOKEN_MEDIAN), int(gaps.size)
            if runs.fabricated:
                findings.append(f"{len(runs.fabricated)} of {work.inferences} inferences streamed tokens that are not "
                                "the model's (a wrong first token is no first token)")
        if "generate" in parts:
            runs_w = power.measure_sustained_power(self._need(bay.supply), bay.device, 1,
                                                   tokens=work.generate_tokens,
                                                   sizing=power.SweepSizing(warmup_tokens=8, rest_s=0.5))
            values[SUSTAINED_POWER], samples[SUSTAINED_POWER] = float(runs_w.means_w[0]), int(runs_w.runs[0].size)
            if runs_w.truncated:
                findings.append("the generate outlasted its sweep (window cut short)")
        if "dialogs" in parts:
            energy = power.measure_dialog_energy(self._need(bay.supply),
                                                 self._need(bay.stimulus), work.dialogs,
                                                 capacity_wh=self.capacity_wh, chunk_s=SWEEP_CHUNK_S, keep_traces=0)
            # Raw: the runner states the dialog gates from it at the A/B's reference length (bench/ab/dialogs.py).
            raw.update(dialog_raw(energy.energy_j, energy.window_s))
            if energy.open_ended:
                findings.append(f"{energy.open_ended} dialog(s) never returned to idle within the sweep limit")
        return Measured(values, samples, tuple(findings), raw)

    @staticmethod
    def _need(instrument: Any | None) -> Any:
        assert instrument is not None  # open_bench refuses a bay without what the gates need
        return instrument


@contextlib.contextmanager
def open_bench(station: StationConfig, duts: Sequence[str] | None, metrics: Sequence[str], installer: Installer,
               workload: Workload = Workload()) -> Iterator[StationBench]:
    """Every bay's phone (those named in `duts`, when given) ready for segments: its own owner, its
    station clock, its instruments the gates need, shipped numerics, battery emulation, the
    stimulus armed. Closed after."""
    roles = {r for m in metrics for r in GATES[m].needs}
    views = [station.for_bay(b) for b in station.bay_names()] if station.multi_bay else [station]
    with contextlib.ExitStack() as stack:
        # the shipped numerics' adapters are signed: trusted as the session trusts them
        stack.enter_context(signing.trusting(station.name, station.trusts_development_key))
        library = load_library()
        bays = []
        for view in views:
            wanted = [d.name for d in view.duts if not duts or d.name in duts]
            if wanted:
                owner = stack.enter_context(StationOwner(view))
                bays += [_open_bay(owner, name, roles, library) for name in wanted]
        missing = sorted(set(duts or ()) - {b.unit.name for b in bays})
        if missing:
            raise InvalidMeasurement(f"no phone {', '.join(missing)} on station {station.name!r}",
                                     hint=f"its phones: {', '.join(d.name for d in station.duts)}")
        yield StationBench(bays, installer, workload)


def _open_bay(owner: StationOwner, dut: str, roles: set[str], library: ProfileLibrary) -> _Bay:
    slot = owner.phone(dut)
    device, identity = slot.opened(), slot.identified()
    client = RuntimeClient(device, clock=owner.clock(dut))
    if not client.observes:
        raise InvalidMeasurement(f"{dut}: no station clock or streaming transport: the A/B would have only the "
                                 "phone's own timestamps", hint="give the station a clock instrument")
    missing = sorted(r for r in roles if r not in owner.station.instruments)
    if missing:  # said before any segment, not as a lost phone later
        raise UsageError(f"{dut}: its bay has no {', '.join(missing)}, which the gates asked for need",
                         hint="leave those gates out (--metric), or wire the instrument in the station file")
    supply = owner.instrument("supply") if "supply" in roles else None
    stimulus = owner.instrument("stimulus") if "stimulus" in roles else None
    if supply is not None:
        power.battery_emulation(supply)
    if stimulus is not None:
        voice.arm_stimulus(stimulus)
    bay = _Bay(Unit(dut, phone_model(identity.to_dict(), fallback=dut)), device, client, supply, stimulus, library)
    _numerics(bay)
    return bay


def _numerics(bay: _Bay) -> None:
    """The unit's shipped numerics (the adapter its fingerprint assigns); none when it has no probes."""
    try:
        outcome = shipped_numerics(bay.client, bay.library)
    except UnsupportedCapability:
        return
    bay.adapter = outcome.sha256 if outcome is not None else None


def _active_adapter(client: RuntimeClient) -> str | None:
    try:
        return client.adapter_status().active
    except UnsupportedCapability:
        return None


def _median(samples: np.ndarray, unit: str, metric: str) -> float:
    if samples.size == 0:
        raise InvalidMeasurement(f"{unit}: no {metric} sample in the segment (no correct token arrived)",
                                 hint="is the phone in its shipped numerics? `bench fingerprint --apply`")
    return float(np.median(samples))
