"""Client of the on-device inference runtime (`llmrt`), per docs/runtime-contract.md.

Every answer is JSON lines; they are parsed by field name, unknown fields are kept aside, and
non-JSON lines (stderr noise merged by ADB shell v1) are skipped. A capability the runtime does
not list raises UnsupportedCapability, which suites turn into a skip with the reason.
"""
from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Sequence

from bench.errors import CommandFailed, DeviceError, UnsupportedCapability
from drivers.device import Device

log = logging.getLogger(__name__)

DEFAULT_COMMAND = "llmrt"
DEFAULT_WORKDIR = "/data/local/tmp/phonebench"
PROBE_FORMAT = "llmrt-probe/1"
SUPPORTED_CONTRACT_MAJOR = "1"


class RuntimeCommandFailed(CommandFailed):
    """The runtime answered a command with an error line and a non-zero status."""


class RuntimeProtocolError(DeviceError):
    """The runtime's output does not follow the contract (missing fields, no JSON)."""


def parse_json_lines(output: str) -> list[dict[str, Any]]:
    """JSON objects, one per line; anything else (stderr noise, banners) is skipped."""
    objects = []
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            if line:
                log.debug("runtime noise: %s", line[:200])
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            log.debug("runtime noise (not JSON): %s", line[:200])
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in data.items() if k in names}


def _extra(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k not in names}


@dataclass
class RuntimeIdentity:
    contract: str
    runtime_version: str
    model: str
    microcode: str
    capabilities: list[str] = field(default_factory=list)
    model_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities


@dataclass
class RuntimeStatus:
    t: float
    thermal_status: int | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    redundancy: Any = None
    npu_freq_mhz: float | None = None
    adapter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Generation:
    """One `generate`: token ids with the device's timestamps (seconds, device clock)."""

    tokens: list[int]
    token_times: list[float]
    start_time: float
    done_time: float
    prompt_tokens: int
    adapter: str | None = None

    @property
    def first_token_s(self) -> float | None:
        """Prompt processing plus the first token: start event to first token event."""
        return self.token_times[0] - self.start_time if self.token_times else None

    @property
    def inter_token_s(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]


@dataclass(frozen=True)
class Probe:
    """One dot product to run on the NPU; vectors in the contract's compact form (see encode_runs)."""

    id: str
    a: str
    b: str


@dataclass
class ProbeResult:
    id: str
    length: int
    result: int


@dataclass
class AdapterStatus:
    active: str | None
    spec: dict[str, Any] | None = None
    installed: list[str] = field(default_factory=list)
    applied: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def encode_runs(runs: Iterable[tuple[int, int]]) -> str:
    """(value, count) runs -> "v" / "vxN" segments, comma-separated."""
    return ",".join(f"{v}x{n}" if n != 1 else str(v) for v, n in runs)


def encode_dense(values: Sequence[int]) -> str:
    """A dense INT4 vector -> "@" + one hex nibble per value (two's complement)."""
    return "@" + "".join("%x" % (int(v) & 0xF) for v in values)


