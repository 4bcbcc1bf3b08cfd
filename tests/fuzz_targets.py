"""Every parser that reads bytes from outside the bench, as a fuzz target: a hypothesis strategy of
hostile input, the call, and the error type the parser owns. Any other exception is a bug.

Shared by the fast tier (tests/test_fuzz_parsers.py, hypothesis profile `phonebench-ci`: a few
examples each, derandomized) and the long tier (benchmarks/fuzz_long.py, profile `phonebench-fuzz`:
>= 10,000 examples each, seeded).
"""
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from phonebench.core.decoding import DecodeError, decode, parse_number
from phonebench.core.errors import BenchError, ConfigError, DeviceError, InstrumentError, InvalidMeasurement
from phonebench.drivers.device import ShellResult
from instrument_helpers import ScriptedResource, ScriptedSerial

_DIR = Path(tempfile.mkdtemp(prefix="phonebench-fuzz-"))

# Two sizes of the same search, named: `ci` for make test (a few derandomized examples per parser,
# the same every run), `fuzz` for make fuzz (seeded, as many examples as it asks for).
CI_PROFILE, FUZZ_PROFILE = "phonebench-ci", "phonebench-fuzz"
settings.register_profile(CI_PROFILE, max_examples=60, derandomize=True, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile(FUZZ_PROFILE, max_examples=10_000, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))

# --- building blocks of hostile input ------------------------------------------------------
_numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from(["9.9E37", "9.91E37", "nan", "NaN", "inf", "-inf", "1_0E-4", "1e999",
                                      "0x10", "", " ", "--1", "1.2.3", "+", "."]))
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                          st.text(max_size=20))
_json_values = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)
_hostile_text = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.integers(1, 100_000).map(lambda n: "[" * n + "]" * (n % 7)),  # deep nesting
    st.integers(1, 100_000).map(lambda n: '{"a":' * n + "1" + "}" * (n % 5)),
    st.sampled_from(["\x00\x01\x02", "\ufeff", "\udcff", "$(reboot)", "`id`", "; rm -rf /", "../../..",
                     "/tmp/x", "a\r\nb", "\u202e"]),
)


def _mutated_lines(template: list[str]) -> st.SearchStrategy[str]:
    """Lines of a real format with fields replaced by hostile values."""
    @st.composite
    def build(draw: Any) -> str:
        lines = []
        for line in template:
            if draw(st.booleans()):
                lines.append(draw(_hostile_text))
            else:
                lines.append(line.replace("{n}", str(draw(_numbers))).replace("{s}", draw(st.text(max_size=12))))
        return "\n".join(draw(st.permutations(lines)) if draw(st.booleans()) else lines)
    return build()


def _toml_value(draw: Any) -> str:
    return draw(st.one_of(
        _numbers.map(str), st.text(max_size=10).map(json.dumps), st.sampled_from(
            ["true", "[1, 2]", "[{a = 1}]", "{x = 1}", '["a", 1]', "[[1]]", '"1_0E-4"', "1_0E-4", "-300", "9999",
             "nan", "inf", "1979-05-27", "[]", "{}"])))


def _toml_document(tables: dict[str, list[str]]) -> st.SearchStrategy[str]:
    """TOML documents shaped like a real file (its tables and keys) with hostile values."""
    @st.composite
    def build(draw: Any) -> str:
        out = []
        for header, keys in tables.items():
            if draw(st.integers(0, 9)) == 0:
                continue
            out.append(header)
            for key in keys:
                if draw(st.integers(0, 3)):
                    out.append(f"{key} = {_toml_value(draw)}")
            if draw(st.integers(0, 5)) == 0:
                out.append(f"{draw(st.sampled_from(['extra', 'name', 'limit', 'phone']))} = {_toml_value(draw)}")
        if draw(st.integers(0, 6)) == 0:
            out.append(draw(_hostile_text))
        return "\n".join(out)
    return build()


