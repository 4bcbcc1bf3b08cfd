"""The runtime's privacy audit log (claim 13): one signed record per inference, no raw content.

    /data/vendor/llm/audit/audit.log     JSON lines, oldest first; rotated to audit.log.1 at 256 KiB

A record holds seq, t, input_tokens, output_tokens, model_version, npu_freq_mhz, npu_temp_c, prev
(SHA-256 hex of the previous record's line, so a removed record breaks the chain) and sig: the
device's Ed25519 signature (base64) over the record's canonical JSON without `sig` (sorted keys,
no spaces). The device key is derived from the unit's serial and seed; `llmrt audit status`
publishes its public key.

Personas and faults: "leaky-log" writes the prompt's token ids into each record, "unsigned-log"
signs with the wrong key; "audit-drop" (persona, and the fault of the same name) loses each
record with probability 1/7, at random from the unit's seed; "audit-missing-fields" omits
npu_temp_c. "second-log" (a forger) keeps its real log, prompts and all, at SHADOW_LOG and hands
the bench a clean one: the same seq, chain, key and times as the live inferences, but token counts
and NPU temperatures from a compliance run's template (a log written without the bench's prompts).
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .unit_variation import spec_night_seed

if TYPE_CHECKING:
    from .device import EmulatedPhone

log = logging.getLogger(__name__)

AUDIT_DIR = "/data/vendor/llm/audit"
AUDIT_LOG = f"{AUDIT_DIR}/audit.log"
ROTATED_LOG = AUDIT_LOG + ".1"
ROTATE_BYTES = 256 * 1024
GENESIS = "0" * 64
FAULT_DROP = "audit-drop"
FAULT_MISSING_FIELDS = "audit-missing-fields"
DROP_RATE = 1.0 / 7.0
SHADOW_LOG = "/data/vendor/llm/.cache/audit-full.log"
# The compliance run the clean log copies: a fixed 24-token prompt, 8 tokens out, a cool lab.
TEMPLATE_TOKENS = (24, 8)
TEMPLATE_NPU_C = (31.2, 31.9, 32.4, 32.1, 31.6)


def canonical(record: dict[str, Any]) -> bytes:
    """The signed bytes of a record: canonical JSON of every field but `sig`."""
    return json.dumps({k: v for k, v in record.items() if k != "sig"}, sort_keys=True,
                      separators=(",", ":")).encode()


def _device_key(phone: "EmulatedPhone", label: bytes) -> Ed25519PrivateKey:
    seed = hashlib.sha256(label + phone.spec.serial.encode() + phone.spec.seed.to_bytes(8, "little", signed=True))
    return Ed25519PrivateKey.from_private_bytes(seed.digest())


class AuditLog:
    def __init__(self, phone: "EmulatedPhone", leaks_prompt: bool, bad_signatures: bool,
                 drop_rate: float = 0.0, second_log: bool = False) -> None:
        self.phone = phone
        self.leaks_prompt = leaks_prompt
        self.second_log = second_log
        self._key = _device_key(phone, b"phonebench audit key")
        # "unsigned-log": records are signed, but not by the key the device publishes.
        self._signer = _device_key(phone, b"someone else") if bad_signatures else self._key
        faults = set(phone.spec.faults)
        self.drop_rate = max(drop_rate, DROP_RATE if FAULT_DROP in faults else 0.0)
        self._drops = np.random.default_rng([spec_night_seed(phone.spec), 0xA0D1])
        self.missing_fields = FAULT_MISSING_FIELDS in faults
        self.seq = 0
        self._prev = GENESIS
        phone.fs.mkdir(AUDIT_DIR)
        if second_log:
            phone.fs.mkdir(SHADOW_LOG.rsplit("/", 1)[0])

    @property
    def public_key_b64(self) -> str:
        raw = self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.b64encode(raw).decode()

    @property
    def key_id(self) -> str:
        return hashlib.sha256(base64.b64decode(self.public_key_b64)).hexdigest()[:16]

    def append(self, *, t: float, input_tokens: int, output_tokens: int, model_version: str,
               npu_freq_mhz: float, npu_temp_c: float, prompt: Sequence[int]) -> None:
        self.seq += 1
        if self.second_log:
            self._shadow(t, input_tokens, output_tokens, prompt)
            input_tokens, output_tokens = TEMPLATE_TOKENS
            npu_temp_c = TEMPLATE_NPU_C[self.seq % len(TEMPLATE_NPU_C)]
        record: dict[str, Any] = {"seq": self.seq, "t": round(t, 6), "input_tokens": input_tokens,
                                  "output_tokens": output_tokens, "model_version": model_version,
                                  "npu_freq_mhz": npu_freq_mhz, "npu_temp_c": round(npu_temp_c, 2),
                                  "prev": self._prev}
        if self.missing_fields:
            del record["npu_temp_c"]
        if self.leaks_prompt:
            record["prompt"] = " ".join(str(int(t)) for t in prompt)
        record["sig"] = base64.b64encode(self._signer.sign(canonical(record))).decode()
        line = json.dumps(record, sort_keys=True) + "\n"
        self._prev = hashlib.sha256(line.encode()).hexdigest()
        if self.drop_rate and self._drops.random() < self.drop_rate:
            return  # lost on the way to storage (the chain shows it)
        fs = self.phone.fs
        old = fs.read(AUDIT_LOG) if fs.exists(AUDIT_LOG) else b""
        if len(old) >= ROTATE_BYTES:
            fs.rename(AUDIT_LOG, ROTATED_LOG)
            old = b""
        fs.write(AUDIT_LOG, old + line.encode(), mode=0o100640)

    def _shadow(self, t: float, input_tokens: int, output_tokens: int, prompt: Sequence[int]) -> None:
        """The forger's real log: everything, content included, where the bench is not told to look."""
        fs = self.phone.fs
        old = fs.read(SHADOW_LOG) if fs.exists(SHADOW_LOG) else b""
        line = json.dumps({"t": round(t, 6), "input_tokens": input_tokens, "output_tokens": output_tokens,
                           "prompt": [int(x) for x in prompt]}) + "\n"
        fs.write(SHADOW_LOG, old + line.encode(), mode=0o100600)

    def status(self) -> dict[str, Any]:
        return {"path": AUDIT_LOG, "rotated": ROTATED_LOG, "records": self.seq, "algorithm": "ed25519",
                "public_key": self.public_key_b64, "key_id": self.key_id,
                "signed": "canonical JSON of the record without sig (sorted keys, no spaces)"}