class RuntimeClient:
    def __init__(self, device: Device, command: str = DEFAULT_COMMAND, workdir: str = DEFAULT_WORKDIR) -> None:
        self.device = device
        self.command = command
        self.workdir = workdir
        self.runtime_calls = 0  # llmrt invocations (what the fingerprint budget counts)
        self.device_calls = 0   # every shell call and push
        self._identity: RuntimeIdentity | None = None
        self._pushes = 0

    # --- plumbing -----------------------------------------------------------------------
    def _call(self, *args: str, timeout_s: float | None = None) -> list[dict[str, Any]]:
        command = " ".join(shlex.quote(a) for a in (self.command, *args))
        self.runtime_calls += 1
        self.device_calls += 1
        result = self.device.shell(command, timeout_s=timeout_s)
        objects = parse_json_lines(result.output)
        if result.exit_code == 127:
            raise UnsupportedCapability(f"{self.device.name}: no `{self.command}` runtime on the device",
                                        hint="install the vendor runtime, or use the llama.cpp adapter")
        if result.exit_code != 0:
            message = next((o["error"] for o in objects if "error" in o), result.output.strip()[-300:])
            raise RuntimeCommandFailed(f"{self.device.name}: `{command}` failed ({result.exit_code}): {message}",
                                       hint="see docs/runtime-contract.md for the command's arguments")
        return [o for o in objects if "error" not in o]

    def _single(self, *args: str) -> dict[str, Any]:
        objects = self._call(*args)
        if not objects:
            raise RuntimeProtocolError(f"{self.device.name}: `{self.command} {' '.join(args)}` printed no JSON object",
                                       hint="the runtime does not follow docs/runtime-contract.md")
        return objects[-1]

    def _require_fields(self, data: dict[str, Any], names: Sequence[str], what: str) -> None:
        missing = [n for n in names if n not in data]
        if missing:
            raise RuntimeProtocolError(f"{self.device.name}: {what} lacks {', '.join(missing)}",
                                       hint="the runtime does not follow docs/runtime-contract.md")

    # --- contract -----------------------------------------------------------------------
    def identity(self, refresh: bool = False) -> RuntimeIdentity:
        if self._identity is None or refresh:
            data = self._single("identity")
            self._require_fields(data, ("contract", "runtime_version", "model", "microcode"), "identity")
            self._identity = RuntimeIdentity(**_known(RuntimeIdentity, data), extra=_extra(RuntimeIdentity, data))
        return self._identity

    def require(self, capability: str) -> None:
        identity = self.identity()
        if not str(identity.contract).startswith(SUPPORTED_CONTRACT_MAJOR + "."):
            raise UnsupportedCapability(f"{self.device.name}: runtime contract {identity.contract} "
                                        f"(this bench speaks {SUPPORTED_CONTRACT_MAJOR}.x)")
        if not identity.supports(capability):
            raise UnsupportedCapability(
                f"{self.device.name}: runtime {identity.runtime_version} has no `{capability}` capability "
                f"(it offers: {', '.join(identity.capabilities) or 'none'})")

    def status(self) -> RuntimeStatus:
        self.require("status")
        data = self._single("status")
        self._require_fields(data, ("t",), "status")
        return RuntimeStatus(**_known(RuntimeStatus, data), extra=_extra(RuntimeStatus, data))

    def generate(self, max_tokens: int, seed: int = 0, prompt: Sequence[int] | None = None,
                 prompt_tokens: int = 32, temperature: float | None = None,
                 timeout_s: float | None = None) -> Generation:
        self.require("generate")
        args = ["generate", "--max-tokens", str(max_tokens), "--seed", str(seed)]
        args += ["--prompt", ",".join(str(int(t)) for t in prompt)] if prompt is not None else \
                ["--prompt-tokens", str(prompt_tokens)]
        if temperature is not None:
            args += ["--temperature", repr(float(temperature))]
        events = self._call(*args, timeout_s=timeout_s)
        start = next((e for e in events if e.get("event") == "start"), None)
        done = next((e for e in events if e.get("event") == "done"), None)
        if start is None or done is None:
            raise RuntimeProtocolError(f"{self.device.name}: generate output lacks a start or done event",
                                       hint="the runtime does not follow docs/runtime-contract.md")
        tokens = sorted((e for e in events if e.get("event") == "token"), key=lambda e: e["index"])
        if [e["index"] for e in tokens] != list(range(len(tokens))):
            raise RuntimeProtocolError(f"{self.device.name}: generate token events are not 0..n-1")
        return Generation(tokens=[int(e["id"]) for e in tokens], token_times=[float(e["t"]) for e in tokens],
                          start_time=float(start["t"]), done_time=float(done["t"]),
                          prompt_tokens=int(start.get("prompt_tokens", 0)), adapter=start.get("adapter"))

    def probe(self, probes: Sequence[Probe], with_adapter: bool = False) -> list[ProbeResult]:
        """Run a batch of dot products in one runtime call (the batch is pushed as a file)."""
        self.require("probe")
        self._pushes += 1
        path = f"{self.workdir}/probe-{self._pushes}.json"
        batch = {"format": PROBE_FORMAT, "probes": [{"id": p.id, "a": p.a, "b": p.b} for p in probes]}
        self.device_calls += 1
        self.device.push_bytes(json.dumps(batch).encode(), path)
        events = self._call("probe", "--in", path, *(["--with-adapter"] if with_adapter else []))
        results = {str(e["id"]): e for e in events if e.get("event") == "probe" and "result" in e}
        missing = [p.id for p in probes if p.id not in results]
        if missing:
            raise RuntimeProtocolError(f"{self.device.name}: probe returned no result for {', '.join(missing[:5])}")
        return [ProbeResult(p.id, int(results[p.id].get("length", 0)), int(results[p.id]["result"])) for p in probes]

    # --- adapters -----------------------------------------------------------------------
    def adapter_install(self, remote_path: str, sha256: str) -> str:
        self.require("adapter")
        return str(self._single("adapter", "install", remote_path, sha256)["installed"])

    def adapter_activate(self, sha256: str) -> str:
        self.require("adapter")
        return str(self._single("adapter", "activate", sha256)["active"])

    def adapter_remove(self, sha256: str | None = None) -> None:
        """No argument: deactivate (the NPU runs raw); with a checksum: delete that installed adapter."""
        self.require("adapter")
        self._single("adapter", "remove", *([sha256] if sha256 else []))

    def adapter_status(self) -> AdapterStatus:
        self.require("adapter")
        data = self._single("adapter", "status")
        self._require_fields(data, ("active",), "adapter status")
        return AdapterStatus(**_known(AdapterStatus, data), extra=_extra(AdapterStatus, data))
