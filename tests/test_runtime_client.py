"""The runtime contract: the emulated `llmrt` and the bench's RuntimeClient."""
from __future__ import annotations

import json

import pytest

from phonebench.core.errors import UnsupportedCapability
from device_double import PhoneDevice, make_device
from phonebench.drivers.device import ShellResult
from phonebench.drivers.runtime import (Probe, RuntimeClient, RuntimeCommandFailed, RuntimeProtocolError, encode_dense,
                             encode_runs, parse_json_lines)
from phonebench.emulation import tinymodel
from phonebench.emulation.npu import matmul
from phonebench.emulation.npu_personas import PERSONAS


class ScriptedDevice:
    """Answers each command with a canned (output, exit code): a runtime we do not control."""

    name = "scripted"

    def __init__(self, answers: dict[str, tuple[str, int]]) -> None:
        self.answers = answers
        self.pushed: dict[str, bytes] = {}

    def shell(self, command, timeout_s=None) -> ShellResult:
        for key, (output, code) in self.answers.items():
            if key in command:
                return ShellResult(self.name, command, output, code)
        return ShellResult(self.name, command, "/system/bin/sh: llmrt: not found\n", 127)

    def run(self, command, timeout_s=None) -> str:
        return self.shell(command).check().output

    def push_bytes(self, data, remote, mode=0o644) -> None:
        self.pushed[remote] = data

    def pull_bytes(self, remote) -> bytes:
        return self.pushed[remote]

    def getprop(self, key) -> str:
        return ""

    def close(self) -> None:
        pass


IDENTITY = {"contract": "1.4", "runtime_version": "vendor-rt 9", "model": "m", "microcode": "u 1",
            "capabilities": ["identity", "generate"], "future_field": {"x": 1}}


@pytest.fixture
def phone() -> PhoneDevice:
    return make_device("SM8650-ES")


def test_identity_reports_the_personas_version_string(phone):
    identity = RuntimeClient(phone).identity()
    assert identity.contract.startswith("1.")
    assert identity.microcode == PERSONAS["SM8650-ES"].microcode
    assert identity.model == tinymodel.MODEL_NAME and identity.model_sha256 == tinymodel.shared_model().sha256
    assert {"identity", "status", "generate", "probe", "adapter"} <= set(identity.capabilities)


def test_generate_streams_one_event_per_token_with_device_time(phone):
    client = RuntimeClient(phone)
    t0 = phone.phone.world.clock.now()
    gen = client.generate(16, seed=3, prompt_tokens=10)
    acc = PERSONAS["SM8650-ES"].accumulator
    assert gen.tokens == tinymodel.shared_model().generate(tinymodel.prompt_tokens(10, 3), 16, seed=3,
                                                           npu_matmul=lambda x, w: matmul(x, w, acc))
    assert len(gen.tokens) == len(gen.token_times) == 16
    assert gen.start_time >= t0 and all(b > a for a, b in zip(gen.token_times, gen.token_times[1:]))
    assert 0 < gen.first_token_s < 1.0 and gen.done_time >= gen.token_times[-1]
    assert phone.phone.world.clock.now() > t0  # the work advanced simulated time


def test_generate_with_explicit_prompt_is_deterministic(phone):
    client = RuntimeClient(phone)
    assert client.generate(8, seed=1, prompt=[5, 6, 7]).tokens == client.generate(8, seed=1, prompt=[5, 6, 7]).tokens


def test_status_fields(phone):
    status = RuntimeClient(phone).status()
    assert status.npu_freq_mhz > 0 and status.thermal_status is not None
    assert {"npu", "skin"} <= set(status.temperatures_c) and status.adapter is None


def test_probe_batch_runs_through_the_npu(phone):
    client = RuntimeClient(phone)
    results = client.probe([Probe("w", encode_runs([(-8, 513)]), encode_runs([(-8, 513)])),
                            Probe("d", encode_dense([-8, 7, 3, -1]), encode_dense([1, 1, 1, 1]))])
    assert [r.id for r in results] == ["w", "d"]
    assert results[0].result == -32768 + 64  # 513 x 64 wraps a 16-bit accumulator
    assert results[1].result == 1 and results[1].length == 4
    assert client.runtime_calls == 2 and client.device_calls == 3  # identity, push, probe


@pytest.mark.parametrize("command", [
    "llmrt", "llmrt bogus", "llmrt generate --max-tokens abc", "llmrt generate --prompt 1,x",
    "llmrt generate --prompt 9999", "llmrt generate --max-tokens 100000", "llmrt probe",
    "llmrt probe --in /nope", "llmrt adapter", "llmrt adapter install /nope 00", "llmrt adapter activate 00",
    "llmrt adapter remove 00"])
def test_bad_arguments_answer_an_error_line_never_crash(phone, command):
    result = phone.phone.shell.execute(command)
    assert result.status != 0
    error = json.loads(result.stderr.decode().strip().splitlines()[-1])
    assert error["error"]
    assert phone.phone.shell.execute("llmrt identity").status == 0


@pytest.mark.parametrize("batch", [b"not json", b'{"format": "other"}',
                                   b'{"format": "llmrt-probe/1", "probes": [{"id": "x", "a": "9", "b": "1"}]}',
                                   b'{"format": "llmrt-probe/1", "probes": [{"id": "x", "a": "1x2", "b": "1"}]}',
                                   b'{"format": "llmrt-probe/1", "probes": [{"id": "x", "a": "@zz", "b": "1"}]}',
                                   b'{"format": "llmrt-probe/1", "probes": [{"id": "x", "a": 3, "b": "1"}]}'])
