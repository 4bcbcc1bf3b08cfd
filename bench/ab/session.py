"""A station ready for A/Bs of a catalogue's builds: opened from a station file or the embedded
emulated fleet, its emulated phones seeded (each its own noise stream, replayable by the seed),
the catalogue's installer writing each install's record to the results folder."""
from __future__ import annotations

import contextlib
import dataclasses
import re
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path

from phonebench.core.errors import UsageError
from phonebench.core.station import EmulatedConfig, StationConfig, load_station
from ..catalogue.catalogue import Catalogue
from ..station.backend import emulated_fleet, open_station
from .gates import defaults_for
from .install import CatalogueInstaller
from .measure import StationBench, Workload, open_bench


def resolve_build(catalogue: Catalogue, name: str) -> str:
    """A catalogue build id from `name`: the id itself, or the runtime's version string a run recorded
    (`llmrt 3.6.0-dev.041-emu` names 3.6.0-dev.041) when exactly one id stands in it as a word."""
    if any(b.id == name for b in catalogue.builds):
        return name
    inside = [b.id for b in catalogue.builds if re.search(rf"(?<![\w.]){re.escape(b.id)}(?![\w.])", name)]
    if len(inside) == 1:
        return inside[0]
    return catalogue.get(name).id  # the catalogue's own error: no such build, and which there are


def new_seed() -> int:
    return secrets.randbelow(2 ** 31)


def seeded(emulated: EmulatedConfig, seed: int) -> EmulatedConfig:
    """The emulated phones with seeds seed, seed + 1, ...: the units' noise is their own (the default
    fleet's phones otherwise share one stream, and a model's two units would cancel each other)."""
    phones = emulated.phones or emulated_fleet().phones
    return dataclasses.replace(emulated, phones=[dataclasses.replace(p, seed=seed + i) for i, p in enumerate(phones)])


def station_config(path: str | None, seed: int | None) -> tuple[StationConfig, int | None]:
    """The station and the seed its emulated phones run on (a fresh one unless given; None for real
    phones, whose noise is their own: a --seed for them is a usage error)."""
    config = load_station(path) if path else StationConfig(name="emulated", source=None, emulated=EmulatedConfig())
    if config.emulated is None:
        if seed is not None:
            raise UsageError(f"--seed: station {config.name!r} has real phones; their noise is not the bench's to seed")
        return config, None
    seed = new_seed() if seed is None else seed
    config.emulated = seeded(config.emulated, seed)
    return config, seed


@dataclasses.dataclass(frozen=True)
class OpenedBench:
    bench: StationBench
    metrics: tuple[str, ...]  # the gates asked for, else the defaults every bay can measure
    left_out: list[str]  # default gates a bay cannot measure, each with why


@contextlib.contextmanager
def ab_bench(config: StationConfig, *, catalogue: Catalogue, duts: Sequence[str] | None,
             metrics: Sequence[str] | None, results_dir: Path,
             workload: Workload = Workload()) -> Iterator[OpenedBench]:
    """The station's phones ready for A/Bs; `metrics` None: the default gates its bays can measure."""
    with open_station(config) as station:
        left_out: list[str] = []
        if metrics is None:
            views = [station.for_bay(b) for b in station.bay_names()] if station.multi_bay else [station]
            metrics, left_out = defaults_for([set(v.instruments) for v in views])
        with open_bench(station, duts, metrics, CatalogueInstaller(catalogue, results_dir), workload) as bench:
            yield OpenedBench(bench, tuple(metrics), left_out)
