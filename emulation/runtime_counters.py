"""The runtime's internal counters (claim 14), as raw counts since the last reset.

`llmrt counters` reports the counts and the rates they give: KV-cache misses per lookup, MAC busy
cycles per NPU cycle while decoding, DRAM bytes moved per byte the bus could move, weight page
faults per page read, useful prefetches per prefetch. Counts follow the work done at per-persona
rates, so they move with the workload like a real PMU's. Two of them are physics, not rates:

- MAC busy cycles are the decode steps' multiply-accumulates over the MAC array's width
  (MACS_PER_TOKEN / MAC_UNITS per token); the cycles are the decode time at the NPU clock. A slow
  or stalling decode therefore shows a low utilisation by itself.
- DRAM bytes are the bytes a decode step moves (BYTES_PER_TOKEN: the INT4 weights, their group
  scales, the KV cache and spilled activations) per decode step; the bytes the bus could move are
  the decode time at the LPDDR peak. A slow decode moves the same bytes in more time: a lower
  utilisation, as on a real memory controller's PMU.
- Weight page faults are major faults the kernel also counts: /proc/vmstat's pgmajfault (and
  pgpgin, 4 KiB per fault) move with them, since boot, never reset.

A lying persona (`counters_reported`) reports other rates than the ones incurred: the reported
numerators are rewritten, the kernel's counts are not, unless the kernel lies too
(`kernel_agrees`: /proc/vmstat counts the faults the runtime reports).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from phonebench.core.counters import COUNTER_RATIOS

NOMINAL_RATES = {
    "kv_cache_miss_rate": 0.112,
    "weight_page_fault_rate": 0.0071,
    "prefetch_accuracy": 0.848,
}
KV_LOOKUPS_PER_TOKEN = 384        # layers x KV blocks touched
PAGE_READS_PER_TOKEN = 64
PREFETCHES_PER_TOKEN = 32
DRAM_PEAK_BYTES_PER_S = 68.3e9    # LPDDR5X-8533, 64-bit
MAC_UNITS = 64                    # INT4 MAC lanes the counter counts, one MAC per cycle each
MACS_PER_TOKEN = 3.0e9            # the product model (~3 B weights): one MAC per weight per token
BYTES_PER_TOKEN = 2.90e9          # DRAM bytes per decode step: 1.5 GB of INT4 weights, scales, KV, activations
PAGE_KIB = 4
VMSTAT = "/proc/vmstat"


@dataclass
class _Counts:
    tokens: int = 0
    kv_lookups: int = 0
    kv_misses: int = 0
    mac_total_cycles: int = 0
    mac_busy_cycles: int = 0
    dram_peak_bytes: int = 0
    dram_bytes: int = 0
    weight_page_reads: int = 0
    weight_page_faults: int = 0
    prefetch_issued: int = 0
    prefetch_useful: int = 0


class Counters:
    def __init__(self, overrides: dict[str, float], rng: np.random.Generator, now: float,
                 reported: dict[str, float] | None = None, kernel_agrees: bool = False) -> None:
        self.rates = {**NOMINAL_RATES, **{k: v for k, v in overrides.items() if k in NOMINAL_RATES}}
        self.reported = dict(reported or {})
        self.rng = rng
        self.counts = _Counts()
        self.since_t = now
        self.major_faults = 0  # since boot: what the kernel counts
        self.kernel_agrees = kernel_agrees and "weight_page_fault_rate" in self.reported

    def reset(self, now: float) -> None:
        self.counts = _Counts()
        self.since_t = now

    def add(self, tokens: int, npu_freq_mhz: float, *, decode_steps: int = 0,
            decode_s: float = 0.0) -> None:
        c, r, rng = self.counts, self.rates, self.rng
        c.tokens += tokens
        lookups = KV_LOOKUPS_PER_TOKEN * tokens
        c.kv_lookups += lookups
        c.kv_misses += int(rng.binomial(lookups, r["kv_cache_miss_rate"]))
        cycles = int(decode_s * npu_freq_mhz * 1e6)
        c.mac_total_cycles += cycles
        # No cap at the cycle count: the timing model has no compute floor, and a run drawn a little
        # faster than the MACs allow must still add up with its time over a workload.
        c.mac_busy_cycles += int(decode_steps * MACS_PER_TOKEN / MAC_UNITS)
        c.dram_peak_bytes += int(decode_s * DRAM_PEAK_BYTES_PER_S)
        c.dram_bytes += int(decode_steps * BYTES_PER_TOKEN)
        reads = PAGE_READS_PER_TOKEN * tokens
        c.weight_page_reads += reads
        faults = int(rng.binomial(reads, r["weight_page_fault_rate"]))
        c.weight_page_faults += faults
        self.major_faults += round(self.reported["weight_page_fault_rate"] * reads) if self.kernel_agrees else faults
        issued = PREFETCHES_PER_TOKEN * tokens
        c.prefetch_issued += issued
        c.prefetch_useful += int(rng.binomial(issued, r["prefetch_accuracy"]))

    def report(self, now: float) -> dict[str, Any]:
        counts = {f.name: getattr(self.counts, f.name) for f in fields(self.counts)}
        for rate, value in self.reported.items():
            num, den = COUNTER_RATIOS[rate]
            counts[num] = int(round(value * counts[den]))
        out: dict[str, Any] = {"t": now, "window_s": round(now - self.since_t, 3), **counts}
        for rate, (num, den) in COUNTER_RATIOS.items():
            out[rate] = round(counts[num] / counts[den], 6) if counts[den] else None
        return out

    def utilisation(self, rate: str) -> float | None:
        """The rate really incurred since the reset (what a forger must hide)."""
        num, den = COUNTER_RATIOS[rate]
        d = getattr(self.counts, den)
        return getattr(self.counts, num) / d if d else None

    def vmstat(self) -> bytes:
        """/proc/vmstat's paging lines (the rest of the file is left out)."""
        return (f"pgpgin {PAGE_KIB * self.major_faults}\npgpgout 0\npgfault {self.major_faults}\n"
                f"pgmajfault {self.major_faults}\n").encode()
