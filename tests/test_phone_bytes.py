"""The phone can hurt the host: every byte from it is bounded and escaped (issue 48, "records a lab
can defend": the phone-bytes items). Covers: ADB packet and length fields refused before anything
is allocated (host: direct transport, shell protocol, sync through the server; device: the emulated
adbd), the pull and shell-output caps, TOML-escaped profile stubs, printable phone strings in the
DUT identity, autoescaped HTML (the trend page's claim; the operator page's in test_operator_auth), `bench line --batch` a
plain name, and the emulated llama.cpp's argument allowlist. docs/security/phone-bytes.md."""
from __future__ import annotations

import socket
import struct
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from phonebench.core.errors import DeviceError
from tests.adb_helpers import adb_key, adb_server, over_adb  # noqa: F401 - fixtures

FOUR_GIB = 0xFFFFFFFF
BOUNDED = 16 * 1024 * 1024  # what refusing a 4 GiB declaration may cost at most, all threads together
_ADB_HEADER = struct.Struct("<6I")
_CNXN = int.from_bytes(b"CNXN", "little")


def _adb_header(command: int, arg0: int, arg1: int, length: int) -> bytes:
    return _ADB_HEADER.pack(command, arg0, arg1, length, 0, command ^ 0xFFFFFFFF)


def _peak(action: Callable[[], Any]) -> tuple[Any, int]:
    """(what `action` raised or returned, the peak of traced allocations while it ran)."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = action()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class _HostileDevice:
    """A TCP peer on a free loopback port that reads the host's CNXN and answers `reply`, then closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with self.listener:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(10)
                header = conn.recv(24, socket.MSG_WAITALL)
                length = _ADB_HEADER.unpack(header)[3]
                conn.recv(length, socket.MSG_WAITALL)
                conn.sendall(self.reply)
                conn.recv(1)  # until the host hangs up (or the timeout)

    def close(self) -> None:
        self.thread.join(timeout=15)


@pytest.fixture
def hostile() -> Iterator[Callable[[bytes], _HostileDevice]]:
    peers: list[_HostileDevice] = []

    def make(reply: bytes) -> _HostileDevice:
        peers.append(_HostileDevice(reply))
        return peers[-1]

    yield make
    for peer in peers:
        peer.close()


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a loopback TCP connection (the shell protocol sets TCP options on its end)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        near = socket.create_connection(listener.getsockname())
        far, _ = listener.accept()
    near.settimeout(10)
    return near, far


def _server_stream(near: socket.socket) -> Any:
    """A ServerConnection on an already connected socket (the adb server's side is the test's)."""
    from phonebench.drivers.adb_client import ServerConnection

    conn = ServerConnection.__new__(ServerConnection)
    conn.conn = near
    return conn


# --- ADB packets: a 24-byte header declaring 4 GiB ---------------------------------------------------------
def test_the_direct_transport_refuses_a_4gib_packet_header_without_allocating(hostile, adb_key) -> None:
    from phonebench.core.errors import TooMuchData
    from phonebench.drivers.adb import AdbPhone

    peer = hostile(_adb_header(_CNXN, 0x01000000, 4096, FOUR_GIB))  # 24 bytes
    phone = AdbPhone(f"127.0.0.1:{peer.port}", key_path=adb_key, name="EVIL1", connect_timeout_s=10, retries=0)
    outcome, peak = _peak(phone.connect)
    phone.close()
    assert isinstance(outcome, TooMuchData), outcome
    assert "EVIL1" in str(outcome) and str(FOUR_GIB) in str(outcome)
    assert peak < BOUNDED, f"refusing 24 bytes cost {peak} bytes"


def test_a_device_declaring_a_4gib_maxdata_gets_the_hosts_own(hostile) -> None:
    """The device's maxdata sizes the host's sync buffer: it is capped at what the host accepts."""
    from adb_shell import constants

    from phonebench.drivers.adb_transport import HardenedAdbDevice, HardenedTcpTransport

    banner = b"device::ro.product.model=evil;\0"
    peer = hostile(_ADB_HEADER.pack(_CNXN, 0x01000000, FOUR_GIB, len(banner), sum(banner), _CNXN ^ 0xFFFFFFFF)
                   + banner)
    device = HardenedAdbDevice(HardenedTcpTransport("127.0.0.1", peer.port))
    try:
        device.connect(transport_timeout_s=10, read_timeout_s=10)
        assert device.maxdata == constants.MAX_ADB_DATA
    finally:
        device.close()


