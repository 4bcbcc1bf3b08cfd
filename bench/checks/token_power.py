"""Token timing against the power trace: a second, independent witness of how long inference took.

Where a power analyzer feeds the phone (battery emulation), an inference shows in its digitizer
trace as current well above idle from prompt processing to the last decode step. For a few
inferences the bench digitizes the current while the tokens stream, finds the active span in
the trace (the smoothed current above halfway between idle and busy, first to last crossing)
and compares it with the span the host saw (start line to done line on the station clock) and
with the span the runtime reports. They must agree within the trace's edge resolution (the
smoothing window plus two samples) plus the link's tolerance; the verdict's value is the
largest difference between the host's span and the power trace's, and its detail gives the
report's. A station clock whose spans run at another rate than the trace's (outside
phone.link.CLOCK_RATE_RANGE), or that failed the link's pause check, is a station error naming the
clock: INVALID, never the phone's FAIL.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from . import CheckResult
from .power import CURRENT_HINT, DEFAULT_INTERVAL_S, SMOOTH_S, _smooth, battery_emulation
from .tokens import PROMPT_SEEDS, PROMPT_TOKENS
from ..phone.link import CLOCK_RATE_RANGE, ClockDomainProblem, measure_link
from phonebench.core.errors import InvalidMeasurement
from phonebench.core import judge
from phonebench.core.judge import compare
from phonebench.core.verdict import Evidence, Finding, FindingKind
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.runtime import RuntimeClient

log = logging.getLogger(__name__)

METRIC = "token_timing_power_consistency"
RUNS = 3
TOKENS = 32
PRE_S = 0.3       # idle before each sweep's trigger: the baseline
MIN_RISE_A = 0.05  # an inference must lift the current at least this much over idle


def active_span_s(current_a: np.ndarray, interval_s: float, pretrigger: int) -> float:
    """Seconds between the first and last sample where the smoothed current is above halfway
    from idle (the pre-trigger median) to busy (its 90th percentile)."""
    smooth = _smooth(current_a.astype(np.float64), interval_s)
    idle = float(np.median(current_a[:pretrigger])) if pretrigger else float(np.min(smooth))
    busy = float(np.percentile(smooth, 90))
    if busy - idle < MIN_RISE_A:
        raise InvalidMeasurement(f"no inference visible in the current trace (idle {idle:.3f} A, busy {busy:.3f} A)",
                                 hint="is the phone powered from this analyzer output (battery emulation on)?")
    above = np.flatnonzero(smooth > (idle + busy) / 2.0)
    return float((above[-1] - above[0]) * interval_s)


def power_cross_check(supply: PowerAnalyzer, runtime: RuntimeClient, *, runs: int = RUNS, tokens: int = TOKENS,
                      interval_s: float = DEFAULT_INTERVAL_S) -> CheckResult:
    link = measure_link(runtime)
    if link is None:
        verdict = judge.recorded(METRIC, None, "ms", statistic="max", raw=("token_power",),
                                 detail="no station clock or stream: nothing to compare the power trace with")
        return CheckResult([verdict], {})
    battery_emulation(supply)
    device = runtime.device
    interval_s = supply.digitizer_interval(interval_s)
    pre = int(round(PRE_S / interval_s))
    first = runtime.generate(tokens, seed=PROMPT_SEEDS[0], prompt_tokens=PROMPT_TOKENS)
    expected = first.done_time - first.start_time
    power, host, said = [], [], []
    for k in range(runs):
        device.run(["sleep", f"{PRE_S + 0.2:g}"])
        supply.arm_digitizer(pre + int(math.ceil((1.5 * expected + 0.5) / interval_s)), interval_s,
                             pretrigger_points=pre, quantities=("current",))
        supply.trigger()
        gen = runtime.generate(tokens, seed=PROMPT_SEEDS[k % len(PROMPT_SEEDS)], prompt_tokens=PROMPT_TOKENS)
        trace = supply.fetch().require_valid()
        arrivals = gen.arrivals
        if arrivals is None or arrivals.start_t is None or arrivals.done_t is None:
            raise InvalidMeasurement(f"{device.name}: the generate's start and done lines were not both observed")
        if trace.current_a is None:
            raise InvalidMeasurement(f"{supply.name}: the digitized trace has no current", hint=CURRENT_HINT)
        power.append(active_span_s(trace.current_a, trace.interval_s, pre))
        host.append(arrivals.done_t - arrivals.start_t)
        said.append(gen.done_time - gen.start_time)
        expected = max(expected, host[-1])
    tolerance_s = SMOOTH_S + 2.0 * interval_s + link.tolerance_s
    host_off = float(np.max(np.abs(np.subtract(host, power))))
    said_off = float(np.max(np.abs(np.subtract(said, power))))
    detail = (f"host spans {_ms(host)} ms, power trace {_ms(power)} ms, runtime report {_ms(said)} ms "
              f"(tolerance {1000 * tolerance_s:.3g} ms: 10 ms smoothing, two samples, the link)")
    verdict = compare(METRIC, 1000.0 * host_off, "ms", 1000.0 * tolerance_s, "<=", statistic="max", n=runs,
                      evidence=Evidence.MEASURED, detail=detail, raw=("token_power",),
                      extra={"reported_off_ms": 1000.0 * said_off},
                      description="Inference span on the station clock vs the active span in the current trace")
    if said_off > tolerance_s:
        # The corroboration rule: a report the power trace contradicts fails.
        verdict = judge.found(verdict, Finding(FindingKind.CONTRADICTED, f"the runtime's reported spans disagree "
                                                                        f"with the power trace by up to "
                                                                        f"{1000 * said_off:.4g} ms"))
    problem = link.domain_problem or _clock_against_trace(link.clock, host, power)
    if problem is not None:
        verdict = problem.invalidate(verdict)
    return CheckResult([verdict], {"token_power": {"power_span_s": np.asarray(power), "host_span_s": np.asarray(host),
                                                   "reported_span_s": np.asarray(said)}})


def _clock_against_trace(clock: str, host: list[float], power: list[float]) -> ClockDomainProblem | None:
    """The station clock's rate against the power analyzer's sample clock over the same spans."""
    rate = float(np.sum(host) / np.sum(power))
    low, high = CLOCK_RATE_RANGE
    if low <= rate <= high:
        return None
    return ClockDomainProblem(clock, f"inference spans of {_ms(host)} ms on it, {_ms(power)} ms in the power trace",
                              rate)


def _ms(values: list[float]) -> str:
    return ", ".join(f"{1000 * v:.1f}" for v in values)
