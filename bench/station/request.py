"""What a run is, typed and built once: the station (a file, the emulated fleet or rack, or labgrid
places), the phones and bays, the tests selected, the SLA profile in force, where the run folder
and the store go, and the run's mode.

`bench run`, `bench plan`, the bays and the labgrid path build it from the command line
(phonebench.bench.cli.request), plain pytest from the plugin's options (phonebench.fixtures.options),
both through `build_request`; below them everything reads this record. A bay's worker gets it as
JSON (`to_json`), never as an argv to parse again. The store is named without its password
(phonebench.core.dburl.with_password finds it again where it is opened)."""
from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from phonebench.core.dburl import resolve_database_url, to_url, without_password
from phonebench.core.errors import ConfigError
from phonebench.core.paths import data_dir
from phonebench.core.station import MAX_EMULATED_BAYS, EmulatedConfig, StationConfig, load_station
from ..specs.sla import load_profile

if TYPE_CHECKING:  # annotations only
    from ..specs.sla import SlaProfile

DEFAULT_SUITES = data_dir("suites")


class Mode(str, enum.Enum):
    """Which question a run answers."""

    RELEASE = "release"  # every claim shown per phone at its confidence (a demonstration profile)
    NIGHTLY = "nightly"  # did tonight's build regress (a regression profile): the line checks stay out
    ACCEPTANCE = "acceptance"  # one production unit, refused on an uncalibrated station


@dataclass(frozen=True)
class LabPlaces:
    """labgrid places the station is built from, each as the bay its reservation holds."""

    coordinator: str | None  # HOST:PORT (None: not given, which the lab refuses)
    place: str | None  # one place to acquire and test
    pattern: str | None  # every place matching it, a run each
    wait_s: float  # how long to wait for a place someone else holds

    @property
    def selected(self) -> str:
        return self.pattern or self.place or ""


@dataclass(frozen=True)
class StationRef:
    """Which station: a station file, labgrid places, or (neither) the emulated fleet; on an
    emulated one, the rack's size and what its phones are made to do."""

    file: Path | None = None
    places: LabPlaces | None = None
    bays: int | None = None  # the emulated rack of N bays (the fleet has a bay per phone)
    persona: str | None = None  # emulated phones only: their SLA behaviour
    faults: tuple[str, ...] = ()  # emulated phones only: injected faults
    seed: int | None = None  # emulated station only: the night's noise (None: the file's, else a fresh one)

    def config(self) -> StationConfig:
        """The station as named, nothing started: its file, or the emulated rack or fleet, with the
        persona and faults given to every emulated phone."""
        from .backend import with_behaviour

        if self.bays:
            config = StationConfig(name="emulated", source=None, emulated=EmulatedConfig(bays=self.bays))
        elif self.file is not None:
            config = load_station(self.file)  # ConfigError names a bad file
        else:
            config = StationConfig(name="emulated", source=None, emulated=EmulatedConfig())
        if config.emulated is not None:
            config.emulated = with_behaviour(config.emulated, self.persona, self.faults).for_night(self.seed)
        return config


@dataclass(frozen=True)
class Selection:
    """The tests a run selects, and the phones and bays it runs them on."""

    suites: tuple[str, ...] = ()  # test files or folders; none: the default ones
    duts: tuple[str, ...] = ()  # none: every phone
    bays: tuple[str, ...] = ()  # none: every bay
    marker: str | None = None  # pytest -m
    keyword: str | None = None  # pytest -k


@dataclass(frozen=True)
class ProfileRef:
    """The SLA profile in force, found once (`resolve_profile`)."""

    name: str
    path: Path
    search: tuple[Path, ...] = ()  # where a profile it extends is looked for too
    purpose: str = "demonstration"  # phonebench.bench.specs.sla.PURPOSES

    def load(self) -> SlaProfile:
        return load_profile(self.path, search=self.search)


@dataclass(frozen=True)
class ResultsPlace:
    """Where the run folder goes: `folder`/`run_id` (no id yet: a new one is made)."""

    folder: Path
    run_id: str | None = None

    @property
    def run_dir(self) -> Path:
        """The run folder, once claimed (`RunRequest.in_run`)."""
        if self.run_id is None:
            raise ValueError("the run folder is not claimed yet")
        return self.folder / self.run_id


