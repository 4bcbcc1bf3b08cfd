"""The llama.cpp adapter end to end against the emulated phone's llama.cpp over real ADB."""
from __future__ import annotations

import pytest

from phonebench.core.errors import UnsupportedCapability
from phonebench.drivers.adb import AdbPhone
from phonebench.drivers.llamacpp import LlamaCpp
from phonebench.emulation.adb_auth import AuthPolicy
from phonebench.emulation.adbd import AdbDaemon
from phonebench.emulation.device import EmulatedPhone, PhoneSpec
from phonebench.emulation.llamacpp import DECODE_TOKENS_PER_S, MODEL_PATH, PROMPT_TOKENS_PER_S


def _device(faults: list[str]):
    phone = EmulatedPhone(PhoneSpec(serial="LLAMA1", faults=faults, llamacpp="imitation"))
    daemon = AdbDaemon(phone, auth=AuthPolicy(accept_any=True))
    daemon.start()
    return phone, daemon, AdbPhone(daemon.address, name="LLAMA1", connect_timeout_s=5)


@pytest.fixture
def emulated():
    started = []

    def make(faults: list[str] = ()):
        phone, daemon, device = _device(list(faults))
        started.append((daemon, device))
        return phone, device

    yield make
    for daemon, device in started:
        device.close()
        daemon.stop()


def test_llama_bench_jsonl_through_adb_matches_the_emulated_rates(emulated):
    phone, device = emulated()
    t0 = phone.world.clock.now()
    results = LlamaCpp(device, MODEL_PATH).bench(n_prompt=128, n_gen=32, repetitions=3)
    by_test = {("pp" if r.n_prompt else "tg"): r for r in results}
    assert by_test["pp"].avg_ts == pytest.approx(PROMPT_TOKENS_PER_S, rel=0.05)
    assert by_test["tg"].avg_ts == pytest.approx(DECODE_TOKENS_PER_S, rel=0.05)
    assert len(by_test["tg"].samples_ts) == 3 and by_test["tg"].build_number == 5163
    # the work took simulated time on the phone: 3 × (128/125 + 32/27.5) s
    assert phone.world.clock.now() - t0 == pytest.approx(3 * (128 / 125 + 32 / 27.5), rel=0.05)


def test_completion_timings_are_parsed_from_merged_stderr(emulated):
    _, device = emulated()
    completion = LlamaCpp(device, MODEL_PATH).complete("What is the capital of France?", n_predict=20)
    assert completion.timings["eval"].count == 19
    assert completion.timings["eval"].tokens_per_second == pytest.approx(DECODE_TOKENS_PER_S, rel=0.05)


def test_missing_model_and_missing_llamacpp_are_clear(emulated):
    _, device = emulated()
    with pytest.raises(Exception, match="failed to load model"):
        LlamaCpp(device, "/data/local/tmp/models/none.gguf").bench(n_prompt=8, n_gen=8, repetitions=1)
    _, bare = emulated(["no-llamacpp"])
    llama = LlamaCpp(bare, MODEL_PATH)
    assert llama.installed() == []
    with pytest.raises(UnsupportedCapability, match="not found"):
        llama.bench(n_prompt=8, n_gen=8, repetitions=1)
