"""The project's fault catalogue, part 1: bad files, instrument faults and hostile input. Each case
asserts the exact outcome: the error type, that the message names the file / device / instrument,
and what to do. Process faults (disk full, kills, locked store, concurrent runs) are in
test_fault_catalogue_process.py; docs/faults.md states what the bench promises."""
from __future__ import annotations

import codecs
import json
import socket
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from pyvisa import constants
from pyvisa.errors import VisaIOError

from phonebench.core import files, signing
from phonebench.core.decoding import DecodeError, decode, parse_number, read_text
from phonebench.core.errors import BenchError, ConfigError, DeviceError, InstrumentError, InvalidMeasurement
from phonebench.core.files import UnsafePath, WriteFailed, check_name, confined, safe_name
from instrument_helpers import ScriptedResource

UTF16 = codecs.BOM_UTF16_LE + "name = 'x'\n".encode("utf-16-le")
BINARY = bytes(range(256)) * 4


# --- bad files ----------------------------------------------------------------------------
def _station(path: Path) -> Any:
    from phonebench.core.station import load_station
    return load_station(path)


def _sla(path: Path) -> Any:
    from phonebench.bench.specs.sla import load_profile
    return load_profile(path)


def _firmware(path: Path) -> Any:
    from phonebench.bench.specs.profiles import load_library
    (path.parent / "adapters").mkdir(exist_ok=True)
    return load_library(path.parent, require_signatures=False)


def _adapter(path: Path) -> Any:
    from phonebench.bench.specs.profiles import load_adapter
    return load_adapter(path)


def _signature(path: Path) -> Any:
    profile = path.with_suffix("")  # x.toml.sig -> x.toml
    profile.write_bytes(b"schema = 1\n")
    return signing.verify_file(profile, signing.trusted_keys([signing.DEV_PUBLIC_KEY]))  # a key named as trusted


def _matrix(path: Path) -> Any:
    from phonebench.bench.results.matrix import load_matrix_file
    return load_matrix_file(path)


def _calibration(path: Path) -> Any:
    from phonebench.bench.procedures.calibration.settings import load_settings
    return load_settings(path)


def _golden(path: Path) -> Any:
    from phonebench.bench.specs.references import load_reference
    return load_reference(path)


SLA_OK = '[metrics.voice_latency_p99]\nstatistic = "percentile"\np = 0.99\ncomparator = "<="\nunit = "ms"\n' \
         'confidence = 0.95\n'
FIRMWARE_OK = 'schema = 1\nvendor = "QTI"\nsoc_manufacturer = "QTI"\nsoc_model = "SM8650"\n'

