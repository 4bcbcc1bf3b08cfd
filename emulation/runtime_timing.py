"""How long the emulated runtime takes: prompt processing and each decode step.

Per-token latency is lognormal around the decode time with autocorrelated jitter (an AR(1)
process in log time: caches, DVFS and memory traffic drift over several tokens), a per-run level
(what state the run started in) and rare stalls. Conditions scale it: the NPU clock (the
compute-bound share follows 1/f), GPU contention (a slowdown proportional to the GPU's busy
fraction, extra jitter and stalls), redundancy (every matmul computed twice) and layers migrated
to the CPU near the thermal trip (slower there, and drawing CPU-side power).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .unit_variation import NOMINAL, UnitVariation

NOMINAL_MHZ = 1100.0
COMPUTE_SHARE = 0.6   # share of a decode step that scales with the NPU clock (the rest is memory)
CPU_SLOWDOWN = 2.4    # a layer on the CPU takes this many times its NPU time


@dataclass(frozen=True)
class TimingProfile:
    prefill_base_s: float = 0.092
    prefill_per_token_s: float = 0.0011
    prefill_sigma: float = 0.07        # lognormal spread of prompt processing
    decode_s: float = 0.045            # median decode step at the nominal clock
    decode_sigma: float = 0.09         # stationary std of the log-time AR(1) jitter
    decode_phi: float = 0.7            # token-to-token autocorrelation of that jitter
    run_sigma: float = 0.035           # per-run level (log time)
    stall_probability: float = 0.002   # per token
    stall_s: float = 0.025             # mean stall (exponential)
    contention_gain: float = 0.3       # decode time x (1 + gain x GPU busy fraction)
    contention_sigma: float = 0.12     # extra log-time jitter under GPU load
    contention_stall_probability: float = 0.006
    contention_stall_s: float = 0.04
    redundancy_factor: float = 1.24    # dual compute and vote: +24 % time per step, ~19 % speed lost


PROFILES: dict[str, TimingProfile] = {
    "nominal": TimingProfile(),
    "jittery": TimingProfile(decode_sigma=0.42, decode_phi=0.5, stall_probability=0.03, stall_s=0.14),
    "slow": TimingProfile(prefill_base_s=0.31, prefill_per_token_s=0.0016),
    "contention-sensitive": TimingProfile(contention_gain=2.6, contention_stall_probability=0.04,
                                          contention_stall_s=0.12),
    "costly-redundancy": TimingProfile(redundancy_factor=1.62),
}


@dataclass(frozen=True)
class Conditions:
    """What the runtime runs under for one step."""

    npu_freq_mhz: float = NOMINAL_MHZ
    gpu_busy: float = 0.0        # GPU busy fraction from a concurrent load, 0..1
    redundancy: bool = False
    cpu_fraction: float = 0.0    # share of layers migrated to the CPU

    def with_(self, **changes: object) -> Conditions:
        return replace(self, **changes)


@dataclass
class StepTime:
    npu_s: float  # time on the NPU (decode/prefill power)
    cpu_s: float  # time of the migrated layers on the CPU

    @property
    def total_s(self) -> float:
        return self.npu_s + self.cpu_s


class TokenTimer:
    """Draws step times for one runtime; `start_run()` begins an inference (new run level)."""

    def __init__(self, profile: TimingProfile, rng: np.random.Generator, unit: UnitVariation = NOMINAL,
                 build_time: float = 1.0) -> None:
        self.profile = profile
        self.rng = rng
        self.build_time = build_time  # the runtime build's NPU work: 1.08 makes every step 8 % longer
        self.unit = unit  # this unit's NPU: prompt processing is compute-bound, a decode step mostly not
        self._level = 0.0
        self._ar = 0.0

    def start_run(self) -> None:
        p = self.profile
        self._level = float(self.rng.normal(0.0, p.run_sigma))
        self._ar = float(self.rng.normal(0.0, p.decode_sigma))  # stationary start

    def _scale(self, cond: Conditions, contention_gain: float) -> float:
        clock = (1.0 - COMPUTE_SHARE) + COMPUTE_SHARE * NOMINAL_MHZ / cond.npu_freq_mhz
        scale = clock * (1.0 + contention_gain * cond.gpu_busy)
        return scale * (self.profile.redundancy_factor if cond.redundancy else 1.0)

    def _split(self, seconds: float, cond: Conditions) -> StepTime:
        m = min(max(cond.cpu_fraction, 0.0), 1.0)
        return StepTime(seconds * (1.0 - m), seconds * m * CPU_SLOWDOWN)

    def prefill(self, prompt_tokens: int, cond: Conditions) -> StepTime:
        p = self.profile
        base = p.prefill_base_s + p.prefill_per_token_s * prompt_tokens
        seconds = base * math.exp(self.rng.normal(0.0, p.prefill_sigma) + self._level) * self.unit.compute_scale
        seconds *= self.build_time
        return self._split(seconds * self._scale(cond, p.contention_gain / 2.0), cond)

    def decode(self, cond: Conditions) -> StepTime:
        p = self.profile
        innovation = self.rng.normal(0.0, p.decode_sigma * math.sqrt(1.0 - p.decode_phi ** 2))
        self._ar = p.decode_phi * self._ar + innovation
        log_time = self._ar + self._level
        if cond.gpu_busy > 0.0:
            log_time += self.rng.normal(0.0, p.contention_sigma * cond.gpu_busy)
        seconds = p.decode_s * math.exp(log_time) * self.unit.decode_scale * self.build_time
        if self.rng.random() < p.stall_probability:
            seconds += self.rng.exponential(p.stall_s)
        if cond.gpu_busy > 0.0 and self.rng.random() < p.contention_stall_probability * cond.gpu_busy:
            seconds += self.rng.exponential(p.contention_stall_s)
        return self._split(seconds * self._scale(cond, p.contention_gain), cond)


def timing_profile(name: str) -> TimingProfile:
    return PROFILES.get(name, PROFILES["nominal"])
