"""The emulated phone's inference runtime, reached as the device command `llmrt`.

Speaks the runtime contract (docs/runtime-contract.md): one JSON object per line on stdout,
errors as a JSON line on stderr with a non-zero status (never an exception into the daemon).
Tokens come from the tiny INT4 model (emulation.tinymodel) run through this phone's NPU persona
and, when one is active, its overflow adapter. Time comes from the phone's simulated world.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from emulation import npu, tinymodel
from emulation.npu_personas import get_persona
from emulation.shell import CommandResult, ShellContext

if TYPE_CHECKING:
    from emulation.device import EmulatedPhone

log = logging.getLogger(__name__)

CONTRACT_VERSION = "1.1"
RUNTIME_VERSION = "llmrt 3.3.0-emu"
CAPABILITIES = ["identity", "status", "generate", "probe", "adapter"]
ADAPTER_DIR = "/data/vendor/llm/adapters"
ACTIVE_POINTER = "/data/vendor/llm/adapter.active"
NPU_FREQ_MHZ = 1100
PROBE_FORMAT = "llmrt-probe/1"
MAX_PROBES = 4096
MAX_SEGMENTS = 1 << 20  # per probe vector
MAX_PROBE_LENGTH = 1 << 31
_CACHE_SIZE = 64

# Fault names a station may inject (PhoneSpec.faults).
FAULT_ERRATIC = "npu-erratic"                    # probe results off by one now and then
FAULT_ACTIVATE_CRASH = "adapter-activate-crash"  # activation dies between temp write and rename
FAULT_IGNORE_ADAPTER = "adapter-ignored"         # runtime accepts adapters but never applies them


class RuntimeFailure(Exception):
    """An error answered to the caller as a JSON line (status 1 unless given)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # never exit the emulator process
        raise RuntimeFailure(message, status=2)


def _parser() -> _Parser:
    p = _Parser(prog="llmrt", add_help=False)
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)
    sub.add_parser("identity", add_help=False)
    sub.add_parser("status", add_help=False)
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
    values: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for segment in text.split(","):
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


