"""The firmware profile library: per SoC, its microcode builds, their expected accumulator
signature and the overflow adapter each needs (firmware_profiles/*.toml, adapters/*.json).

Loading validates the schema (errors name file, line and field), refuses two entries claiming
the same build (SoC + microcode version string), checks that each adapter really protects the
accumulator it is assigned to, and verifies every file's Ed25519 signature.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from phonebench.core.paths import data_dir
from phonebench.core import signing
from phonebench.core.decoding import decode, read_text
from phonebench.core.errors import ConfigError
from phonebench.core.phone_text import printable, toml_string
from .profile_versions import check_and_record

log = logging.getLogger(__name__)

DEFAULT_ROOT = data_dir("firmware_profiles")
SCHEMA_VERSION = 1
OVERFLOW_RULES = ("wrap", "saturate-each-step", "clamp-at-end")
STAGES = ("ES", "MP")
NO_ADAPTER = "none"
MAX_PRODUCT = 64  # largest INT4 x INT4 product, (-8) x (-8)
_HINT = "see firmware_profiles/README.md for the profile format"


@dataclass(frozen=True)
class Signature:
    """Measured or expected accumulator behaviour. bits=None: no overflow seen up to 32 bits."""

    bits: int | None
    overflow: str  # one of OVERFLOW_RULES, or "none" when nothing overflowed

    def __str__(self) -> str:
        return "wide (no overflow up to 32 bits)" if self.bits is None else f"{self.bits}-bit {self.overflow}"

    def to_dict(self) -> dict[str, Any]:
        return {"accumulator_bits": self.bits, "overflow": self.overflow}


@dataclass
class Adapter:
    """A signed adapter file: the exact bytes pushed to a phone and what they ask the NPU to do."""

    name: str
    path: Path
    data: bytes
    spec: dict[str, Any]
    signer: signing.TrustedKey | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def tile(self) -> int:
        return int(self.spec["tile"])

    def protects(self, bits: int) -> bool:
        """No tile of INT4 products can overflow a `bits`-bit accumulator."""
        return self.tile * MAX_PRODUCT <= (1 << (bits - 1)) - 1


@dataclass
class ProfileBuild:
    soc_model: str
    vendor: str
    microcode: str
    stage: str
    signature: Signature
    adapter: str  # adapter name, or "none"
    source: Path
    line: int
    notes: str = ""

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {"soc_model": self.soc_model, "vendor": self.vendor, "microcode": self.microcode,
                "stage": self.stage, **self.signature.to_dict(), "adapter": self.adapter, "source": self.where}


@dataclass
class SocProfile:
    path: Path
    vendor: str
    soc_manufacturer: str
    soc_model: str
    marketing_name: str
    board_platform: str
    builds: list[ProfileBuild]
    signer: signing.TrustedKey | None = None
    npu_gmac_per_s: float | None = None  # the NPU's INT4 MAC throughput: the fingerprint's timing signature
    version: int = 0  # the profile's own, rising with each release of it (never back: profile_versions)


@dataclass
class ProfileLibrary:
    root: Path
    socs: dict[str, SocProfile] = field(default_factory=dict)  # by soc_model, upper case
    adapters: dict[str, Adapter] = field(default_factory=dict)
    trusted: list[signing.TrustedKey] = field(default_factory=list)

    def build(self, soc_model: str, microcode: str) -> ProfileBuild | None:
        soc = self.socs.get(soc_model.upper())
        return next((b for b in soc.builds if b.microcode == microcode), None) if soc else None

    def builds_with_microcode(self, microcode: str) -> list[ProfileBuild]:
        return [b for soc in self.socs.values() for b in soc.builds if b.microcode == microcode]

    def builds_with_signature(self, signature: Signature) -> list[ProfileBuild]:
        return [b for soc in self.socs.values() for b in soc.builds if b.signature == signature]

    def adapter(self, name: str) -> Adapter | None:
        return None if name == NO_ADAPTER else self.adapters[name]

    @property
    def dev_signed(self) -> bool:
        return any(s.signer is not None and s.signer.is_dev for s in self.socs.values())


# --- locating fields in TOML text (tomllib gives values, not line numbers) --------------------
class _Locator:
    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")

    def __init__(self, text: str) -> None:
        self.sections: dict[tuple[str, int], int] = {}
        self.keys: dict[tuple[tuple[str, int], str], int] = {}
        current: tuple[str, int] = ("", 0)
        counts: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            header = self._HEADER.match(line)
            if header:
                name = header.group(1)
                counts[name] = counts.get(name, -1) + 1
                current = (name, counts[name])
                self.sections[current] = number
                continue
            key = self._KEY.match(line)
            if key:
                self.keys.setdefault((current, key.group(1)), number)

    def line(self, section: tuple[str, int], key: str | None = None) -> int:
        if key is not None and (section, key) in self.keys:
            return self.keys[(section, key)]
        return self.sections.get(section, 1)


class _Table:
    """Typed access to one TOML table; every error names file, line and field."""

    def __init__(self, path: Path, data: dict[str, Any], locator: _Locator, section: tuple[str, int],
                 label: str) -> None:
        self.path, self.data, self.locator, self.section, self.label = path, data, locator, section, label

    def error(self, key: str | None, problem: str) -> ConfigError:
        where = f"{self.path}:{self.locator.line(self.section, key)}"
        name = f"{self.label}{key}" if key else self.label.rstrip(".")
        return ConfigError(f"{where}: {name}: {problem}", hint=_HINT)

    def get(self, key: str, kind: type, choices: Sequence[Any] | None = None, default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise self.error(key, "missing (required)")
            return default
        value = self.data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(key, f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
        if isinstance(value, str) and not value.strip():
            raise self.error(key, "must not be empty")
        if choices is not None and value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(map(str, choices))}")
        return value

    def check_unknown(self, known: set[str]) -> None:
        for key in self.data:
            if key not in known:
                raise self.error(key, f"unknown field (known: {', '.join(sorted(known))})")


# --- loading ----------------------------------------------------------------------------------
def load_adapter(path: Path) -> Adapter:
    """Parse and validate one adapter file (signature checked separately)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"adapter {path} cannot be read: {exc.strerror or exc}", hint=_HINT) from None
    text = decode(data, f"adapter {path}", error=ConfigError, hint=_HINT)
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON: {exc}", hint=_HINT) from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to be an adapter", hint=_HINT) from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}:1: an adapter is a JSON object", hint=_HINT)
    lines = text.splitlines()

    def fail(key: str, problem: str) -> ConfigError:
        line = next((i for i, text in enumerate(lines, start=1) if f'"{key}"' in text), 1)
        return ConfigError(f"{path}:{line}: {key}: {problem}", hint=_HINT)

    expected = {"schema": int, "name": str, "transform": str, "tile": int, "partials": str, "description": str}
    for key in spec:
        if key not in expected:
            raise fail(key, f"unknown field (known: {', '.join(sorted(expected))})")
    for key, kind in expected.items():
        if key not in spec:
            raise fail(key, "missing (required)")
        if not isinstance(spec[key], kind) or isinstance(spec[key], bool):
            raise fail(key, f"expected {kind.__name__}, got {spec[key]!r}")
    if spec["schema"] != SCHEMA_VERSION:
        raise fail("schema", f"version {spec['schema']} is not supported (this bench reads {SCHEMA_VERSION})")
    if spec["name"] != path.stem:
        raise fail("name", f"{spec['name']!r} does not match the file name {path.name!r}")
    if spec["transform"] != "tile-k":
        raise fail("transform", f"{spec['transform']!r} is not a known transform (tile-k)")
    if spec["tile"] < 1:
        raise fail("tile", "must be >= 1")
    if spec["partials"] != "wide":
        raise fail("partials", f"{spec['partials']!r}: only 'wide' partial sums are supported")
    return Adapter(spec["name"], path, data, spec)


