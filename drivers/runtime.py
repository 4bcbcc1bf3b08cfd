"""Client of the on-device inference runtime (`llmrt`), per docs/runtime-contract.md.

Every answer is JSON lines; they are parsed by field name, unknown fields are kept aside, and
non-JSON lines (stderr noise merged by ADB shell v1) are skipped. A capability the runtime does
not list raises UnsupportedCapability, which suites turn into a skip with the reason.

Contract 1.2 added config, weights, audit and counters; `generate(allow_incomplete=True)` returns
what a killed inference streamed instead of raising (the thermal soak counts such kills).
"""
from __future__ import annotations

import base64
import json
import logging
import shlex
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from phonebench.core.errors import CommandFailed, DeviceError, UnsupportedCapability
from .device import Device, TimedShellResult

if TYPE_CHECKING:
    from .clock import StationClock

log = logging.getLogger(__name__)

DEFAULT_COMMAND = "llmrt"
DEFAULT_WORKDIR = "/data/local/tmp/phonebench"
PROBE_FORMAT = "llmrt-probe/1"
SUPPORTED_CONTRACT_MAJOR = "1"
KILLED_EXIT_CODES = (137, 143)  # SIGKILL, SIGTERM: the process died mid-inference


class RuntimeCommandFailed(CommandFailed):
    """The runtime answered a command with an error line and a non-zero status (`answer`: that line)."""

    def __init__(self, message: str, hint: str | None = None, answer: dict[str, Any] | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message, hint)
        self.answer = answer or {}
        self.exit_code = exit_code


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
        except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth: noise too
            log.debug("runtime noise (not JSON): %s", line[:200])
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def _arrivals(result: TimedShellResult) -> Arrivals:
    """Arrival time of each generate event's line (token events by index)."""
    start = done = None
    tokens: dict[int, float] = {}
    for t, line in result.lines:
        event = parse_json_lines(line)
        kind = event[0].get("event") if event else None
        if kind == "start" and start is None:
            start = t
        elif kind == "done":
            done = t
        elif kind == "token" and isinstance(event[0].get("index"), int):
            tokens.setdefault(event[0]["index"], t)
    return Arrivals(result.sent_t, start, [tokens[i] for i in sorted(tokens)], done)


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
    redundancy: Any = None  # 1.2: {active, mode, trigger_mv, release_mv, ...}; 1.1: false or a mode name
    npu_freq_mhz: float | None = None
    adapter: str | None = None
    mac_errors_detected: int | None = None
    thermal: dict[str, Any] = field(default_factory=dict)  # layers_on_cpu, layers, migrations, trips
    pid: int | None = None
    started_t: float | None = None
    perf_profile: str | None = None
    build: dict[str, Any] | None = None  # 1.3: {version, sha256} of the installed build
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def redundancy_active(self) -> bool | None:
        """Whether voltage redundancy is engaged now, in either contract's shape (None: not reported)."""
        if isinstance(self.redundancy, dict):
            return bool(self.redundancy.get("active")) if "active" in self.redundancy else None
        if isinstance(self.redundancy, (bool, str)):
            return bool(self.redundancy)
        return None

    @property
    def redundancy_mode(self) -> str | None:
        return self.redundancy.get("mode") if isinstance(self.redundancy, dict) else None


@dataclass
class Arrivals:
    """When the host saw one generate's output, on the station clock (seconds): the request
    going out, and each event's line arriving (phonebench.drivers.adb.AdbPhone.shell_timed)."""

    sent_t: float
    start_t: float | None
    token_times: list[float]
    done_t: float | None

    @property
    def first_token_s(self) -> float | None:
        """Request to first streamed token, as the host saw it."""
        return self.token_times[0] - self.sent_t if self.token_times else None


@dataclass
class Generation:
    """One `generate`: token ids with the device's timestamps (seconds, device clock), and the
    host's arrival times when the client streams with a station clock."""

    tokens: list[int]
    token_times: list[float]
    start_time: float
    done_time: float
    prompt_tokens: int
    adapter: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # other events (e.g. "thermal"), in order
    completed: bool = True  # False: the runtime died before its done event (allow_incomplete)
    exit_code: int = 0
    arrivals: Arrivals | None = None  # None: nothing observed on the host (no station clock or stream)

    @property
    def thermal_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == "thermal"]

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
class WeightPage:
    """One weight page as the device read it, with its hash-tree path (hash-device block -> bytes)."""

    page: int
    data: bytes
    crc_ok: bool | None = None
    path: dict[int, bytes] = field(default_factory=dict)
    read_ms: float | None = None  # device time the reads took