def test_a_shell_protocol_packet_declaring_4gib_is_refused_without_allocating() -> None:
    from phonebench.core.errors import TooMuchData
    from phonebench.drivers import shell_v2

    near, far = _tcp_pair()
    with near, far:
        far.sendall(b"OKAY" + struct.pack("<BI", shell_v2.STDOUT, FOUR_GIB) + b"x" * 1000)
        outcome, peak = _peak(lambda: shell_v2.read_shell(_server_stream(near), "getprop"))
    assert isinstance(outcome, TooMuchData), outcome
    assert str(FOUR_GIB) in str(outcome)
    assert peak < BOUNDED


def test_a_sync_data_block_declaring_4gib_is_refused_without_allocating() -> None:
    from phonebench.core.errors import TooMuchData
    from phonebench.drivers.adb_server import _SyncChannel

    near, far = _tcp_pair()
    with near, far:
        far.sendall(b"DATA" + struct.pack("<I", FOUR_GIB) + b"x" * 1000)
        sync = _SyncChannel(_server_stream(near), "EVIL2 (127.0.0.1:1): pull /x")
        outcome, peak = _peak(lambda: sync.recv("/x", lambda block: None))
    assert isinstance(outcome, TooMuchData), outcome
    assert peak < BOUNDED


def test_the_emulated_adbd_refuses_a_4gib_packet_header_without_allocating() -> None:
    from phonebench.emulation.adbd import MAX_DATA, AdbDaemon
    from phonebench.emulation.device import PhoneSpec
    from phonebench.emulation.phones import emulated_phone

    daemon = AdbDaemon(emulated_phone(PhoneSpec(serial="EMU-BYTES-1")))
    daemon.start()
    try:
        def attack(length: int) -> bytes:
            with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
                sock.sendall(_adb_header(_CNXN, 0x01000000, MAX_DATA, length))
                sock.sendall(b"x" * 4096)
                return sock.recv(24)  # b"": the daemon dropped the client

        answer, peak = _peak(lambda: attack(FOUR_GIB))
        assert answer == b"" and peak < BOUNDED
        # over the maxdata its own CNXN declares, not only over 4 GiB
        assert attack(MAX_DATA + 1) == b""
    finally:
        daemon.stop()


def test_the_emulated_adbd_keeps_no_stdin_a_client_floods_it_with() -> None:
    from phonebench.emulation.adb_shell_v2 import HEADER, STDIN, HostPace

    pace = HostPace("test")
    chunk = b"x" * 65536

    def flood() -> None:
        pace.feed(HEADER.pack(STDIN, FOUR_GIB))
        for _ in range(128):  # 8 MiB of a 4 GiB stdin packet
            pace.feed(chunk)

    _, peak = _peak(flood)
    assert peak < 1024 * 1024
    paced = HostPace("test")  # what pacing reads still arrives: an empty stdin packet after data
    paced.feed(HEADER.pack(STDIN, 3) + b"abc" + HEADER.pack(STDIN, 0))
    sent: list[bytes] = []
    paced.paced(sent.append, lambda: False)(b"token")  # acknowledged already: no wait
    assert sent


# --- caps on a pulled file and on one command's output -----------------------------------------------------
def test_pulls_and_shell_output_over_their_caps_are_refused_on_both_transports(over_adb) -> None:
    from phonebench.core.errors import TooMuchData
    from phonebench.drivers.limits import ByteLimits

    _, device, _ = over_adb.start()
    device.push_bytes(b"y" * 200_000, "/data/local/tmp/big.bin")
    device.limits = ByteLimits(pull_bytes=100_000, shell_bytes=100_000)
    with pytest.raises(TooMuchData, match=r"pull /data/local/tmp/big.bin.*100000 bytes") as pulled:
        device.pull_bytes("/data/local/tmp/big.bin")
    assert device.name in str(pulled.value) and "PHONEBENCH_MAX_PULL_MB" in str(pulled.value)
    with pytest.raises(TooMuchData, match="shell output cap") as shelled:
        device.shell("cat /data/local/tmp/big.bin")
    assert device.name in str(shelled.value)
    # the phone is still usable, and within the caps nothing changed
    device.limits = ByteLimits()
    assert device.pull_bytes("/data/local/tmp/big.bin") == b"y" * 200_000
    assert device.shell("cat /data/local/tmp/big.bin").output == "y" * 200_000