class EmulatedRuntime:
    def __init__(self, phone: "EmulatedPhone") -> None:
        self.phone = phone
        self.persona = get_persona(phone.spec.npu_persona)
        self.faults = set(phone.spec.faults)
        self._lock = threading.Lock()  # one inference at a time, like the real NPU queue
        self._tokens: OrderedDict[tuple, list[int]] = OrderedDict()
        self._erratic = np.random.default_rng([phone.spec.seed, 0xE7])

    def __call__(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        verb = argv[1] if len(argv) > 1 else ""
        try:
            args = _parser().parse_args(argv[1:])
            if args.verb is None or (args.verb == "adapter" and args.action is None):
                raise RuntimeFailure("usage: llmrt identity|status|generate|probe|adapter ...", status=2)
            name = f"_{args.verb}" + (f"_{args.action}" if args.verb == "adapter" else "")
            with self._lock:
                return getattr(self, name)(args)
        except RuntimeFailure as exc:
            return _error(verb, str(exc), exc.status)
        except Exception as exc:  # a runtime bug must not take the daemon down
            log.exception("llmrt %s failed", verb)
            return _error(verb, f"internal error: {exc!r}", 70)

    # --- identity and state -------------------------------------------------------------
    def _identity(self, args: argparse.Namespace) -> CommandResult:
        model = tinymodel.shared_model()
        return _lines({"contract": CONTRACT_VERSION, "runtime_version": RUNTIME_VERSION,
                       "model": tinymodel.MODEL_NAME, "model_sha256": model.sha256,
                       "vocab": model.config.vocab, "max_seq": model.config.max_seq,
                       "microcode": self.persona.microcode, "capabilities": CAPABILITIES})

    def _status(self, args: argparse.Namespace) -> CommandResult:
        world = self.phone.world
        return _lines({"t": world.clock.now(), "thermal_status": self.phone.thermal_status(),
                       "temperatures_c": world.temperatures(), "redundancy": False,
                       "npu_freq_mhz": NPU_FREQ_MHZ, "adapter": self._active_sha()})

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
        key = (tuple(prompt), args.max_tokens, args.seed, args.temperature, tile)
        tokens = self._tokens.get(key)
        if tokens is None:
            acc = self.persona.accumulator
            tokens = model.generate(prompt, args.max_tokens, args.seed, args.temperature,
                                    npu_matmul=lambda x, w: npu.matmul(x, w, acc, tile))
            self._tokens[key] = tokens
            if len(self._tokens) > _CACHE_SIZE:
                self._tokens.popitem(last=False)
        world = self.phone.world
        timing = np.random.default_rng([args.seed, len(prompt)])
        events: list[dict[str, Any]] = [{"event": "start", "t": world.clock.now(), "prompt_tokens": len(prompt),
                                         "max_tokens": args.max_tokens, "adapter": adapter_sha}]
        world.work("prefill", 0.12 + 0.0015 * len(prompt))
        for index, token in enumerate(tokens):
            if index:
                world.work("decode", max(0.005, timing.normal(0.045, 0.004)))
            events.append({"event": "token", "index": index, "id": token, "t": world.clock.now()})
        events.append({"event": "done", "t": world.clock.now(), "tokens": len(tokens)})
        return _lines(*events)

    # --- probe --------------------------------------------------------------------------
    def _probe(self, args: argparse.Namespace) -> CommandResult:
        batch = self._read_json(args.path, "probe batch")
        if not isinstance(batch, dict) or batch.get("format") != PROBE_FORMAT or not isinstance(batch.get("probes"), list):
            raise RuntimeFailure(f"{args.path}: not a {PROBE_FORMAT} batch", 2)
        probes = batch["probes"]
        if len(probes) > MAX_PROBES:
            raise RuntimeFailure(f"{args.path}: {len(probes)} probes (at most {MAX_PROBES} per call)", 2)
        adapter_sha, tile = self._adapter_tile() if args.with_adapter else (None, None)
        acc = self.persona.accumulator
        events: list[dict[str, Any]] = []
        for index, probe in enumerate(probes):
            ident = probe.get("id", index) if isinstance(probe, dict) else index
            try:
                a, b = parse_vector(probe["a"]), parse_vector(probe["b"])
                if max(a.values.size, b.values.size) > MAX_SEGMENTS or a.length > MAX_PROBE_LENGTH:
                    raise ValueError(f"vector too large (limits: {MAX_SEGMENTS} segments, length {MAX_PROBE_LENGTH})")
                result = npu.dot_runs(a, b, acc, tile)
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise RuntimeFailure(f"{args.path}: probe {ident!r}: {exc}", 2) from None
            if FAULT_ERRATIC in self.faults and self._erratic.random() < 0.3:
                result += int(self._erratic.choice([-1, 1]))
            events.append({"event": "probe", "id": ident, "length": a.length, "result": result})
        self.phone.world.work("decode", 0.0005 * len(probes))  # NPU busy, decode-like power
        events.append({"event": "done", "t": self.phone.world.clock.now(), "probes": len(probes),
                       "adapter": adapter_sha})
        return _lines(*events)

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


def _lines(*objects: dict[str, Any]) -> CommandResult:
    return CommandResult("".join(json.dumps(o) + "\n" for o in objects).encode())


def _error(verb: str, message: str, status: int) -> CommandResult:
    return CommandResult(stderr=(json.dumps({"error": message, "verb": verb}) + "\n").encode(), status=status)


def install(phone: "EmulatedPhone") -> None:
    phone.shell.register("llmrt", EmulatedRuntime(phone))
    phone.fs.write("/system/bin/llmrt", b"\x7fELF emulated", mode=0o100755)
    phone.fs.mkdir(ADAPTER_DIR)
