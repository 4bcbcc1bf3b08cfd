"""Internal runtime counters (claim 14), read after a run when the runtime exposes them.

The counters are reset, a fixed workload runs, and the counters are read. Each rate is
recomputed from its raw counts when the runtime gives them (a ratio the runtime reports is only
used when it gives no counts), and judged against its target in the claim's direction (a miss
or fault rate at most, a utilisation or accuracy at least). A counter the runtime does not
expose is recorded as not measured, never failed: the claim itself says "if the runtime exposes
them".

A counter is the phone's word, and so is everything else read over ADB (the runtime's status,
/proc/vmstat): no corroboration may rest on another number the phone supplies.

- MAC utilisation is held against physics: MAC units x NPU clock x decode time must give the
  operations the model does per token x the decode steps the host saw arrive (decode time: the
  token gaps on the station clock). The MAC units, ops per token and the clock are the entry's
  datasheet parameters (`npu_clock_mhz`: the SoC's clock in the profile the phone runs by
  default), never the runtime's status. Tolerance: the expanded (k=2) uncertainty of the
  physical figure (ops per token, clock, link jitter). Agreement: corroborated; disagreement:
  FAIL with both numbers. Without `npu_clock_mhz` the clock would be the phone's: reported.
- Weight page faults are compared with the kernel's major faults (/proc/vmstat pgmajfault,
  before and after, within three Poisson standard deviations): a phone that contradicts its own
  kernel FAILs, but agreement is still the phone's word (reported): a forger rewrites both.
- Memory-bandwidth utilisation is held against physics the same way: the decode steps the host
  saw x the bytes a step moves (the model's weights, scales, KV cache: `bytes_per_token`) over the
  SoC's DRAM peak (`dram_peak_gbps`) x the decode time on the station clock; datasheet figures in
  the entry's parameters, never the phone's.
- KV-cache misses and prefetch accuracy have no independent reading: reported.

A reported counter is kept and shown, and never a PASS (a profile cannot require less).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from . import CheckResult, Tick, no_tick
from .tokens import TokenRuns, run_inferences
from ..phone.link import ClockDomainProblem, measure_link
from phonebench.core.counters import COUNTER_RATIOS as COUNTERS
from phonebench.core import judge
from phonebench.core.verdict import Evidence, Finding, FindingKind, Uncertainty, UncertaintyComponent, Verdict
from ..specs.sla import SlaEntry
from phonebench.drivers.runtime import RuntimeClient

log = logging.getLogger(__name__)

# counters_check's entries (one per counter ratio) and the metric ids that hold them.
ENTRIES = {name: f"counters_{name}" for name in COUNTERS}
WORKLOAD_INFERENCES = 20
WORKLOAD_TOKENS = 32
VMSTAT = "/proc/vmstat"
FAULT_SIGMAS = 3.0


def read_major_faults(runtime: RuntimeClient) -> int | None:
    """The kernel's major page faults since boot (/proc/vmstat pgmajfault); None if unreadable."""
    result = runtime.device.shell(["cat", VMSTAT])
    for line in result.output.splitlines() if result.exit_code == 0 else []:
        name, _, value = line.partition(" ")
        if name == "pgmajfault" and value.strip().isdigit():
            return int(value)
    return None


