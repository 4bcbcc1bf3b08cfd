"""Ed25519 signatures for firmware profiles and overflow adapters (detached `<file>.sig`).

A signature file holds one line: `ed25519 <key-id> <base64 signature of the file's bytes>`;
the key id is the first 16 hex digits of SHA-256 over the raw public key.

Keys: the repository ships a DEVELOPMENT key pair (firmware_profiles/keys/); its private half is
in the repository, so anyone can sign with it. It is trusted only where a station opts in by
name (`trust_development_key = true` in its station file; an emulated station does), or where a
command names its public key (--pubkey). A lab signs with its own key: PHONEBENCH_SIGNING_KEY
names the private key (PEM, PKCS#8) for `bench profiles sign`, PHONEBENCH_TRUSTED_KEYS lists the
public keys (PEM, separated by os.pathsep) that verification accepts. See firmware_profiles/README.md.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .paths import data_dir
from .decoding import read_text
from .errors import ConfigError
from .files import write_atomically

log = logging.getLogger(__name__)

KEYS_DIR = data_dir("firmware_profiles") / "keys"
DEV_PUBLIC_KEY = KEYS_DIR / "dev-ed25519.pub"
DEV_PRIVATE_KEY = KEYS_DIR / "dev-only" / "dev-ed25519.pem"  # public knowledge: development only
SIGNING_KEY_ENV = "PHONEBENCH_SIGNING_KEY"
TRUSTED_KEYS_ENV = "PHONEBENCH_TRUSTED_KEYS"
SUFFIX = ".sig"
_ALGORITHM = "ed25519"
_HINT = "sign it with `bench profiles sign` (see firmware_profiles/README.md)"
DEV_KEY_NOTE = "signed with the development key, trusted by station opt-in"
_OPT_IN_HINT = (f"on a development or emulated station, opt in with `trust_development_key = true` at the top of "
                f"its station file; a lab signs with its own key (${SIGNING_KEY_ENV}) and lists its public half "
                f"in ${TRUSTED_KEYS_ENV}; `--pubkey {DEV_PUBLIC_KEY}` names it for one command")


class SignatureError(ConfigError):
    """A profile or adapter is unsigned, tampered with, or signed by an untrusted key."""


@dataclass(frozen=True)
class TrustedKey:
    key: Ed25519PublicKey
    key_id: str
    path: Path
    is_dev: bool


@dataclass(frozen=True)
class StationTrust:
    """Whose keys this process verifies with: the station it works for, and whether that station
    opted in to the development key (set by the bench session for its station)."""
    station: str | None = None
    development: bool = False


_trust = StationTrust()


def station_trust() -> StationTrust:
    return _trust


@contextlib.contextmanager
def trusting(station: str | None, development: bool) -> Iterator[StationTrust]:
    """While a station is in use: its name and its development-key opt-in govern trusted_keys()."""
    global _trust
    previous, _trust = _trust, StationTrust(station, development)
    try:
        yield _trust
    finally:
        _trust = previous


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _dev_key_id() -> str | None:
    try:
        return key_id(load_public_key(DEV_PUBLIC_KEY))
    except ConfigError:
        return None


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    path = Path(path).expanduser()
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise ConfigError(f"signing key {path} does not exist",
                          hint=f"pass --key or set {SIGNING_KEY_ENV}; create one with "
                               "`openssl genpkey -algorithm ed25519 -out key.pem`") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"signing key {path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"signing key {path} is not an Ed25519 key",
                          hint="`openssl genpkey -algorithm ed25519 -out key.pem` makes one")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    path = Path(path).expanduser()
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"public key {path} does not exist",
                          hint=f"pass --pubkey or set {TRUSTED_KEYS_ENV}") from None
    except ValueError as exc:
        raise ConfigError(f"public key {path} is not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"public key {path} is not an Ed25519 key")
    return key


def public_pem(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)


def signing_key_path(explicit: str | Path | None = None) -> Path:
    """--key, else $PHONEBENCH_SIGNING_KEY, else the development key (with a warning)."""
    if explicit:
        return Path(explicit)
    if os.environ.get(SIGNING_KEY_ENV):
        return Path(os.environ[SIGNING_KEY_ENV])
    log.warning("signing with the DEVELOPMENT key %s: not for production profiles", DEV_PRIVATE_KEY)
    return DEV_PRIVATE_KEY


def trusted_keys(paths: Sequence[str | Path] | None = None, development: bool | None = None) -> list[TrustedKey]:
    """Keys verification accepts: `paths` (named by the caller: the development key among them is
    trusted), else $PHONEBENCH_TRUSTED_KEYS; the development key besides only where the station
    opted in (`development`, default: the station in use, see trusting())."""
    development = _trust.development if development is None else development
    named = bool(paths)
    if not paths:
        env = os.environ.get(TRUSTED_KEYS_ENV, "")
        paths = [p for p in env.split(os.pathsep) if p]
    dev = _dev_key_id()
    keys = []
    for path in paths:
        public = load_public_key(path)
        ident = key_id(public)
        if ident == dev and not named and not development:
            log.warning("%s lists the DEVELOPMENT key %s: not trusted unless the station opts in "
                        "(trust_development_key = true)", TRUSTED_KEYS_ENV, path)
            continue
        keys.append(TrustedKey(public, ident, Path(path), ident == dev))
    if development and dev is not None and all(k.key_id != dev for k in keys):
        keys.append(TrustedKey(load_public_key(DEV_PUBLIC_KEY), dev, DEV_PUBLIC_KEY, True))
    return keys


def sign_bytes(data: bytes, private: Ed25519PrivateKey) -> str:
    signature = base64.b64encode(private.sign(data)).decode()
    return f"{_ALGORITHM} {key_id(private.public_key())} {signature}\n"


def verify_bytes(data: bytes, signature_text: str, trusted: Sequence[TrustedKey], what: str) -> TrustedKey:
    """Check `data` against a signature line; returns the key that signed it."""
    parts = signature_text.split()
    if len(parts) != 3 or parts[0] != _ALGORITHM:
        raise SignatureError(f"{what}: malformed signature (expected `{_ALGORITHM} <key-id> <base64>`)", hint=_HINT)
    _, ident, encoded = parts
    key = next((k for k in trusted if k.key_id == ident), None)
    if key is None and ident == _dev_key_id():
        station = f"station {_trust.station!r}" if _trust.station else "this bench"
        raise SignatureError(f"{what}: signed with the DEVELOPMENT key {ident}, whose private half is in the "
                             f"repository (anyone can sign with it); {station} does not trust it", hint=_OPT_IN_HINT)
    if key is None:
        raise SignatureError(f"{what}: signed by key {ident}, which is not trusted "
                             f"(trusted: {', '.join(k.key_id for k in trusted) or 'none'})",
                             hint=f"add its public key to {TRUSTED_KEYS_ENV} or re-sign with a trusted key")
    try:
        key.key.verify(base64.b64decode(encoded, validate=True), data)
    except (InvalidSignature, ValueError):
        raise SignatureError(f"{what}: signature does not match its content (tampered or edited after signing)",
                             hint=f"restore the file, or review the change and {_HINT}") from None
    return key


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def sign_file(path: str | Path, private: Ed25519PrivateKey) -> Path:
    path = Path(path)
    out = signature_path(path)
    write_atomically(out, sign_bytes(path.read_bytes(), private))
    return out


def verify_file(path: str | Path, trusted: Sequence[TrustedKey], data: bytes | None = None) -> TrustedKey:
    """Verify `path` (or `data` read from it) against `path.sig`."""
    path = Path(path)
    sig = signature_path(path)
    if not sig.exists():
        raise SignatureError(f"{path}: unsigned (no {sig.name})", hint=_HINT)
    text = read_text(sig, "signature", error=SignatureError, hint=_HINT)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SignatureError(f"{path}: cannot be read ({exc.strerror or exc})",
                                 hint="check the file and its permissions") from None
    return verify_bytes(data, text, trusted, str(path))
