"""Is this bay's supply wired to this bay's phone? The cables, not the station file, decide.

A technician who swaps two bays' supply cables leaves every address in the station file right and
every identity honest, and each bay then judges its phone by another phone's current: with phones
alike it may even pass. Physics tells: the bench makes its phone work in bursts and rests of
random lengths and the supply must show that pattern (an NPU at work draws about a watt above
idle). A supply
that does not follow the pattern of work only the bench chose is not on this phone, and the
verdict names the instrument, the phone and the likely mix-up.
"""
from __future__ import annotations

import math

import numpy as np

from . import CheckResult
from .power import CURRENT_HINT, DEFAULT_INTERVAL_S, _smooth, battery_emulation
from .tokens import PROMPT_SEEDS, PROMPT_TOKENS
from phonebench.core.errors import InvalidMeasurement
from phonebench.core.verdict import Evidence, Outcome
from ..specs.sla import SlaEntry
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.runtime import RuntimeClient

METRIC = "supply_follows_this_phone_ms"
MIN_STEP_A = 0.1  # an inference lifts a phone's battery current by several tenths of an ampere
PRE_S = 0.3
BURSTS = 3
TOKENS = (8, 40)  # each burst's length in tokens, drawn from entropy
GAPS_S = (0.25, 0.9)  # rests between bursts, drawn from entropy


def active_segments(current_a: np.ndarray, interval_s: float, pretrigger: int) -> tuple[list[tuple[float, float]], float]:
    """(start, end) seconds of each stretch where the smoothed current is above halfway from idle
    (the pre-trigger median) to busy (its 90th percentile), and the step between the two."""
    smooth = _smooth(current_a, interval_s)
    idle = float(np.median(current_a[:pretrigger]))
    busy = float(np.percentile(smooth, 90))
    above = smooth > (idle + busy) / 2.0
    edges = np.flatnonzero(np.diff(above.astype(np.int8)))
    starts = list(edges[~above[edges]] + 1) if len(edges) else []
    ends = list(edges[above[edges]] + 1) if len(edges) else []
    if above[0]:
        starts.insert(0, 0)
    if above[-1]:
        ends.append(len(above))
    return [(a * interval_s, b * interval_s) for a, b in zip(starts, ends)], busy - idle


def supply_wiring_check(supply: PowerAnalyzer, runtime: RuntimeClient, *, follows: SlaEntry,
                        interval_s: float = DEFAULT_INTERVAL_S) -> CheckResult:
    """The bay's supply must show this phone's work in a pattern only the bench knows: bursts of
    inference of random lengths separated by random rests, drawn now from entropy. A supply on
    another phone sees that phone's own life, which cannot follow this pattern (not even another
    bay running the same test at the same moment). `follows` (metric supply_follows_this_phone_ms,
    bench/checks/targets.toml) bounds the largest burst or rest the supply saw off the pattern."""
    battery_emulation(supply)
    device = runtime.device
    interval_s = supply.digitizer_interval(interval_s)
    rng = np.random.default_rng()
    tokens = [int(t) for t in rng.integers(*TOKENS, size=BURSTS)]
    gaps = [float(g) for g in rng.uniform(*GAPS_S, size=BURSTS - 1)]
    pre = int(round(PRE_S / interval_s))
    budget_s = sum(0.2 + 0.06 * t for t in tokens) + sum(gaps) + 1.0
    device.run(["sleep", f"{PRE_S + 0.2:g}"])
    supply.arm_digitizer(pre + int(math.ceil(budget_s / interval_s)), interval_s, pretrigger_points=pre,
                         quantities=("current",))
    supply.trigger()
    bursts: list[float] = []
    for k, count in enumerate(tokens):
        gen = runtime.generate(count, seed=PROMPT_SEEDS[k % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS)
        arrivals = gen.arrivals
        if arrivals is not None and arrivals.start_t is not None and arrivals.done_t is not None:
            bursts.append(arrivals.done_t - arrivals.start_t)  # seen on the station clock
        else:
            bursts.append(gen.done_time - gen.start_time)
        if k < len(gaps):
            device.run(["sleep", f"{gaps[k]:.3f}"])
    trace = supply.fetch().require_valid()
    if trace.current_a is None:
        raise InvalidMeasurement(f"{supply.name}: the digitized trace has no current", hint=CURRENT_HINT)
    current = trace.current_a.astype(np.float64)
    segments, step = active_segments(current, trace.interval_s, pre)
    seen = [end - start for start, end in segments]
    rests = [segments[k + 1][0] - segments[k][1] for k in range(len(segments) - 1)]
    expected = f"bursts {_ms(bursts)} ms with rests {_ms(gaps)} ms"
    found = f"{len(segments)} burst(s) {_ms(seen)} ms, rests {_ms(rests)} ms, step {1000 * step:.0f} mA"
    if step < MIN_STEP_A or len(segments) != BURSTS:
        off_ms = np.array([np.inf])  # the pattern is not there at all
    else:
        off_ms = 1000.0 * np.abs(np.concatenate([np.subtract(seen, bursts), np.subtract(rests, gaps)]))
    detail = f"{trace.instrument}: {device.name} ran {expected}; the supply saw {found}"
    verdict = follows.evaluate(off_ms, evidence=Evidence.MEASURED, detail=detail, raw="wiring", n=BURSTS)
    if verdict.outcome is Outcome.FAIL:
        verdict = verdict.but(detail=f"cross-wired? {trace.instrument} does not follow {device.name}: {device.name} ran "
                                     f"{expected}, the supply saw {found}; its output feeds another phone: check this "
                                     f"bay's supply cable (two bays' cables swapped?) before trusting any power result")
    return CheckResult([verdict], {"wiring": {"current_a": current, "interval_s": trace.interval_s,
                                              "bursts_s": np.asarray(bursts), "rests_s": np.asarray(gaps)}})


def _ms(values: list[float]) -> str:
    return ", ".join(f"{1000 * v:.0f}" for v in values) or "none"