def counters_check(runtime: RuntimeClient, *, kv_cache_miss_rate: SlaEntry, mac_utilisation: SlaEntry,
                   memory_bandwidth_utilisation: SlaEntry, weight_page_fault_rate: SlaEntry,
                   prefetch_accuracy: SlaEntry, inferences: int = WORKLOAD_INFERENCES, tokens: int = WORKLOAD_TOKENS,
                   tick: Tick = no_tick) -> CheckResult:
    """One entry per counter ratio in COUNTERS (ENTRIES: the metric ids that usually hold them)."""
    entries = {"counters_kv_cache_miss_rate": kv_cache_miss_rate, "counters_mac_utilisation": mac_utilisation,
               "counters_memory_bandwidth_utilisation": memory_bandwidth_utilisation,
               "counters_weight_page_fault_rate": weight_page_fault_rate,
               "counters_prefetch_accuracy": prefetch_accuracy}
    faults_before = read_major_faults(runtime) if hasattr(runtime, "device") else None
    runtime.counters(reset=True)
    runs = run_inferences(runtime, inferences, tokens, tick=tick)
    data = runtime.counters()
    faults_after = read_major_faults(runtime) if faults_before is not None else None
    cross = {"mac_utilisation": lambda v, e: _mac_plausibility(v, e, runtime, runs),
             "memory_bandwidth_utilisation": lambda v, e: _bandwidth_plausibility(v, e, runtime, runs),
             "weight_page_fault_rate": lambda v, e: _fault_plausibility(data, faults_before, faults_after)}
    verdicts = []
    for name, (num, den) in COUNTERS.items():
        metric = f"counters_{name}"
        if isinstance(data.get(num), (int, float)) and isinstance(data.get(den), (int, float)) and data[den] > 0:
            value, how = data[num] / data[den], f"{num} / {den} = {data[num]} / {data[den]}"
        elif isinstance(data.get(name), (int, float)):
            value, how = float(data[name]), "the runtime's own ratio (no raw counts)"
        else:
            verdicts.append(judge.recorded(metric, None, entries[metric].unit, statistic="value",
                                           raw=("counters",), detail="not exposed by this runtime"))
            continue
        check = cross[name](value, entries[metric]) if name in cross else None
        verdicts.append(_judge(entries[metric], metric, value, how, check, data.get("tokens")))
    return CheckResult(verdicts, {"counters": {**data, "vmstat_pgmajfault": [faults_before, faults_after]}})


class _Plausibility:
    """The counter against an independent figure: agree within `tolerance`, or not."""

    def __init__(self, reported: float, independent: float, tolerance: float, what: str,
                 uncertainty: Uncertainty | None = None, *, phones_word: bool = False) -> None:
        self.reported, self.independent, self.tolerance, self.what = reported, independent, tolerance, what
        self.uncertainty = uncertainty
        self.phones_word = phones_word  # the "independent" figure is itself the phone's: agreement proves nothing

    @property
    def agrees(self) -> bool:
        return abs(self.reported - self.independent) <= self.tolerance


def _judge(entry: SlaEntry, metric: str, value: float, how: str,
           check: _Plausibility | ClockDomainProblem | str | None, tokens: Any) -> Verdict:
    own: dict[str, Any] = dict(name=metric, raw="counters")
    if isinstance(check, ClockDomainProblem):  # a station error: nothing to corroborate with
        return check.invalidate(entry.evaluate(value, evidence=Evidence.SELF_REPORTED, **own,
                                               extra={"tokens": tokens}))
    if not isinstance(check, _Plausibility):
        why = check or "no independent reading of this counter on a phone"
        return entry.evaluate(value, evidence=Evidence.REPORTED, **own, extra={"tokens": tokens},
                              detail_prefix=f"{how}; reported ({why})")
    evidence = Evidence.REPORTED if check.phones_word else Evidence.CORROBORATED
    said = "consistent with the phone's own" if check.phones_word else "corroborated:"
    # A cross-check the counter fails is the check's own finding: the numbers alone cannot show it.
    return entry.evaluate(
        value, evidence=evidence, uncertainty=check.uncertainty, **own,
        extra={"tokens": tokens, "independent": check.independent, "tolerance": check.tolerance,
               "cross_check": check.what},
        findings=() if check.agrees else (Finding(
            FindingKind.CONTRADICTED, f"implausible: the runtime reports {check.reported:.4g} but {check.what} "
                                      f"gives {check.independent:.4g} (tolerance {check.tolerance:.2g})"),),
        detail_prefix=f"{how}; {said} {check.what} gives {check.independent:.4g} (within {check.tolerance:.2g})"
        if check.agrees else how)


@dataclass(frozen=True)
class _Decode:
    """The decode steps the host saw arrive and their time on the station clock."""

    steps: int
    seconds: float
    runs: int
    jitter_s: float

    @property
    def timing_rel_u(self) -> float:
        return math.sqrt(2.0 * self.runs) * self.jitter_s / self.seconds


def _observed_decode(runtime: RuntimeClient, runs: TokenRuns) -> _Decode | ClockDomainProblem | str:
    link = measure_link(runtime)
    if link is None or not runs.observed:
        return "no station clock to time the decode steps"
    if link.domain_problem is not None:
        return link.domain_problem
    gaps = runs.gaps_ms
    steps = sum(g.size for g in gaps)
    seconds = sum(float(g.sum()) for g in gaps) / 1000.0
    if not steps or seconds <= 0:
        return "no decode steps to compare with"
    return _Decode(steps, seconds, len(gaps), link.jitter_s)