@dataclass(frozen=True)
class RunRequest:
    station: StationRef
    selection: Selection
    profile: ProfileRef
    results: ResultsPlace
    store: str  # the results store's URL, without a password
    mode: Mode = Mode.RELEASE
    jobs: int | None = None  # bays (or places) tested at once; None: all of them

    @property
    def bay(self) -> str | None:
        """The one bay a session is narrowed to, if one was selected."""
        return self.selection.bays[0] if len(self.selection.bays) == 1 else None

    def at_station(self, file: Path) -> RunRequest:
        """The same run on the station file `file` (the emulated station's, or a place's), which
        already holds the emulated behaviour: profile, results and store stay as they were found."""
        return dataclasses.replace(self, station=StationRef(file=file))

    def in_run(self, run_dir: Path) -> RunRequest:
        """The same run, its folder `run_dir` claimed."""
        return dataclasses.replace(self, results=ResultsPlace(run_dir.parent, run_dir.name))

    def for_bay(self, bay: str, duts: list[str], run_dir: Path) -> RunRequest:
        """One bay's share of the run (its worker's request), recorded in `run_dir`."""
        wanted = tuple(d for d in self.selection.duts if d in duts)
        return dataclasses.replace(self, selection=dataclasses.replace(self.selection, bays=(bay,), duts=wanted),
                                   results=ResultsPlace(run_dir.parent, run_dir.name), jobs=None)

    def pytest_argv(self, *options: str) -> list[str]:
        """pytest's own part of this run (the suites, -m, -k, the bench plugin) and `options`; the
        bench's part is the request itself, handed to the plugin whole (phonebench.fixtures.options)."""
        selection = self.selection
        argv = [*(selection.suites or [str(DEFAULT_SUITES)]), "-p", "phonebench", "--rootdir",
                str(DEFAULT_SUITES.parent), "-p", "no:cacheprovider",
                "-p", "no:labgrid",  # labgrid's own pytest plugin (lab extra) is for labgrid targets, not the bench
                # `bench` imported the plugin before pytest could rewrite its asserts: it has none to rewrite
                "-W", "ignore::pytest.PytestAssertRewriteWarning"]
        for flag, value in (("-m", selection.marker), ("-k", selection.keyword)):
            if value:
                argv += [flag, value]
        return [*argv, *options]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), default=str, indent=1)

    @classmethod
    def from_json(cls, text: str) -> RunRequest:
        data = json.loads(text)
        station, selection, profile, results = data["station"], data["selection"], data["profile"], data["results"]
        places = station["places"]
        return cls(
            station=StationRef(file=_path(station["file"]), bays=station["bays"], persona=station["persona"],
                               faults=tuple(station["faults"]), seed=station.get("seed"),
                               places=LabPlaces(**places) if places else None),
            selection=Selection(suites=tuple(selection["suites"]), duts=tuple(selection["duts"]),
                                bays=tuple(selection["bays"]), marker=selection["marker"], keyword=selection["keyword"]),
            profile=ProfileRef(profile["name"], Path(profile["path"]), tuple(Path(p) for p in profile["search"]),
                               profile["purpose"]),
            results=ResultsPlace(Path(results["folder"]), results["run_id"]),
            store=data["store"], mode=Mode(data["mode"]), jobs=data["jobs"])


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def build_request(station: StationRef, selection: Selection, *, sla_profile: str | None = None,
                  results_dir: str | None = None, run_id: str | None = None, store: str | None = None,
                  jobs: int | None = None, acceptance: bool = False, named: StationConfig | None = None) -> RunRequest:
    """The run these inputs ask for, with what they leave to the station found once: the profile
    (`resolve_profile`), the results folder and the store. `named`: the station as `station.config()`
    parsed it, where the caller keeps that parse (a session reads one). ConfigError for inputs
    that cannot go together or name nothing."""
    _check_station(station)
    config = None
    if station.places is None:  # a place's station is known once the place is acquired
        config = named if named is not None else station.config()
    profile = resolve_profile(sla_profile, config)
    if results_dir:
        folder = Path(results_dir)
    else:
        folder = config.results_dir if config is not None else Path("reports")
    folder = folder.resolve()
    # a store given on the command line is the one meant; else $PHONEBENCH_DATABASE, the station's, the folder's
    url = to_url(store) if store else resolve_database_url(config.database if config is not None else None, folder)
    mode = Mode.ACCEPTANCE if acceptance else Mode.NIGHTLY if profile.purpose == "regression" else Mode.RELEASE
    return RunRequest(station=station, selection=selection, profile=profile, results=ResultsPlace(folder, run_id),
                      store=without_password(url), mode=mode, jobs=jobs)


def resolve_profile(given: str | None, station: StationConfig | None) -> ProfileRef:
    """The SLA profile a run judges against: `given` (a name or a .toml path), else the station's.
    The one search rule: a name is looked for in the station file's folder, then in the shipped
    sla_profiles/. ConfigError when there is none of that name."""
    name = given or (station.sla_profile if station is not None else "default")
    search = (station.source.parent.resolve(),) if station is not None and station.source else ()
    profile = load_profile(name, search=search)
    return ProfileRef(profile.name, profile.path, search, profile.purpose)


def _check_station(station: StationRef) -> None:
    if station.places is not None and (station.file is not None or station.bays):
        raise ConfigError("--place builds the station from the place's resources; drop --station / --bays")
    if station.bays and station.file is not None:
        raise ConfigError("--bays makes an emulated fleet; it does not go with --station",
                          hint="put `bays = N` in the station file's [emulated] table instead")
    if station.bays and not 1 <= station.bays <= MAX_EMULATED_BAYS:
        raise ConfigError(f"--bays {station.bays}: the emulated rack has 1 to {MAX_EMULATED_BAYS} bays")
