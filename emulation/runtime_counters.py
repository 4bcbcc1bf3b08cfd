"""The runtime's internal counters (claim 14), as raw counts since the last reset.

`llmrt counters` reports the counts and the rates they give: KV-cache misses per lookup, MAC busy
cycles per NPU cycle, DRAM bytes moved per byte the bus could move, weight page faults per page
read, useful prefetches per prefetch. Counts follow the work done (tokens, decode time, clock)
at per-persona rates, so they move with the workload like a real PMU's.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

NOMINAL_RATES = {
    "kv_cache_miss_rate": 0.112,
    "mac_utilisation": 0.902,
    "memory_bandwidth_utilisation": 0.921,
    "weight_page_fault_rate": 0.0071,
    "prefetch_accuracy": 0.848,
}
KV_LOOKUPS_PER_TOKEN = 384        # layers x KV blocks touched
PAGE_READS_PER_TOKEN = 64
PREFETCHES_PER_TOKEN = 32
DRAM_PEAK_BYTES_PER_S = 68.3e9    # LPDDR5X-8533, 64-bit


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
    def __init__(self, overrides: dict[str, float], rng: np.random.Generator, now: float) -> None:
        self.rates = {**NOMINAL_RATES, **overrides}
        self.rng = rng
        self.counts = _Counts()
        self.since_t = now

    def reset(self, now: float) -> None:
        self.counts = _Counts()
        self.since_t = now

    def add(self, tokens: int, busy_s: float, npu_freq_mhz: float) -> None:
        c, r, rng = self.counts, self.rates, self.rng
        c.tokens += tokens
        lookups = KV_LOOKUPS_PER_TOKEN * tokens
        c.kv_lookups += lookups
        c.kv_misses += int(rng.binomial(lookups, r["kv_cache_miss_rate"]))
        cycles = int(busy_s * npu_freq_mhz * 1e6)
        c.mac_total_cycles += cycles
        c.mac_busy_cycles += int(cycles * min(1.0, r["mac_utilisation"] * rng.normal(1.0, 0.004)))
        peak = int(busy_s * DRAM_PEAK_BYTES_PER_S)
        c.dram_peak_bytes += peak
        c.dram_bytes += int(peak * min(1.0, r["memory_bandwidth_utilisation"] * rng.normal(1.0, 0.004)))
        reads = PAGE_READS_PER_TOKEN * tokens
        c.weight_page_reads += reads
        c.weight_page_faults += int(rng.binomial(reads, r["weight_page_fault_rate"]))
        issued = PREFETCHES_PER_TOKEN * tokens
        c.prefetch_issued += issued
        c.prefetch_useful += int(rng.binomial(issued, r["prefetch_accuracy"]))

    def report(self, now: float) -> dict[str, Any]:
        c = self.counts

        def ratio(a: int, b: int) -> float | None:
            return round(a / b, 6) if b else None

        out: dict[str, Any] = {"t": now, "window_s": round(now - self.since_t, 3)}
        out.update({f.name: getattr(c, f.name) for f in fields(c)})
        out.update(kv_cache_miss_rate=ratio(c.kv_misses, c.kv_lookups),
                   mac_utilisation=ratio(c.mac_busy_cycles, c.mac_total_cycles),
                   memory_bandwidth_utilisation=ratio(c.dram_bytes, c.dram_peak_bytes),
                   weight_page_fault_rate=ratio(c.weight_page_faults, c.weight_page_reads),
                   prefetch_accuracy=ratio(c.prefetch_useful, c.prefetch_issued))
        return out