def _load_soc(path: Path, adapters: dict[str, Adapter]) -> SocProfile:
    text = read_text(path, "firmware profile", hint=_HINT)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint=_HINT) from None
    except RecursionError:
        raise ConfigError(f"{path}: TOML nested too deeply to be a profile", hint=_HINT) from None
    locator = _Locator(text)
    top = _Table(path, data, locator, ("", 0), "")
    top.check_unknown({"schema", "vendor", "soc_manufacturer", "soc_model", "marketing_name", "board_platform",
                       "npu_gmac_per_s", "build", "version"})
    if top.get("schema", int) != SCHEMA_VERSION:
        raise top.error("schema", f"version {data['schema']} is not supported (this bench reads {SCHEMA_VERSION})")
    vendor = top.get("vendor", str)
    soc_model = top.get("soc_model", str)
    raw_builds = top.get("build", list)
    if not raw_builds:
        raise top.error("build", "a profile lists at least one [[build]]")
    builds = []
    for index, raw in enumerate(raw_builds):
        table = _Table(path, raw, locator, ("build", index), f"[[build]] #{index + 1} ")
        if not isinstance(raw, dict):
            raise table.error(None, "expected a table")
        table.check_unknown({"microcode", "stage", "accumulator_bits", "overflow", "adapter", "notes"})
        bits = table.get("accumulator_bits", int)
        if not 8 <= bits <= 32:
            raise table.error("accumulator_bits", f"{bits} is outside 8..32")
        adapter = table.get("adapter", str)
        if adapter == NO_ADAPTER:
            if bits < 32:
                raise table.error("adapter", f"a {bits}-bit accumulator overflows in real layers: it needs an adapter")
        elif adapter not in adapters:
            raise table.error("adapter", f"{adapter!r} is not in {path.parent / 'adapters'} "
                                         f"(known: {', '.join(sorted(adapters)) or 'none'})")
        elif not adapters[adapter].protects(bits):
            raise table.error("adapter", f"{adapter} (tile {adapters[adapter].tile}) cannot protect a {bits}-bit "
                                         f"accumulator: {adapters[adapter].tile} x {MAX_PRODUCT} exceeds 2^{bits - 1} - 1")
        builds.append(ProfileBuild(
            soc_model=soc_model, vendor=vendor, microcode=table.get("microcode", str),
            stage=table.get("stage", str, STAGES), adapter=adapter,
            signature=Signature(bits, table.get("overflow", str, OVERFLOW_RULES)),
            source=path, line=locator.line(("build", index)), notes=table.get("notes", str, default="")))
    gmac = top.get("npu_gmac_per_s", float, default=None)
    if gmac is not None and not gmac > 0:
        raise top.error("npu_gmac_per_s", f"{gmac} is not a throughput > 0")
    version = top.get("version", int, default=0)
    if version < 0:
        raise top.error("version", f"{version} is not a version (0, 1, 2, ...)")
    return SocProfile(path, vendor, top.get("soc_manufacturer", str), soc_model,
                      top.get("marketing_name", str, default=soc_model), top.get("board_platform", str, default=""),
                      builds, npu_gmac_per_s=None if gmac is None else float(gmac), version=version)


