"""A GPU load generator on the emulated phone: the `gpuload` shell command the contention check starts.

    gpuload start --target 0.75 [--kind video+call]   -> {"running": true, ...}
    gpuload status                                     -> {"running": ..., "gpu_busy": 0.76, ...}
    gpuload stop                                       -> {"running": false, "gpu_busy_mean": ...}

Answers are JSON lines like the runtime's. `gpu_busy` is the GPU busy fraction the tool says it
measures, near the target. Fault "gpu-load-weak": the load never gets the GPU past ~50 % (a
throttled GPU), so a check that needs > 70 % must not pass. Persona "fake-gpu-load": the tool
reports 80 % busy and loads nothing; "phantom-gpu-load" also has the kernel's counters say so.
A real load draws GPU_FULL_W x its busy fraction beside the runtime's work (world.set_background:
on the supply, and as heat next to the CPU); the runtime feels it as contention.

The kernel's account: the GPU driver's busy counters in
/sys/class/kgsl/kgsl-3d0/gpubusy, `busy total` in microseconds over the last completed window of
GPUBUSY_WINDOW_S (KGSL's format), integrated from the GPU's real busy fraction on every step of
the world's clock.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .unit_variation import unit_seed
from .runtime_personas import runtime_persona
from .shell import CommandResult, ShellContext

if TYPE_CHECKING:
    from .device import EmulatedPhone

KINDS = ("video", "call", "video+call", "game")
FAULT_WEAK = "gpu-load-weak"
GPU_FULL_W = 2.4  # the GPU's draw at 100 % busy (a video + call load on a flagship SoC: ~1.8 W at 75 %)
WEAK_CEILING = 0.5
GPUBUSY = "/sys/class/kgsl/kgsl-3d0/gpubusy"
GPUBUSY_WINDOW_S = 1.0


@dataclass
class _Load:
    target: float
    kind: str
    since_t: float


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise ValueError(message)


@lru_cache(maxsize=1)
def _parser() -> _Parser:
    p = _Parser(prog="gpuload", add_help=False)
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)
    start = sub.add_parser("start", add_help=False)
    start.add_argument("--target", type=float, required=True)
    start.add_argument("--kind", default="video+call", choices=KINDS)
    sub.add_parser("status", add_help=False)
    sub.add_parser("stop", add_help=False)
    return p


class GpuLoad:
    def __init__(self, phone: "EmulatedPhone") -> None:
        self.phone = phone
        self.weak = FAULT_WEAK in phone.spec.faults
        self._rng = np.random.default_rng([unit_seed(phone.spec.seed, phone.spec.serial), 0x6B0])
        self._load: _Load | None = None
        self._offset = 0.0  # how far the achieved load sits from the target (per start)
        self._samples: list[float] = []
        persona = runtime_persona(phone.spec.sla_persona)
        self.fake_busy = persona.gpuload_fake_busy
        self.fake_counters = persona.gpu_counters_fake  # the kernel's busy counters tell the same lie
        self._window = [0.0, 0.0]  # busy, total seconds in the current gpubusy window

    def busy(self) -> float:
        """The GPU busy fraction now (0 without a load): what the GPU really does."""
        if self._load is None or self.fake_busy is not None:
            return 0.0
        achieved = self._load.target + self._offset
        if self.weak:
            achieved = min(achieved, WEAK_CEILING)
        return float(np.clip(achieved + self._rng.normal(0.0, 0.01), 0.0, 1.0))

    def __call__(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        try:
            args = _parser().parse_args(argv[1:])
            if args.verb is None:
                raise ValueError("usage: gpuload start --target F [--kind K] | status | stop")
            if args.verb == "start":
                if not 0.0 < args.target <= 1.0:
                    raise ValueError(f"--target is a busy fraction in (0, 1], got {args.target}")
                self._load = _Load(args.target, args.kind, self.phone.world.clock.now())
                self._offset = float(self._rng.normal(0.015, 0.01))
                self._samples = []
                self.phone.world.set_background("gpu", GPU_FULL_W * self.busy())
                return _lines(self._state())
            if args.verb == "status":
                return _lines(self._state())
            state = self._state()
            self._load = None
            self.phone.world.set_background("gpu", 0.0)
            return _lines({**state, "running": False})
        except ValueError as exc:
            return CommandResult(stderr=(json.dumps({"error": str(exc), "verb": "gpuload"}) + "\n").encode(),
                                 status=2)

    def on_step(self, t: float, dt: float) -> None:
        """Clock listener: the kernel's busy counters, one gpubusy window at a time."""
        said = self.fake_busy if self.fake_counters and self._load is not None else None
        self._window[0] += dt * (self.busy() if said is None else said)
        self._window[1] += dt
        if self._window[1] >= GPUBUSY_WINDOW_S:
            busy_us, total_us = (round(1e6 * x) for x in self._window)
            self.phone.fs.write(GPUBUSY, f"{busy_us:7d} {total_us:7d}\n".encode())
            self._window = [0.0, 0.0]

    def _state(self) -> dict:
        if self._load is None:
            return {"running": False, "gpu_busy": 0.0}
        busy = self.busy() if self.fake_busy is None else float(self.fake_busy)
        self._samples.append(busy)
        now = self.phone.world.clock.now()
        return {"running": True, "target": self._load.target, "kind": self._load.kind, "gpu_busy": round(busy, 4),
                "gpu_busy_mean": round(float(np.mean(self._samples)), 4), "ran_s": round(now - self._load.since_t, 3)}


def _lines(*objects: dict) -> CommandResult:
    return CommandResult("".join(json.dumps(o) + "\n" for o in objects).encode())


def install(phone: "EmulatedPhone") -> GpuLoad:
    tool = GpuLoad(phone)
    phone.shell.register("gpuload", tool)
    phone.fs.write(GPUBUSY, b"      0       0\n")
    phone.world.clock.add_listener(tool.on_step)
    return tool
