"""DUT identity, collected once per DUT at the edge and attached to every result.

Every string here is the phone's own word and is read through phonebench.core.phone_text.printable:
control characters (terminal escape sequences, newlines, bidi overrides) become visible escapes
and length is bounded, so a phone cannot rewrite the operator's screen or forge record lines."""
from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from phonebench.core.phone_text import printable
from phonebench.drivers.device import Device

log = logging.getLogger(__name__)

_GETPROP_LINE = re.compile(r"^\[(?P<key>[^\]]+)\]: \[(?P<value>.*)\]$")
PROPS = {
    "serial": "ro.serialno",
    "soc_manufacturer": "ro.soc.manufacturer",
    "soc_model": "ro.soc.model",
    "board_platform": "ro.board.platform",
    "hardware": "ro.hardware",
    "product_model": "ro.product.model",
    "build_fingerprint": "ro.build.fingerprint",
}


@dataclass
class DutIdentity:
    name: str
    address: str
    serial: str = ""
    soc_manufacturer: str = ""
    soc_model: str = ""
    board_platform: str = ""
    hardware: str = ""
    product_model: str = ""
    build_fingerprint: str = ""
    runtime_version: str | None = None
    runtime_contract: str | None = None
    model: str | None = None
    microcode: str | None = None
    capabilities: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_getprop(text: str) -> dict[str, str]:
    """Parse `getprop` (no arguments) output: lines of `[key]: [value]`, keys and values made
    printable (phonebench.core.phone_text)."""
    props = {}
    for line in text.splitlines():
        match = _GETPROP_LINE.match(line.strip())
        if match:
            props[printable(match["key"])] = printable(match["value"])
    return props


def collect_identity(device: Device, name: str, address: str) -> DutIdentity:
    """Read getprop and the runtime's identity in two shell calls."""
    props = parse_getprop(device.run("getprop"))
    identity = DutIdentity(name=name, address=address)
    for attr, key in PROPS.items():
        setattr(identity, attr, props.get(key, ""))
    if not identity.soc_model:  # ro.soc.model exists from API 31; older phones only have the board
        identity.soc_model = props.get("ro.board.platform", "")
    _add_runtime_identity(device, identity)
    return identity


def _add_runtime_identity(device: Device, identity: DutIdentity) -> None:
    from phonebench.core.errors import BenchError
    from phonebench.drivers.runtime import RuntimeClient

    try:
        runtime = RuntimeClient(device).identity()
    except BenchError as exc:
        log.warning("%s: no runtime identity (%s)", identity.name, exc)
        return
    identity.runtime_version = _shown(runtime.runtime_version)
    identity.runtime_contract = _shown(runtime.contract)
    identity.model = _shown(runtime.model)
    identity.microcode = _shown(runtime.microcode)
    identity.capabilities = [printable(str(c)) for c in runtime.capabilities]


def _shown(value: str | None) -> str | None:
    return None if value is None else printable(str(value))
