"""Internal runtime counters (claim 14), read after a run when the runtime exposes them.

The counters are reset, a fixed workload runs, and the counters are read. Each rate is
recomputed from its raw counts when the runtime gives them (a ratio the runtime reports is only
used when it gives no counts), and judged against its target in the claim's direction (a miss
or fault rate at most, a utilisation or accuracy at least). A counter the runtime does not
expose is recorded as not measured, never failed: the claim itself says "if the runtime exposes
them".
"""
from __future__ import annotations

import logging

from bench.checks import CheckResult, Tick, named, no_tick
from bench.checks.tokens import run_inferences
from bench.sla import SlaEntry
from bench.core.verdict import Outcome, Verdict
from drivers.runtime import RuntimeClient

log = logging.getLogger(__name__)

# counter -> (numerator count, denominator count)
COUNTERS = {
    "kv_cache_miss_rate": ("kv_misses", "kv_lookups"),
    "mac_utilisation": ("mac_busy_cycles", "mac_total_cycles"),
    "memory_bandwidth_utilisation": ("dram_bytes", "dram_peak_bytes"),
    "weight_page_fault_rate": ("weight_page_faults", "weight_page_reads"),
    "prefetch_accuracy": ("prefetch_useful", "prefetch_issued"),
}
WORKLOAD_INFERENCES = 20
WORKLOAD_TOKENS = 32


def counters_check(runtime: RuntimeClient, entries: dict[str, SlaEntry], *, inferences: int = WORKLOAD_INFERENCES,
                   tokens: int = WORKLOAD_TOKENS, tick: Tick = no_tick) -> CheckResult:
    """entries: counters_<name> for each name in COUNTERS."""
    runtime.counters(reset=True)
    run_inferences(runtime, inferences, tokens, tick=tick)
    data = runtime.counters()
    verdicts = []
    for name, (num, den) in COUNTERS.items():
        metric = f"counters_{name}"
        if isinstance(data.get(num), (int, float)) and isinstance(data.get(den), (int, float)) and data[den] > 0:
            value, how = data[num] / data[den], f"{num} / {den} = {data[num]} / {data[den]}"
        elif isinstance(data.get(name), (int, float)):
            value, how = float(data[name]), "the runtime's own ratio (no raw counts)"
        else:
            verdicts.append(Verdict(metric, None, entries[metric].unit, Outcome.INFO, statistic="value",
                                    raw=["counters"], detail="not exposed by this runtime"))
            continue
        verdict = named(entries[metric].evaluate(value), metric, raw="counters", tokens=data.get("tokens"))
        verdict.detail = f"{how}; {verdict.detail}"
        verdicts.append(verdict)
    return CheckResult(verdicts, {"counters": data})
