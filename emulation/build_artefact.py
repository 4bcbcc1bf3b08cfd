"""The artefact of an emulated runtime build (`llmrt-build/1`, docs/builds.md): what a lab's build
system would produce for the emulated phone, and what the phone checks before it installs one.

An artefact is a tar archive (optionally gzip-compressed) holding

    build.toml       the manifest: format, version, the build's behaviour, its files' SHA-256
    build.toml.sig   an Ed25519 signature of build.toml (core/signing.py's one-line format)
    <files>          whatever the manifest's [files] lists (the runtime's libraries)

The signature covers the manifest, the manifest covers every file, so nothing in the archive is
unsigned. The phone trusts its vendor's key; the emulated phone's vendor key is the repository's
DEVELOPMENT key (as for its weights update, emulation/weights.py), so an artefact signed with any
other key, or changed after signing, is refused as a real phone refuses it.

The behaviour is the emulation's physics of the build, never a word the runtime says: how long NPU
work takes (`npu_time`), how much dynamic power it draws (`npu_power`) and how much more the spoken
answer of a dialog draws on top (`speak_power`: a costlier TTS path) relative to the release,
whether the runtime crashes at start, optionally per phone model or SoC.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import posixpath
import sys
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from phonebench.core.signing import DEV_PRIVATE_KEY, DEV_PUBLIC_KEY, key_id, load_private_key, load_public_key, sign_bytes

FORMAT = "llmrt-build/1"
MANIFEST = "build.toml"
SIGNATURE = MANIFEST + ".sig"
MAX_ARTEFACT_BYTES = 256 << 20  # what the emulated installer reads into memory
MAX_MEMBERS = 256
BEHAVIOUR_RANGE = (0.2, 5.0)  # the factors: a build 5x slower is broken, not a regression
FACTORS = ("npu_time", "npu_power", "speak_power")


class ArtefactRefused(Exception):
    """The phone will not install this artefact: `kind` is "bad-signature" (unsigned, signed by
    another key, or changed after signing) or "refused" (not an llmrt-build/1 artefact)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Behaviour:
    """What a build does to the emulated phone (1.0 / false: as the release)."""

    npu_time: float = 1.0  # NPU work (prompt processing and decode) takes this many times as long
    npu_power: float = 1.0  # dynamic power of NPU work
    speak_power: float = 1.0  # dynamic power while the assistant speaks its answer (TTS and streaming decode)
    crash_on_start: bool = False  # the runtime dies as it starts: the install rolls back


@dataclass(frozen=True)
class BuildManifest:
    version: str  # what `llmrt identity` reports once it is installed
    behaviour: Behaviour = Behaviour()
    models: Mapping[str, Behaviour] = field(default_factory=dict)  # product or SoC model -> its behaviour
    files: Mapping[str, str] = field(default_factory=dict)  # archive member -> SHA-256
    install_bytes: int | None = None  # space the installed build takes (None: its files' size)

    def behaviour_for(self, product_model: str, soc_model: str) -> Behaviour:
        """This build's behaviour on a phone: its product model's entry, else its SoC's, else the base."""
        return self.models.get(product_model) or self.models.get(soc_model) or self.behaviour


@dataclass(frozen=True)
class Artefact:
    """An artefact the phone accepted: its manifest and files."""

    sha256: str
    manifest: BuildManifest
    manifest_bytes: bytes  # build.toml as signed
    files: Mapping[str, bytes]

    @property
    def install_bytes(self) -> int:
        return self.manifest.install_bytes if self.manifest.install_bytes is not None else \
            sum(len(d) for d in self.files.values())


# --- writing (a build system's side) -----------------------------------------------------------
def manifest_toml(manifest: BuildManifest) -> bytes:
    """build.toml for `manifest` (a JSON string is a valid TOML basic string)."""
    lines = [f"format = {json.dumps(FORMAT)}", f"version = {json.dumps(manifest.version)}"]
    if manifest.install_bytes is not None:
        lines.append(f"install_bytes = {int(manifest.install_bytes)}")
    lines += ["", "[behaviour]", *_behaviour_lines(manifest.behaviour, Behaviour())]
    for model, behaviour in manifest.models.items():
        lines += ["", f"[behaviour.models.{json.dumps(model)}]", *_behaviour_lines(behaviour, None)]
    lines += ["", "[files]", *(f"{json.dumps(name)} = {json.dumps(digest)}" for name, digest in manifest.files.items())]
    return ("\n".join(lines) + "\n").encode()


