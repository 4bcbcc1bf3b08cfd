"""NPU thermal trip soak (claim 8): trip at 72 °C, layers migrate to the CPU, the process survives,
long dialogs succeed.

The soak pins the NPU at its burst clock (`npu.perf_profile = burst`, the thermal worst case a
lab uses to reach the trip at room ambient) and runs long dialogs back to back. For each dialog:
the runtime's streamed thermal events (migrate / restore, with the NPU temperature it acted on),
whether it completed (a killed process ends the stream with exit 137), and a status read (NPU
and CPU temperature, layers on the CPU, the process id: a new pid is a restarted, i.e. killed,
runtime).

- Trip temperature: median NPU temperature of the migrations that started from all layers on
  the NPU (the trips); the device's own thermal zones are the source, as for any sensor check.
  No trip in the soak makes the value missing: the claim was not shown (invalid).
- Process kills: dialogs that died (exit 137/143) or a pid change between reads, whichever count
  is larger.
- Long-dialog success: dialogs that completed with every requested token.

Afterwards the perf profile is restored and the phone rests until it is near its starting
temperatures, so the next check does not inherit a hot phone.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.checks import CheckResult, Tick, named, no_tick
from bench.checks.tokens import PROMPT_SEEDS, PROMPT_TOKENS
from bench.sla import SlaEntry
from bench.core.verdict import Outcome, Verdict
from drivers.runtime import RuntimeClient

log = logging.getLogger(__name__)

SOAK_PROFILE = "burst"
DIALOG_TOKENS = 128
COOL_STEP_S = 300.0
COOL_MAX_S = 3600.0
COOL_MARGIN_C = 1.5


@dataclass
class SoakLog:
    t: list[float] = field(default_factory=list)
    npu_c: list[float] = field(default_factory=list)
    cpu_c: list[float] = field(default_factory=list)
    skin_c: list[float] = field(default_factory=list)
    layers_on_cpu: list[int] = field(default_factory=list)
    pids: list[int | None] = field(default_factory=list)
    completed: list[bool] = field(default_factory=list)
    killed: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def read_status(self, runtime: RuntimeClient) -> None:
        status = runtime.status()
        temps = status.temperatures_c
        self.t.append(status.t)
        self.npu_c.append(float(temps.get("npu", np.nan)))
        self.cpu_c.append(float(temps.get("cpu", np.nan)))
        self.skin_c.append(float(temps.get("skin", np.nan)))
        self.layers_on_cpu.append(int(status.thermal.get("layers_on_cpu", 0)))
        self.pids.append(status.pid)

    @property
    def pid_changes(self) -> int:
        known = [p for p in self.pids if p is not None]
        return sum(a != b for a, b in zip(known, known[1:]))

    @property
    def trip_temperatures(self) -> list[float]:
        """NPU temperature at each trip: a migration that started with no layers on the CPU."""
        trips, on_cpu = [], 0
        for event in self.events:
            if event.get("action") == "migrate" and on_cpu == 0 and "npu_c" in event:
                trips.append(float(event["npu_c"]))
            on_cpu = int(event.get("layers_on_cpu", on_cpu))
        return trips


def soak(runtime: RuntimeClient, dialogs: int, *, tokens: int = DIALOG_TOKENS, perf_profile: str = SOAK_PROFILE,
         tick: Tick = no_tick) -> SoakLog:
    """Run the soak and leave the phone as found (perf profile, near its starting temperature)."""
    log_ = SoakLog()
    previous = runtime.config_get("npu.perf_profile")
    log_.read_status(runtime)
    start_npu, start_skin = log_.npu_c[0], log_.skin_c[0]
    runtime.config_set("npu.perf_profile", perf_profile)
    try:
        for i in range(dialogs):
            gen = runtime.generate(tokens, seed=PROMPT_SEEDS[i % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS,
                                   allow_incomplete=True)
            log_.completed.append(gen.completed and len(gen.tokens) == tokens)
            log_.killed += int(not gen.completed)
            log_.events.extend(gen.thermal_events)
            log_.read_status(runtime)
            tick(1)
    finally:
        runtime.config_set("npu.perf_profile", previous)
        _cool_down(runtime, start_npu, start_skin)
    return log_


def _cool_down(runtime: RuntimeClient, npu_c: float, skin_c: float) -> None:
    rested = 0.0
    while rested < COOL_MAX_S:
        temps = runtime.status().temperatures_c
        if temps.get("npu", npu_c) <= npu_c + COOL_MARGIN_C and temps.get("skin", skin_c) <= skin_c + COOL_MARGIN_C:
            return
        runtime.device.run(["sleep", f"{COOL_STEP_S:g}"], timeout_s=COOL_STEP_S + 60.0)
        rested += COOL_STEP_S
    log.warning("%s: still warm after resting %.0f s", runtime.device.name, rested)


def thermal_trip_check(runtime: RuntimeClient, trip: SlaEntry, kills: SlaEntry, success: SlaEntry, *,
                       dialogs: int | None = None, tokens: int = DIALOG_TOKENS, tick: Tick = no_tick) -> CheckResult:
    dialogs = max(dialogs or 0, success.n_required)
    log_ = soak(runtime, dialogs, tokens=tokens, tick=tick)
    trips = log_.trip_temperatures
    trip_c = float(np.median(trips)) if trips else None
    t = np.asarray(log_.t) - log_.t[0]
    trace = {"t": t, "y": np.asarray(log_.npu_c), "y2": np.asarray(log_.cpu_c),
             "layers_on_cpu": np.asarray(log_.layers_on_cpu, dtype=float), "skin": np.asarray(log_.skin_c)}
    cpu_at_trips = [e["cpu_c"] for e in log_.events if e.get("action") == "migrate" and "cpu_c" in e]
    trip_v = named(trip.evaluate(trip_c), "npu_trip_temperature", raw="soak_trace", plot="trace",
                   labels=["NPU", "CPU"], y_label="degC", x_label="soak time (s)", trips=len(trips),
                   cpu_c_at_trips=cpu_at_trips[:50])
    if trip_c is None:
        hottest = np.nanmax(log_.npu_c)
        trip_v.detail = f"no thermal trip in {dialogs} dialogs (max NPU {hottest:.1f} degC); {trip_v.detail}"
    kill_count = max(log_.killed, log_.pid_changes)
    kills_v = named(kills.evaluate(kill_count), "npu_trip_process_kills", raw="soak_events",
                    killed_streams=log_.killed, pid_changes=log_.pid_changes)
    ok = np.asarray(log_.completed, dtype=bool)
    success_v = named(success.evaluate(ok), "npu_trip_long_dialog_success", raw="soak_events", tokens=tokens)
    migrations = sum(1 for e in log_.events if e.get("action") == "migrate")
    info = [
        Verdict("thermal_throttle_events", float(migrations), "events", Outcome.INFO, statistic="count", n=dialogs,
                raw=["soak_events"], detail=f"{len(trips)} trips, {migrations} migration steps to the CPU"),
        Verdict("thermal_soak_npu_max", float(np.nanmax(log_.npu_c)), "degC", Outcome.INFO, statistic="max",
                n=len(log_.npu_c), raw=["soak_trace"], detail="hottest NPU reading between dialogs"),
    ]
    raw = {"soak_trace": trace,
           "soak_events": {"events": log_.events, "completed": log_.completed, "pids": log_.pids,
                           "killed_streams": log_.killed, "dialog_tokens": tokens}}
    return CheckResult([trip_v, kills_v, success_v, *info], raw)