# (id, loader, file name, content, error type, fragments the message must hold)
BAD_FILES: list[tuple[str, Callable[[Path], Any], str, bytes, type[BaseException], tuple[str, ...]]] = [
    ("station-binary", _station, "lab.toml", BINARY, ConfigError, ("station file", "lab.toml", "binary", "hint")),
    ("station-utf16", _station, "lab.toml", UTF16, ConfigError, ("lab.toml", "UTF-16", "UTF-8")),
    ("station-bad-toml", _station, "lab.toml", b"[station\nname=", ConfigError, ("lab.toml", "not valid TOML")),
    ("station-deep-nesting", _station, "lab.toml", b"x = " + b"[" * 5000, ConfigError, ("lab.toml",)),
    ("station-phone-not-table", _station, "lab.toml", b"[emulated]\nphone = [1, 2]\n", ConfigError,
     ("lab.toml", "emulated.phone[0]", "table")),
    ("station-faults-not-strings", _station, "lab.toml", b"[emulated]\n[[emulated.phone]]\nserial = 'A'\nfaults = [1]\n",
     ConfigError, ("lab.toml", "faults", "array of strings")),
    ("station-dut-not-table", _station, "lab.toml", b"dut = ['x']\n", ConfigError, ("lab.toml", "dut[0]")),
    ("station-instruments-scalar", _station, "lab.toml", b"instruments = 5\n[emulated]\n", ConfigError,
     ("lab.toml", "instruments")),
    ("station-bad-port", _station, "lab.toml", b"[[dut]]\nname = 'a'\nadb = 'host:99999'\n", ConfigError,
     ("lab.toml", "adb", "host:port")),
    ("station-missing", _station, "absent/lab.toml", None, ConfigError, ("does not exist", "--station")),
    ("sla-binary", _sla, "p.toml", BINARY, ConfigError, ("SLA profile", "p.toml", "binary")),
    ("sla-utf16", _sla, "p.toml", UTF16, ConfigError, ("SLA profile", "UTF-16", "iconv")),
    ("sla-negative-ms", _sla, "p.toml", (SLA_OK + "limit = -300\n").encode(), ConfigError,
     ("p.toml", "limit", ">= 0", "'ms'")),
    ("sla-claim-9999", _sla, "p.toml", (SLA_OK + "limit = 410\nclaim = 9999\n").encode(), ConfigError,
     ("p.toml", "claim", "docs/claims.md")),
    ("sla-nan-limit", _sla, "p.toml", (SLA_OK + "limit = nan\n").encode(), ConfigError, ("p.toml", "limit")),
    ("sla-empty-unit", _sla, "p.toml", (SLA_OK.replace('"ms"', '""') + "limit = 1\n").encode(), ConfigError,
     ("p.toml", "unit")),
    ("firmware-binary", _firmware, "soc.toml", BINARY, ConfigError, ("firmware profile", "soc.toml", "binary")),
    ("firmware-utf16", _firmware, "soc.toml", UTF16, ConfigError, ("firmware profile", "UTF-16")),
    ("firmware-bits-range", _firmware, "soc.toml",
     (FIRMWARE_OK + '[[build]]\nmicrocode = "a"\nstage = "MP"\naccumulator_bits = 99\noverflow = "wrap"\n'
                    'adapter = "none"\n').encode(), ConfigError, ("soc.toml:", "accumulator_bits", "8..32")),
    ("firmware-build-not-table", _firmware, "soc.toml", (FIRMWARE_OK + "build = [1]\n").encode(), ConfigError,
     ("soc.toml", "expected a table")),
    ("adapter-utf16-json", _adapter, "tile8.json", codecs.BOM_UTF16_LE + '{"a": 1}'.encode("utf-16-le"),
     ConfigError, ("adapter", "tile8.json", "UTF-16")),
    ("adapter-binary", _adapter, "tile8.json", BINARY, ConfigError, ("adapter", "tile8.json")),
    ("adapter-deep-json", _adapter, "tile8.json", b"[" * 100_000, ConfigError, ("tile8.json",)),
    ("adapter-wrong-type", _adapter, "tile8.json", json.dumps(
        {"schema": 1, "name": "tile8", "transform": "tile-k", "tile": "8", "partials": "wide",
         "description": ""}).encode(), ConfigError, ("tile8.json:", "tile", "expected int")),
    ("signature-binary", _signature, "x.toml.sig", BINARY, signing.SignatureError, ("signature", "x.toml.sig",
                                                                                   "bench profiles sign")),
    ("signature-malformed", _signature, "x.toml.sig", b"ed25519 onlytwo", signing.SignatureError,
     ("x.toml", "malformed signature")),
    ("signature-bad-base64", _signature, "x.toml.sig", b"ed25519 " + signing.key_id(
        signing.load_public_key(signing.DEV_PUBLIC_KEY)).encode() + b" !!!notbase64", signing.SignatureError,
     ("x.toml", "does not match")),
    ("signature-untrusted-key", _signature, "x.toml.sig", b"ed25519 0123456789abcdef AAAA", signing.SignatureError,
     ("x.toml", "not trusted", "PHONEBENCH_TRUSTED_KEYS")),
    ("matrix-row-longer", _matrix, "m.csv", b"soc,microcode,fingerprint\nA,B,known,EXTRA\n", BenchError,
     ("m.csv:2", "columns", "bench matrix --format csv")),
    ("matrix-row-shorter", _matrix, "m.csv", b"soc,microcode,fingerprint\nA\n", BenchError, ("m.csv:2", "columns")),
    ("matrix-not-ours", _matrix, "m.csv", b"a,b\n1,2\n", BenchError, ("m.csv", "not a matrix written by")),
    ("matrix-binary", _matrix, "m.csv", BINARY, BenchError, ("m.csv", "binary")),
    ("matrix-utf16", _matrix, "m.csv", codecs.BOM_UTF16_LE + "soc,microcode".encode("utf-16-le"), BenchError,
     ("m.csv", "UTF-16")),
    ("calibration-utf16", _calibration, "cal.toml", UTF16, ConfigError, ("calibration settings", "cal.toml")),
    ("golden-binary", _golden, "g.json", BINARY, ConfigError, ("golden reference", "g.json")),
]