def _behaviour_lines(behaviour: Behaviour, base: Behaviour | None) -> list[str]:
    out = []
    for f in fields(Behaviour):
        value = getattr(behaviour, f.name)
        if base is None or value != getattr(base, f.name):
            out.append(f"{f.name} = {json.dumps(value)}")
    return out


def write_artefact(version: str, behaviour: Behaviour = Behaviour(), models: Mapping[str, Behaviour] | None = None,
                   *, payload_bytes: int = 64 << 10, install_bytes: int | None = None,
                   key: Ed25519PrivateKey | None = None, tamper: bool = False, signed: bool = True) -> bytes:
    """The artefact of a build, deterministically (the same arguments give the same bytes, so the
    same SHA-256): a payload library of `payload_bytes` drawn from the version, its manifest signed
    with `key` (default: the development key, which the emulated phone trusts).

    Negative controls: `tamper` changes the manifest after signing (and leaves the signature);
    `signed=False` leaves the signature out; a `key` of another pair is a key the phone does not trust.
    """
    library = _payload(version, payload_bytes)
    manifest = manifest_toml(BuildManifest(version, behaviour, dict(models or {}),
                                           {"lib/libllmrt.so": hashlib.sha256(library).hexdigest()}, install_bytes))
    signature = sign_bytes(manifest, key or _dev_key()).encode()
    if tamper:
        manifest = manifest.replace(b"[files]", b"# edited after signing\n[files]")
    members = {MANIFEST: manifest, **({SIGNATURE: signature} if signed else {}), "lib/libllmrt.so": library}
    return tar_bytes(members)


