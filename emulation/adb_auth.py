"""ADB authentication policy of the emulated daemon: which host keys the "phone" trusts.

Keys are in Android's public-key format, the one `adbkey.pub` and a phone's
/data/misc/adb/adb_keys hold: base64 of the RSAPublicKey struct, optionally followed by
" user@host". A host proves it holds a key by signing the daemon's 20-byte token with
RSA PKCS#1 v1.5, the token standing in for a SHA-1 digest.
"""
from __future__ import annotations

import base64
import binascii
import logging
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

from phonebench.core.errors import ConfigError

log = logging.getLogger(__name__)

_MODULUS_BYTES = 2048 // 8
# modulus_size_words, n0inv, modulus (LE), rr (LE), exponent
_PUBKEY_STRUCT = struct.Struct(f"<II{_MODULUS_BYTES}s{_MODULUS_BYTES}sI")


@dataclass(frozen=True)
class AndroidPublicKey:
    n: int
    e: int
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        """Short id for logs: the low 32 bits of the modulus, as hex."""
        return f"{self.n & 0xFFFFFFFF:08x}"

    def same_key(self, other: "AndroidPublicKey") -> bool:
        return (self.n, self.e) == (other.n, other.e)

    def verify(self, token: bytes, signature: bytes) -> bool:
        public = rsa.RSAPublicNumbers(self.e, self.n).public_key()
        try:
            public.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
        except (InvalidSignature, ValueError):
            return False
        return True


def parse_android_pubkey(text: str | bytes) -> AndroidPublicKey:
    """Parse one key line ("<base64> user@host", NULs and whitespace tolerated)."""
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    blob, _, comment = text.strip().strip("\0").strip().partition(" ")
    try:
        raw = base64.b64decode(blob, validate=True)
        words, _n0inv, modulus, _rr, exponent = _PUBKEY_STRUCT.unpack(raw)
    except (binascii.Error, struct.error) as exc:
        raise ValueError(f"not an Android RSA public key ({exc})") from None
    if words != _MODULUS_BYTES // 4:
        raise ValueError(f"not an Android RSA-2048 public key (modulus of {words} words)")
    return AndroidPublicKey(int.from_bytes(modulus, "little"), exponent, comment.strip("\0").strip())


def load_keys(spec: str | Path) -> list[AndroidPublicKey]:
    """A key string ("<base64> user@host"), or the path of a file of keys one per line
    (adbkey.pub, a phone's adb_keys)."""
    # An RSA-2048 key is ~700 base64 characters; anything shorter is taken for a path.
    if isinstance(spec, str) and len(spec.strip().split(" ", 1)[0]) >= 512:
        try:
            return [parse_android_pubkey(spec)]
        except ValueError as exc:
            raise ConfigError(f"allowed ADB key {spec[:24]}...: {exc}",
                              hint="use the contents or the path of an adbkey.pub file") from None
    path = Path(spec).expanduser()
    try:
        lines = path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError as exc:
        raise ConfigError(f"allowed ADB key file {path}: {exc.strerror}",
                          hint="give the path of a host's adbkey.pub (e.g. ~/.android/adbkey.pub) "
                               "or the key itself") from None
    keys = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                keys.append(parse_android_pubkey(line))
            except ValueError as exc:
                raise ConfigError(f"allowed ADB key file {path} line {number}: {exc}",
                                  hint="one adbkey.pub line per key") from None
    if not keys:
        raise ConfigError(f"allowed ADB key file {path}: no key in it", hint="one adbkey.pub line per key")
    return keys


# Stands for "the host's key, already in the phone's adb_keys" when the phone trusts every host.
TRUSTED_HOST = AndroidPublicKey(0, 0, "a host this phone already trusts")
_SIGNATURE_BYTES = 2048 // 8


class AuthPolicy:
    """What the emulated phone knows of hosts, and what its user does with the "Allow USB
    debugging?" prompt.

    accept_any, prompt=False (the default): the phone already trusts the host ("always allow" was
    ticked before): the host's signature is accepted, so the first connection goes straight
    online, as on a lab's phones.
    accept_any, prompt=True: a first connection from an unknown key: the signature is refused,
    the host offers its public key, the user accepts it and it is remembered (the stock client
    prints "failed to authenticate" meanwhile).
    allowed_keys: key strings or key files pre-installed on the phone; with accept_any off,
    only these authenticate and any other offered key is refused.
    """

    def __init__(self, accept_any: bool = True, allowed_keys: Sequence[str | Path] = (), prompt: bool = False) -> None:
        self.accept_any = accept_any
        self.prompt = prompt
        self._lock = threading.Lock()
        self._known: list[AndroidPublicKey] = [key for spec in allowed_keys for key in load_keys(spec)]

    def verify(self, token: bytes, signature: bytes) -> AndroidPublicKey | None:
        """The trusted key that made `signature` over `token`, if any. A phone that trusts every
        host cannot check a key it never saw: any RSA-2048 signature stands for the host's."""
        with self._lock:
            known = list(self._known)
        key = next((key for key in known if key.verify(token, signature)), None)
        if key is None and self.accept_any and not self.prompt and len(signature) == _SIGNATURE_BYTES:
            return TRUSTED_HOST
        return key

    def offer(self, key_line: bytes) -> AndroidPublicKey | None:
        """A host offers its public key (AUTH RSAPUBLICKEY). Returns the key if accepted."""
        try:
            key = parse_android_pubkey(key_line)
        except ValueError as exc:
            log.warning("adbd: malformed public key offered: %s", exc)
            return None
        with self._lock:
            if any(key.same_key(k) for k in self._known):
                return key
            if not self.accept_any:
                log.warning("adbd: refused key %s (%s): not in the allowed keys", key.fingerprint, key.comment)
                return None
            self._known.append(key)
        log.info("adbd: accepted key %s (%s)", key.fingerprint, key.comment)
        return key
