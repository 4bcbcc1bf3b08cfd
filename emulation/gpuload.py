"""A GPU load generator on the emulated phone: the `gpuload` shell command the contention check starts.

    gpuload start --target 0.75 [--kind video+call]   -> {"running": true, ...}
    gpuload status                                     -> {"running": ..., "gpu_busy": 0.76, ...}
    gpuload stop                                       -> {"running": false, "gpu_busy_mean": ...}

Answers are JSON lines like the runtime's. `gpu_busy` is the GPU busy fraction the tool says it
measures, near the target. Fault "gpu-load-weak": the load never gets the GPU past ~50 % (a
throttled GPU), so a check that needs > 70 % must not pass. Persona "fake-gpu-load": the tool
reports 80 % busy and loads nothing; "phantom-gpu-load" also has the kernel's counters say so;
"light-gpu-load" runs a real 30 % load while tool and counters say 80 %. A real load draws
its SoC's GPU draw at full load (npu_personas.Soc.gpu_full_w: 1.7-2.7 W) x the unit's GPU power factor (unit_variation: ~3 % unit to unit) x its busy fraction
beside the runtime's work (world.set_background: on the supply, and as heat next to the CPU); the
runtime feels it as contention.

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

from .npu_personas import get_persona
from .unit_variation import spec_night_seed
from .runtime_personas import runtime_persona
from .shell import CommandResult, ShellContext

if TYPE_CHECKING:
    from .device import EmulatedPhone

KINDS = ("video", "call", "video+call", "game")
FAULT_WEAK = "gpu-load-weak"
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
        self._rng = np.random.default_rng([spec_night_seed(phone.spec), 0x6B0])  # the load's wobble: the night's
        self._load: _Load | None = None
        self._offset = 0.0  # how far the achieved load sits from the target (per start)
        self._samples: list[float] = []
        persona = runtime_persona(phone.spec.sla_persona)
        self.fake_busy = persona.gpuload_fake_busy
        self.fake_counters = persona.gpu_counters_fake  # the kernel's busy counters tell the same lie
        self.full_w = get_persona(phone.spec.npu_persona).die.gpu_full_w
        self.real_busy = persona.gpuload_real_busy  # with fake_busy: the load it really runs (None: none)
        self._window = [0.0, 0.0]  # busy, total seconds in the current gpubusy window

    def _achieved(self) -> float:
        """The load's mean busy fraction (0 without a load): what it draws power for."""
        if self._load is None:
            return 0.0
        if self.fake_busy is not None:
            return 0.0 if self.real_busy is None else float(self.real_busy)
        achieved = self._load.target + self._offset
        return float(np.clip(min(achieved, WEAK_CEILING) if self.weak else achieved, 0.0, 1.0))

    def busy(self) -> float:
        """The GPU busy fraction now: its mean, wobbling by a point from moment to moment."""
        achieved = self._achieved()
        if achieved == 0.0 or self.fake_busy is not None:
            return achieved
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
                world = self.phone.world
                world.set_background("gpu", self.full_w * world.variation.gpu_power * self._achieved())
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