def load_library(root: str | Path = DEFAULT_ROOT, trusted: Sequence[signing.TrustedKey] | None = None,
                 require_signatures: bool = True) -> ProfileLibrary:
    """Load, validate and (unless told otherwise) verify every profile and adapter under root."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"profile library {root} does not exist", hint="pass --profiles with the library folder")
    keys = list(trusted) if trusted is not None else (signing.trusted_keys() if require_signatures else [])
    library = ProfileLibrary(root, trusted=keys)
    for path in sorted((root / "adapters").glob("*.json")):
        adapter = load_adapter(path)
        if require_signatures:
            adapter.signer = signing.verify_file(path, keys, adapter.data)
        library.adapters[adapter.name] = adapter
    claimed: dict[tuple[str, str], ProfileBuild] = {}
    for path in sorted(root.glob("*.toml")):
        soc = _load_soc(path, library.adapters)
        if require_signatures:
            soc.signer = signing.verify_file(path, keys)
        key = soc.soc_model.upper()
        if key in library.socs:
            raise ConfigError(f"{path}: soc_model {soc.soc_model} is already profiled in {library.socs[key].path}",
                              hint="one profile file per SoC: merge the builds into one file")
        for build in soc.builds:
            other = claimed.get((key, build.microcode))
            if other is not None:
                raise ConfigError(f"{build.where}: build {build.soc_model} {build.microcode!r} is already claimed "
                                  f"at {other.where}", hint="a build has one expected signature: remove one entry")
            claimed[(key, build.microcode)] = build
        library.socs[key] = soc
    if not library.socs:
        raise ConfigError(f"profile library {root} has no *.toml profiles", hint=_HINT)
    station = signing.station_trust().station
    if require_signatures and station:  # a station never goes back to an older profile it replaced
        check_and_record(station, {soc: (p.version, p.path) for soc, p in library.socs.items()})
    if library.dev_signed:
        log.warning("profile library %s is signed with the DEVELOPMENT key (trusted here by the station's opt-in "
                    "or a --pubkey naming it)", root)
    return library


def profile_stub(soc_manufacturer: str, soc_model: str, microcode: str, signature: Signature,
                 suggested_adapter: str | None, evidence: str) -> str:
    """A TOML [[build]] entry for an engineer to review and add to the SoC's profile.

    The SoC, microcode and evidence strings are the phone's: they are written as TOML values
    (escaped: a newline cannot start a table a reviewer then signs) and shown in the comments only
    with their control characters made visible."""
    adapter = suggested_adapter or "REVIEW: no adapter in the library protects this accumulator"
    if signature.bits is None:  # nothing overflowed: width and rule need the vendor's documentation
        bits, overflow = "32  # REVIEW: no overflow observed up to 32 bits", "REVIEW: not observable"
    else:
        bits, overflow = str(signature.bits), signature.overflow
    return (f"# Profile stub for an unknown microcode build - REVIEW before adding to firmware_profiles/.\n"
            f"# SoC: {printable(soc_manufacturer)} {printable(soc_model)}\n# Evidence: {printable(evidence, 1024)}\n"
            f"[[build]]\nmicrocode = {toml_string(microcode)}\nstage = \"REVIEW: ES or MP\"\n"
            f"accumulator_bits = {bits}\noverflow = {toml_string(overflow)}\nadapter = {toml_string(adapter)}\n"
            f"notes = {toml_string(f'REVIEW: observed on SoC {soc_manufacturer} {soc_model}')}\n")