def tar_bytes(members: Mapping[str, bytes]) -> bytes:
    """A POSIX (ustar) tar of `members`, in order, with fixed owners and times: reproducible bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _payload(version: str, size: int) -> bytes:
    seed = hashlib.sha256(version.encode()).digest()
    blocks = (size + 31) // 32
    return b"".join(hashlib.sha256(seed + i.to_bytes(8, "little")).digest() for i in range(blocks))[:size]


@lru_cache(maxsize=1)
def _dev_key() -> Ed25519PrivateKey:
    return load_private_key(DEV_PRIVATE_KEY)


@lru_cache(maxsize=1)
def vendor_key() -> Ed25519PublicKey:
    """The key the emulated phone's installer trusts: its vendor's, the development key."""
    return load_public_key(DEV_PUBLIC_KEY)


# --- reading (the phone's side) ----------------------------------------------------------------
def read_artefact(data: bytes, trusted: Ed25519PublicKey | None = None) -> Artefact:
    """The artefact in `data`, verified as the phone verifies it; ArtefactRefused says why not."""
    if len(data) > MAX_ARTEFACT_BYTES:
        raise ArtefactRefused("refused", f"artefact of {len(data)} bytes is larger than the installer takes "
                                         f"({MAX_ARTEFACT_BYTES})")
    members = _members(data)
    manifest_bytes, signature = members.pop(MANIFEST, None), members.pop(SIGNATURE, None)
    if manifest_bytes is None:
        raise ArtefactRefused("refused", f"not an {FORMAT} artefact: no {MANIFEST}")
    if signature is None:
        raise ArtefactRefused("bad-signature", f"signature verification failed: {SIGNATURE} missing (unsigned build)")
    _verify(manifest_bytes, signature, trusted or vendor_key())
    manifest = parse_manifest(manifest_bytes)
    for name, digest in manifest.files.items():
        if name not in members:
            raise ArtefactRefused("refused", f"{MANIFEST} lists {name}, which the artefact lacks")
        if hashlib.sha256(members[name]).hexdigest() != digest:
            raise ArtefactRefused("bad-signature", f"signature verification failed: {name} does not match "
                                                   "its signed digest (changed after signing)")
    unsigned = sorted(set(members) - set(manifest.files))
    if unsigned:
        raise ArtefactRefused("bad-signature", f"signature verification failed: {unsigned[0]} is not in the "
                                               f"signed {MANIFEST}")
    return Artefact(hashlib.sha256(data).hexdigest(), manifest, manifest_bytes, members)


def _members(data: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            total = 0
            for count, info in enumerate(tar, start=1):
                name = posixpath.normpath(info.name)
                if info.isdir():  # `tar -C folder .` lists its folders: they hold nothing to sign
                    continue
                if count > MAX_MEMBERS or not info.isfile() or name.startswith(("/", "..")) or name in out:
                    raise ArtefactRefused("refused", f"not an {FORMAT} artefact: member {info.name[:100]!r} "
                                                     "(regular files and folders with relative paths only, "
                                                     f"each once, at most {MAX_MEMBERS})")
                total += info.size
                if total > MAX_ARTEFACT_BYTES:
                    raise ArtefactRefused("refused", "artefact unpacks to more than the installer takes")
                handle = tar.extractfile(info)
                out[name] = handle.read() if handle is not None else b""
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArtefactRefused("refused", f"not an {FORMAT} artefact (a tar archive): {exc}") from None
    return out


def _verify(manifest: bytes, signature: bytes, trusted: Ed25519PublicKey) -> None:
    parts = signature.decode("ascii", errors="replace").split()
    if len(parts) < 3 or parts[0] != "ed25519":
        raise ArtefactRefused("bad-signature", f"signature verification failed: {SIGNATURE} is malformed")
    parts[2:] = ["".join(parts[2:])]  # base64 wrapped over lines (`base64` without -w0) is one signature
    if parts[1] != key_id(trusted):
        raise ArtefactRefused("bad-signature", f"signature verification failed: signed by key {parts[1][:16]}, "
                                               f"not this device's release key {key_id(trusted)}")
    try:
        trusted.verify(base64.b64decode(parts[2], validate=True), manifest)
    except (InvalidSignature, ValueError):
        raise ArtefactRefused("bad-signature", f"signature verification failed: {MANIFEST} does not match its "
                                               "signature (changed after signing)") from None


def parse_manifest(data: bytes) -> BuildManifest:
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ArtefactRefused("refused", f"{MANIFEST}: not UTF-8 TOML ({exc})") from None
    _only(doc, {"format", "version", "install_bytes", "behaviour", "files"}, MANIFEST)
    if doc.get("format") != FORMAT:
        raise ArtefactRefused("refused", f"{MANIFEST}: format is {str(doc.get('format'))[:40]!r}, this runtime "
                                         f"installs {FORMAT}")
    version = doc.get("version")
    if not isinstance(version, str) or not version.strip():
        raise ArtefactRefused("refused", f"{MANIFEST}: version: expected a non-empty string")
    install_bytes = doc.get("install_bytes")
    if install_bytes is not None and (not isinstance(install_bytes, int) or isinstance(install_bytes, bool)
                                      or install_bytes < 0):
        raise ArtefactRefused("refused", f"{MANIFEST}: install_bytes: expected a whole number of bytes >= 0")
    table = doc.get("behaviour", {})
    if not isinstance(table, dict):
        raise ArtefactRefused("refused", f"{MANIFEST}: [behaviour]: expected a table")
    models = table.pop("models", {})
    base = _behaviour(table, Behaviour(), "[behaviour]")
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise ArtefactRefused("refused", f"{MANIFEST}: [behaviour.models]: expected a table per model")
    files = doc.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) and len(v) == 64 for v in files.values()):
        raise ArtefactRefused("refused", f"{MANIFEST}: [files]: expected \"member\" = \"<sha256 hex>\" lines")
    return BuildManifest(version.strip(), base,
                         {str(m): _behaviour(t, base, f"[behaviour.models.{m!r}]") for m, t in models.items()},
                         {posixpath.normpath(str(k)): v.lower() for k, v in files.items()}, install_bytes)


def _behaviour(table: dict[str, Any], base: Behaviour, where: str) -> Behaviour:
    _only(table, {f.name for f in fields(Behaviour)}, f"{MANIFEST} {where}")
    values: dict[str, Any] = {}
    for name in FACTORS:
        if name in table:
            value = table[name]
            low, high = BEHAVIOUR_RANGE
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
                raise ArtefactRefused("refused", f"{MANIFEST} {where}: {name}: expected a factor in {low}..{high}")
            values[name] = float(value)
    if "crash_on_start" in table:
        if not isinstance(table["crash_on_start"], bool):
            raise ArtefactRefused("refused", f"{MANIFEST} {where}: crash_on_start: expected true or false")
        values["crash_on_start"] = table["crash_on_start"]
    return replace(base, **values)


def _only(table: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ArtefactRefused("refused", f"{where}: unknown key {unknown[0][:40]!r} (known: {', '.join(sorted(known))})")
