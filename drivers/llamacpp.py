"""llama.cpp on the phone: `llama-bench -o jsonl` throughput and `llama-completion` / `llama-cli`
timings, so the bench is useful on any phone with a llama.cpp build.

Parsing is by field name: unknown JSON fields are kept in `extra`, lines that are not JSON (ggml
backend logs and other stderr merged by ADB shell v1) are skipped, and the perf lines
("eval time = 1234.56 ms / 128 runs ( 9.65 ms per token, 103.68 tokens per second)") are read
whatever their function prefix (llama_print_timings in old builds, llama_perf_context_print,
common_perf_print in new ones), with or without the log prefix (`--log-prefix`: a level letter,
`--log-timestamps`: M.ss.mmm.uuu before it), with colour codes, or as JSONL log records
({"type": "log", "msg": ...}).
llama.cpp has no NPU probe, adapter or status interface: those checks are skipped with a reason.
"""
from __future__ import annotations

import json
import logging
import math
import re
import shlex
from dataclasses import dataclass, field, fields
from typing import Any, Sequence

from phonebench.core.errors import CommandFailed, DeviceError, UnsupportedCapability
from .device import Device
from .runtime import parse_json_lines

log = logging.getLogger(__name__)

DEFAULT_DIR = "/data/local/tmp/llama.cpp"
CAPABILITIES = ("throughput", "generate-timing")
UNSUPPORTED = {
    "probe": "llama.cpp has no NPU probe interface (it runs on the CPU/GPU, not the vendor NPU microcode)",
    "adapter": "llama.cpp has no overflow-adapter interface",
    "status": "llama.cpp reports no runtime status (redundancy, NPU frequency)",
    "token-timestamps": "llama.cpp prints aggregate timings, not per-token device timestamps",
}

_ANSI = re.compile(r"\x1b\[[\d;]*m")
PERF_SUMMARY_ATTEMPTS = 3  # a completion that exited 0 without its perf summary is run again, this often
_TIMING = re.compile(
    r"^(?:\d+\.\d{2}\.\d{3}\.\d{3}\s+)?(?:[IWED]\s+)?(?:[\w.]+:)?\s*(?P<phase>[a-z][a-z ]*?) time\s*=\s*(?P<ms>[-\d.]+|nan|inf)\s*ms"
    r"(?:\s*/\s*(?P<count>\d+)\s+(?P<unit>runs|tokens))?"
    r"(?:\s*\(\s*(?P<per>[-\d.]+|nan|inf)\s*ms per token,\s*(?P<tps>[-\d.]+|nan|inf)\s*tokens per second\s*\))?",
    re.MULTILINE)


class LlamaCppOutputError(DeviceError):
    """llama.cpp ran but printed nothing the bench can use."""


@dataclass
class LlamaBenchResult:
    n_prompt: int
    n_gen: int
    avg_ns: float
    avg_ts: float
    stddev_ns: float = 0.0
    stddev_ts: float = 0.0
    samples_ns: list[float] = field(default_factory=list)
    samples_ts: list[float] = field(default_factory=list)
    n_threads: int | None = None
    n_depth: int = 0
    build_commit: str = ""
    build_number: int | None = None
    model_type: str = ""
    model_size: int | None = None
    model_n_params: int | None = None
    backends: str = ""
    test_time: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def test(self) -> str:
        """llama-bench's own name for the test: pp512, tg128, pp512+tg128, with @dN for depth."""
        parts = ([f"pp{self.n_prompt}"] if self.n_prompt else []) + ([f"tg{self.n_gen}"] if self.n_gen else [])
        return "+".join(parts) + (f" @ d{self.n_depth}" if self.n_depth else "")


@dataclass
class Timing:
    phase: str  # "load", "prompt eval", "eval", "sampling", "total", ...
    ms: float
    count: int | None = None
    unit: str | None = None  # "tokens" or "runs"
    ms_per_token: float | None = None
    tokens_per_second: float | None = None


@dataclass
class Completion:
    output: str  # merged stdout/stderr as the device printed it
    timings: dict[str, Timing]

    @property
    def decode_tokens_per_second(self) -> float | None:
        timing = self.timings.get("eval")
        return timing.tokens_per_second if timing else None

    @property
    def prompt_tokens_per_second(self) -> float | None:
        timing = self.timings.get("prompt eval")
        return timing.tokens_per_second if timing else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:  # the pattern admits "1.2.3" and "--"
        raise LlamaCppOutputError(f"llama.cpp timing {text!r} is not a number",
                                  hint="the binary's perf output is not the format this bench reads") from None
    return None if math.isnan(value) or math.isinf(value) else value


def parse_bench_jsonl(text: str) -> list[LlamaBenchResult]:
    """Results of `llama-bench -o jsonl` (one object per finished test); noise is skipped."""
    names = {f.name for f in fields(LlamaBenchResult)} - {"extra"}
    results = []
    for obj in parse_json_lines(text):
        if not {"n_prompt", "n_gen", "avg_ns", "avg_ts"} <= obj.keys():
            log.debug("llama-bench: skipping JSON that is not a result: %s", list(obj)[:8])
            continue
        known = {k: v for k, v in obj.items() if k in names}
        results.append(LlamaBenchResult(**known, extra={k: v for k, v in obj.items() if k not in names}))
    return results


