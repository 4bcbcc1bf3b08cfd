"""Client of the GPU load generator the contention check runs on the phone (`gpuload`).

    gpuload start --target 0.75 --kind video+call
    gpuload status        -> {"running": true, "gpu_busy": 0.76, "gpu_busy_mean": 0.76, ...}
    gpuload stop

JSON lines like the runtime's (docs/runtime-contract.md, "Bench tools on the device"). A phone
without the tool raises UnsupportedCapability: the check is skipped with the reason.
"""
from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from typing import Any

from phonebench.core.errors import CommandFailed, UnsupportedCapability
from .device import Device
from .runtime import parse_json_lines

log = logging.getLogger(__name__)


@dataclass
class GpuLoadState:
    running: bool
    gpu_busy: float | None = None       # the GPU's busy fraction now
    gpu_busy_mean: float | None = None  # over this load's status samples
    target: float | None = None
    kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class GpuLoad:
    def __init__(self, device: Device, command: str = "gpuload") -> None:
        self.device = device
        self.command = command

    def _call(self, *args: str) -> GpuLoadState:
        line = " ".join(shlex.quote(a) for a in (self.command, *args))
        result = self.device.shell(line)
        if result.exit_code == 127:
            raise UnsupportedCapability(f"{self.device.name}: no GPU load generator `{self.command}` on the device",
                                        hint="push the bench's GPU load tool to the phone (docs/runtime-contract.md)")
        objects = parse_json_lines(result.output)
        if result.exit_code != 0 or not objects:
            message = next((o["error"] for o in objects if "error" in o), result.output.strip()[-300:])
            raise CommandFailed(f"{self.device.name}: `{line}` failed ({result.exit_code}): {message}",
                                hint="gpuload start --target F [--kind video|call|video+call|game] | status | stop")
        data = objects[-1]
        names = {"running", "gpu_busy", "gpu_busy_mean", "target", "kind"}
        return GpuLoadState(**{k: v for k, v in data.items() if k in names},
                            extra={k: v for k, v in data.items() if k not in names})

    def start(self, target: float, kind: str = "video+call") -> GpuLoadState:
        return self._call("start", "--target", f"{target:g}", "--kind", kind)

    def status(self) -> GpuLoadState:
        return self._call("status")

    def stop(self) -> GpuLoadState:
        return self._call("stop")


# The GPU driver's own busy counters: "busy total" microseconds over its last sampling window
# (Qualcomm KGSL). The bench reads them itself, so the load's effect does not rest on the tool.
GPU_BUSY_NODES = ("/sys/class/kgsl/kgsl-3d0/gpubusy",)


def read_gpu_busy(device: Device) -> float | None:
    """The GPU's busy fraction by its driver's counters; None when the phone exposes none."""
    for node in GPU_BUSY_NODES:
        result = device.shell(["cat", node])
        fields = result.output.split()
        if result.exit_code != 0 or len(fields) != 2 or not all(f.isdigit() for f in fields):
            continue
        busy, total = (int(f) for f in fields)
        if total > 0:
            return min(busy / total, 1.0)
    log.debug("%s: no GPU busy counters (%s)", device.name, ", ".join(GPU_BUSY_NODES))
    return None
