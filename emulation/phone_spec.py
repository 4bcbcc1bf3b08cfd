"""What makes one emulated phone differ from another: its identity, personas, faults and seed."""
from __future__ import annotations

from dataclasses import dataclass, field

# Faults the device model itself understands ("kill-on:<command>" is a pattern).
DEVICE_FAULTS = {"no-runtime", "no-llamacpp", "low-battery", "skin-sensor-drift", "no-return-after-reboot",
                 "data-full"}


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
    build_id: str = "AP3A.241105.008"
    build_incremental: str = "12345678"
    build_fingerprint: str = ""  # "": brand/name/device:release/id/incremental:type/tags, as Android builds it
    npu_persona: str = "SM8650-MP"          # which microcode build the emulated NPU runs
    sla_persona: str = "nominal"            # behaviour persona for SLA checks (slow, jittery, hot, ...)
    # Injected faults: "kill-on:<command>" (adbd dies when it runs), "no-runtime", "no-llamacpp", "low-battery",
    # "skin-sensor-drift", "no-return-after-reboot" (a reboot it never comes back from), "data-full" (16 KiB
    # left on /data: pushes and installs fail with ENOSPC), and those the
    # runtime and world understand.
    faults: list[str] = field(default_factory=list)
    seed: int = 0
    runtime_build: str = ""  # the runtime build it runs (emulation/runtime_builds.py; "" the release)
    # llama.cpp behind the phone's llama-bench / llama-completion: "auto" (the host's real build
    # when `make llama` made one, else the imitation), "real" (the build, or an error), "imitation".
    llamacpp: str = "auto"

    @property
    def fingerprint(self) -> str:
        return self.build_fingerprint or (f"phonebench/{self.product_name}/{self.product_device}:15/{self.build_id}/"
                                          f"{self.build_incremental}:user/release-keys")

    def props(self) -> dict[str, str]:
        """The build properties a user build of this model has, consistent with its fingerprint."""
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
            "ro.product.brand": "phonebench",
            "ro.build.fingerprint": self.fingerprint,
            "ro.build.id": self.build_id,
            "ro.build.display.id": f"{self.build_id} release-keys",
            "ro.build.version.incremental": self.build_incremental,
            "ro.build.version.codename": "REL",
            "ro.build.version.sdk": "35",
            "ro.build.version.release": "15",
            "ro.build.version.security_patch": "2024-11-05",
            "ro.build.product": self.product_device,
            "ro.build.characteristics": "default",
            "ro.build.type": "user",
            "ro.build.tags": "release-keys",
            "ro.debuggable": "0",
            "ro.secure": "1",
            "sys.boot_completed": "1",
        }