@dataclass
class WeightsVerify:
    pages: int
    crc_errors: int
    bad_pages: list[int] = field(default_factory=list)
    read_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AuditStatus:
    path: str
    records: int
    public_key: bytes  # raw Ed25519 public key
    key_id: str = ""
    rotated: str | None = None
    algorithm: str = "ed25519"
    extra: dict[str, Any] = field(default_factory=dict)


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


def encode_dense(values: Iterable[int]) -> str:
    """A dense INT4 vector -> "@" + one hex nibble per value (two's complement)."""
    return "@" + "".join("%x" % (int(v) & 0xF) for v in values)


class RuntimeClient:
    """`clock`: a station clock (phonebench.drivers.clock); with it, and a device that can stamp its output
    as it arrives (`shell_timed`), every generate also records the host's arrival times."""

    def __init__(self, device: Device, command: str = DEFAULT_COMMAND, workdir: str = DEFAULT_WORKDIR,
                 clock: "StationClock | None" = None) -> None:
        self.device = device
        self.clock = clock
        self.command = command
        self.workdir = workdir
        self.runtime_calls = 0  # llmrt invocations (what the fingerprint budget counts)
        self.device_calls = 0   # every shell call and push
        self._identity: RuntimeIdentity | None = None
        self._pushes = 0
        self._last_timed: TimedShellResult | None = None

    # --- plumbing -----------------------------------------------------------------------
    @property
    def observes(self) -> bool:
        """Whether generate records host arrival times (a station clock and a stamping transport)."""
        return self.clock is not None and callable(getattr(self.device, "shell_timed", None))

    def _run(self, *args: str, timeout_s: float | None = None,
             timed: bool = False) -> tuple[str, list[dict[str, Any]], int, str]:
        """(command line, JSON objects, exit code, output); a missing runtime is UnsupportedCapability.
        timed: stamp the output on arrival (kept in self._last_timed for generate)."""
        command = " ".join(shlex.quote(a) for a in (self.command, *args))
        self.runtime_calls += 1
        self.device_calls += 1
        if timed and self.observes:
            result = self.device.shell_timed(command, self.clock.now, timeout_s=timeout_s)  # type: ignore[attr-defined]
            self._last_timed = result
        else:
            result = self.device.shell(command, timeout_s=timeout_s)
            self._last_timed = None
        if result.exit_code == 127:
            raise UnsupportedCapability(f"{self.device.name}: no `{self.command}` runtime on the device",
                                        hint="install the vendor runtime, or use the llama.cpp adapter")
        return command, parse_json_lines(result.output), result.exit_code, result.output

    def _failed(self, command: str, objects: list[dict[str, Any]], exit_code: int, output: str) -> RuntimeCommandFailed:
        answer = next((o for o in objects if "error" in o), {})
        message = answer.get("error") or output.strip()[-300:] or "no output (killed?)"
        return RuntimeCommandFailed(f"{self.device.name}: `{command}` failed ({exit_code}): {message}",
                                    hint="see docs/runtime-contract.md for the command's arguments",
                                    answer=answer, exit_code=exit_code)

    def _call(self, *args: str, timeout_s: float | None = None) -> list[dict[str, Any]]:
        command, objects, exit_code, output = self._run(*args, timeout_s=timeout_s)
        if exit_code != 0:
            raise self._failed(command, objects, exit_code, output)
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
            capabilities = data.get("capabilities", [])
            if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
                raise RuntimeProtocolError(f"{self.device.name}: identity capabilities {capabilities!r} is not a "
                                           "list of names", hint="the runtime does not follow docs/runtime-contract.md")
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
                 timeout_s: float | None = None, allow_incomplete: bool = False) -> Generation:
        """One inference with its token timestamps. allow_incomplete: a runtime killed mid-stream
        (exit 137/143 after its start event) gives a Generation with completed=False."""
        self.require("generate")
        args = ["generate", "--max-tokens", str(max_tokens), "--seed", str(seed)]
        args += ["--prompt", ",".join(str(int(t)) for t in prompt)] if prompt is not None else \
                ["--prompt-tokens", str(prompt_tokens)]
        if temperature is not None:
            args += ["--temperature", repr(float(temperature))]
        command, events, exit_code, output = self._run(*args, timeout_s=timeout_s, timed=True)
        start = next((e for e in events if e.get("event") == "start"), None)
        done = next((e for e in events if e.get("event") == "done"), None)
        killed = allow_incomplete and exit_code in KILLED_EXIT_CODES and start is not None
        if exit_code != 0 and not killed:
            raise self._failed(command, events, exit_code, output)
        if start is None or (done is None and not killed):
            raise RuntimeProtocolError(f"{self.device.name}: generate output lacks a start or done event",
                                       hint="the runtime does not follow docs/runtime-contract.md")
        try:
            return self._generation(events, start, done, exit_code)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise RuntimeProtocolError(f"{self.device.name}: generate events have a missing or malformed field "
                                       f"({type(exc).__name__}: {exc})",
                                       hint="the runtime does not follow docs/runtime-contract.md") from None

    def _generation(self, events: list[dict[str, Any]], start: dict[str, Any], done: dict[str, Any] | None,
                    exit_code: int) -> Generation:
        tokens = sorted((e for e in events if e.get("event") == "token"), key=lambda e: int(e["index"]))
        if [e["index"] for e in tokens] != list(range(len(tokens))):
            raise RuntimeProtocolError(f"{self.device.name}: generate token events are not 0..n-1")
        times = [float(e["t"]) for e in tokens]
        last = float(done["t"]) if done is not None else (times[-1] if times else float(start["t"]))
        other = [e for e in events if e.get("event") not in ("start", "token", "done") and "error" not in e]
        return Generation(tokens=[int(e["id"]) for e in tokens], token_times=times,
                          start_time=float(start["t"]),
                          done_time=last,
                          prompt_tokens=int(start.get("prompt_tokens", 0)), adapter=start.get("adapter"),
                          events=other, completed=done is not None and exit_code == 0, exit_code=exit_code,
                          arrivals=_arrivals(self._last_timed) if self._last_timed is not None else None)

    def probe(self, probes: Sequence[Probe], with_adapter: bool = False) -> list[ProbeResult]:
        """Run a batch of dot products in one runtime call (the batch is pushed as a file)."""
        self.require("probe")
        self._pushes += 1
        path = f"{self.workdir}/probe-{self._pushes}.json"
        batch = {"format": PROBE_FORMAT, "probes": [{"id": p.id, "a": p.a, "b": p.b} for p in probes]}
        self.device_calls += 1
        self.device.push_bytes(json.dumps(batch).encode(), path)
        events = self._call("probe", "--in", path, *(["--with-adapter"] if with_adapter else []))
        results = {str(e.get("id")): e for e in events if e.get("event") == "probe" and "result" in e}
        missing = [p.id for p in probes if p.id not in results]
        if missing:
            raise RuntimeProtocolError(f"{self.device.name}: probe returned no result for {', '.join(missing[:5])}")
        try:
            return [ProbeResult(p.id, int(results[p.id].get("length", 0)), int(results[p.id]["result"]))
                    for p in probes]
        except (TypeError, ValueError, OverflowError) as exc:
            raise RuntimeProtocolError(f"{self.device.name}: probe result is not an integer ({exc})",
                                       hint="the runtime does not follow docs/runtime-contract.md") from None

    # --- adapters -----------------------------------------------------------------------
    def adapter_install(self, remote_path: str, sha256: str) -> str:
        self.require("adapter")
        data = self._single("adapter", "install", remote_path, sha256)
        self._require_fields(data, ("installed",), "adapter install")
        return str(data["installed"])

    def adapter_activate(self, sha256: str) -> str:
        self.require("adapter")
        data = self._single("adapter", "activate", sha256)
        self._require_fields(data, ("active",), "adapter activate")
        return str(data["active"])

    def adapter_remove(self, sha256: str | None = None) -> None:
        """No argument: deactivate (the NPU runs raw); with a checksum: delete that installed adapter."""
        self.require("adapter")
        self._single("adapter", "remove", *([sha256] if sha256 else []))

    def adapter_status(self) -> AdapterStatus:
        self.require("adapter")
        data = self._single("adapter", "status")
        self._require_fields(data, ("active",), "adapter status")
        return AdapterStatus(**_known(AdapterStatus, data), extra=_extra(AdapterStatus, data))

    # --- runtime builds (1.3) ------------------------------------------------------------
    def install(self, remote_path: str, sha256: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Have the runtime install the build artefact pushed to remote_path (it re-checks the digest)
        and start on it; its answer, or RuntimeCommandFailed whose `answer` carries the failure's `kind`."""
        self.require("install")
        data = self._call("install", remote_path, "--sha256", sha256, timeout_s=timeout_s)
        if not data:
            raise RuntimeProtocolError(f"{self.device.name}: `{self.command} install` printed no JSON object",
                                       hint="the runtime does not follow docs/runtime-contract.md")
        self._require_fields(data[-1], ("installed",), "install")
        self._identity = None  # a new build: its identity is read again
        return data[-1]

    # --- config (1.2) -------------------------------------------------------------------
    def config_get(self, key: str | None = None) -> Any:
        """One setting's value, or every setting as a dict when key is None."""
        self.require("config")
        data = self._single("config", "get", *([key] if key else []))
        if key is None:
            self._require_fields(data, ("config",), "config get")
            if not isinstance(data["config"], dict):
                raise RuntimeProtocolError(f"{self.device.name}: config get answered config = {data['config']!r}, "
                                           "not an object", hint="the runtime does not follow docs/runtime-contract.md")
            return dict(data["config"])
        self._require_fields(data, ("value",), "config get")
        return data["value"]

    def config_set(self, key: str, value: Any) -> Any:
        """Set and persist one setting; returns the value the runtime stored."""
        self.require("config")
        text = value if isinstance(value, str) else repr(float(value)) if isinstance(value, float) else str(value)
        data = self._single("config", "set", key, text)
        self._require_fields(data, ("value",), "config set")
        return data["value"]

    # --- weights (1.2) ------------------------------------------------------------------
    def weights_status(self) -> dict[str, Any]:
        self.require("weights")
        data = self._single("weights", "status")
        self._require_fields(data, ("path", "hash_device", "manifest", "pages"), "weights status")
        return data

    def weights_verify(self) -> WeightsVerify:
        self.require("weights")
        data = self._single("weights", "verify")
        self._require_fields(data, ("pages", "crc_errors"), "weights verify")
        return WeightsVerify(**_known(WeightsVerify, data), extra=_extra(WeightsVerify, data))

    def weights_read(self, page: int, with_path: bool = False) -> WeightPage:
        self.require("weights")
        data = self._single("weights", "read", "--page", str(int(page)), *(["--with-path"] if with_path else []))
        self._require_fields(data, ("page", "data"), "weights read")
        try:
            return WeightPage(page=int(data["page"]), data=base64.b64decode(data["data"], validate=True),
                              crc_ok=data.get("crc_ok"), read_ms=data.get("read_ms"),
                              path={int(p["block"]): base64.b64decode(p["data"], validate=True)
                                    for p in data.get("path", [])})
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeProtocolError(f"{self.device.name}: weights read of page {page}: bad encoding ({exc})",
                                       hint="data fields are base64") from None

    def weights_repair(self, page: int, remote_path: str) -> dict[str, Any]:
        """Have the runtime write one re-sent page (already pushed to remote_path)."""
        self.require("weights")
        return self._single("weights", "repair", "--page", str(int(page)), "--in", remote_path)

    # --- audit and counters (1.2) -------------------------------------------------------
    def audit_status(self) -> AuditStatus:
        self.require("audit")
        data = self._single("audit", "status")
        self._require_fields(data, ("path", "records", "public_key"), "audit status")
        try:
            key = base64.b64decode(data["public_key"], validate=True)
        except ValueError:
            raise RuntimeProtocolError(f"{self.device.name}: audit public key is not base64") from None
        known = _known(AuditStatus, data)
        known["public_key"] = key
        return AuditStatus(**known, extra=_extra(AuditStatus, data))

    def counters(self, reset: bool = False) -> dict[str, Any]:
        """The runtime's internal counters since the last reset (reset=True zeroes them)."""
        self.require("counters")
        return self._single("counters", *(["--reset"] if reset else []))