@pytest.mark.parametrize("loader, name, content, error, fragments",
                         [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_bad_file_is_refused_naming_it(tmp_path: Path, loader: Callable[[Path], Any], name: str,
                                       content: bytes | None, error: type[BaseException],
                                       fragments: tuple[str, ...]) -> None:
    path = tmp_path / name
    if content is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    with pytest.raises(error) as caught:
        loader(path)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_station_option_of_wrong_type_names_the_instrument() -> None:
    from phonebench.drivers.registry import open_instrument

    with pytest.raises(ConfigError, match=r"scope keysight-infiniivision at TCPIP::x::5025::SOCKET: option "
                                          r"timeout_s = 'ten' is a str, expected float\n  hint: fix"):
        open_instrument("scope", "keysight-infiniivision", "TCPIP::x::5025::SOCKET", timeout_s="ten")


def test_station_option_bool_for_int_is_refused() -> None:
    from phonebench.drivers.registry import open_instrument

    with pytest.raises(ConfigError, match="option channel = True is a bool, expected int"):
        open_instrument("supply", "keysight-n6705c", "TCPIP::x::5025::SOCKET", channel=True)


# --- instrument faults ----------------------------------------------------------------------
def _scpi(answers: dict[str, Any]) -> Any:
    from phonebench.drivers.visa import ScpiInstrument

    return ScpiInstrument("TCPIP::10.0.0.7::5025::SOCKET", resource=ScriptedResource(
        {"*IDN?": "Keysight,N6705C,MY1,1.0", **answers}))


@pytest.mark.parametrize("answer", ["garbage", "1_0E-4", "0x10", "", "1.2.3", "--1"])
def test_instrument_garbage_number_is_refused_naming_it(answer: str) -> None:
    inst = _scpi({"MEAS?": answer})
    with pytest.raises(InstrumentError) as caught:
        inst.query_float("MEAS?")
    assert "at TCPIP::10.0.0.7::5025::SOCKET" in str(caught.value) and "MEAS?" in str(caught.value)
    assert "not a number" in str(caught.value) and "hint:" in str(caught.value)


@pytest.mark.parametrize("text", ["1_0E-4", "infinity", "0x10", "1e", "", "- 1"])
def test_strict_number_refuses_what_no_instrument_sends(text: str) -> None:
    with pytest.raises(DecodeError, match=r"scope at TCPIP::x: answered .* not a number"):
        parse_number(text, "scope at TCPIP::x")


@pytest.mark.parametrize("text, value", [("+1.5E-3", 1.5e-3), ("9.9E37", 9.9e37), ("-12", -12.0), (".5", 0.5)])
def test_strict_number_reads_ieee_488_2_numbers(text: str, value: float) -> None:
    assert parse_number(text, "x") == value


@pytest.mark.parametrize("value", ["9.9E37", "9.91E37", "NaN", "nan", "inf"])
def test_power_overload_and_nan_are_invalid_measurements(value: str) -> None:
    from phonebench.drivers.power import KeysightN6705C

    res = ScriptedResource({"*IDN?": "Keysight,N6705C,MY1,1.0", "SYST:CHAN:MOD? (@1)": '"N6781A"',
                            "MEAS:VOLT? (@1)": value})
    supply = KeysightN6705C("TCPIP::10.0.0.8::5025::SOCKET", resource=res)
    with pytest.raises(InvalidMeasurement, match="supply keysight-n6705c at TCPIP::10.0.0.8.*overload"):
        supply.measure_voltage()


def test_instrument_silence_is_named_with_what_to_check() -> None:
    inst = _scpi({})
    inst._res.query = _raise(VisaIOError(constants.StatusCode.error_timeout))
    with pytest.raises(InstrumentError, match=r"no answer to `MEAS\?` within .* s\n  hint: the instrument is silent"):
        inst.query("MEAS?")


def test_instrument_closing_mid_read_is_named_as_such_not_silence() -> None:
    inst = _scpi({})
    inst._res.query = _raise(ConnectionResetError(104, "Connection reset by peer"))
    with pytest.raises(InstrumentError, match=r"closed the connection during `MEAS\?`\n  hint: .*reopen the instrument"):
        inst.query("MEAS?")


@pytest.mark.parametrize("block, expected", [
    (b"#15abc", "truncated or stalled"),  # 5 announced, 3 sent
    (b"#9abcdefghi", "length"),  # non-digit length
    (b"XYZ\n", "instead of a definite-length binary block"),
    (b"#13abcX", "not followed by the terminator"),
])
def test_truncated_or_corrupt_block_is_refused(block: bytes, expected: str) -> None:
    inst = _scpi({})
    inst._res._pending += block
    with pytest.raises(InstrumentError, match=expected):
        inst.read_block("WAV:DATA?")
    assert not inst._res._pending  # resynchronised: a late remainder cannot answer the next query


def test_late_answer_is_discarded_before_the_next_query() -> None:
    inst = _scpi({})
    inst._res._pending += b"#15ab"  # the scope answers late: only part of the block is there
    with pytest.raises(InstrumentError):
        inst.read_block("WAV:DATA?")
    inst._res.answers["VOLT?"] = "1.25"
    assert inst.query_float("VOLT?") == 1.25


def test_preamble_with_nan_field_is_refused() -> None:
    from phonebench.drivers.scope import Preamble

    with pytest.raises(InstrumentError, match="scope1: waveform preamble has NaN, infinite or 9.9E37 fields"):
        Preamble.parse("0,0,1000,1,nan,0,0,0.01,0,128", "scope1")


def test_idn_garbage_names_the_address() -> None:
    from phonebench.drivers.visa import parse_idn

    with pytest.raises(InstrumentError, match=r"scope at TCPIP::x: \*IDN\? answered '\\x00\\x01'.*\n  hint: check"):
        parse_idn("\x00\x01", "TCPIP::x", "scope")


def _raise(exc: BaseException) -> Callable[..., Any]:
    def raiser(*_: Any, **__: Any) -> Any:
        raise exc
    return raiser


# --- ADB faults -----------------------------------------------------------------------------
def _server(behaviour: Callable[[socket.socket], None]) -> tuple[str, threading.Thread, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            behaviour(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{port}", thread, listener


def _adb(address: str) -> Any:
    from phonebench.drivers.adb import AdbPhone

    return AdbPhone(address, connect_timeout_s=1.0, name="bay9")


def test_adb_nothing_listening_is_unreachable_naming_the_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    from phonebench.core.errors import DeviceUnreachable

    with pytest.raises(DeviceUnreachable, match=f"127.0.0.1:{port}.*cannot connect"):
        _adb(f"127.0.0.1:{port}").connect()


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\xff" * 24, b""])
def test_adb_garbage_or_closed_handshake_is_a_device_error(reply: bytes) -> None:
    def behaviour(conn: socket.socket) -> None:
        conn.recv(4096)
        conn.sendall(reply)

    address, thread, listener = _server(behaviour)
    try:
        with pytest.raises(DeviceError, match=address):
            _adb(address).connect()
    finally:
        listener.close()
        thread.join(timeout=5)


# --- hostile input --------------------------------------------------------------------------
@pytest.mark.parametrize("text, name", [
    ("/tmp/x", "tmp_x"), ("../../..", "item"), ("SM8650", "SM8650"), ("a;rm -rf /", "a_rm_-rf"),
    ("$(reboot)", "reboot"), ("\x00\xff", "item"), ("ü" * 300, "item"), ("x" * 500, "x" * 120),
    (".hidden", "hidden"),
])
def test_safe_name_from_any_text(text: str, name: str) -> None:
    assert safe_name(text) == name


@pytest.mark.parametrize("run_id", ["../..", "/tmp/x", "a/b", ".", "..", "-rf", "a b", "x" * 121, ""])
def test_run_id_that_is_not_a_plain_name_is_refused(tmp_path: Path, run_id: str) -> None:
    from phonebench.bench.results.run_record import RunRecorder

    with pytest.raises(UnsafePath, match=r"run id .* is not a plain name\n  hint: use letters"):
        RunRecorder(tmp_path / "reports", {"name": "s"}, run_id=run_id)
    assert not any(tmp_path.parent.glob("x")) and [p.name for p in tmp_path.iterdir()] == []


def test_confined_refuses_a_path_outside_its_folder(tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="outside"):
        confined(tmp_path, "stubs", "../../etc/passwd")
    (tmp_path / "link").symlink_to("/")
    with pytest.raises(UnsafePath):
        confined(tmp_path, "link", "etc")
    assert confined(tmp_path, "stubs", "a.toml") == (tmp_path / "stubs" / "a.toml").resolve()


def test_phone_soc_model_cannot_choose_where_the_stub_is_written(tmp_path: Path) -> None:
    name = safe_name("../../../tmp/evil-EMU1") + ".toml"
    stub = confined(tmp_path / "report", "profile-stubs", name)
    assert stub.parent == (tmp_path / "report" / "profile-stubs").resolve() and stub.name == "tmp_evil-EMU1.toml"


def test_check_name_accepts_plain_names() -> None:
    assert check_name("20261201-120000-ab12", "run id") == "20261201-120000-ab12"


@pytest.mark.parametrize("data, fragment", [
    (b"soc=\xff\xfe", "byte 4"), (b"\x00\x00\x00binary", "binary data"),
    (codecs.BOM_UTF16_LE + b"a\x00", "UTF-16"),
])
def test_undecodable_bytes_name_their_source(data: bytes, fragment: str) -> None:
    with pytest.raises(DecodeError, match=rf"bay1: getprop ro.soc.model: .*{fragment}"):
        decode(data, "bay1: getprop ro.soc.model")


def test_lenient_decoding_keeps_the_rest_of_a_phone_answer(caplog: pytest.LogCaptureFixture) -> None:
    assert decode(b"temp=41\xff\n", "bay1: dumpsys", lenient=True) == "temp=41\ufffd\n"
    assert "bay1: dumpsys: undecodable bytes replaced" in caplog.text


def test_huge_runtime_output_is_parsed_without_crash() -> None:
    from phonebench.drivers.runtime import parse_json_lines

    line = json.dumps({"t": 1.0, "blob": "x" * 5_000_000})
    noise = "\x00\xff" * 100_000
    assert [o["t"] for o in parse_json_lines(noise + "\n" + line + "\n" + "[" * 200_000)] == [1.0]


def test_read_text_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"SLA profile {tmp_path} is a folder"):
        read_text(tmp_path, "SLA profile")


def test_raw_data_names_from_test_ids_stay_in_the_run_folder(tmp_path: Path) -> None:
    from phonebench.bench.results.run_record import RunRecorder

    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    rel = rec.save_raw("../../escape::test[/etc]", "../../x", np.arange(3))
    assert (rec.run_dir / rel).resolve().is_relative_to(rec.run_dir.resolve()) and ".." not in rel


def test_write_failed_is_an_oserror_and_a_bench_error(tmp_path: Path) -> None:
    exc = files.describe_os_error(tmp_path / "f", OSError(28, "No space left on device"))
    assert isinstance(exc, OSError) and isinstance(exc, BenchError) and exc.disk_full
    assert str(exc).startswith(f"{tmp_path / 'f'}: disk full") and "free space" in str(exc)
    assert isinstance(exc, WriteFailed)