def _bandwidth_plausibility(reported: float, entry: SlaEntry, runtime: RuntimeClient,
                            runs: TokenRuns) -> _Plausibility | ClockDomainProblem | str:
    """Bandwidth utilisation the decode steps the host saw imply: steps x bytes moved per token /
    (the SoC's DRAM peak x decode time). Bytes per token and the peak are datasheet figures."""
    p = entry.parameters
    if not {"bytes_per_token", "dram_peak_gbps"} <= set(p):
        return f"profile entry {entry.metric} gives no bytes_per_token / dram_peak_gbps"
    decode = _observed_decode(runtime, runs)
    if not isinstance(decode, _Decode):
        return decode
    physical = decode.steps * float(p["bytes_per_token"]) / (float(p["dram_peak_gbps"]) * 1e9 * decode.seconds)
    budget = Uncertainty.combine([
        UncertaintyComponent("bytes per token (model)", physical * float(p.get("bytes_per_token_rel_u", 0.02))
                             / math.sqrt(3.0), "B", "KV cache growing over the context, rectangular"),
        UncertaintyComponent("DRAM peak", physical * float(p.get("dram_peak_rel_u", 0.005)) / math.sqrt(3.0), "B",
                             "datasheet transfer rate vs the memory clock, rectangular"),
        UncertaintyComponent("decode time (link jitter)", physical * decode.timing_rel_u, "A",
                             "station-clock arrivals")])
    return _Plausibility(reported, physical, budget.expanded,
                         f"{decode.steps} decode steps of {float(p['bytes_per_token']):.3g} B in {decode.seconds:.4g} s "
                         f"against a {p['dram_peak_gbps']} GB/s peak", budget)


def _mac_plausibility(reported: float, entry: SlaEntry, runtime: RuntimeClient,
                      runs: TokenRuns) -> _Plausibility | ClockDomainProblem | str:
    """MAC utilisation the decode steps the host saw imply: steps x ops per token / (MACs x clock x time)."""
    p = entry.parameters
    if not {"mac_units", "macs_per_token"} <= set(p):
        return f"profile entry {entry.metric} gives no mac_units / macs_per_token"
    decode = _observed_decode(runtime, runs)
    if not isinstance(decode, _Decode):
        return decode
    steps, decode_s = decode.steps, decode.seconds
    datasheet = "npu_clock_mhz" in p
    freq_mhz = float(p["npu_clock_mhz"]) if datasheet else runtime.status().npu_freq_mhz
    if not freq_mhz:
        return "no NPU clock to compare with"
    physical = steps * float(p["macs_per_token"]) / (float(p["mac_units"]) * freq_mhz * 1e6 * decode_s)
    ops_u = float(p.get("macs_per_token_rel_u", 0.02))
    clock_u = float(p.get("npu_clock_rel_u", 0.005))
    timing_u = decode.timing_rel_u
    budget = Uncertainty.combine([
        UncertaintyComponent("ops per token (model)", physical * ops_u / math.sqrt(3.0), "B",
                             "attention over the context and fused ops, rectangular"),
        UncertaintyComponent("NPU clock", physical * clock_u / math.sqrt(3.0), "B", "reported setting vs actual"),
        UncertaintyComponent("decode time (link jitter)", physical * timing_u, "A", "station-clock arrivals")])
    clock = "datasheet" if datasheet else "the runtime's"
    return _Plausibility(reported, physical, budget.expanded,
                         f"{steps} decode steps in {decode_s:.4g} s at {freq_mhz:g} MHz ({clock} clock) on "
                         f"{p['mac_units']} MACs", budget, phones_word=not datasheet)


def _fault_plausibility(data: dict[str, Any], before: int | None, after: int | None) -> _Plausibility | str:
    """Weight page faults against the kernel's major faults in the same window."""
    faults, reads = data.get("weight_page_faults"), data.get("weight_page_reads")
    if before is None or after is None:
        return f"no {VMSTAT} pgmajfault to compare with"
    if not isinstance(faults, int) or not isinstance(reads, int) or reads <= 0:
        return "no raw fault and read counts"
    kernel = after - before
    allowance = FAULT_SIGMAS * math.sqrt(max(kernel, 1))
    return _Plausibility(faults / reads, kernel / reads, allowance / reads,
                         f"the kernel's {kernel} major faults over {reads} page reads", phones_word=True)