def test_the_caps_come_from_the_driver_else_the_environment_else_the_defaults() -> None:
    from phonebench.core.errors import ConfigError
    from phonebench.drivers.limits import DEFAULT_MAX_PULL_BYTES, DEFAULT_MAX_SHELL_BYTES, MIB, byte_limits

    assert byte_limits(env={}) == (DEFAULT_MAX_PULL_BYTES, DEFAULT_MAX_SHELL_BYTES) or \
        (byte_limits(env={}).pull_bytes, byte_limits(env={}).shell_bytes) == (256 * MIB, 64 * MIB)
    env = {"PHONEBENCH_MAX_PULL_MB": "1024", "PHONEBENCH_MAX_SHELL_MB": "0.5"}
    assert (byte_limits(env=env).pull_bytes, byte_limits(env=env).shell_bytes) == (1024 * MIB, MIB // 2)
    assert byte_limits(7, 9, env=env).pull_bytes == 7
    with pytest.raises(ConfigError, match="PHONEBENCH_MAX_SHELL_MB"):
        byte_limits(env={"PHONEBENCH_MAX_SHELL_MB": "lots"})


# --- phone strings: TOML and terminals ----------------------------------------------------------------------
EVIL_SOC = 'SM8650\n[[build]]\nmicrocode = "trusted"\naccumulator_bits = 32\nadapter = "none"\x1b[2J'


def test_a_soc_string_cannot_add_a_table_to_the_profile_stub() -> None:
    import tomllib

    from phonebench.bench.specs.profiles import Signature, profile_stub

    stub = profile_stub("Qualcomm\n[evil]", EVIL_SOC, 'npu-fw 9.9"\n[[build]]\x7f', Signature(17, "wrap"),
                        "tile-k-512", f"measured on EMU1 (serial {EVIL_SOC})")
    data = tomllib.loads(stub)
    assert list(data) == ["build"] and len(data["build"]) == 1
    build = data["build"][0]
    assert set(build) == {"microcode", "stage", "accumulator_bits", "overflow", "adapter", "notes"}
    assert build["microcode"] == 'npu-fw 9.9"\n[[build]]\x7f'
    assert EVIL_SOC in build["notes"] and "Qualcomm\n[evil]" in build["notes"]
    lines = stub.splitlines()
    assert "\x1b" not in stub and [line for line in lines if line.startswith("[")] == ["[[build]]"]
    assert all(line.startswith("#") or " = " in line for line in lines if line != "[[build]]")


def test_phone_strings_reach_the_identity_and_the_screen_printable_and_bounded() -> None:
    from phonebench.bench.phone.identity import collect_identity
    from phonebench.core.phone_text import printable
    from phonebench.drivers.device import ShellCommands, ShellResult

    class Phone(ShellCommands):
        name = "EVIL3"

        def shell(self, command: Any, timeout_s: float | None = None) -> ShellResult:
            text = command if isinstance(command, str) else " ".join(command)
            if text == "getprop":
                output = ("[ro.soc.model]: [SM8650\x1b]0;pwned\x07\x1b[2J]\n[ro.serialno]: [EMU\u202e1]\n"
                          f"[ro.build.fingerprint]: [{'f' * 5000}]\n")
                return ShellResult(self.name, text, output, 0)
            if text == "getprop ro.product.model":
                return ShellResult(self.name, text, "Pixel\x9b31m\n", 0)
            return ShellResult(self.name, text, "", 127)  # no runtime on this phone

    phone = Phone()
    identity = collect_identity(phone, "EVIL3", "127.0.0.1:1")
    assert identity.soc_model == "SM8650\\x1b]0;pwned\\x07\\x1b[2J"
    assert identity.serial == "EMU\\u202e1"
    assert len(identity.build_fingerprint) < 300
    assert phone.getprop("ro.product.model") == "Pixel\\x9b31m"
    assert printable("plain SM8650") == "plain SM8650"
    assert len(printable("\x1b" * 10**7)) < 300  # bounded however much the phone sends


# --- HTML ---------------------------------------------------------------------------------------------------
def test_the_trend_page_escapes_a_stored_claim() -> None:
    import datetime as dt

    from phonebench.bench.report.trend_page import render_page
    from phonebench.bench.results.trend import NightValue, Series

    nights = [NightValue(f"r{i}", None, ("b1",), 10.0 + i, 1) for i in range(3)]
    series = Series("decode_tokens_per_s", "Pixel <b>9</b>", "tok/s", "<script>alert(1)</script>",  # type: ignore[arg-type]
                    False, nights)
    page = render_page([series], "nightly", dt.datetime(2026, 12, 6))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_report_environment_escapes_j2_templates() -> None:
    from phonebench.bench.report.render import _environment

    template = _environment().from_string("{{ value }}")
    assert template.render(value="<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"


# --- bench line --batch -------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", ["../../x", "/tmp/x", "a/b", "..", ".hidden"])
def test_a_line_batch_is_a_plain_name(tmp_path: Path, batch: str, capsys: pytest.CaptureFixture[str]) -> None:
    from phonebench.bench.cli import main
    from phonebench.core.exits import USAGE

    results = tmp_path / "a" / "b" / "results"
    assert main(["line", "--batch", batch, "--count", "1", "--results-dir", str(results)]) == USAGE
    assert "--batch" in capsys.readouterr().err
    assert not any(tmp_path.rglob("*.toml")) and not results.exists()


# --- the emulated llama.cpp's arguments ---------------------------------------------------------------------
HOSTILE_ARGS = [("llama-bench", ["--log-file", "/tmp/x"]), ("llama-completion", ["-f", "/etc/passwd"]),
                ("llama-bench", ["--model=/x"]), ("llama-completion", ["--mod", "/x"]),
                ("llama-bench", ["-o", "jsonl", "stray"])]


@pytest.mark.parametrize("tool,args", HOSTILE_ARGS)
def test_the_emulated_llamacpp_refuses_arguments_that_touch_host_files(tool: str, args: list[str],
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    import subprocess

    from phonebench.emulation import llamacpp
    from phonebench.emulation.device import PhoneSpec
    from phonebench.emulation.phones import emulated_phone
    from phonebench.emulation.shell import ShellContext

    phone = emulated_phone(PhoneSpec(serial="EMU-LLAMA-1", llamacpp="imitation"))
    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: ran.append(argv))  # the host must run nothing
    host = llamacpp.HostLlamaCpp(phone, llamacpp.HostBuild(tmp_path, tmp_path / "tiny.gguf"))
    for run in (host.bench if tool == "llama-bench" else host.completion,
                lambda argv, ctx: phone.shell.execute(" ".join(argv))):
        result = run([tool, *args], ShellContext(phone))
        assert result.status != 0 and b"invalid argument" in result.stderr, result
    assert ran == []


def test_the_bench_drivers_llamacpp_arguments_are_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What drivers/llamacpp.py sends passes the allowlist and reaches the host build as sent."""
    import subprocess

    from phonebench.emulation import llamacpp
    from phonebench.emulation.device import PhoneSpec
    from phonebench.emulation.phones import emulated_phone
    from phonebench.emulation.shell import ShellContext

    phone = emulated_phone(PhoneSpec(serial="EMU-LLAMA-2", llamacpp="imitation"))
    ran: list[list[str]] = []

    def fake_run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(subprocess, "run", fake_run)
    host = llamacpp.HostLlamaCpp(phone, llamacpp.HostBuild(tmp_path, tmp_path / "tiny.gguf"))
    ok = host.completion(["llama-completion", "-m", llamacpp.MODEL_PATH, "-p", "-m", "-n", "8", "-s", "1", "-t", "2"],
                         ShellContext(phone))
    assert ok.status == 0
    assert ran[-1][1:] == ["-m", str(tmp_path / "tiny.gguf"), "-p", "-m", "-n", "8", "-s", "1", "-t", "2"]
