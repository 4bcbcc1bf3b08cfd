"""Energy per dialog at a fixed dialog length: the A/B's variance reduction on its own measurement.

A dialog's energy is its mean power times its length (from the stimulus until the phone is idle
again, both read on the power analyzer's digitizer: bench.checks.power.measure_dialog_energy).
Its length is mostly the assistant's spoken answer, which scatters from dialog to dialog whatever
the build (on the emulated phone 1.6-2.9 s, uniformly: ~15 % a dialog), while its power is what a
runtime build changes. So the `energy_per_dialog` gate's segment statistic is the energy a dialog
of the A/B's reference length costs:

    adjusted = (sum E / sum W) x W_ref

(a ratio estimator: regression adjustment on a covariate the bench measures itself), with W_ref a
constant of the whole A/B on that unit (its first dialog segment's mean window), so a block's
log-ratio B/A is the ratio of the builds' dialog powers. The raw mean energy and window of every
segment are kept beside it (`Measured.raw`, `Segment.raw`): nothing measured is dropped.

What this cannot see: a build that makes dialogs *longer* at the same power costs more energy per
dialog and leaves the adjusted statistic alone. That is the `dialog_length` gate's (the mean window
per dialog), which the report shows beside energy per dialog whenever dialogs were measured.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .gates import DIALOG_LENGTH, ENERGY_PER_DIALOG
from .protocol import Measured

# Segment.raw keys of the dialogs part.
DIALOGS, ENERGY_J, WINDOW_S = "dialogs", "dialog_energy_j", "dialog_window_s"


def dialog_raw(energy_j: Sequence[float], window_s: Sequence[float]) -> dict[str, float]:
    """One segment's dialogs as measured: their count, mean energy (J) and mean window (s)."""
    if not energy_j or len(energy_j) != len(window_s):
        raise ValueError(f"dialogs: {len(energy_j)} energies and {len(window_s)} windows")
    n = len(energy_j)
    return {DIALOGS: float(n), ENERGY_J: float(sum(energy_j)) / n, WINDOW_S: float(sum(window_s)) / n}


def has_dialogs(raw: Mapping[str, float]) -> bool:
    return ENERGY_J in raw and WINDOW_S in raw


def dialog_power_w(raw: Mapping[str, float]) -> float:
    """The segment's dialog power: sum E / sum W (= mean E / mean W over its dialogs)."""
    window = raw[WINDOW_S]
    return raw[ENERGY_J] / window if window > 0 else 0.0  # a zero window: no positive statistic, the runner refuses it


def length_adjusted_j(raw: Mapping[str, float], reference_s: float) -> float:
    """The energy a dialog of `reference_s` seconds costs at this segment's dialog power."""
    return dialog_power_w(raw) * reference_s


def with_dialog_statistics(measured: Measured, metrics: Sequence[str], reference_s: float | None) -> \
        tuple[Measured, float | None]:
    """The segment with its dialog gates' statistics from its raw dialogs: energy per dialog at the
    reference length (fixed by the first segment that measures dialogs: returned), dialog length the
    mean window. A segment without raw dialogs (a bench that states its statistics) is left alone."""
    if not has_dialogs(measured.raw):
        return measured, reference_s
    if reference_s is None:
        reference_s = measured.raw[WINDOW_S]
    values = dict(measured.values)
    if ENERGY_PER_DIALOG in metrics:
        values[ENERGY_PER_DIALOG] = length_adjusted_j(measured.raw, reference_s)
    if DIALOG_LENGTH in metrics:
        values[DIALOG_LENGTH] = measured.raw[WINDOW_S]
    samples = {**measured.samples, **{m: int(measured.raw[DIALOGS]) for m in (ENERGY_PER_DIALOG, DIALOG_LENGTH)
                                      if m in metrics}}
    return dataclasses.replace(measured, values=values, samples=samples), reference_s
