"""What makes one emulated phone differ from another: its identity, personas, faults and seed."""
from __future__ import annotations

from dataclasses import dataclass, field

# Faults the device model itself understands ("kill-on:<command>" is a pattern).
DEVICE_FAULTS = {"no-runtime", "no-llamacpp", "low-battery", "skin-sensor-drift"}


@dataclass
class PhoneSpec:
    """What makes one emulated phone differ from another (set per phone in the station file)."""

    serial: str = "EMU0001"
    soc_manufacturer: str = "Qualcomm"
    soc_model: str = "SM8650"
    board_platform: str = "pineapple"
    hardware: str = "qcom"
    product_model: str = "PB-Emu Pro"
    product_name: str = "pbemu"
    product_device: str = "pbemu"
    build_fingerprint: str = "phonebench/pbemu/pbemu:15/AP3A.241105.008/12345678:user/release-keys"
    npu_persona: str = "SM8650-MP"          # which microcode build the emulated NPU runs
    sla_persona: str = "nominal"            # behaviour persona for SLA checks (slow, jittery, hot, ...)
    # Injected faults: "kill-on:<command>" (adbd dies when it runs), "no-runtime", "no-llamacpp", "low-battery",
    # "skin-sensor-drift", and those the runtime and world understand.
    faults: list[str] = field(default_factory=list)
    seed: int = 0

    def props(self) -> dict[str, str]:
        return {
            "ro.serialno": self.serial,
            "ro.boot.serialno": self.serial,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.soc.model": self.soc_model,
            "ro.board.platform": self.board_platform,
            "ro.hardware": self.hardware,
            "ro.product.model": self.product_model,
            "ro.product.name": self.product_name,
            "ro.product.device": self.product_device,
            "ro.product.manufacturer": "phonebench",
            "ro.build.fingerprint": self.build_fingerprint,
            "ro.build.version.sdk": "35",
            "ro.build.version.release": "15",
            "ro.build.type": "user",
        }