def test_malformed_probe_batches_are_refused(phone, batch):
    phone.push_bytes(batch, "/data/local/tmp/bad.json")
    result = phone.phone.shell.execute("llmrt probe --in /data/local/tmp/bad.json")
    assert result.status == 2 and b"error" in result.stderr


def test_client_tolerates_noise_and_unknown_fields():
    noisy = ("WARNING: linker: libfoo.so has text relocations\n"
             + json.dumps(IDENTITY) + "\n{broken json\n")
    client = RuntimeClient(ScriptedDevice({"identity": (noisy, 0)}))
    identity = client.identity()
    assert identity.runtime_version == "vendor-rt 9" and identity.extra == {"future_field": {"x": 1}}


def test_generate_parses_by_field_name_in_any_order():
    lines = [{"t": 10.0, "event": "start", "prompt_tokens": 4, "new": 1},
             {"id": 7, "event": "token", "t": 10.3, "index": 1, "logprob": -0.1},
             "[stderr] npu: clock boost\n",
             {"event": "token", "index": 0, "id": 5, "t": 10.2},
             {"event": "done", "t": 10.4, "tokens": 2}]
    output = "".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines)
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps(IDENTITY), 0), "generate": (output, 0)}))
    gen = client.generate(2, prompt=[1, 2, 3, 4])
    assert gen.tokens == [5, 7] and gen.token_times == [10.2, 10.3]
    assert gen.first_token_s == pytest.approx(0.2) and gen.inter_token_s == [pytest.approx(0.1)]


def test_generate_without_done_event_is_a_protocol_error():
    output = json.dumps({"event": "start", "t": 1}) + "\n"
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps(IDENTITY), 0), "generate": (output, 0)}))
    with pytest.raises(RuntimeProtocolError, match="start or done"):
        client.generate(2)


def test_missing_capability_raises_unsupported_with_reason():
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps(IDENTITY), 0)}))
    with pytest.raises(UnsupportedCapability, match="no `probe` capability.*offers: identity, generate"):
        client.probe([Probe("p", "1", "1")])
    with pytest.raises(UnsupportedCapability, match="adapter"):
        client.adapter_status()


def test_unknown_contract_major_is_unsupported():
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps({**IDENTITY, "contract": "2.0"}), 0)}))
    assert client.identity().contract == "2.0"
    with pytest.raises(UnsupportedCapability, match="contract 2.0"):
        client.require("generate")


def test_no_runtime_on_the_phone_is_unsupported():
    with pytest.raises(UnsupportedCapability, match="no `llmrt` runtime"):
        RuntimeClient(ScriptedDevice({})).identity()


def test_error_line_becomes_a_command_failure_naming_the_device():
    answer = ('{"error": "checksum mismatch", "verb": "adapter"}\n', 1)
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps({**IDENTITY, "capabilities": ["adapter"]}), 0),
                                           "adapter install": answer}))
    with pytest.raises(RuntimeCommandFailed, match="scripted.*checksum mismatch"):
        client.adapter_install("/x", "00")


def test_identity_without_required_fields_is_a_protocol_error():
    client = RuntimeClient(ScriptedDevice({"identity": ('{"contract": "1.0"}\n', 0)}))
    with pytest.raises(RuntimeProtocolError, match="runtime_version"):
        client.identity()


def test_parse_json_lines_skips_everything_else():
    assert parse_json_lines('x\n{"a": 1}\n[1, 2]\n{"b"\n  {"c": 2}  \n') == [{"a": 1}, {"c": 2}]


@pytest.mark.parametrize("verb, call", [("adapter install", lambda c: c.adapter_install("/x", "ab")),
                                        ("adapter activate", lambda c: c.adapter_activate("ab"))])
def test_an_adapter_answer_without_its_field_is_a_protocol_error(verb, call):
    identity = {**IDENTITY, "capabilities": ["identity", "adapter"]}
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps(identity), 0), "adapter": ("{}", 0)}))
    with pytest.raises(RuntimeProtocolError, match=f"{verb} lacks"):
        call(client)


def test_generate_events_with_malformed_fields_are_a_protocol_error():
    identity = {**IDENTITY, "capabilities": ["identity", "generate"]}
    events = [{"event": "start", "t": 0.0}, {"event": "token", "index": [0], "t": 0.1, "id": 5},
              {"event": "done", "t": 0.2}]
    output = "\n".join(json.dumps(e) for e in events)
    client = RuntimeClient(ScriptedDevice({"identity": (json.dumps(identity), 0), "generate": (output, 0)}))
    with pytest.raises(RuntimeProtocolError, match="missing or malformed field"):
        client.generate(1)


@pytest.mark.parametrize("text, values, counts", [
    ("3x4,-2x2", [3, -2], [4, 2]),
    ("3x, 1x2", [3, 1], [1, 2]),  # `vx` is one v: the loop's reading, kept by the fast path's fallback
    ("5,1x2", [5, 1], [1, 2]),
    ("@7f,1x3", [7, -1, 1], [1, 1, 3]),
])
def test_a_probe_vector_reads_the_same_through_the_fast_path_and_the_loop(text, values, counts):
    from phonebench.emulation.runtime import parse_vector

    vector = parse_vector(text)
    assert vector.values.tolist() == values and vector.counts.tolist() == counts


@pytest.mark.parametrize("text", ["1x2x3,4", "x3,1x2", "1xq,2x2", "9x2,1x1"])
def test_a_malformed_probe_vector_is_refused(text):
    from phonebench.emulation.runtime import parse_vector

    with pytest.raises(ValueError):
        parse_vector(text)
