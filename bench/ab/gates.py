"""The A/B's gates: what one segment measures of each, in which unit, with which instruments.

Every gate is read from the bench's own instruments and clock, never from the phone's word: token
times from the host's arrivals on the station clock, power and energy from the power analyzer's
digitizer (bench/ab/measure.py reuses the checks' measurement functions). Each is a statistic
whose higher value is worse, so a positive change is a regression.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from phonebench.core.errors import UsageError


@dataclass(frozen=True)
class Gate:
    metric: str
    unit: str
    what: str  # how one segment's value is read
    needs: tuple[str, ...]  # instrument roles beside the phone and the station clock
    part: str  # the segment's workload part that measures it (gates of one part share its samples)
    spread: float  # one block's log-ratio spread on one emulated phone (benchmarks/bench_bisect.py): for the plan


FIRST_TOKEN, TOKEN_MEDIAN, SUSTAINED_POWER, ENERGY_PER_DIALOG, DIALOG_LENGTH = (
    "first_token", "token_median", "sustained_power", "energy_per_dialog", "dialog_length")

# Measured on the emulated fleet at bench/ab/measure.Workload's sizes (docs/ab-and-bisect.md, "Measured"):
# what a gate's stated power before a run rests on; the run itself decides on its own blocks' spread.
# Energy per dialog is length-adjusted (bench/ab/dialogs.py): 0.10-0.14 % a block with one dialog a
# segment (the raw mean energy's was 9-14 %, the answer's length); dialog length keeps that scatter
# (benchmarks/bench_dialog_energy.py). First token and token median: the root mean square of the
# three A/A phones' spreads in the latest measurement (1.10 %, 0.84 %; it was 0.8 %, 0.6 %), so the
# power `bench ab` states before a run is not the power of a quieter fleet.
SPREAD_FT, SPREAD_TM, SPREAD_POWER, SPREAD_ENERGY, SPREAD_LENGTH = 0.011, 0.0084, 0.0005, 0.0015, 0.12

GATES: dict[str, Gate] = {g.metric: g for g in (
    Gate(FIRST_TOKEN, "ms", "median request-to-first-token of the segment's inferences (host arrivals, station clock)",
         (), "inferences", SPREAD_FT),
    Gate(TOKEN_MEDIAN, "ms", "median gap between token arrivals over the same inferences (host arrivals)", (),
         "inferences", SPREAD_TM),
    Gate(SUSTAINED_POWER, "W", "mean V x I over one fixed generate's window (power analyzer digitizer)", ("supply",),
         "generate", SPREAD_POWER),
    Gate(ENERGY_PER_DIALOG, "J", "energy of a dialog of the A/B's reference length: the segment's dialog power "
                                 "(sum of energies / sum of windows, each dialog swept from the stimulus until the "
                                 "phone is idle again) x the unit's first dialog segment's mean window (power "
                                 "analyzer digitizer; bench/ab/dialogs.py)", ("supply", "stimulus"),
         "dialogs", SPREAD_ENERGY),
    Gate(DIALOG_LENGTH, "s", "mean window of the segment's dialogs, stimulus until idle again (power analyzer "
                             "digitizer): what energy per dialog holds fixed", ("supply", "stimulus"),
         "dialogs", SPREAD_LENGTH),
)}
# Energy per dialog at a fixed length settles +-3 % at the first look like sustained power, and its
# one dialog a segment keeps the whole plan within 30 lab minutes a phone: a default gate. Dialog
# length only when asked for: its spread (the answer's length) leaves it undecided at +-3 %, and an
# unsettled gate keeps an A/B running to its last block; the report shows its change beside energy
# per dialog instead (docs/ab-and-bisect.md states what it detects).
DEFAULT_METRICS = (FIRST_TOKEN, TOKEN_MEDIAN, SUSTAINED_POWER, ENERGY_PER_DIALOG)


def gates_named(names: list[str] | tuple[str, ...]) -> tuple[Gate, ...]:
    """The gates asked for by name, in the order given; an unknown name is a usage error."""
    unknown = [n for n in names if n not in GATES]
    if unknown:
        raise UsageError(f"no A/B gate {', '.join(map(repr, unknown))}", hint=f"gates: {', '.join(GATES)}")
    return tuple(GATES[n] for n in dict.fromkeys(names))


def defaults_for(roles_of_bays: Sequence[Collection[str]]) -> tuple[tuple[str, ...], list[str]]:
    """The default gates every bay can measure (the instrument roles wired to each), and why each
    one left out is: a station without a stimulus still A/Bs its token and power gates; a gate
    named with --metric is required instead (open_bench refuses the bay that lacks it)."""
    kept, left_out = [], []
    for metric in DEFAULT_METRICS:
        missing = sorted({r for r in GATES[metric].needs if any(r not in roles for roles in roles_of_bays)})
        if missing:
            left_out.append(f"{metric} left out: a bay has no {', '.join(missing)} (wire it, or name the gate "
                            "with --metric to require it)")
        else:
            kept.append(metric)
    return tuple(kept), left_out
