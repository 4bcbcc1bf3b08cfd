"""A build catalogue: the ordered runtime builds a lab's build system produced (docs/builds.md).

`catalogue.toml` (or a folder holding one) lists each build's id, its order in the build history,
its date, its artefact (a path relative to the catalogue file) and the artefact's SHA-256. Loading
checks the file's shape only: an artefact is hashed when it is installed (bench/catalogue/install.py),
right before it is pushed, so a file changed after loading is still caught and a catalogue of
thousands of builds loads without reading them.
"""
from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from phonebench.core.decoding import read_text
from phonebench.core.errors import ConfigError
from phonebench.core.phone_text import printable

CATALOGUE_FILE = "catalogue.toml"
FORMAT = "phonebench-catalogue/1"
MAX_ID = 128  # a build id is shown on screens and in records: a tag or version, never a paragraph
MAX_BUILDS = 100_000
_HINT = "see docs/builds.md for the catalogue format"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_BUILD_KEYS = {"id", "order", "date", "artefact", "sha256", "notes"}


class CatalogueError(ConfigError):
    """A catalogue file is malformed, or names no such build."""


@dataclass(frozen=True)
class CatalogueBuild:
    id: str
    order: int  # place in the build history: a lower order was built from older sources
    date: dt.date | dt.datetime
    artefact: Path  # absolute (resolved against the catalogue file's folder)
    sha256: str  # lower-case hex of the artefact's bytes, as the build system computed it
    notes: str = ""

    @property
    def available(self) -> bool:
        """Whether the artefact exists (a build the build system listed but never produced does not)."""
        return self.artefact.is_file()


@dataclass(frozen=True)
class Catalogue:
    path: Path  # the catalogue file
    builds: tuple[CatalogueBuild, ...]  # in order

    def get(self, build_id: str) -> CatalogueBuild:
        for build in self.builds:
            if build.id == build_id:
                return build
        shown = ", ".join(b.id for b in self.builds[:5]) + (f" … ({len(self.builds)} builds)"
                                                             if len(self.builds) > 5 else "")
        raise CatalogueError(f"{self.path}: no build {printable(build_id, MAX_ID)!r}",
                             hint=f"builds: {shown or 'none'}")

    def between(self, good_id: str, bad_id: str) -> tuple[CatalogueBuild, ...]:
        """The builds from `good_id` to `bad_id`, both included, in order; `good_id` must come first."""
        good, bad = self.get(good_id), self.get(bad_id)
        if good.order >= bad.order:
            raise CatalogueError(f"{self.path}: build {good.id!r} (order {good.order}) is not before "
                                 f"{bad.id!r} (order {bad.order})",
                                 hint="name the good (older) build first, then the bad one")
        return tuple(b for b in self.builds if good.order <= b.order <= bad.order)

    def index(self, build_id: str) -> int:
        """Where the build stands in `builds` (0 the oldest)."""
        return self.builds.index(self.get(build_id))


def load_catalogue(path: str | Path) -> Catalogue:
    """Read `path` (a catalogue.toml, or a folder holding one); CatalogueError names the file and key."""
    path = Path(path)
    if path.is_dir():
        path = path / CATALOGUE_FILE
    if not path.is_file():
        raise CatalogueError(f"build catalogue {path} does not exist",
                             hint=f"pass --catalogue with a {CATALOGUE_FILE} or the folder holding it; {_HINT}")
    text = read_text(path, "build catalogue", error=CatalogueError, hint=_HINT)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path}: not valid TOML: {exc}", hint="check quoting and brackets on that line") from None
    except RecursionError:
        raise CatalogueError(f"{path}: TOML nested too deeply to be a catalogue", hint=_HINT) from None
    return parse_catalogue(data, path.resolve())


