"""Token timing checks (claims 3, 4, 5): first token, per-token jitter, latency under GPU load.

All times come from the runtime's own event timestamps (device clock), so the host's speed and
the transport never enter a latency. Prompts come from a fixed set (`PROMPT_SEEDS`), cycled: a
lab runs the same dialogs every night, and a runtime may cache what it likes.

- First token: start event to first token event, one sample per inference.
- Per-token latency: the gaps between consecutive token events. The runs (inferences) are handed
  to the SLA entry as a list: with independence "block" they are one consecutive series whose
  autocorrelation sets the effective sample size, with "run" each inference is a unit.
- Contention: a GPU load runs on the phone while inferences are issued on an open-loop schedule
  (one every `period`). Latencies are measured from the intended start: a run that starts late
  (the previous one overran its slot) has that lateness charged to its first token gap, and a gap
  longer than the expected token interval also counts the tokens that were due during it
  (HdrHistogram's expected-interval correction). A runtime that falls behind under load cannot
  hide the backlog by simply emitting fewer, later tokens.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from bench.checks import CheckResult, Tick, named, no_tick
from bench.core.errors import InvalidMeasurement
from bench.sla import SlaEntry
from drivers.device import Device
from drivers.gpuload import GpuLoad
from drivers.runtime import Generation, RuntimeClient

log = logging.getLogger(__name__)

PROMPT_SEEDS = (11, 12, 13, 14)
PROMPT_TOKENS = 16
STD_TOKENS = 16           # tokens per inference in the jitter series
CONTENTION_TOKENS = 48
CONTENTION_BASELINE_RUNS = 3
LOAD_SETTLE_S = 2.0
SCHEDULE_SLACK = 1.5      # open-loop period = this x the unloaded run's duration


@dataclass
class TokenRuns:
    """Timestamps of consecutive inferences (device clock)."""

    generations: list[Generation] = field(default_factory=list)

    @property
    def first_token_ms(self) -> np.ndarray:
        return np.array([1000.0 * g.first_token_s for g in self.generations if g.token_times])

    @property
    def gaps_ms(self) -> list[np.ndarray]:
        return [1000.0 * np.diff(np.asarray(g.token_times)) for g in self.generations if len(g.token_times) > 1]


def run_inferences(runtime: RuntimeClient, n: int, max_tokens: int, *, prompt_tokens: int = PROMPT_TOKENS,
                   seeds: tuple[int, ...] = PROMPT_SEEDS, tick: Tick = no_tick) -> TokenRuns:
    """n consecutive inferences over the prompt set."""
    runs = TokenRuns()
    for i in range(n):
        runs.generations.append(runtime.generate(max_tokens, seed=seeds[i % len(seeds)], prompt_tokens=prompt_tokens))
        tick(1)
    return runs


def first_token_check(runtime: RuntimeClient, entry: SlaEntry, *, n: int | None = None,
                      tick: Tick = no_tick) -> CheckResult:
    """Claim 3: first token (prompt processing + first decode) per inference, against the entry."""
    n = max(n or 0, entry.n_required)
    runs = run_inferences(runtime, n, max_tokens=2, tick=tick)
    samples = runs.first_token_ms
    verdict = named(entry.evaluate(samples), entry.metric, raw="first_token", plot="samples")
    return CheckResult([verdict], {"first_token": {"samples": samples}})


def token_std_check(runtime: RuntimeClient, entry: SlaEntry, *, inferences: int | None = None,
                    max_tokens: int = STD_TOKENS, tick: Tick = no_tick) -> CheckResult:
    """Claim 4: std of per-token latency over N consecutive inferences (the entry's parameter)."""
    n = inferences or int(entry.parameters.get("consecutive_inferences", 1000))
    runs = run_inferences(runtime, n, max_tokens=max_tokens, tick=tick)
    gaps = runs.gaps_ms
    verdict = named(entry.evaluate(gaps), entry.metric, raw="token_latencies", plot="samples",
                    inferences=n, tokens_per_inference=max_tokens)
    raw = {"samples": np.concatenate(gaps) if gaps else np.empty(0),
           "run": np.concatenate([np.full(g.size, i) for i, g in enumerate(gaps)]) if gaps else np.empty(0),
           "first_token_ms": runs.first_token_ms}
    return CheckResult([verdict], {"token_latencies": raw})


def expected_interval_correction(gaps_ms: np.ndarray, expected_ms: float) -> np.ndarray:
    """Each gap, plus (for a gap longer than the expected interval) the latencies of the tokens that
    were due during it: g - E, g - 2E, ... while at least E (HdrHistogram recordValueWithExpectedInterval)."""
    out: list[float] = []
    for gap in gaps_ms:
        out.append(float(gap))
        missing = gap - expected_ms
        while expected_ms > 0 and missing >= expected_ms:
            out.append(float(missing))
            missing -= expected_ms
    return np.asarray(out)


def contention_check(device: Device, runtime: RuntimeClient, entry: SlaEntry, *, runs: int | None = None,
                     tokens: int = CONTENTION_TOKENS, target: float = 0.75, kind: str = "video+call",
                     tick: Tick = no_tick) -> CheckResult:
    """Claim 5: token latencies from the intended start while a GPU load keeps the GPU busy."""
    runs = runs or max(2 * entry.min_runs, math.ceil(entry.min_samples / max(tokens - 1, 1)), 10)
    load = GpuLoad(device)
    load.status()  # a phone without the load generator is skipped before any work
    baseline = run_inferences(runtime, CONTENTION_BASELINE_RUNS, tokens)
    expected_ms = float(np.median(np.concatenate(baseline.gaps_ms)))
    run_s = float(np.median([g.done_time - g.start_time for g in baseline.generations]))
    period = SCHEDULE_SLACK * run_s
    latencies: list[np.ndarray] = []
    lateness: list[float] = []
    busy: list[float] = []
    load.start(target, kind)
    try:
        device.run(["sleep", f"{LOAD_SETTLE_S:g}"])
        busy.append(_busy(load))
        t0 = runtime.status().t
        last_done = t0
        for k in range(runs):
            intended = t0 + k * period
            if intended > last_done:
                device.run(["sleep", f"{intended - last_done:.6f}"], timeout_s=intended - last_done + 30.0)
            gen = runtime.generate(tokens, seed=PROMPT_SEEDS[k % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS)
            last_done = gen.done_time
            late_ms = max(0.0, 1000.0 * (gen.start_time - intended))
            gaps = 1000.0 * np.diff(np.asarray(gen.token_times))
            if gaps.size:
                gaps[0] += late_ms
            latencies.append(expected_interval_correction(gaps, expected_ms))
            lateness.append(late_ms)
            busy.append(_busy(load))
            tick(1)
    finally:
        load.stop()
    gpu_load = float(np.mean(busy))
    verdict = named(entry.evaluate(latencies, gpu_load=gpu_load), entry.metric, raw="token_latencies_gpu_load",
                    plot="samples", gpu_load=gpu_load, expected_interval_ms=expected_ms, schedule_period_s=period,
                    max_start_lateness_ms=max(lateness) if lateness else None, load_kind=kind)
    raw = {"samples": np.concatenate(latencies) if latencies else np.empty(0),
           "run": np.concatenate([np.full(x.size, i) for i, x in enumerate(latencies)]) if latencies else np.empty(0),
           "start_lateness_ms": np.asarray(lateness), "gpu_busy": np.asarray(busy)}
    return CheckResult([verdict], {"token_latencies_gpu_load": raw})


def _busy(load: GpuLoad) -> float:
    state = load.status()
    if not state.running or state.gpu_busy is None:
        raise InvalidMeasurement(f"{load.device.name}: the GPU load is not running ({state})",
                                 hint="the load generator stopped by itself; check `gpuload status` on the phone")
    return float(state.gpu_busy)