def parse_timings(text: str) -> dict[str, Timing]:
    """Perf lines by phase; when a phase appears twice (e.g. sampler and context prints), the
    last one wins."""
    timings = {}
    for match in _TIMING.finditer(_plain_log(text)):
        phase = match["phase"].strip()
        timings[phase] = Timing(phase=phase, ms=_number(match["ms"]) or 0.0,
                                count=int(match["count"]) if match["count"] else None, unit=match["unit"],
                                ms_per_token=_number(match["per"]), tokens_per_second=_number(match["tps"]))
    return timings


def _plain_log(text: str) -> str:
    """The log as plain lines: colour codes dropped, JSONL log records replaced by their message."""
    lines = []
    for line in _ANSI.sub("", text).splitlines():
        if line.startswith("{") and '"msg"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and isinstance(record.get("msg"), str):
                lines.extend(record["msg"].splitlines())
                continue
        lines.append(line)
    return "\n".join(lines)


class LlamaCpp:
    """llama.cpp binaries and a GGUF model already on the phone (pushed by the lab)."""

    def __init__(self, device: Device, model: str, directory: str = DEFAULT_DIR) -> None:
        self.device = device
        self.model = model
        self.directory = directory.rstrip("/")

    def _binary(self, name: str) -> str:
        return f"{self.directory}/bin/{name}"

    def _run(self, binary: str, args: Sequence[str], timeout_s: float | None) -> str:
        env = f"LD_LIBRARY_PATH={shlex.quote(self.directory + '/lib')}:{shlex.quote(self.directory + '/bin')}"
        command = f"{env} {shlex.quote(binary)} " + " ".join(shlex.quote(a) for a in args)
        result = self.device.shell(command, timeout_s=timeout_s)
        if result.exit_code == 127:
            raise UnsupportedCapability(f"{self.device.name}: {binary} not found",
                                        hint=f"push a llama.cpp build to {self.directory} (bin/ and lib/)")
        if result.exit_code != 0:
            raise CommandFailed(f"{self.device.name}: {binary} exited {result.exit_code}: {result.output.strip()[-400:]}",
                                hint=f"check the model path {self.model} and run the command with `adb shell`")
        return result.output

    def installed(self) -> list[str]:
        """Which llama.cpp tools are on the phone."""
        tools = ("llama-bench", "llama-completion", "llama-cli")
        output = self.device.shell("ls " + " ".join(shlex.quote(self._binary(t)) for t in tools)).output
        return [t for t in tools if self._binary(t) in output.split()]

    @staticmethod
    def require(capability: str) -> None:
        if capability in UNSUPPORTED:
            raise UnsupportedCapability(f"runtime llama.cpp: {UNSUPPORTED[capability]}")
        if capability not in CAPABILITIES:
            raise UnsupportedCapability(f"runtime llama.cpp: no {capability!r} capability")

    def bench(self, n_prompt: int = 512, n_gen: int = 128, repetitions: int = 5, threads: int | None = None,
              extra_args: Sequence[str] = (), timeout_s: float | None = 1800.0) -> list[LlamaBenchResult]:
        args = ["-m", self.model, "-p", str(n_prompt), "-n", str(n_gen), "-r", str(repetitions), "-o", "jsonl",
                *(["-t", str(threads)] if threads else []), *extra_args]
        results = parse_bench_jsonl(self._run(self._binary("llama-bench"), args, timeout_s))
        if not results:
            raise LlamaCppOutputError(f"{self.device.name}: llama-bench printed no JSONL results",
                                      hint="is the build new enough for `-o jsonl`?")
        return results

    def complete(self, prompt: str, n_predict: int = 64, seed: int = 0, threads: int | None = None,
                 extra_args: Sequence[str] = (), timeout_s: float | None = 600.0) -> Completion:
        """One non-interactive completion; llama-completion where present (newer builds, where
        llama-cli is chat-only), else `llama-cli -no-cnv`."""
        installed = self.installed()
        if "llama-completion" in installed:
            binary, mode = "llama-completion", []
        elif "llama-cli" in installed:
            binary, mode = "llama-cli", ["-no-cnv"]
        else:
            raise UnsupportedCapability(f"{self.device.name}: neither llama-completion nor llama-cli in "
                                        f"{self.directory}/bin", hint="push a llama.cpp build to the phone")
        args = [*mode, "-m", self.model, "-p", prompt, "-n", str(n_predict), "-s", str(seed),
                *(["-t", str(threads)] if threads else []), *extra_args]
        for attempt in range(1, PERF_SUMMARY_ATTEMPTS + 1):
            output = self._run(self._binary(binary), args, timeout_s)
            timings = parse_timings(output)
            if "eval" in timings:
                return Completion(output, timings)
            # llama.cpp's logger prints from a worker thread and the process can exit before it drains
            # (ggml-org/llama.cpp#22142): a loaded phone loses the perf summary now and then.
            log.warning("%s: %s's perf summary was lost at exit (attempt %d of %d)", self.device.name, binary,
                        attempt, PERF_SUMMARY_ATTEMPTS)
        raise LlamaCppOutputError(f"{self.device.name}: {binary} printed no eval timing line",
                                  hint="the perf summary goes to stderr: run through ADB shell v1 (merged)")
