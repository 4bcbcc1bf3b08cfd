"""The emulated phone's inference runtime, reached as the device command `llmrt`.

Speaks the runtime contract (docs/runtime-contract.md): JSON for single answers, JSON lines
(one event per token) for generate. Time comes from the phone's simulated world.
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import numpy as np

from emulation.shell import CommandResult, ShellContext

if TYPE_CHECKING:
    from emulation.device import EmulatedPhone

CONTRACT_VERSION = "1.0"
RUNTIME_VERSION = "llmrt 3.2.0-emu"
MODEL_NAME = "assistant-35b-int4mix"
CAPABILITIES = ["identity", "generate", "status"]


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # never exit the emulator process
        raise _ArgError(message)


def _parser() -> _Parser:
    p = _Parser(prog="llmrt", add_help=False)
    sub = p.add_subparsers(dest="verb")
    sub.add_parser("identity", add_help=False)
    sub.add_parser("status", add_help=False)
    g = sub.add_parser("generate", add_help=False)
    g.add_argument("--prompt-tokens", type=int, default=32)
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--seed", type=int, default=0)
    return p


class EmulatedRuntime:
    def __init__(self, phone: "EmulatedPhone") -> None:
        self.phone = phone
        self.rng = np.random.default_rng(phone.spec.seed)

    def __call__(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        try:
            args = _parser().parse_args(argv[1:])
        except _ArgError as exc:
            return CommandResult(stderr=f"llmrt: {exc}\n".encode(), status=2)
        if args.verb is None:
            return CommandResult(stderr=b"llmrt: usage: llmrt identity|status|generate ...\n", status=2)
        return getattr(self, f"_{args.verb}")(args)

    def _identity(self, args: argparse.Namespace) -> CommandResult:
        return _json({"contract": CONTRACT_VERSION, "runtime_version": RUNTIME_VERSION,
                      "model": MODEL_NAME, "microcode": self.phone.spec.npu_persona,
                      "capabilities": CAPABILITIES})

    def _status(self, args: argparse.Namespace) -> CommandResult:
        t = self.phone.world.temperatures()
        return _json({"t": self.phone.world.clock.now(), "thermal_status": self.phone.thermal_status(),
                      "temperatures_c": t, "redundancy": False})

    def _generate(self, args: argparse.Namespace) -> CommandResult:
        world = self.phone.world
        events = [{"event": "start", "t": world.clock.now(), "prompt_tokens": args.prompt_tokens}]
        world.work("prefill", 0.12 + 0.0015 * args.prompt_tokens)
        rng = np.random.default_rng(args.seed)
        for index in range(args.max_tokens):
            world.work("decode", max(0.005, rng.normal(0.045, 0.004)))
            events.append({"event": "token", "index": index, "id": int(rng.integers(0, 32000)),
                           "t": world.clock.now()})
        events.append({"event": "done", "t": world.clock.now(), "tokens": args.max_tokens})
        return CommandResult("".join(json.dumps(e) + "\n" for e in events).encode())


def _json(obj: object) -> CommandResult:
    return CommandResult((json.dumps(obj) + "\n").encode())


def install(phone: "EmulatedPhone") -> None:
    phone.shell.register("llmrt", EmulatedRuntime(phone))
    phone.fs.write("/system/bin/llmrt", b"\x7fELF emulated", mode=0o100755)