def _file_bytes(text_strategy: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.one_of(text_strategy.map(lambda t: t.encode("utf-8", "surrogatepass")),
                     text_strategy.map(lambda t: t.encode("utf-16", "surrogatepass")),
                     st.binary(max_size=400))


def _write(name: str, data: bytes) -> Path:
    path = _DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- the targets ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy[Any]
    call: Callable[[Any], Any]
    errors: tuple[type[BaseException], ...]  # what a bad input may raise: the parser's own types


def _runtime_json_lines(text: str) -> None:
    from phonebench.drivers.runtime import parse_json_lines

    for obj in parse_json_lines(text):
        assert isinstance(obj, dict)


class _Device:
    name = "fuzz-dut"

    def __init__(self, output: str, exit_code: int = 0) -> None:
        self.output, self.exit_code = output, exit_code

    def shell(self, command: str, timeout_s: float | None = None) -> ShellResult:
        return ShellResult(self.name, command, self.output, self.exit_code)

    def run(self, command: str, timeout_s: float | None = None) -> str:
        return self.output

    def push_bytes(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        pass


_IDENTITY = json.dumps({"contract": "1.2", "runtime_version": "x", "model": "m", "microcode": "u",
                        "capabilities": ["status", "adapter", "config"]})


def _runtime_answers(answer: Any) -> None:
    from phonebench.drivers.runtime import RuntimeClient

    line = json.dumps(answer, allow_nan=True) if not isinstance(answer, str) else answer
    for call in ("status", "adapter_status", "config_get"):
        client = RuntimeClient(_Device(line))  # type: ignore[arg-type]
        client._identity = None
        client.device = _Device(_IDENTITY)  # type: ignore[assignment]
        client.identity()
        client.device = _Device(line)  # type: ignore[assignment]
        try:
            getattr(client, call)()
        except BenchError:  # each call must refuse cleanly on its own
            pass
    client = RuntimeClient(_Device(line))  # type: ignore[arg-type]
    client.require("status")


_EVERY_CAPABILITY = json.dumps({"contract": "1.2", "runtime_version": "x", "model": "m", "microcode": "u",
                                 "capabilities": ["status", "adapter", "config", "generate", "probe", "weights",
                                                  "audit", "counters"]})


def _runtime_verbs(case: tuple[str, str, int]) -> None:
    """Every runtime verb on hostile output and exit codes (docs/runtime-contract.md)."""
    from phonebench.drivers.runtime import Probe, RuntimeClient

    verb, output, exit_code = case
    client = RuntimeClient(_Device(_EVERY_CAPABILITY))  # type: ignore[arg-type]
    client.identity()
    client.device = _Device(output, exit_code)  # type: ignore[assignment]
    calls: dict[str, Callable[[], Any]] = {
        "generate": lambda: client.generate(4, allow_incomplete=exit_code in (137, 143)),
        "probe": lambda: client.probe([Probe("p1", "1x4", "@1234"), Probe("p2", "2", "3")]),
        "adapter install": lambda: client.adapter_install("/data/local/tmp/a.json", "ab" * 32),
        "adapter activate": lambda: client.adapter_activate("ab" * 32),
        "adapter remove": lambda: client.adapter_remove(),
        "adapter status": client.adapter_status, "status": client.status,
        "config get": lambda: client.config_get("thermal.skin_offset_c"), "config get all": client.config_get,
        "config set": lambda: client.config_set("redundancy.trigger_mv", 12.5),
        "weights status": client.weights_status, "weights verify": client.weights_verify,
        "weights read": lambda: client.weights_read(3, with_path=True),
        "weights repair": lambda: client.weights_repair(3, "/data/local/tmp/page"),
        "audit status": client.audit_status, "counters": client.counters,
    }
    calls[verb]()


_EVENT_KEYS = ["event", "index", "t", "id", "result", "length", "prompt_tokens", "adapter", "error", "installed",
               "active", "value", "config", "page", "data", "path", "crc_ok", "pages", "crc_errors", "public_key",
               "records", "hash_device", "manifest", "block"]
_EVENT = st.dictionaries(st.sampled_from(_EVENT_KEYS), st.one_of(
    _json_values, st.sampled_from(["start", "token", "done", "probe", "p1", "p2", "AAAA", "!!"])), max_size=6)
_RUNTIME_OUTPUT = st.one_of(st.lists(_EVENT, max_size=6).map(lambda events: "\n".join(
    json.dumps(e, allow_nan=True) for e in events)), _hostile_text)
_RUNTIME_VERBS = st.tuples(st.sampled_from(["generate", "probe", "adapter install", "adapter activate", "adapter remove",
                                            "adapter status", "status", "config get", "config get all", "config set",
                                            "weights status", "weights verify", "weights read", "weights repair",
                                            "audit status", "counters"]),
                           _RUNTIME_OUTPUT, st.sampled_from([0, 0, 0, 1, 2, 137, 143]))


def _fluke_1529(line: str) -> None:
    from phonebench.drivers.thermal_fluke import Fluke1529

    wire = line.encode("utf-8", "surrogatepass")  # what the serial line carries: any bytes
    port = ScriptedSerial({"*IDN?": "HART SCIENTIFIC,1529,A3B417,1.60", "SYST:ERR?": '0,"No error"',
                           "FETC? 1": wire})
    Fluke1529("socket://fuzz:1", channels=1, port=port).read()


_FLUKE_1529_LINE = st.one_of(_hostile_text, st.lists(_numbers.map(str), min_size=1, max_size=12).map(",".join),
                             st.tuples(st.sampled_from(["0", "1", "2", "x"]), st.sampled_from(["1", "2", "0"]),
                                       _numbers.map(str), st.sampled_from(["C", "F", "K", "O", ""]),
                                       *([_numbers.map(str)] * 6)).map(",".join),
                             st.tuples(st.sampled_from(["0", "1"]), st.just("1"), _numbers.map(str),
                                       st.sampled_from(["C", "F", "K"]), st.integers(0, 30).map(str),
                                       st.integers(0, 59).map(str), st.floats(0, 60).map(str),
                                       st.integers(-1, 10_000).map(str), st.integers(0, 13).map(str),
                                       st.integers(0, 32).map(str)).map(",".join))


def _fluke_1521(answers: tuple[str, str]) -> None:
    from phonebench.drivers.thermal_fluke import Fluke1521

    version, reading = answers
    wire = {"*ver": version.encode("utf-8", "surrogatepass"), "fetch?": reading.encode("utf-8", "surrogatepass")}
    Fluke1521("socket://fuzz:1", port=ScriptedSerial(wire)).read()  # type: ignore[arg-type]


_FLUKE_1521 = st.tuples(st.one_of(st.just("ver.1521,1.10"), _hostile_text),
                        st.one_of(st.tuples(_numbers.map(str), st.sampled_from([" C", " F", " K", "", " OPEN"]))
                                  .map(lambda t: f"t: {t[0]}{t[1]}"), _hostile_text))


def _daq970a_readings(answer: str) -> None:
    from phonebench.drivers.daq970a import DaqChannel, parse_readings

    parse_readings(answer, [DaqChannel("T1", 101, "K"), DaqChannel("T2", 102, "K")], 1,
                   "thermal keysight-daq970a at fuzz")  # the parser alone: no instrument behind it


_DAQ_READING = st.tuples(_numbers.map(str), st.sampled_from([" C", " F", "", " VDC"]), _numbers.map(str),
                         st.sampled_from(["101", "102", "103", "x", ""])).map(lambda t: f"{t[0]}{t[1]},{t[2]},{t[3]}")
_DAQ970A = st.one_of(st.lists(_DAQ_READING, min_size=1, max_size=3).map(",".join), _hostile_text)


def _adb_devices(listing: str) -> None:
    from phonebench.drivers.adb_server import parse_devices, state_error

    for serial, state in parse_devices(listing).items():
        assert isinstance(serial, str) and isinstance(state, str)
        state_error("fuzz phone", state, listing)


_ADB_DEVICES = st.one_of(_hostile_text, st.lists(st.tuples(st.text(max_size=20), st.sampled_from(
    ["device", "offline", "unauthorized", "no permissions (user in plugdev group; are your udev rules wrong?)",
     "recovery", "sideload", "", "host"])).map(lambda t: f"{t[0]}\t{t[1]}"), max_size=5).map("\n".join))


class _Conn:
    """An adb server stream that answers with fixed bytes (phonebench.drivers.adb_client.ServerConnection's surface)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.conn = bytearray(data), self

    def sendall(self, data: bytes) -> None:
        pass

    def setsockopt(self, *option: object) -> None:
        pass

    def send_command(self, command: str) -> None:
        pass

    def check_okay(self) -> None:
        pass

    def read_exact(self, n: int) -> bytes:
        if len(self.data) < n:
            raise EOFError(f"{n} bytes wanted, {len(self.data)} left")
        out, self.data = bytes(self.data[:n]), self.data[n:]
        return out

    def read_until_close(self, limit: int | None = None) -> bytes:
        out, self.data = bytes(self.data), bytearray()
        return out


def _adb_streams(data: bytes) -> None:
    """What a phone sends back through the adb server: shell v2 packets, shell v1 output with
    the exit marker, sync STAT and LIST replies."""
    from phonebench.drivers.adb_client import AdbServerError
    from phonebench.drivers.adb_server import _read_shell_v1, _SyncChannel
    from phonebench.drivers.shell_v2 import read_shell

    for call in (lambda: read_shell(_Conn(data), "true"),  # type: ignore[arg-type]
                 lambda: _read_shell_v1(_Conn(data), "true"),  # type: ignore[arg-type]
                 lambda: _SyncChannel(_Conn(data), "fuzz phone").stat("/x"),  # type: ignore[arg-type]
                 lambda: _SyncChannel(_Conn(data), "fuzz phone").list("/x")):  # type: ignore[arg-type]
        try:
            call()
        except (EOFError, AdbServerError, DeviceError, BenchError):  # a cut stream, a refused request: the caller's to report
            pass


def _shell_packet(kind: int, payload: bytes) -> bytes:
    import struct

    return struct.pack("<BI", kind, len(payload)) + payload


_ADB_STREAM = st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=30)), max_size=6)
    .map(lambda packets: b"".join(_shell_packet(k, p) for k, p in packets)),
    st.lists(st.tuples(st.sampled_from([b"STAT", b"DENT", b"DONE", b"FAIL", b"XXXX"]),
                       st.binary(min_size=16, max_size=16), st.binary(max_size=12)), max_size=4)
    .map(lambda entries: b"".join(ident + fixed + name for ident, fixed, name in entries)))


def _calibration_settings(data: bytes) -> None:
    from phonebench.bench.procedures.calibration.settings import load_settings

    load_settings(_write("calibration.toml", data))


_CALIBRATION = _toml_document({
    "[calibration]": ["operator", "humidity_pct", "fixture_path_m", "ambient_channel", "loopback_trials",
                      "asset_tags", "intervals_days", "skin_reference", "ripple_sweep_mv", "trigger_margin_mv",
                      "hysteresis_mv", "unattended", "limits"],
    "[calibration.limits]": ["max_skew_s", "fixture_delay_s", "max_current_zero_a", "ripple_onset_mv"],
    "[calibration.reference]": ["channel", "points", "family", "address", "channels", "certificate", "due"],
})


_RUNTIME_ANSWER = st.dictionaries(st.sampled_from(
    ["t", "active", "config", "value", "thermal_status", "capabilities", "contract", "runtime_version", "model",
     "microcode", "redundancy", "temperatures_c", "installed", "error"]), _json_values, max_size=8)


def _llamacpp(text: str) -> None:
    from phonebench.drivers.llamacpp import parse_bench_jsonl, parse_timings

    parse_timings(text)
    parse_bench_jsonl(text)


def _scpi_number(text: str) -> None:
    value = parse_number(text, "fuzz instrument")
    assert isinstance(value, float)


def _scpi_query_float(text: str) -> None:
    from phonebench.drivers.visa import ScpiInstrument

    res = ScriptedResource({"*IDN?": "Fuzz,Model,1,1.0", "MEAS?": text})
    ScpiInstrument("TCPIP::fuzz::SOCKET", resource=res).query_float("MEAS?")


def _scpi_idn(text: str) -> None:
    from phonebench.drivers.visa import parse_idn

    parse_idn(text, "TCPIP::fuzz::SOCKET", "scope", "fuzz")


def _scpi_block(data: bytes) -> None:
    from phonebench.drivers.visa import ScpiInstrument

    res = ScriptedResource({"*IDN?": "Fuzz,Model,1,1.0"})
    inst = ScpiInstrument("TCPIP::fuzz::SOCKET", resource=res)
    res._pending += data
    inst.read_block("WAV:DATA?")


def _preamble(text: str) -> None:
    from phonebench.drivers.scope import Preamble

    pre = Preamble.parse(text, "fuzz scope")
    assert pre.points > 0 and math.isfinite(pre.xincrement) and pre.xincrement > 0


_PREAMBLE = st.lists(_numbers.map(str), min_size=8, max_size=12).map(",".join)


def _serial_probe(line: str) -> None:
    from phonebench.drivers.thermal_generic import GenericAsciiProbe

    port = ScriptedSerial({"*IDN?": "Fuzz,Probe,1,1.0", "CHAN?": "T1,T2,T3,T4,CJ"})
    probe = GenericAsciiProbe("fuzz://probe", port=port)
    probe._parse_poll(line)
    probe._parse_stream(line)


_PROBE_LINE = st.one_of(_hostile_text, st.lists(_numbers.map(str), min_size=1, max_size=8).map(",".join),
                        st.lists(st.tuples(st.sampled_from(["T1", "T2", "T3", "T4", "CJ", "X"]), _numbers.map(str)),
                                 max_size=6).map(lambda kv: ",".join(f"{k}={v}" for k, v in kv)))


def _station(data: bytes) -> None:
    from phonebench.core.station import load_station

    load_station(_write("station.toml", data))


_STATION = _toml_document({
    "[station]": ["name", "results_dir", "sla_profile", "location", "database", "payloads"],
    "[[dut]]": ["name", "adb", "usb", "key", "expected_serial"],
    "[instruments.scope]": ["family", "address", "attached_to", "options"],
    "[instruments.scope.options]": ["timeout_s", "channel"],
    "[emulated]": ["instruments", "auth", "allowed_keys", "phone"],
    "[[emulated.phone]]": ["serial", "npu_persona", "sla_persona", "faults", "seed"],
})


def _sla(data: bytes) -> None:
    from phonebench.bench.specs.sla import load_profile

    load_profile(_write("sla/fuzz.toml", data))


_SLA = _toml_document({
    "": ["name", "description", "extends"],
    "[metrics.voice_latency_p99]": ["statistic", "p", "comparator", "limit", "unit", "confidence", "min_samples",
                                    "claim", "independence", "min_runs", "tolerance", "evidence", "decision_rule"],
    "[metrics.voice_latency_p99.conditions]": ["gpu_load_min", "mode"],
})


def _firmware(data: bytes) -> None:
    from phonebench.bench.specs.profiles import load_library

    root = _DIR / "profiles"
    (root / "adapters").mkdir(parents=True, exist_ok=True)
    (root / "soc.toml").write_bytes(data)
    load_library(root, require_signatures=False)


_FIRMWARE = _toml_document({
    "": ["schema", "vendor", "soc_manufacturer", "soc_model", "marketing_name", "board_platform"],
    "[[build]]": ["microcode", "stage", "accumulator_bits", "overflow", "adapter", "notes"],
})


def _adapter(data: bytes) -> None:
    from phonebench.bench.specs.profiles import load_adapter

    load_adapter(_write("adapters/tile8.json", data))


_ADAPTER = st.one_of(_json_values.map(lambda v: json.dumps(v, allow_nan=True)),
                     st.dictionaries(st.sampled_from(["schema", "name", "transform", "tile", "partials",
                                                      "description", "x"]), _json_values, max_size=7)
                     .map(lambda d: json.dumps(d, allow_nan=True)), _hostile_text)


def _signature(data: bytes) -> None:
    from phonebench.core import signing

    path = _write("signed/profile.toml", b"schema = 1\n")
    _write("signed/profile.toml.sig", data)
    signing.verify_file(path, signing.trusted_keys())


_SIG = st.one_of(st.tuples(st.sampled_from(["ed25519", "rsa", ""]), st.text(max_size=20),
                           st.text(max_size=90)).map(" ".join), _hostile_text)


def _thermalservice(text: str) -> None:
    from phonebench.bench.phone.device_state import parse_thermalservice

    parse_thermalservice(text)


_THERMALSERVICE = st.one_of(_numbers.map(lambda n: f"Thermal Status: 1\nCurrent temperatures from HAL:\n"
                                                      f"\tTemperature{{mValue={n}, mType=3, mName=skin, mStatus=0}}"),
                             _mutated_lines([
    "IsStatusOverride: false", "Thermal Status: {n}", "Current temperatures from HAL:",
    "\tTemperature{mValue={n}, mType={n}, mName={s}, mStatus={n}}",
    "\tTemperature{mValue={n}, mType=3, mName=skin, mStatus=0}"]))


def _battery(text: str) -> None:
    from phonebench.bench.phone.device_state import read_battery, read_thermal_zones

    read_battery(_Device(text))  # type: ignore[arg-type]
    read_thermal_zones(_Device(text))  # type: ignore[arg-type]


_BATTERY = st.one_of(_hostile_text, st.lists(_numbers.map(str), min_size=0, max_size=6).map("\n".join),
                     _mutated_lines(["/sys/class/thermal/thermal_zone{n}/type:{s}",
                                     "/sys/class/thermal/thermal_zone{n}/temp:{n}"]))


def _matrix_csv(data: bytes) -> None:
    from phonebench.bench.results.matrix import load_matrix_file

    load_matrix_file(_write("matrix.csv", data))


_MATRIX = st.one_of(_mutated_lines(["soc,microcode,fingerprint,rule", "{s},{s},{s},{n}", "{s},{s},known,{s},{s}",
                                    "\"{s},{s}", "x"]),
                    _mutated_lines(["| SoC | Microcode | Fingerprint |", "|---|---|---|", "| {s} | {s} | {n} |"]))


def _statistics(case: tuple[Any, str, str]) -> None:
    """Verdicts on whatever a check collected: empty, NaN, infinite, runs of any length."""
    from phonebench.bench.stats import verdicts as stats
    from phonebench.core.verdict import Verdict

    samples, comparator, independence = case
    common = dict(unit="ms", limit=1.0, comparator=comparator)
    verdicts = [stats.percentile_verdict("m", samples, p=0.9, confidence=0.95, independence=independence, **common),
                stats.std_verdict("m", samples, confidence=0.95, independence=independence, **common),
                stats.mean_verdict("m", samples, confidence=0.95, independence=independence, **common),
                stats.extreme_verdict("m", samples, statistic="max", **common)]
    assert all(isinstance(v, Verdict) and (v.outcome.is_good or v.outcome.value) for v in verdicts)


_SAMPLE = st.floats(allow_nan=True, allow_infinity=True, width=64)
_STATS = st.tuples(st.one_of(st.lists(_SAMPLE, max_size=40), st.lists(st.lists(_SAMPLE, max_size=12), max_size=5)),
                   st.sampled_from(["<=", "<", ">=", ">"]), st.sampled_from(["sample", "run"]))


def _decode(data: bytes) -> None:
    assert isinstance(decode(data, "fuzz phone"), str)


TARGETS: tuple[Target, ...] = (
    Target("runtime JSON lines", _hostile_text, _runtime_json_lines, ()),
    Target("runtime answers (status, adapter, config)", st.one_of(_RUNTIME_ANSWER, _json_values, _hostile_text),
           _runtime_answers,
           (DeviceError, BenchError)),
    Target("runtime verbs (every llmrt command)", _RUNTIME_VERBS, _runtime_verbs, (DeviceError, BenchError)),
    Target("llama.cpp output", st.one_of(_hostile_text, _mutated_lines([
        "llama_perf_context_print: prompt eval time = {n} ms / {n} tokens ({n} ms per token, {n} tokens per second)",
        "llama_perf_context_print:        eval time = {n} ms / {n} runs   ({n} ms per token, {n} tokens per second)",
        '{"n_prompt": {n}, "n_gen": {n}, "avg_ns": {n}, "avg_ts": {n}}'])), _llamacpp, (DeviceError,)),
    Target("SCPI numbers", _numbers.map(str), _scpi_number, (DecodeError,)),
    Target("SCPI query_float", _numbers.map(str), _scpi_query_float, (InstrumentError,)),
    Target("SCPI *IDN?", _hostile_text, _scpi_idn, (InstrumentError,)),
    Target("SCPI binary blocks", st.one_of(st.binary(max_size=64), st.tuples(
        st.integers(0, 9), st.text("0123456789x", max_size=10), st.binary(max_size=40), st.binary(max_size=2))
        .map(lambda t: b"#" + str(t[0]).encode() + t[1].encode() + t[2] + t[3])), _scpi_block, (InstrumentError,)),
    Target("scope preamble", st.one_of(_PREAMBLE, _hostile_text), _preamble, (InstrumentError,)),
    Target("serial probe lines", _PROBE_LINE, _serial_probe, (InstrumentError, InvalidMeasurement)),
    Target("Fluke 1529 readouts", _FLUKE_1529_LINE, _fluke_1529, (InstrumentError, InvalidMeasurement)),
    Target("Fluke 1521 readouts", _FLUKE_1521, _fluke_1521, (InstrumentError, InvalidMeasurement)),
    Target("DAQ970A readings", _DAQ970A, _daq970a_readings, (InstrumentError, InvalidMeasurement)),
    Target("adb server device list", _ADB_DEVICES, _adb_devices, ()),
    Target("adb shell and sync streams", _ADB_STREAM, _adb_streams, ()),
    Target("station files", _file_bytes(_STATION), _station, (ConfigError,)),
    Target("calibration settings", _file_bytes(_CALIBRATION), _calibration_settings, (ConfigError,)),
    Target("SLA profiles", _file_bytes(_SLA), _sla, (ConfigError,)),
    Target("firmware profiles", _file_bytes(_FIRMWARE), _firmware, (ConfigError,)),
    Target("firmware adapters", _file_bytes(_ADAPTER), _adapter, (ConfigError,)),
    Target("signatures", _file_bytes(_SIG), _signature, (ConfigError,)),
    Target("thermal service dumps", st.one_of(_THERMALSERVICE, _hostile_text), _thermalservice,
           (InvalidMeasurement,)),
    Target("battery and thermal zones", _BATTERY, _battery, (InvalidMeasurement, DeviceError)),
    Target("matrix CSV", _file_bytes(_MATRIX), _matrix_csv, (BenchError,)),
    Target("bytes from phones", st.binary(max_size=200), _decode, (DecodeError,)),
    Target("run statistics", _STATS, _statistics, ()),
)


def run_one(target: Target, value: Any) -> None:
    """Call the target; its own error types are a clean refusal, anything else propagates."""
    try:
        target.call(value)
    except target.errors:
        pass
