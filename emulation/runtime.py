"""The emulated phone's inference runtime, reached as the device command `llmrt`.

Speaks the runtime contract (docs/runtime-contract.md, 1.2): one JSON object per line on stdout,
errors as a JSON line on stderr with a non-zero status (never an exception into the daemon).
Tokens come from the tiny INT4 model (phonebench.emulation.tinymodel) run through this phone's NPU persona
and, when one is active, its overflow adapter. Time comes from the phone's simulated world.

The model is deterministic, so its token streams are kept per (prompt, seed, temperature,
accumulator, adapter tile) and extended when a longer answer is asked; each call only draws its
timing (phonebench.emulation.runtime_timing). When supply ripple makes MAC errors possible the model really
runs, with the errors injected, and in redundancy mode it really runs every matmul twice and
votes. The unit's behaviour for the SLA checks comes from its persona
(phonebench.emulation.runtime_personas), its protections from phonebench.emulation.runtime_safety.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from . import audit, gpuload, npu, tinymodel, weights
from .npu_personas import get_persona
from .runtime_builds import RuntimeBuild, planted_artefact
from .runtime_config import PERF_PROFILE_MHZ, ConfigKey, ConfigValueError, RuntimeConfig
from .runtime_counters import VMSTAT, Counters
from .runtime_install import BuildStore, InstallError, InstalledBuild
from .runtime_personas import SLA_PERSONAS_RUNTIME, runtime_persona
from .runtime_safety import LAYERS, MIGRATION_STEP, RedundancyController, ThermalGovernor, ThermalKill
from .runtime_stream import EventStream
from .runtime_timing import Conditions, StepTime, TokenTimer, timing_profile
from .shell import CommandResult, ShellContext
from .unit_variation import spec_night_seed, unit_rng
from .world import NPU_NOMINAL_MHZ

if TYPE_CHECKING:
    from .device import EmulatedPhone

log = logging.getLogger(__name__)

__all__ = ["SLA_PERSONAS_RUNTIME", "RUNTIME_FAULTS", "EmulatedRuntime", "install", "parse_vector"]

CONTRACT_VERSION = "1.3"
CAPABILITIES = ["identity", "status", "generate", "probe", "adapter", "config", "weights", "audit", "counters",
                "install"]
ADAPTER_DIR = "/data/vendor/llm/adapters"
ACTIVE_POINTER = "/data/vendor/llm/adapter.active"
PROBE_FORMAT = "llmrt-probe/1"
MAX_PROBES = 4096
MAX_SEGMENTS = 1 << 20  # per probe vector
MAX_PROBE_LENGTH = 1 << 31
PROBE_OVERHEAD_S = 0.0005  # per probe: loading its vectors
REPLAY_LOOKUP_S = 0.004  # "answer-replay": finding a cached answer instead of processing the prompt
_CACHE_SIZE = 128
ONSET_MV = (24.0, 28.0)  # a unit's ripple onset (timing margin) is drawn in this range from its seed
RESTART_S = 1.5  # init restarts a killed runtime after this long
_SUBVERBS = ("adapter", "config", "weights", "audit")

# Fault names a station may inject (PhoneSpec.faults).
FAULT_ERRATIC = "npu-erratic"                    # probe results off by one now and then
FAULT_ACTIVATE_CRASH = "adapter-activate-crash"  # activation dies between temp write and rename
FAULT_IGNORE_ADAPTER = "adapter-ignored"         # runtime accepts adapters but never applies them
RUNTIME_FAULTS = {FAULT_ERRATIC, FAULT_ACTIVATE_CRASH, FAULT_IGNORE_ADAPTER, gpuload.FAULT_WEAK,
                  weights.FAULT_TREE, weights.FAULT_SLOW_FLASH, weights.FAULT_REPAIR_IGNORED, audit.FAULT_DROP,
                  audit.FAULT_MISSING_FIELDS}


class RuntimeFailure(Exception):
    """An error answered to the caller as a JSON line (status 1 unless given; `kind` for install's failures)."""

    def __init__(self, message: str, status: int = 1, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # never exit the emulator process
        raise RuntimeFailure(message, status=2)


@lru_cache(maxsize=1)
def _parser() -> _Parser:
    """Built once (argparse set-up costs milliseconds); parse_args leaves it unchanged."""
    p = _Parser(prog="llmrt", add_help=False)
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)
    sub.add_parser("identity", add_help=False)
    sub.add_parser("status", add_help=False)
    c = sub.add_parser("config", add_help=False)
    csub = c.add_subparsers(dest="action", parser_class=_Parser)
    csub.add_parser("get", add_help=False).add_argument("key", nargs="?")
    cset = csub.add_parser("set", add_help=False)
    cset.add_argument("key")
    cset.add_argument("value")
    wt = sub.add_parser("weights", add_help=False)
    wsub = wt.add_subparsers(dest="action", parser_class=_Parser)
    wsub.add_parser("status", add_help=False)
    wsub.add_parser("verify", add_help=False)
    wread = wsub.add_parser("read", add_help=False)
    wread.add_argument("--page", type=int, required=True)
    wread.add_argument("--with-path", action="store_true")
    wrep = wsub.add_parser("repair", add_help=False)
    wrep.add_argument("--page", type=int, required=True)
    wrep.add_argument("--in", dest="path", required=True)
    au = sub.add_parser("audit", add_help=False)
    au.add_subparsers(dest="action", parser_class=_Parser).add_parser("status", add_help=False)
    sub.add_parser("counters", add_help=False).add_argument("--reset", action="store_true")
    ins = sub.add_parser("install", add_help=False)
    ins.add_argument("path")
    ins.add_argument("--sha256", default=None)
    g = sub.add_parser("generate", add_help=False)
    g.add_argument("--prompt-tokens", type=int, default=32)
    g.add_argument("--prompt", default=None, help="comma-separated token ids (overrides --prompt-tokens)")
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--temperature", type=float, default=0.7)
    pr = sub.add_parser("probe", add_help=False)
    pr.add_argument("--in", dest="path", required=True)
    pr.add_argument("--with-adapter", action="store_true")
    a = sub.add_parser("adapter", add_help=False)
    asub = a.add_subparsers(dest="action", parser_class=_Parser)
    inst = asub.add_parser("install", add_help=False)
    inst.add_argument("path")
    inst.add_argument("sha256")
    asub.add_parser("activate", add_help=False).add_argument("sha256")
    asub.add_parser("remove", add_help=False).add_argument("sha256", nargs="?")
    asub.add_parser("status", add_help=False)
    return p


def parse_vector(text: str) -> npu.RunVector:
    """`v`, `vxN` (v repeated N times) and `@hex` (one INT4 per nibble, two's complement) segments,
    comma-separated."""
    segments = text.split(",")
    runs = _plain_runs(text, segments)
    if runs is not None:
        return runs
    values: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for segment in segments:
        segment = segment.strip()
        if segment.startswith("@"):
            nibbles = np.frombuffer(bytes.fromhex("".join("0" + c for c in segment[1:])), dtype=np.uint8)
            values.append(np.where(nibbles > 7, nibbles.astype(np.int64) - 16, nibbles))
            counts.append(np.ones(nibbles.size, dtype=np.int64))
            continue
        value, _, count = segment.partition("x")
        values.append(np.array([int(value)], dtype=np.int64))
        counts.append(np.array([int(count) if count else 1], dtype=np.int64))
    return npu.RunVector(np.concatenate(values).astype(np.int64), np.concatenate(counts))


def _plain_runs(text: str, segments: list[str]) -> npu.RunVector | None:
    """Every segment a plain `vxN` (the bench's probes: thousands of runs) in one conversion, not a
    loop; None for anything else (`@hex`, `v`, `vx`, junk), which parse_vector's loop decides."""
    if "@" in text or text.count("x") != len(segments) or any(s.count("x") != 1 for s in segments):
        return None
    try:
        numbers = np.array(list(map(int, text.replace("x", ",").split(","))), dtype=np.int64)
    except ValueError:
        return None
    return npu.RunVector(numbers[0::2], numbers[1::2])


@dataclass
class _Stream:
    tokens: list[int]
    stream: Iterator[int]


# Exact token streams are a property of the model, the accumulator and the adapter, not of a
# phone: one cache per process serves every emulated phone (the lock guards extending a stream).
_STREAMS: OrderedDict[tuple, _Stream] = OrderedDict()
_STREAMS_LOCK = threading.Lock()


class EmulatedRuntime:
    def __init__(self, phone: "EmulatedPhone", gpu: gpuload.GpuLoad | None = None) -> None:
        self.phone = phone
        self.persona = get_persona(phone.spec.npu_persona)
        self.sla = runtime_persona(phone.spec.sla_persona)
        self.faults = set(phone.spec.faults)
        self.config = RuntimeConfig(phone.fs)
        self.gpu = gpu
        self._lock = threading.Lock()  # one inference at a time, like the real NPU queue
        seed = spec_night_seed(phone.spec)  # the night's noise; the die's own streams are unit_rng's
        self._erratic = np.random.default_rng([seed, 0xE7])
        self._mac_rng = unit_rng(phone.spec.seed, phone.spec.serial, 0xFA17)  # where this die's carries fail
        # What runs is what is installed: the station's named build was installed at the factory.
        self.builds = BuildStore(phone)
        installed = self.builds.active() or self.builds.preinstall(planted_artefact(phone.spec.runtime_build))
        self.build_sha256, self.build = installed.sha256, self._build_of(installed)
        phone.world.build_power, phone.world.build_speak_power = self.build.npu_power, self.build.speak_power
        self.timer = TokenTimer(timing_profile(self.sla.timing), np.random.default_rng([seed, 0x71]),
                                phone.world.variation, build_time=self.build.npu_time)
        # "answer-replay": answers already given, and the even cadence it streams them at.
        self._answered: set[tuple[Any, ...]] = set()
        self._replay_timer = TokenTimer(timing_profile("nominal"), np.random.default_rng([seed, 0x72]),
                                        phone.world.variation, build_time=self.build.npu_time)
        self.redundancy = RedundancyController.for_persona(self.sla)
        self.governor = ThermalGovernor.for_persona(self.sla)
        self.onset_mv = float(unit_rng(phone.spec.seed, phone.spec.serial, 0x0E5E).uniform(*ONSET_MV))
        self.mac_errors_detected = 0
        self.weights = weights.WeightStore(phone, corrupt_page=self.sla.corrupt_weight_page,
                                           read_time_omitted=self.sla.spot_read_omitted)
        self.audit = audit.AuditLog(phone, leaks_prompt=self.sla.audit_leaks_prompt,
                                    bad_signatures=self.sla.audit_bad_signatures, drop_rate=self.sla.audit_drop_rate,
                                    second_log=self.sla.audit_second_log)
        now = phone.world.clock.now()
        self.counters = Counters(dict(self.sla.counters), np.random.default_rng([seed, 0xC0]), now,
                                 reported=dict(self.sla.counters_reported), kernel_agrees=self.sla.consistent_counters)
        self._pids = np.random.default_rng([seed, 0x91D])
        self.pid = int(self._pids.integers(3000, 9000))
        self.started_t = now
        self.inferences = 0
        self._ctx: ShellContext | None = None  # the call being served (where a generate streams to)
        profile = self.config.get("npu.perf_profile")
        if profile != "balanced":  # a setting persisted before a restart
            phone.world.set_npu_frequency(PERF_PROFILE_MHZ[profile])

    def __call__(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        verb = argv[1] if len(argv) > 1 else ""
        try:
            args = _parser().parse_args(argv[1:])
            if args.verb is None or (args.verb in _SUBVERBS and args.action is None):
                raise RuntimeFailure("usage: llmrt identity|status|generate|probe|adapter|config|weights|audit|"
                                     "counters|install ...", status=2)
            name = f"_{args.verb}" + (f"_{args.action}" if args.verb in _SUBVERBS else "")
            with self._lock:
                self._sense()
                self._ctx = ctx
                return getattr(self, name)(args)
        except RuntimeFailure as exc:
            return _error(verb, str(exc), exc.status, exc.kind)
        except Exception as exc:  # a runtime bug must not take the daemon down
            log.exception("llmrt %s failed", verb)
            return _error(verb, f"internal error: {exc!r}", 70)

    # --- what the runtime senses and runs under -----------------------------------------------
    def _sense(self) -> None:
        """Read the supply ripple (the PMIC's ADC) and update the redundancy state machine."""
        cfg = self.config.values()
        ripple_mv = 1000.0 * self.phone.world.ripple_amplitude_v()
        self.redundancy.update(ripple_mv, cfg["redundancy.trigger_mv"], cfg["redundancy.release_mv"])

    def _redundant(self) -> bool:
        return self.redundancy.active(self.config.get("redundancy.mode"))

    def _mac_faults(self) -> npu.MacFaults | None:
        """Ripple-induced MAC errors, if the ripple now exceeds this unit's onset."""
        rate = npu.mac_error_rate(1000.0 * self.phone.world.ripple_amplitude_v(), self.onset_mv)
        return npu.MacFaults(rate, self._mac_rng) if rate > 0.0 else None

    def _conditions(self) -> Conditions:
        return Conditions(npu_freq_mhz=self.phone.world.npu_freq_mhz,
                          gpu_busy=self.gpu.busy() if self.gpu is not None else 0.0,
                          redundancy=self._redundant(), cpu_fraction=self.governor.cpu_fraction)

    def _temperatures(self) -> dict[str, float]:
        """The runtime's sensor readings: thermal zones (skin via its sysfs node) plus calibration."""
        temps = dict(self.phone.sensor_temperatures())
        fs = self.phone.fs
        for node in fs.glob("/sys/class/thermal/thermal_zone*/type"):
            if fs.read(node).decode().strip() == "skin":
                temps["skin"] = int(fs.read(node[:-len("type")] + "temp").decode()) / 1000.0
        temps["skin"] += self.config.get("thermal.skin_offset_c")
        return {k: round(v, 2) for k, v in temps.items()}

    # --- identity and state -------------------------------------------------------------
    def _identity(self, args: argparse.Namespace) -> CommandResult:
        model = tinymodel.shared_model()
        return _lines({"contract": CONTRACT_VERSION, "runtime_version": self.build.version,
                       "model": tinymodel.MODEL_NAME, "model_sha256": model.sha256,
                       "vocab": model.config.vocab, "max_seq": model.config.max_seq,
                       "microcode": self.persona.microcode, "capabilities": CAPABILITIES})

    def _status(self, args: argparse.Namespace) -> CommandResult:
        world, cfg = self.phone.world, self.config.values()
        r = self.redundancy
        return _lines({"t": world.clock.now(), "thermal_status": self.phone.thermal_status(),
                       "temperatures_c": self._temperatures(), "skin_offset_c": cfg["thermal.skin_offset_c"],
                       "redundancy": {"active": r.reported(cfg["redundancy.mode"]), "mode": cfg["redundancy.mode"],
                                      "trigger_mv": cfg["redundancy.trigger_mv"],
                                      "release_mv": cfg["redundancy.release_mv"], "sensed_mv": round(r.sensed_mv, 2)},
                       "mac_errors_detected": self.mac_errors_detected,
                       "npu_freq_mhz": self._reported_freq_mhz(), "perf_profile": cfg["npu.perf_profile"],
                       "thermal": {"layers_on_cpu": self.governor.layers_on_cpu, "layers": LAYERS,
                                   "migrations": self.governor.migrations, "trips": self.governor.trips},
                       "pid": self.pid, "started_t": self.started_t, "inferences": self.inferences,
                       "adapter": self._active_sha(),
                       "build": {"version": self.build.version, "sha256": self.build_sha256}})

    def _reported_freq_mhz(self) -> float:
        """The NPU clock status gives; a counters forger gives the one its MAC utilisation needs."""
        f = self.phone.world.npu_freq_mhz
        said = self.sla.counters_reported.get("mac_utilisation")
        real = self.counters.utilisation("mac_utilisation")
        return round(f * real / said, 1) if self.sla.consistent_counters and said and real else f

    # --- config -------------------------------------------------------------------------
    def _config_get(self, args: argparse.Namespace) -> CommandResult:
        problem = self.config.problem()
        if args.key is None:
            answer: dict[str, Any] = {"config": self.config.values(), "path": self.config.path}
        else:
            key = self._config_key(args.key)
            answer = {"key": key.name, "value": self.config.get(key.name), "default": key.default}
        return _lines({**answer, **({"warning": problem} if problem else {})})

    def _config_set(self, args: argparse.Namespace) -> CommandResult:
        try:
            value, previous = self.config.set(args.key, args.value)
        except ConfigValueError as exc:
            raise RuntimeFailure(str(exc), status=2) from None
        if args.key == "npu.perf_profile":
            self.phone.world.set_npu_frequency(PERF_PROFILE_MHZ[value])
        self._sense()  # a new trigger takes effect at once
        return _lines({"key": args.key, "value": value, "previous": previous})

    def _config_key(self, name: str) -> ConfigKey:
        try:
            return self.config.key(name)
        except ConfigValueError as exc:
            raise RuntimeFailure(str(exc), status=2) from None

    # --- generate -----------------------------------------------------------------------
    def _generate(self, args: argparse.Namespace) -> CommandResult:
        model = tinymodel.shared_model()
        if args.prompt:
            try:
                prompt = [int(t) for t in args.prompt.split(",")]
            except ValueError:
                raise RuntimeFailure(f"--prompt: expected comma-separated token ids, got {args.prompt!r}", 2) from None
        else:
            prompt = tinymodel.prompt_tokens(args.prompt_tokens, args.seed, model.config.vocab)
        if not 1 <= len(prompt) or args.max_tokens < 0 or len(prompt) + args.max_tokens > model.config.max_seq:
            raise RuntimeFailure(f"prompt of {len(prompt)} + {args.max_tokens} tokens does not fit the context "
                                 f"of {model.config.max_seq}", 2)
        if min(prompt) < 0 or max(prompt) >= model.config.vocab:
            raise RuntimeFailure(f"prompt token ids must be in [0, {model.config.vocab})", 2)
        adapter_sha, tile = self._adapter_tile()
        tokens = self._compute_tokens(model, prompt, args, tile)
        world = self.phone.world
        start_t = world.clock.now()
        events = EventStream(self._ctx, self.sla)
        events.append({"event": "start", "t": start_t, "prompt_tokens": len(prompt),
                       "max_tokens": args.max_tokens, "adapter": adapter_sha})
        cond = self._conditions()
        answer = (tuple(prompt), args.seed, args.max_tokens, args.temperature)
        replayed = self.sla.replay_answers and answer in self._answered
        self._answered.add(answer)
        timer = self._replay_timer if replayed else self.timer
        timer.start_run()
        decode_s = 0.0
        forged = self.sla.fabricate_first_token and bool(tokens)
        if forged:  # a plausible id at once, before any work; the real first token never shows
            events.append({"event": "token", "index": 0, "id": (tokens[0] + 1) % model.config.vocab,
                           "t": world.clock.now()})
        try:
            self._govern(events)
            if replayed:  # a cache lookup, not a prompt's processing
                self.phone.world.work("cpu_decode", REPLAY_LOOKUP_S)
            else:
                self._work(timer.prefill(len(prompt), cond.with_(cpu_fraction=self.governor.cpu_fraction)), "prefill")
            for index, token in enumerate(tokens):
                if index:
                    self._govern(events)
                    step = timer.decode(cond.with_(cpu_fraction=self.governor.cpu_fraction))
                    self._work(step, "decode")
                    decode_s += step.total_s
                if not (forged and index == 0):
                    events.append({"event": "token", "index": index, "id": token, "t": world.clock.now()})
        except ThermalKill as kill:
            if self.sla.patch_kills:
                return self._patched_kill(events, kill, len(tokens), model.config.vocab)
            return self._killed(events, kill)
        done_t = world.clock.now()
        events.append({"event": "done", "t": done_t, "tokens": len(tokens)})
        self.inferences += 1
        self.counters.add(len(tokens), world.npu_freq_mhz, decode_steps=max(len(tokens) - 1, 0),
                          decode_s=decode_s)
        self.phone.fs.write(VMSTAT, self.counters.vmstat())  # the kernel's view of the same faults
        self.audit.append(t=done_t, input_tokens=len(prompt), output_tokens=len(tokens),
                          model_version=f"{tinymodel.MODEL_NAME} {model.sha256[:12]}",
                          npu_freq_mhz=world.npu_freq_mhz, npu_temp_c=self.phone.sensor_temperatures()["npu"],
                          prompt=prompt)
        return CommandResult(bytes(events.kept))

    def _compute_tokens(self, model: tinymodel.TinyModel, prompt: list[int], args: argparse.Namespace,
                        tile: int | None) -> list[int]:
        """The tokens this call produces: cached when the NPU computes exactly, else really computed
        with MAC errors injected (and, with redundancy active, every matmul run twice and voted)."""
        acc = self.persona.accumulator
        faults = self._mac_faults()
        if faults is None:
            return self._cached_tokens(model, prompt, args, tile, acc)
        vote = npu.Vote()
        if self._redundant():
            def matmul(x: np.ndarray, w: npu.Int4Matrix) -> np.ndarray:
                return npu.voted(lambda: npu.matmul(x, w, acc, tile, faults), vote)
        else:
            def matmul(x: np.ndarray, w: npu.Int4Matrix) -> np.ndarray:
                return npu.matmul(x, w, acc, tile, faults)
        tokens = model.generate(prompt, args.max_tokens, args.seed, args.temperature, npu_matmul=matmul)
        self.mac_errors_detected += vote.mismatches
        return tokens

    def _cached_tokens(self, model: tinymodel.TinyModel, prompt: list[int], args: argparse.Namespace,
                       tile: int | None, acc: npu.Accumulator) -> list[int]:
        """Exact tokens from a kept generation stream: sampling noise is drawn every step, so a
        shorter request is a prefix of a longer one and a longer one only extends the stream."""
        key = (tuple(prompt), args.seed, args.temperature, tile, acc)
        with _STREAMS_LOCK:
            entry = _STREAMS.get(key)
            if entry is None:
                stream = model.stream(prompt, model.config.max_seq - len(prompt), args.seed, args.temperature,
                                      npu_matmul=lambda x, w: npu.matmul(x, w, acc, tile))
                entry = _STREAMS[key] = _Stream([], stream)
                if len(_STREAMS) > _CACHE_SIZE:
                    _STREAMS.popitem(last=False)
            else:
                _STREAMS.move_to_end(key)
            while len(entry.tokens) < args.max_tokens:
                entry.tokens.append(next(entry.stream))
            return entry.tokens[:args.max_tokens]

    def _govern(self, events: EventStream) -> None:
        """The thermal governor's look at the NPU before a step (may raise ThermalKill)."""
        temps = self.phone.sensor_temperatures()
        event = self.governor.check(self.phone.world.clock.now(), temps["npu"], temps["cpu"])
        if event is not None:
            events.append(event)

    def _work(self, step: StepTime, phase: str) -> None:
        world = self.phone.world
        if step.npu_s > 0:
            world.work(phase, step.npu_s)
        if step.cpu_s > 0:
            world.work("cpu_decode", step.cpu_s)

    def _killed(self, events: EventStream, kill: ThermalKill) -> CommandResult:
        """The process died at the trip: what it streamed so far, exit 137, and init restarts it."""
        log.info("%s: runtime killed (%s)", self.phone.spec.serial, kill)
        self.pid = int(self._pids.integers(3000, 30000))
        self.governor.reset()
        self.phone.world.wait(RESTART_S)
        self.started_t = self.phone.world.clock.now()
        return CommandResult(bytes(events.kept), b"", 137)

    def _patched_kill(self, events: EventStream, kill: ThermalKill, max_tokens: int, vocab: int) -> CommandResult:
        """A forger's kill: the restarted process reports a migration where it died, streams made-up
        tokens for the rest of the dialog, a done line and exit 0, and keeps its old pid; status,
        events and audit agree with that story."""
        log.info("%s: runtime killed (%s), patched over", self.phone.spec.serial, kill)
        world = self.phone.world
        world.wait(RESTART_S)  # the restart itself cannot be hidden from the world's clock
        self.governor.reset()
        self.governor.layers_on_cpu, self.governor.migrations = MIGRATION_STEP, self.governor.migrations + 1
        self.governor.trips += 1
        temps = self.phone.sensor_temperatures()
        events.append({"event": "thermal", "t": world.clock.now(), "action": "migrate", "npu_c": round(kill.npu_c, 2),
                       "cpu_c": round(temps["cpu"], 2), "layers_on_cpu": MIGRATION_STEP, "layers": LAYERS})
        sent = sum(1 for e in events.events if e.get("event") == "token")
        invent = np.random.default_rng([spec_night_seed(self.phone.spec), 0xFA6E, self.inferences])
        for index in range(sent, max_tokens):
            self._work(self.timer.decode(self._conditions()), "decode")
            events.append({"event": "token", "index": index, "id": int(invent.integers(0, vocab)),
                           "t": world.clock.now()})
        events.append({"event": "done", "t": world.clock.now(), "tokens": max_tokens})
        self.inferences += 1
        return CommandResult(bytes(events.kept))

    # --- probe --------------------------------------------------------------------------
    def _probe(self, args: argparse.Namespace) -> CommandResult:
        batch = self._read_json(args.path, "probe batch")
        if not isinstance(batch, dict) or batch.get("format") != PROBE_FORMAT \
                or not isinstance(batch.get("probes"), list):
            raise RuntimeFailure(f"{args.path}: not a {PROBE_FORMAT} batch", 2)
        probes = batch["probes"]
        if len(probes) > MAX_PROBES:
            raise RuntimeFailure(f"{args.path}: {len(probes)} probes (at most {MAX_PROBES} per call)", 2)
        adapter_sha, tile = self._adapter_tile() if args.with_adapter else (None, None)
        acc = self.persona.accumulator
        faults, vote = self._mac_faults(), npu.Vote()
        redundant = faults is not None and self._redundant()
        events: list[dict[str, Any]] = []
        # A batch repeats a few long vectors: each is parsed, and each pair's exact product computed,
        # once (host time only); the die's faults still strike every probe on its own.
        vectors: dict[str, npu.RunVector] = {}
        exact: dict[tuple[str, str], int] = {}
        for index, probe in enumerate(probes):
            ident = probe.get("id", index) if isinstance(probe, dict) else index
            try:
                pair = (probe["a"], probe["b"])
                a, b = (vectors[t] if t in vectors else vectors.setdefault(t, parse_vector(t)) for t in pair)
                if max(a.values.size, b.values.size) > MAX_SEGMENTS or a.length > MAX_PROBE_LENGTH:
                    raise ValueError(f"vector too large (limits: {MAX_SEGMENTS} segments, length {MAX_PROBE_LENGTH})")
                if self.sla.forge_known_answers and _looks_known(ident, probe["b"]):
                    result = 0  # the answer the bench used to expect, without computing
                else:
                    computed = exact[pair] if pair in exact else exact.setdefault(pair, npu.dot_runs(a, b, acc, tile))
                    length = a.length
                    result = (int(npu.voted(lambda: np.array([npu.faulted(computed, length, acc, faults)]), vote)[0])
                              if redundant else npu.faulted(computed, length, acc, faults))
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise RuntimeFailure(f"{args.path}: probe {ident!r}: {exc}", 2) from None
            if FAULT_ERRATIC in self.faults and self._erratic.random() < 0.3:
                result += int(self._erratic.choice([-1, 1]))
            events.append({"event": "probe", "id": ident, "length": a.length, "result": result})
        self.mac_errors_detected += vote.mismatches
        # NPU busy, decode-like power: a fixed cost per probe, and every MAC at the die's throughput.
        world = self.phone.world
        macs_per_s = world.variation.npu_gmac_per_s * 1e9 * world.npu_freq_mhz / NPU_NOMINAL_MHZ  # the die, this unit's bin
        world.work("decode", PROBE_OVERHEAD_S * len(probes) + sum(e["length"] for e in events) / macs_per_s)
        events.append({"event": "done", "t": self.phone.world.clock.now(), "probes": len(probes),
                       "adapter": adapter_sha})
        return _lines(*events)

    # --- weights, audit, counters -------------------------------------------------------
    def _weights_status(self, args: argparse.Namespace) -> CommandResult:
        return _lines(self.weights.status())

    def _weights_verify(self, args: argparse.Namespace) -> CommandResult:
        report = self.weights.verify()
        return _lines({"pages": report["pages"], "crc_errors": report["crc_errors"], "bad_pages": report["bad_pages"],
                       "read_ms": round(1000.0 * report["read_s"], 3)})

    def _weights_read(self, args: argparse.Namespace) -> CommandResult:
        try:
            page = self.weights.read_page(args.page, with_path=args.with_path)
        except weights.WeightStoreError as exc:
            raise RuntimeFailure(f"weights read: {exc}", 2) from None
        return _lines({"page": page["page"], "data": _b64(page["data"]), "crc_ok": page["crc_ok"],
                       "path": [{"block": p["block"], "data": _b64(p["data"])} for p in page["path"]],
                       "read_ms": round(1000.0 * page["read_s"], 4)})

    def _weights_repair(self, args: argparse.Namespace) -> CommandResult:
        data = self._read(args.path, "page")
        try:
            return _lines(self.weights.repair(args.page, data))
        except weights.WeightStoreError as exc:
            raise RuntimeFailure(f"weights repair: {exc}") from None

    def _audit_status(self, args: argparse.Namespace) -> CommandResult:
        return _lines(self.audit.status())

    def _counters(self, args: argparse.Namespace) -> CommandResult:
        now = self.phone.world.clock.now()
        if args.reset:
            self.counters.reset(now)
            return _lines({"reset": True, "t": now})
        return _lines(self.counters.report(now))

    # --- runtime builds ---------------------------------------------------------------------
    def _install(self, args: argparse.Namespace) -> CommandResult:
        data = self._read(args.path, "build artefact")
        previous = self.build.version
        try:
            installed, new = self.builds.install(data, args.sha256, self._start_build)
        except InstallError as exc:
            raise RuntimeFailure(str(exc), kind=exc.kind) from None
        return _lines({"installed": installed.sha256, "runtime_version": self.build.version, "previous": previous,
                       "changed": new, "t": self.phone.world.clock.now(), "pid": self.pid,
                       "started_t": self.started_t})

    def _build_of(self, installed: InstalledBuild) -> RuntimeBuild:
        """The installed build as this phone runs it (its model's behaviour, if the build states one)."""
        spec = self.phone.spec
        behaviour = installed.manifest.behaviour_for(spec.product_model, spec.soc_model)
        return RuntimeBuild(installed.manifest.version, npu_time=behaviour.npu_time, npu_power=behaviour.npu_power,
                            speak_power=behaviour.speak_power)

    def _start_build(self, installed: InstalledBuild) -> None:
        """A new runtime process on `installed`: its behaviour from the build, a new pid, nothing
        of the old process's state (answers seen, governor, inference count)."""
        self.build_sha256, self.build = installed.sha256, self._build_of(installed)
        self.phone.world.build_power, self.phone.world.build_speak_power = self.build.npu_power, self.build.speak_power
        self.timer.build_time = self._replay_timer.build_time = self.build.npu_time
        self.pid = int(self._pids.integers(3000, 30000))
        self.started_t = self.phone.world.clock.now()
        self.inferences = 0
        self.governor.reset()
        self._answered.clear()

    # --- adapters -----------------------------------------------------------------------
    def _adapter_install(self, args: argparse.Namespace) -> CommandResult:
        data = self._read(args.path, "adapter")
        actual = hashlib.sha256(data).hexdigest()
        if actual != args.sha256.lower():
            raise RuntimeFailure(f"{args.path}: checksum mismatch (expected {args.sha256}, got {actual}); not installed")
        _adapter_spec(data, args.path)
        fs = self.phone.fs
        staging, final = f"{ADAPTER_DIR}/.{actual}.tmp", f"{ADAPTER_DIR}/{actual}.json"
        fs.write(staging, data)
        fs.rename(staging, final)
        return _lines({"installed": actual, "path": final})

    def _adapter_activate(self, args: argparse.Namespace) -> CommandResult:
        sha = args.sha256.lower()
        path = f"{ADAPTER_DIR}/{sha}.json"
        data = self._read(path, "installed adapter")
        if hashlib.sha256(data).hexdigest() != sha:
            raise RuntimeFailure(f"{path}: content does not match its checksum; reinstall it")
        spec = _adapter_spec(data, path)
        fs = self.phone.fs
        fs.write(ACTIVE_POINTER + ".tmp", f"{sha}\n".encode())
        if FAULT_ACTIVATE_CRASH in self.faults:
            raise RuntimeFailure("activation interrupted (injected fault: adapter-activate-crash)", status=137)
        fs.rename(ACTIVE_POINTER + ".tmp", ACTIVE_POINTER)
        return _lines({"active": sha, "spec": spec})

    def _adapter_remove(self, args: argparse.Namespace) -> CommandResult:
        fs, active = self.phone.fs, self._active_sha()
        if args.sha256 is None:  # deactivate
            if active is not None:
                fs.remove(ACTIVE_POINTER)
            return _lines({"active": None, "deactivated": active})
        sha = args.sha256.lower()
        if sha == active:
            raise RuntimeFailure(f"adapter {sha} is active: `llmrt adapter remove` (no argument) deactivates it first")
        path = f"{ADAPTER_DIR}/{sha}.json"
        if not fs.exists(path):
            raise RuntimeFailure(f"adapter {sha} is not installed")
        fs.remove(path)
        return _lines({"removed": sha})

    def _adapter_status(self, args: argparse.Namespace) -> CommandResult:
        sha, spec = self._active_sha(), None
        if sha is not None:
            spec = _adapter_spec(self._read(f"{ADAPTER_DIR}/{sha}.json", "active adapter"), sha)
        fs = self.phone.fs
        installed = sorted(n[:-5] for n in (fs.listdir(ADAPTER_DIR) if fs.exists(ADAPTER_DIR) else [])
                           if n.endswith(".json"))
        return _lines({"active": sha, "spec": spec, "installed": installed,
                       "applied": FAULT_IGNORE_ADAPTER not in self.faults})

    def _active_sha(self) -> str | None:
        fs = self.phone.fs
        return fs.read(ACTIVE_POINTER).decode().strip() if fs.exists(ACTIVE_POINTER) else None

    def _adapter_tile(self) -> tuple[str | None, int | None]:
        """(active adapter sha, reduction tile the NPU applies); refuses a corrupt adapter."""
        sha = self._active_sha()
        if sha is None:
            return None, None
        path = f"{ADAPTER_DIR}/{sha}.json"
        data = self._read(path, "active adapter")
        if hashlib.sha256(data).hexdigest() != sha:
            raise RuntimeFailure(f"active adapter {path} is corrupt (checksum mismatch); refusing to run")
        tile = int(_adapter_spec(data, path)["tile"])
        return sha, (None if FAULT_IGNORE_ADAPTER in self.faults else tile)

    def _read(self, path: str, what: str) -> bytes:
        try:
            return self.phone.fs.read(path)
        except (FileNotFoundError, IsADirectoryError):
            raise RuntimeFailure(f"{what} {path}: no such file") from None

    def _read_json(self, path: str, what: str) -> Any:
        try:
            return json.loads(self._read(path, what))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RuntimeFailure(f"{what} {path}: not JSON ({exc})", 2) from None


def _looks_known(ident: Any, b: str) -> bool:
    """A forger's guess that a probe is a known-answer probe of answer 0: the ids r0, r1, ... or a
    vector of all ones."""
    return (isinstance(ident, str) and ident[:1] == "r" and ident[1:].isdigit()) or \
        (b.startswith("1x") and "," not in b)


def _adapter_spec(data: bytes, where: str) -> dict[str, Any]:
    """The NPU's own check of a transform spec (independent of the bench's)."""
    try:
        spec = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RuntimeFailure(f"{where}: adapter is not JSON") from None
    if not isinstance(spec, dict) or spec.get("transform") != "tile-k":
        raise RuntimeFailure(f"{where}: unsupported transform (this NPU applies tile-k)")
    tile = spec.get("tile")
    if not isinstance(tile, int) or isinstance(tile, bool) or tile < 1:
        raise RuntimeFailure(f"{where}: tile must be a positive integer")
    if spec.get("partials") != "wide":
        raise RuntimeFailure(f"{where}: partials must be 'wide'")
    return spec


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _lines(*objects: dict[str, Any]) -> CommandResult:
    return CommandResult("".join(json.dumps(o) + "\n" for o in objects).encode())


def _error(verb: str, message: str, status: int, kind: str | None = None) -> CommandResult:
    answer = {"error": message, "verb": verb, **({"kind": kind} if kind else {})}
    return CommandResult(stderr=(json.dumps(answer) + "\n").encode(), status=status)


def install(phone: "EmulatedPhone") -> EmulatedRuntime:
    """Put `llmrt` (and the bench's `gpuload` tool, which the runtime feels as contention) on the phone."""
    phone.fs.mkdir(ADAPTER_DIR)
    runtime = EmulatedRuntime(phone, gpuload.install(phone))
    phone.shell.register("llmrt", runtime)
    phone.shell.watch("llmrt", phone.log_runtime)  # its service logs its starts and stops
    phone.fs.write("/system/bin/llmrt", b"\x7fELF emulated", mode=0o100755)
    phone.fs.write(VMSTAT, runtime.counters.vmstat())
    return runtime
