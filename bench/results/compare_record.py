"""`bench compare --json`: the night's comparisons as one typed record, with the handover (each
regression's build range and bisect command) and the gates that could not see a change of their
threshold's size (with the A/B that would). docs/nightly.md describes the fields."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .compare import Comparison, Night, Statistic
from .detectable import POWER


@dataclass(frozen=True)
class Side:
    value: float
    se: float | None
    n_phones: int
    run: str | None
    builds: tuple[str, ...]


@dataclass(frozen=True)
class Sight:
    """What the gate could see on this comparison (relative to the baseline's value)."""

    detects: float
    resolution: float
    power_at_threshold: float
    sees_threshold: bool


@dataclass(frozen=True)
class Gate:
    metric: str
    claim: int | None
    unit: str
    model: str
    phone: str | None
    baseline: Side
    tonight: Side
    change: float
    relative: float | None
    ci95: tuple[float, float] | None
    p: float | None
    p_holm: float | None
    threshold: float
    call: str
    sight: Sight | None
    build_range: str | None


@dataclass(frozen=True)
class Handover:
    """A regression handed to the day: where it moved and the command that searches the range."""

    metric: str
    claim: int | None
    model: str
    build_range: str
    bisect: str | None
    why_no_bisect: str | None


@dataclass(frozen=True)
class Blind:
    """A gate under which a change of its threshold's size passes most nights unseen."""

    metric: str
    claim: int | None
    model: str
    threshold: float
    detects: float
    power_at_threshold: float
    ab: str | None
    why_no_ab: str | None


@dataclass(frozen=True)
class NightRecord:
    run: str
    against: str
    alpha: float
    family: int
    power: float
    comparisons: tuple[Gate, ...]
    regressions: tuple[Handover, ...]
    blind: tuple[Blind, ...]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def night_record(night: Night, run: str, against: str) -> NightRecord:
    return NightRecord(run, against, night.alpha, night.family, POWER,
                       tuple(_gate(c) for c in night.comparisons),
                       tuple(handover(c) for c in night.regressions),
                       tuple(blind(c) for c in night.blind))


def handover(c: Comparison) -> Handover:
    builds = c.builds
    return Handover(c.metric, c.claim, c.model, builds.text if builds else "build not recorded",
                    builds.bisect(c.metric, c.model) if builds else None,
                    builds.why_not_searchable if builds else "build not recorded")


def blind(c: Comparison) -> Blind:
    assert c.detectable is not None  # Night.blind holds only comparisons with one
    builds = c.builds
    return Blind(c.metric, c.claim, c.model, c.threshold, c.detectable.detects, c.detectable.power_at_threshold,
                 builds.ab(c.metric, c.model) if builds else None,
                 builds.why_not_searchable if builds else "build not recorded")


def _gate(c: Comparison) -> Gate:
    builds, seen = c.builds, c.detectable
    sight = Sight(seen.detects, seen.resolution, seen.power_at_threshold, seen.sees_threshold) if seen else None
    return Gate(c.metric, c.claim, c.unit, c.model, c.phone,
                _side(c.baseline, builds.good_run if builds else None, builds.good if builds else ()),
                _side(c.tonight, builds.bad_run if builds else None, builds.bad if builds else ()),
                c.difference, c.relative, c.interval(), c.p, c.p_holm, c.threshold, c.call, sight,
                builds.text if builds else None)


def _side(s: Statistic, run: str | None, builds: tuple[str, ...]) -> Side:
    return Side(s.value, s.se, s.n_phones, run, builds)
