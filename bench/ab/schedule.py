"""The order builds take turns on each phone: ABBA blocks, counterbalanced across units.

A phone drifts (it warms, its battery and background settle) and each segment leaves heat for the
next. In a block A B B A each build sits once early and once late, so a drift linear over the
block cancels from the block's difference, (B1 + B2 - A1 - A2) / 2; blocks follow each other as
ABBA ABBA ..., so over two blocks each build follows each build equally often (first-order
carryover balanced). Half the units run BAAB instead (units alternate by their index): the
first segment after the run starts, on a phone that has not yet worked, falls on A on some units
and on B on others, and the model's pooled difference does not lean on it.

A build is installed only when it is not the one the phone runs: a block costs two installs
(A|B, B|A), and A A across a block boundary none. Installs are lab time like any other: the plan
counts them and the runner measures them on the station clock.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Side = Literal["A", "B"]
PATTERN: dict[Side, tuple[Side, Side, Side, Side]] = {"A": ("A", "B", "B", "A"), "B": ("B", "A", "A", "B")}


@dataclass(frozen=True)
class Slot:
    """One segment of a unit's schedule."""

    block: int  # 1-based
    position: int  # 0..3 inside the block
    side: Side
    install: bool  # the side's build is installed first (the phone runs the other one, or nothing known)


def first_side(unit_index: int) -> Side:
    """Units alternate ABBA / BAAB by their index (counterbalancing)."""
    return "A" if unit_index % 2 == 0 else "B"


def block_slots(block: int, first: Side, running: Side | None) -> list[Slot]:
    """Block `block`'s four segments for a unit that starts its blocks with `first` and now runs
    `running` (None: a build the A/B did not install)."""
    slots = []
    for position, side in enumerate(PATTERN[first]):
        slots.append(Slot(block, position, side, side != running))
        running = side
    return slots


def unit_order(blocks: int, first: Side, running: Side | None = None) -> list[Slot]:
    """A unit's whole schedule of `blocks` blocks."""
    slots: list[Slot] = []
    for block in range(1, blocks + 1):
        slots += block_slots(block, first, slots[-1].side if slots else running)
    return slots


def planned_seconds(blocks: int, segment_s: float, install_s: float) -> float:
    """A unit's lab time for `blocks` blocks: four segments each and the installs its order needs."""
    installs = sum(s.install for s in unit_order(blocks, "A"))
    return 4 * blocks * segment_s + installs * install_s


def block_log_ratio(a: tuple[float, float], b: tuple[float, float]) -> float:
    """A block's log-ratio B/A from its two A and two B segment values (positive numbers)."""
    return 0.5 * (math.log(b[0]) + math.log(b[1]) - math.log(a[0]) - math.log(a[1]))
