"""The runtime contract's internal counters (docs/runtime-contract.md): every rate `llmrt status`
reports is one raw count over another, and both counts travel with it, so whoever reads the
status (the bench's counter check) recomputes the rate that whoever writes it (a runtime, the
emulated one included) derived. One table for both sides of the wire."""
from __future__ import annotations

# rate -> (numerator count, denominator count)
COUNTER_RATIOS: dict[str, tuple[str, str]] = {
    "kv_cache_miss_rate": ("kv_misses", "kv_lookups"),
    "mac_utilisation": ("mac_busy_cycles", "mac_total_cycles"),
    "memory_bandwidth_utilisation": ("dram_bytes", "dram_peak_bytes"),
    "weight_page_fault_rate": ("weight_page_faults", "weight_page_reads"),
    "prefetch_accuracy": ("prefetch_useful", "prefetch_issued"),
}