def parse_catalogue(data: dict[str, Any], path: Path) -> Catalogue:
    unknown = sorted(set(data) - {"format", "build"})
    if unknown:
        raise CatalogueError(f"{path}: {unknown[0]}: unknown key", hint=f"top-level keys: format, [[build]]; {_HINT}")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise CatalogueError(f"{path}: format: expected {FORMAT!r}, got {printable(str(fmt))!r}", hint=_HINT)
    tables = data.get("build", [])
    if not isinstance(tables, list) or not tables:
        raise CatalogueError(f"{path}: [[build]]: expected at least one [[build]] table", hint=_HINT)
    if len(tables) > MAX_BUILDS:
        raise CatalogueError(f"{path}: {len(tables)} builds (at most {MAX_BUILDS})", hint="split the catalogue")
    builds = [_build(path, index, table) for index, table in enumerate(tables, start=1)]
    for key in ("id", "order"):
        seen: dict[object, int] = {}
        for index, build in enumerate(builds, start=1):
            value = getattr(build, key)
            if value in seen:
                raise CatalogueError(f"{path}: [[build]] #{index}.{key}: {value!r} is already build #{seen[value]}'s",
                                     hint=f"every build has its own {key}")
            seen[value] = index
    return Catalogue(path, tuple(sorted(builds, key=lambda b: b.order)))


def _build(path: Path, index: int, table: object) -> CatalogueBuild:
    where = f"{path}: [[build]] #{index}."
    if not isinstance(table, dict):
        raise CatalogueError(f"{where[:-1]}: expected a table", hint=_HINT)
    unknown = sorted(set(table) - _BUILD_KEYS)
    if unknown:
        raise CatalogueError(f"{where}{unknown[0]}: unknown key", hint=f"keys of a build: {', '.join(sorted(_BUILD_KEYS))}")

    def need(key: str, kind: type | tuple[type, ...], expected: str) -> Any:
        if key not in table:
            raise CatalogueError(f"{where}{key}: missing (required)", hint=_HINT)
        value = table[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CatalogueError(f"{where}{key}: expected {expected}, got {type(value).__name__} "
                                 f"{printable(repr(value), 80)}", hint=_HINT)
        return value

    ident = need("id", str, "a string").strip()
    if not ident or len(ident) > MAX_ID or printable(ident) != ident:
        raise CatalogueError(f"{where}id: expected a printable build id of 1 to {MAX_ID} characters, got "
                             f"{printable(ident, MAX_ID)!r}", hint=_HINT)
    order = need("order", int, "an integer (the build's place in the history)")
    artefact = Path(need("artefact", str, "a path to the build's artefact"))
    digest = need("sha256", str, "64 hex digits")
    if not _SHA256.fullmatch(digest):
        raise CatalogueError(f"{where}sha256: expected 64 hex digits (the artefact's SHA-256), got "
                             f"{printable(digest, 80)!r}", hint="`sha256sum ARTEFACT` prints it")
    notes = table.get("notes", "")
    if not isinstance(notes, str):
        raise CatalogueError(f"{where}notes: expected a string", hint=_HINT)
    return CatalogueBuild(id=ident, order=order, date=_date(where, need("date", (dt.date, str), "a date")),
                          artefact=artefact if artefact.is_absolute() else path.parent / artefact,
                          sha256=digest.lower(), notes=notes)


def _date(where: str, value: dt.date | str) -> dt.date | dt.datetime:
    """A TOML date or date-time; an ISO 8601 string is taken too (build systems often quote it)."""
    if isinstance(value, dt.date):
        return value
    text = value.strip()
    text = text[:-1] + "+00:00" if text.endswith("Z") else text  # Python 3.10's parser lacks the Z
    try:
        return dt.datetime.fromisoformat(text) if "T" in text or " " in text else dt.date.fromisoformat(text)
    except ValueError:
        raise CatalogueError(f"{where}date: expected a date such as 2026-12-01 or 2026-12-01T22:05:00Z, got "
                             f"{printable(value, 80)!r}", hint=_HINT) from None
