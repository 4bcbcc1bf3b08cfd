"""Unit-to-unit variation: no two emulated phones are the same phone.

Real units of one SoC differ by process variation (NPU speed bins, leakage, how well each board
sheds heat, the audio path's buffering, each flash part's read time), and SoCs differ by design.
Each emulated phone draws its own factors here, reproducibly, from its seed and serial, out of
the spread stated per SoC model below (a unit's factors are drawn from a normal distribution
truncated at 2 sigma, as a production screen would cut the tails). Nominal units stay inside every
claim; they just do not agree with each other to nine digits.

The SoC's own NPU throughput (npu_personas.Soc.npu_gmac_per_s, what the fingerprint's timing
signature measures) sets how long compute-bound work takes on this unit: prompt processing scales
with REFERENCE_GMAC_PER_S / throughput (the timings of runtime_timing were set on an SM8650), and a
decode step, bound by DRAM bandwidth, only in its small compute share. The same throughput, with
the unit's own speed factor, times the fingerprint's probes (emulation/runtime.py).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

REFERENCE_GMAC_PER_S = 70.4  # the SoC (SM8650) the nominal timing profile was set on
DECODE_COMPUTE_SHARE = 0.05  # a decode step waits on DRAM; only this share follows the NPU's speed
TRUNCATE_SIGMA = 2.0


@dataclass(frozen=True)
class SocSpread:
    """Unit-to-unit standard deviations of one SoC model (relative unless a unit is given)."""

    npu_speed: float = 0.015     # NPU throughput (speed bin within the SoC's)
    leakage: float = 0.06        # static (idle) power
    dynamic: float = 0.012       # dynamic power of NPU work
    cooling: float = 0.03        # heat loss to air (thermal resistance, cover and board)
    audio_latency_s: float = 0.003  # audio path latency added to every answer (absolute, seconds)
    flash_read: float = 0.04     # flash random-read time
    gpu_power: float = 0.03      # the GPU's draw at a given busy fraction (its leakage and voltage bin)


# Spreads per SoC model; the newest nodes (N3) vary a little more than mature ones (N4).
SPREADS: dict[str, SocSpread] = {
    "SM8750": SocSpread(npu_speed=0.02, leakage=0.08, dynamic=0.015),
    "SM8650": SocSpread(),
    "SM8550": SocSpread(leakage=0.05),
    "SM8450": SocSpread(leakage=0.07, cooling=0.035),
    "MT6991": SocSpread(npu_speed=0.02, leakage=0.08, dynamic=0.015),
    "MT6989": SocSpread(leakage=0.05),
    "MT6985": SocSpread(),
    "MT6897": SocSpread(flash_read=0.05),
}
DEFAULT_SPREAD = SocSpread()


@dataclass(frozen=True)
class UnitVariation:
    """One unit's factors (1.0 / 0.0: exactly nominal)."""

    npu_speed: float = 1.0
    leakage: float = 1.0
    dynamic: float = 1.0
    cooling: float = 1.0
    audio_latency_s: float = 0.0
    flash_read: float = 1.0
    gpu_power: float = 1.0
    npu_gmac_per_s: float = REFERENCE_GMAC_PER_S  # the die's throughput on this unit (SoC x speed bin)

    @property
    def compute_scale(self) -> float:
        """Compute-bound time on this unit relative to the reference SoC."""
        return REFERENCE_GMAC_PER_S / self.npu_gmac_per_s

    @property
    def decode_scale(self) -> float:
        return 1.0 - DECODE_COMPUTE_SHARE * (1.0 - self.compute_scale)


NOMINAL = UnitVariation()


def unit_seed(seed: int, serial: str) -> int:
    """The seed of a unit's own state that is not its silicon (which weight page a persona
    corrupts, its audit key): the one its station file gives, 0 by default."""
    return int(seed)


def night_seed(run_seed: int | None, seed: int, serial: str) -> int:
    """The seed of one unit's noise on one night (token jitter, voice, counters, instrument noise,
    the room's cycle): from the run's seed, the unit's station seed and its serial, so every unit
    has its own and a bay started in another process derives the same one. A phone outside a
    station's night (run_seed None: built on its own, as the production line and unit tests build
    them) has the noise of its station seed alone. docs/emulated-fleet.md."""
    if run_seed is None:
        return unit_seed(seed, serial)
    mask = (1 << 64) - 1
    entropy = [int(run_seed) & mask, int(seed) & mask, zlib.crc32(serial.encode())]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])


def spec_night_seed(spec: object) -> int:
    """night_seed of an emulated phone's spec (its run_seed, seed and serial)."""
    return night_seed(spec.run_seed, spec.seed, spec.serial)  # type: ignore[attr-defined]


def unit_rng(seed: int, serial: str, stream: int) -> np.random.Generator:
    """A random stream of this unit's own (its silicon: timing margin, fault sites), distinct per
    serial whatever the station seed, and repeatable for a given seed."""
    return np.random.default_rng([unit_seed(seed, serial), zlib.crc32(serial.encode()), stream])


def draw(soc_model: str, die_gmac_per_s: float, seed: int, serial: str) -> UnitVariation:
    """This unit's factors, from its SoC's spread, its seed and its serial."""
    spread = SPREADS.get(soc_model, DEFAULT_SPREAD)
    rng = unit_rng(seed, serial, 0x5EED)

    def factor(sigma: float) -> float:
        return float(1.0 + sigma * np.clip(rng.standard_normal(), -TRUNCATE_SIGMA, TRUNCATE_SIGMA))

    speed = factor(spread.npu_speed)
    # Drawn in this order: a factor added later comes last, so a unit's earlier factors stay its own.
    leakage, dynamic, cooling = factor(spread.leakage), factor(spread.dynamic), factor(spread.cooling)
    audio, flash = factor(spread.audio_latency_s) - 1.0, factor(spread.flash_read)
    return UnitVariation(npu_speed=speed, leakage=leakage, dynamic=dynamic, cooling=cooling, audio_latency_s=audio,
                         flash_read=flash, gpu_power=factor(spread.gpu_power), npu_gmac_per_s=die_gmac_per_s * speed)


def for_spec(spec: object) -> UnitVariation:
    """The variation of an emulated phone built from a PhoneSpec (its NPU persona gives the die)."""
    from .npu_personas import get_persona

    die = get_persona(spec.npu_persona).die  # type: ignore[attr-defined]
    return draw(die.model, die.npu_gmac_per_s, spec.seed, spec.serial)  # type: ignore[attr-defined]
