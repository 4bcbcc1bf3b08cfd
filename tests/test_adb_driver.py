"""Both ADB paths against the emulated daemon: ServerAdbPhone through a real adb server (a private
one, on its own port) and AdbPhone straight to the daemon (adb-shell, hardened); then each
hardening over stock adb-shell."""
from __future__ import annotations

import logging
import random
import socket
import threading
import time
from pathlib import Path

import pytest
from adb_shell import exceptions as adb_exc
from adb_shell.adb_message import checksum as stock_checksum
from adb_shell.auth.keygen import keygen
from adb_shell.transport.tcp_transport import TcpTransport

from phonebench.core.errors import (AuthRefused, BenchError, CommandFailed, CommandTimeout, ConfigError, DeviceDisconnected,
                          DeviceUnreachable)
from phonebench.drivers.adb import AdbPhone, _split_marker, quote_command
from phonebench.drivers.adb_server import ServerAdbPhone, open_phone
from phonebench.drivers.adb_transport import HardenedAdbDevice, HardenedTcpTransport, fast_checksum
from phonebench.drivers.device import Device
from phonebench.drivers.recovery import DeviceBroken, RecoveryPolicy, reboot_and_wait, recover
from phonebench.emulation.adb_auth import AuthPolicy
from phonebench.emulation.adbd import AdbDaemon
from phonebench.emulation.device import EmulatedPhone, PhoneSpec
from phonebench.emulation.phones import emulated_phone
from phonebench.emulation.shell import CommandResult, DaemonKilled
from tests.adb_helpers import private_adb_server

WAIT_S = 30.0  # generous: a hang fails the test rather than blocking it; never asserted on


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("adbkeys")
    first, second = folder / "adbkey", folder / "otherkey"
    keygen(str(first))
    keygen(str(second))
    return first, second


@pytest.fixture
def phone() -> EmulatedPhone:
    return emulated_phone(PhoneSpec(serial="EMU-DRV-1"))


@pytest.fixture
def daemon(phone: EmulatedPhone):
    daemon = AdbDaemon(phone, auth=AuthPolicy(accept_any=True))
    daemon.start()
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def adb_server(tmp_path_factory: pytest.TempPathFactory):
    yield from private_adb_server(tmp_path_factory.mktemp("adbhome"))


@pytest.fixture(params=["server", "direct"])
def make(request: pytest.FixtureRequest, keys: tuple[Path, Path]):
    """A phone driver of the test's transport; the server path through the private adb server."""
    made: list[ServerAdbPhone] = []

    def make(address: str, **options):
        options.setdefault("key_path", keys[0])
        if request.param == "direct":
            return AdbPhone(address, **options)
        options.pop("key_path")
        made.append(ServerAdbPhone(address, server=request.getfixturevalue("adb_server"), **options))
        return made[-1]

    make.transport = request.param  # type: ignore[attr-defined]
    yield make
    for phone in made:  # the server forgets the phone: the next test's daemon reuses no entry
        phone.disconnect()


@pytest.fixture
def direct_phone(daemon: AdbDaemon, keys: tuple[Path, Path]):
    """For the tests of adb-shell's hardening: the direct path only."""
    with AdbPhone(daemon.address, key_path=keys[0], name="dut1", connect_timeout_s=WAIT_S) as dut:
        yield dut


@pytest.fixture
def adb_phone(daemon: AdbDaemon, make):
    with make(daemon.address, name="dut1", connect_timeout_s=WAIT_S) as dut:
        yield dut


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _register_blocking(phone: EmulatedPhone, name: str) -> threading.Event:
    release = threading.Event()

    def run(argv: list[str], ctx: object) -> CommandResult:
        release.wait(WAIT_S)
        return CommandResult(b"done waiting\n")

    phone.shell.register(name, run)
    return release


# --- shell ---------------------------------------------------------------------------------------------
def test_open_phone_picks_the_transport(keys: tuple[Path, Path]) -> None:
    assert isinstance(open_phone("127.0.0.1:5555", "server"), ServerAdbPhone)
    assert isinstance(open_phone("127.0.0.1:5555", "direct", key=keys[0]), AdbPhone)
    with pytest.raises(ConfigError, match="unknown ADB transport 'usb3'"):
        open_phone("127.0.0.1:5555", "usb3")


def test_is_a_device(adb_phone: AdbPhone) -> None:
    assert isinstance(adb_phone, Device)
    assert adb_phone.name == "dut1"


@pytest.mark.parametrize("command, output, status", [
    ("echo hello", "hello\n", 0),
    ("false", "", 1),
    ("cat /nope", "cat: /nope: No such file or directory\n", 1),
    ("frobnicate --now", "/system/bin/sh: frobnicate: not found\n", 127),
    ("echo -n partial", "partial", 0),
])
def test_shell_output_and_exit_status(adb_phone: AdbPhone, command: str, output: str, status: int) -> None:
    result = adb_phone.shell(command)
    assert (result.output, result.exit_code, result.device, result.command) == (output, status, "dut1", command)


def test_run_raises_command_failed_naming_device_and_command(adb_phone: AdbPhone) -> None:
    assert adb_phone.run("echo fine") == "fine\n"
    with pytest.raises(CommandFailed, match=r"dut1: `cat /nope` exited 1"):
        adb_phone.run("cat /nope")


def test_awkward_arguments_are_quoted(adb_phone: AdbPhone) -> None:
    args = ["two words", "it's", 'say "hi"', "$HOME", "a;b", "&&", "back\\slash", ""]
    result = adb_phone.shell(["echo", *args])
    assert result.exit_code == 0
    assert result.output == " ".join(args) + "\n"


def test_quote_command() -> None:
    assert quote_command("ls -l; echo $x") == "ls -l; echo $x"
    assert quote_command(["ls", "a b", "$x"]) == "ls 'a b' '$x'"


def test_output_after_the_marker_is_kept() -> None:
    # A v1 shell may deliver the command's stderr after the marker line.
    assert _split_marker(b"out\nMARK1\nerr\n", b"MARK") == (b"out\nerr\n", 1)
    assert _split_marker(b"no marker here", b"MARK") == (b"no marker here", None)


def test_exit_status_of_a_command_that_exits(adb_phone, make, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="phonebench.drivers.adb"):
        result = adb_phone.shell("echo bye; exit 3")
    if make.transport == "server":  # the shell protocol carries the shell's own exit status
        assert (result.output, result.exit_code) == ("bye\n", 3)
    else:  # the marker echoed after the command never runs
        assert (result.output, result.exit_code) == ("bye\n", -1)
        assert "no exit status" in caplog.text


def test_stdout_and_stderr_both_arrive(adb_phone) -> None:
    result = adb_phone.shell("echo out; cat /nope")
    assert result.exit_code == 1
    assert result.output == "out\ncat: /nope: No such file or directory\n"


def test_output_stamped_as_it_arrives(adb_phone, phone: EmulatedPhone) -> None:
    """shell_timed, the same contract on both transports: a stamp before sending, each line with
    the arrival of the packet that completed it, the output and exit status as shell() gives them."""
    ticks = iter(range(1, 1000))
    result = adb_phone.shell_timed("echo one; llmrt identity; cat /nope", lambda: float(next(ticks)))
    assert result.sent_t == 1.0 and result.exit_code == 1
    texts = [line for _, line in result.lines]
    assert texts[0] == "one" and texts[1].startswith('{"contract"')
    assert all(t > result.sent_t for t, _ in result.lines)
    assert result.output.startswith("one\n") and "No such file or directory" in result.output


def test_a_phone_without_the_shell_protocol_cannot_be_stamped_through_the_server(
        monkeypatch: pytest.MonkeyPatch, adb_server) -> None:
    from phonebench.emulation import adbd

    monkeypatch.setattr(adbd, "SUPPORTED_FEATURES", tuple(f for f in adbd.SUPPORTED_FEATURES if f != "shell_v2"))
    with AdbDaemon(emulated_phone(PhoneSpec(serial="EMU-OLD"))) as daemon:
        old = ServerAdbPhone(daemon.address, server=adb_server, name="old", connect_timeout_s=WAIT_S)
        try:
            assert old.shell("false").exit_code == 1  # shell v1 and its marker
            with pytest.raises(CommandFailed, match="no shell protocol") as refused:
                old.shell_timed("echo v1", float)
            assert 'transport = "direct"' in refused.value.hint
        finally:
            old.disconnect()


def test_getprop_and_serial(adb_phone: AdbPhone) -> None:
    assert adb_phone.getprop("ro.product.model") == "PB-Emu Pro"
    assert adb_phone.getprop("ro.no.such.prop") == ""
    assert adb_phone.serial == "EMU-DRV-1"


def test_calls_from_two_threads_on_one_connection_are_serialised(adb_phone: AdbPhone) -> None:
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        try:
            for index in range(15):
                assert adb_phone.run(["echo", f"{tag}{index}"]) == f"{tag}{index}\n"
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not errors


def test_forks_run_concurrently(phone: EmulatedPhone, adb_phone: AdbPhone) -> None:
    release = _register_blocking(phone, "longjob")
    results: dict[str, str] = {}

    def long_activity() -> None:
        with adb_phone.fork() as own:
            results["long"] = own.run("longjob")

    worker = threading.Thread(target=long_activity)
    worker.start()
    with adb_phone.fork() as other:  # proceeds while the first fork's command is still running
        results["serial"] = other.getprop("ro.serialno")
        other.push_bytes(b"side by side", "/data/local/tmp/side")
        results["pulled"] = other.pull_bytes("/data/local/tmp/side").decode()
    release.set()
    worker.join(WAIT_S)
    assert results == {"long": "done waiting\n", "serial": "EMU-DRV-1", "pulled": "side by side"}


# --- files ------------------------------------------------------------------------------------------
def test_push_pull_bytes_identical(adb_phone: AdbPhone, phone: EmulatedPhone) -> None:
    data = random.Random(5).randbytes(5 * 1024 * 1024)
    adb_phone.push_bytes(data, "/data/local/tmp/blob.bin", mode=0o600)
    assert phone.fs.read("/data/local/tmp/blob.bin") == data
    assert adb_phone.pull_bytes("/data/local/tmp/blob.bin") == data
    st = adb_phone.stat("/data/local/tmp/blob.bin")
    assert st is not None and (st.size, st.mode & 0o777, st.is_dir) == (len(data), 0o600, False)


def test_push_pull_files_identical(adb_phone: AdbPhone, tmp_path: Path) -> None:
    source, back = tmp_path / "model.bin", tmp_path / "back.bin"
    source.write_bytes(random.Random(6).randbytes(3 * 1024 * 1024 + 17))
    source.chmod(0o640)
    adb_phone.push(source, "/data/vendor/llm/model.bin")
    adb_phone.pull("/data/vendor/llm/model.bin", back)
    assert back.read_bytes() == source.read_bytes()
    assert adb_phone.stat("/data/vendor/llm/model.bin").mode & 0o777 == 0o640  # type: ignore[union-attr]


def test_stat_and_listdir(adb_phone: AdbPhone) -> None:
    adb_phone.push_bytes(b"1", "/data/local/tmp/list/a")
    adb_phone.push_bytes(b"22", "/data/local/tmp/list/b")
    assert adb_phone.listdir("/data/local/tmp/list") == ["a", "b"]
    assert adb_phone.listdir("/no/such/dir") == []
    assert adb_phone.stat("/data/local/tmp/list").is_dir  # type: ignore[union-attr]
    assert adb_phone.stat("/no/such/file") is None


def test_file_errors_are_clear_and_leave_the_link_usable(adb_phone: AdbPhone, tmp_path: Path) -> None:
    with pytest.raises(CommandFailed, match=r"dut1 \(127\.0\.0\.1:\d+\): pull /nope failed: open failed: No such file"):
        adb_phone.pull_bytes("/nope")
    with pytest.raises(CommandFailed, match="pull /nope"):
        adb_phone.pull("/nope", tmp_path / "x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.part").exists()
    with pytest.raises(CommandFailed, match="push to /data/local/tmp failed: couldn't create file"):
        adb_phone.push_bytes(b"x", "/data/local/tmp")  # a directory
    with pytest.raises(ConfigError, match="not a file"):
        adb_phone.push(tmp_path / "missing.bin", "/data/local/tmp/m")
    assert adb_phone.run("echo still here") == "still here\n"


# --- connection, auth, errors -----------------------------------------------------------------------
def test_tcp_nodelay_on_the_client_socket(direct_phone: AdbPhone) -> None:
    direct_phone.connect()
    sock = direct_phone._device.transport.sock  # type: ignore[union-attr]
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    stock = TcpTransport("127.0.0.1", int(direct_phone.address.rsplit(":", 1)[1]))  # negative control
    stock.connect(5)
    assert not stock._connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    stock.close()


def test_listed_key_accepted(phone: EmulatedPhone, keys: tuple[Path, Path]) -> None:
    policy = AuthPolicy(accept_any=False, allowed_keys=[Path(f"{keys[0]}.pub")])
    with AdbDaemon(phone, auth=policy) as daemon, AdbPhone(daemon.address, key_path=keys[0]) as dut:
        assert dut.serial == "EMU-DRV-1"


def test_unlisted_key_refused_names_the_key_file(phone: EmulatedPhone, keys: tuple[Path, Path]) -> None:
    policy = AuthPolicy(accept_any=False, allowed_keys=[Path(f"{keys[0]}.pub")])
    with AdbDaemon(phone, auth=policy) as daemon:
        # the phone leaves a refused link waiting for its prompt: connect_timeout_s bounds the wait
        dut = AdbPhone(daemon.address, key_path=keys[1], name="dut9", connect_timeout_s=3.0)
        with pytest.raises(AuthRefused) as refused:
            dut.connect()
    message = str(refused.value)
    assert "dut9" in message and str(keys[1]) in message
    assert "Allow USB debugging" in message and "allowed keys" in message


def test_unreachable_port_is_a_clear_error(make) -> None:
    port = _closed_port()
    dut = make(f"127.0.0.1:{port}", name="bench-a", retries=2, connect_timeout_s=WAIT_S)
    with pytest.raises(DeviceUnreachable) as unreachable:
        dut.shell("true")
    message = str(unreachable.value)
    assert f"bench-a (127.0.0.1:{port}): cannot connect (3 attempts" in message
    assert "Connection refused" in message
    assert "adb tcpip 5555" in message and "host:port" in message


class FakeTime:
    """Simulated clock for the retry loop: sleeping advances it; nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 9))
        self.now += seconds


@pytest.mark.parametrize("retries, budget_s, sleeps, attempts", [
    (3, 30.0, [0.1, 0.2, 0.4], 4),   # exponential backoff, `retries` retries
    (10, 0.25, [0.1, 0.15], 2),      # never longer than connect_timeout_s in total
])
def test_connect_retries_back_off_within_the_connect_timeout(keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                                             retries: int, budget_s: float, sleeps: list[float],
                                                             attempts: int) -> None:
    fake = FakeTime()
    monkeypatch.setattr("phonebench.drivers.adb.time", fake)
    dut = AdbPhone(f"127.0.0.1:{_closed_port()}", key_path=keys[0], retries=retries, connect_timeout_s=budget_s)
    with pytest.raises(DeviceUnreachable, match=f"{attempts} attempts in {budget_s:g} s"):
        dut.connect()
    assert fake.sleeps == sleeps


def test_daemon_death_mid_command_is_a_disconnect_and_the_next_call_reconnects(make) -> None:
    phone = emulated_phone(PhoneSpec(serial="EMU-KILL", faults=["kill-on:llmrt"]))
    with AdbDaemon(phone) as daemon:
        dut = make(daemon.address, name="dutk", connect_timeout_s=WAIT_S, retries=1)
        assert dut.run("echo up") == "up\n"
        with pytest.raises(DeviceDisconnected, match=r"dutk .*lost the connection during `llmrt generate`"):
            dut.shell("llmrt generate", timeout_s=WAIT_S)
        with pytest.raises(DeviceUnreachable):  # the daemon is dead: nothing listens
            dut.shell("true")
        daemon.revive()
        assert dut.run("echo back") == "back\n"


def test_a_command_cut_by_a_drop_is_not_re_run(phone: EmulatedPhone, daemon: AdbDaemon, adb_phone: AdbPhone) -> None:
    runs: list[int] = []

    def count_then_die(argv: list[str], ctx: object) -> CommandResult:
        runs.append(1)
        raise DaemonKilled("counter")

    phone.shell.register("counter", count_then_die)
    with pytest.raises(DeviceDisconnected):
        adb_phone.shell("counter", timeout_s=WAIT_S)
    daemon.revive()
    assert adb_phone.run("echo next") == "next\n"
    assert runs == [1]


def test_long_silent_command_within_the_configured_timeout(phone: EmulatedPhone, daemon: AdbDaemon, make) -> None:
    release = _register_blocking(phone, "quietjob")
    timer = threading.Timer(0.6, release.set)  # silent for 0.6 s, well inside the 20 s configured
    with make(daemon.address, command_timeout_s=20.0) as dut:
        timer.start()
        try:
            assert dut.run("quietjob") == "done waiting\n"
        finally:
            timer.cancel()


def test_timeouts_are_passed_to_adb_shell_explicitly(direct_phone: AdbPhone, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, object]] = []
    original = HardenedAdbDevice.shell

    def spy(self, command, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs)
        return original(self, command, **kwargs)

    monkeypatch.setattr(HardenedAdbDevice, "shell", spy)
    direct_phone.command_timeout_s = 321.0
    direct_phone.shell("true")
    direct_phone.shell("true", timeout_s=45.0)
    assert [(k["transport_timeout_s"], k["read_timeout_s"], k["timeout_s"]) for k in seen] == [
        (321.0, 321.0, 321.0), (45.0, 45.0, 45.0)]


def test_command_timeout_names_device_command_and_timeout(phone: EmulatedPhone, adb_phone: AdbPhone) -> None:
    release = _register_blocking(phone, "stuckjob")
    try:
        with pytest.raises(CommandTimeout, match=r"dut1 .*`stuckjob --all` did not finish within 0.3 s"):
            adb_phone.shell("stuckjob --all", timeout_s=0.3)
    finally:
        release.set()
    assert adb_phone.run("echo recovered") == "recovered\n"  # a fresh connection


def test_adb_shell_errors_never_escape(direct_phone: AdbPhone) -> None:
    cases = [(adb_exc.AdbTimeoutError("slow"), CommandTimeout), (adb_exc.TcpTimeoutException("slow"), CommandTimeout),
             (adb_exc.InvalidChecksumError("bad"), DeviceDisconnected),
             (adb_exc.InvalidResponseError("odd"), DeviceDisconnected),
             (adb_exc.InvalidCommandError("odd"), DeviceDisconnected),
             (adb_exc.AdbConnectionError("gone"), DeviceDisconnected),
             (adb_exc.PushFailedError(bytearray(b"nope")), CommandFailed),
             (KeyError(0x12345678), DeviceDisconnected),  # adb-shell on an unknown sync id
             (BrokenPipeError(32, "Broken pipe"), DeviceDisconnected),
             (ConnectionResetError(104, "Connection reset by peer"), DeviceDisconnected)]

    class Failing:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def shell(self, *args: object, **kwargs: object) -> None:
            raise self.exc

        def close(self) -> None:
            pass

    for raw, expected in cases:
        direct_phone._device = Failing(raw)  # type: ignore[assignment]
        with pytest.raises(expected) as caught:
            direct_phone.shell("true")
        assert "dut1" in str(caught.value) and caught.value.hint


# --- hardened transport ---------------------------------------------------------------------------
class TrickleSocket:
    """A socket that accepts at most 3 bytes per send, and reads from a script."""

    def __init__(self, incoming: list[bytes] | None = None, error: OSError | None = None) -> None:
        self.sent = bytearray()
        self.incoming = list(incoming or [])
        self.error = error

    def settimeout(self, timeout: float | None) -> None:
        pass

    def send(self, data: memoryview | bytes) -> int:
        if self.error:
            raise self.error
        self.sent += bytes(data[:3])
        return min(3, len(data))

    def recv(self, size: int) -> bytes:
        if self.error:
            raise self.error
        return self.incoming.pop(0) if self.incoming else b""

    def recv_into(self, view: memoryview) -> int:
        data = self.recv(len(view))
        view[:len(data)] = data
        return len(data)


def _transport_with(sock: TrickleSocket) -> HardenedTcpTransport:
    transport = HardenedTcpTransport("127.0.0.1", 5555)
    transport.sock = sock  # type: ignore[assignment]
    return transport


def test_bulk_write_loops_over_partial_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    sock = TrickleSocket()
    payload = bytes(range(256)) * 40
    assert _transport_with(sock).bulk_write(payload, 1.0) == len(payload)
    assert bytes(sock.sent) == payload
    # Negative control: stock adb-shell sends once and drops the rest on the floor.
    stock, short = TcpTransport("127.0.0.1", 5555), TrickleSocket()
    stock._connection = short  # type: ignore[assignment]
    monkeypatch.setattr("adb_shell.transport.tcp_transport.select.select", lambda r, w, x, t: (r, w, x))
    assert stock.bulk_write(payload, 1.0) == 3
    assert len(short.sent) == 3


def test_eof_is_a_disconnect_at_once() -> None:
    with pytest.raises(DeviceDisconnected, match="closed by the device"):
        _transport_with(TrickleSocket()).bulk_read(24, 10.0)
    with pytest.raises(DeviceDisconnected, match="closed by the device"):
        _transport_with(TrickleSocket([b"partial"])).read_exact(24, 10.0)
    assert _transport_with(TrickleSocket([b"abc", b"def"])).read_exact(6, 1.0) == b"abcdef"


@pytest.mark.parametrize("error", [ConnectionResetError(104, "Connection reset by peer"),
                                   BrokenPipeError(32, "Broken pipe")])
def test_socket_errors_are_disconnects(error: OSError) -> None:
    with pytest.raises(DeviceDisconnected, match=error.strerror):
        _transport_with(TrickleSocket(error=error)).bulk_write(b"abc", 1.0)
    with pytest.raises(DeviceDisconnected, match=error.strerror):
        _transport_with(TrickleSocket(error=error)).read_exact(4, 1.0)


def test_connect_refused_is_unreachable() -> None:
    with pytest.raises(DeviceUnreachable, match="Connection refused"):
        HardenedTcpTransport("127.0.0.1", _closed_port(), connect_timeout_s=5).connect(5)


def test_fast_checksum_matches_adb_shell() -> None:
    rng = random.Random(7)
    for size in (0, 1, 511, 512, 4096, 300_000):
        data = rng.randbytes(size)
        assert fast_checksum(data) == stock_checksum(data)
    assert fast_checksum(b"\xff" * (17 * 1024 * 1024)) == (255 * 17 * 1024 * 1024) & 0xFFFFFFFF


# --- keys and addresses ------------------------------------------------------------------------------
def test_missing_default_key_is_generated(daemon: AdbDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="phonebench.drivers.adb"):
        with AdbPhone(daemon.address) as dut:
            assert dut.run("echo hi") == "hi\n"
    key = tmp_path / ".android" / "adbkey"
    assert key.exists() and (tmp_path / ".android" / "adbkey.pub").exists()
    assert "generated a new one" in caplog.text and str(key) in caplog.text


def test_missing_explicit_key_names_the_path(daemon: AdbDaemon, tmp_path: Path) -> None:
    missing = tmp_path / "keys" / "station_key"
    with pytest.raises(ConfigError, match=f"ADB key file {missing} does not exist"):
        AdbPhone(daemon.address, key_path=missing).connect()
    assert not missing.exists()


def test_missing_public_half_is_rebuilt(daemon: AdbDaemon, tmp_path: Path) -> None:
    key = tmp_path / "lonely"
    keygen(str(key))
    Path(f"{key}.pub").unlink()
    with AdbPhone(daemon.address, key_path=key) as dut:
        assert dut.run("echo ok") == "ok\n"
    assert Path(f"{key}.pub").exists()


@pytest.mark.parametrize("address", ["nohostport", "host:", ":5555", "host:99999", "host:abc"])
def test_bad_address_is_a_config_error(address: str) -> None:
    with pytest.raises(ConfigError, match="not host:port"):
        AdbPhone(address)


def test_usb_address_constructs_and_fails_clearly_without_a_device(keys: tuple[Path, Path]) -> None:
    dut = AdbPhone("usb:R5CT00000", key_path=keys[0], retries=0, connect_timeout_s=5)
    assert dut.name == "usb:R5CT00000" and not dut.connected
    with pytest.raises(DeviceUnreachable) as unreachable:
        dut.connect()
    assert "no USB ADB device with serial R5CT00000" in str(unreachable.value)
    assert "USB debugging" in str(unreachable.value)
    assert isinstance(unreachable.value, BenchError)


def test_stream_closed_by_the_device_mid_push_fails_at_once_not_at_the_timeout(direct_phone, monkeypatch):
    """Stock adb-shell ignores an unexpected CLSE and waits out its whole timeout; a sync service
    that dies mid-push (or a real adbd closing after FAIL) must end the wait at once."""
    from phonebench.emulation import adb_sync

    def broken(self, ident, spec):
        raise RuntimeError("sync service crashed")

    monkeypatch.setattr(adb_sync.SyncSession, "_send", broken)
    direct_phone.command_timeout_s = 20.0  # a regression waits this out and raises CommandTimeout instead
    with pytest.raises(CommandFailed, match="closed the stream"):
        direct_phone.push_bytes(b"x" * 15_000, "/data/local/tmp/crash")
    monkeypatch.undo()
    direct_phone.push_bytes(b"y" * 15_000, "/data/local/tmp/after")  # the connection is still usable
    assert direct_phone.pull_bytes("/data/local/tmp/after") == b"y" * 15_000


# --- recovery -------------------------------------------------------------------------------------
QUICK = RecoveryPolicy(gone_timeout_s=WAIT_S, online_timeout_s=WAIT_S, boot_timeout_s=WAIT_S, poll_s=0.05)


def test_reboot_request_waits_until_the_phone_is_back_and_booted(phone: EmulatedPhone, daemon: AdbDaemon,
                                                                  adb_phone) -> None:
    before = phone.world.clock.now()
    reboot_and_wait(adb_phone, QUICK)
    assert adb_phone.getprop("sys.boot_completed") == "1"
    assert phone.world.clock.now() - before >= 29.9  # down, then booting: the phone's own time
    assert "Boot completed" in adb_phone.run("logcat -d")


def test_recovery_after_a_daemon_restart(phone: EmulatedPhone, daemon: AdbDaemon, adb_phone) -> None:
    assert adb_phone.run("echo up") == "up\n"
    daemon.kill()
    timer = threading.Timer(0.3, daemon.revive)
    timer.start()
    try:
        recover(adb_phone, QUICK)
    finally:
        timer.cancel()
    assert adb_phone.run("echo back") == "back\n"


def test_a_phone_that_never_returns_is_broken_not_retried_forever(make) -> None:
    stuck = emulated_phone(PhoneSpec(serial="EMU-GONE", faults=["no-return-after-reboot"]))
    with AdbDaemon(stuck) as daemon:
        dut = make(daemon.address, name="dutg", connect_timeout_s=WAIT_S)
        with pytest.raises(DeviceBroken, match=r"dutg: did not come back on ADB within 1\.5 s") as broken:
            reboot_and_wait(dut, RecoveryPolicy(gone_timeout_s=WAIT_S, online_timeout_s=1.5, poll_s=0.05))
    assert "rest of this run" in broken.value.hint


def test_back_on_adb_but_never_booted_is_broken(phone: EmulatedPhone, daemon: AdbDaemon, adb_phone) -> None:
    phone.props["sys.boot_completed"] = "0"  # adbd up, boot never finishing
    with pytest.raises(DeviceBroken, match=r"not booted within 0\.5 s \(sys.boot_completed = 0\)"):
        recover(adb_phone, RecoveryPolicy(online_timeout_s=WAIT_S, boot_timeout_s=0.5, poll_s=0.05))


def test_usb_serial_the_server_does_not_list_is_unreachable(adb_server) -> None:
    dut = ServerAdbPhone("usb:R5CT00000", server=adb_server, name="bay7", retries=1, connect_timeout_s=5)
    with pytest.raises(DeviceUnreachable) as unreachable:
        dut.connect()
    assert "bay7 (usb:R5CT00000): cannot connect" in str(unreachable.value)
    assert "not listed by the adb server" in str(unreachable.value)
    assert "`adb devices` must list" in unreachable.value.hint


def test_server_address_comes_from_the_environment_as_adb_reads_it() -> None:
    from phonebench.drivers.adb_server import server_address

    assert server_address({}) == ("127.0.0.1", 5037)
    assert server_address({"ANDROID_ADB_SERVER_PORT": "6001"}) == ("127.0.0.1", 6001)
    assert server_address({"ADB_SERVER_SOCKET": "tcp:10.1.2.3:7001", "ANDROID_ADB_SERVER_PORT": "6001"}) == (
        "10.1.2.3", 7001)
    with pytest.raises(ConfigError, match="expected tcp:HOST:PORT"):
        server_address({"ADB_SERVER_SOCKET": "localfilesystem:/tmp/adb"})


def _await_server_noticed_drop(server, address: str, within_s: float = 20.0) -> None:
    """The server sees a dropped link on its own thread; until it has, it still lists `device`
    (a command then fails as disconnected, which is another test's subject)."""
    deadline = time.monotonic() + within_s
    while server.state(address) == "device":
        assert time.monotonic() < deadline, f"the adb server still lists {address} as device {within_s:g} s after adbd died"
        time.sleep(0.05)


def test_a_stale_offline_entry_is_cleared_before_connecting(phone: EmulatedPhone, adb_server) -> None:
    with AdbDaemon(phone) as daemon:
        first = ServerAdbPhone(daemon.address, server=adb_server, connect_timeout_s=WAIT_S)
        assert first.run("echo one") == "one\n"
        daemon.kill()  # the server keeps an offline entry for it
        _await_server_noticed_drop(adb_server, daemon.address)
        daemon.revive()
        again = ServerAdbPhone(daemon.address, server=adb_server, connect_timeout_s=WAIT_S)
        assert again.run("echo two") == "two\n"
        again.disconnect()


# --- phone states on the server transport, worded as `adb` words them ----------------------------
def test_refused_key_on_the_server_transport_says_unauthorized(phone: EmulatedPhone, keys: tuple[Path, Path],
                                                               adb_server) -> None:
    """The phone lists another host's key only: the server's `adb connect` fails to authenticate
    and the phone keeps the link waiting for its prompt, so `adb devices` says unauthorized."""
    with AdbDaemon(phone, auth=AuthPolicy(accept_any=False, allowed_keys=[Path(f"{keys[1]}.pub")])) as daemon:
        dut = ServerAdbPhone(daemon.address, server=adb_server, name="bay3", retries=0, connect_timeout_s=5.0)
        with pytest.raises(AuthRefused) as refused:
            dut.connect()
        assert adb_server.state(daemon.address) is None  # no unauthorized entry left behind
    message = str(refused.value)
    assert message.startswith(f"bay3 ({daemon.address}): unauthorized") and "failed to authenticate" in message
    assert "offline" not in message and "network" not in refused.value.hint
    assert "accept this host's key on the phone" in refused.value.hint and "adb_keys" in refused.value.hint


class _ListingServer:
    """An adb server that lists one serial in a fixed state (what `adb devices` prints)."""
    host, port = "127.0.0.1", 5037

    def __init__(self, state: str) -> None:
        self.listing, self.client = state, self

    def ensure_running(self) -> None:
        pass

    def state(self, serial: str) -> str | None:
        from phonebench.drivers.adb_server import parse_devices

        return parse_devices(f"other\tdevice\n{serial}\t{self.listing}\n").get(serial)

    def connect(self, address: str, timeout_s: float | None = None) -> str:
        return f"connected to {address}" if self.listing != "unauthorized" else f"failed to authenticate to {address}"

    def disconnect(self, address: str) -> None:
        pass


@pytest.mark.parametrize("state, error, said, advice", [
    ("unauthorized", AuthRefused, "unauthorized", "accept this host's key on the phone"),
    ("no permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/"
     "device.html]", DeviceUnreachable, "no permissions", "plugdev"),
    ("offline", DeviceUnreachable, "adb server lists it as offline", "adb reconnect offline"),
])
def test_server_states_are_reported_as_adb_reports_them(monkeypatch: pytest.MonkeyPatch, state: str,
                                                        error: type, said: str, advice: str) -> None:
    monkeypatch.setattr("phonebench.drivers.adb_server._POLL_S", 0.0)
    for address in ("usb:R5CT1234", "10.0.0.20:5555"):
        dut = ServerAdbPhone(address, server=_ListingServer(state), name="bay1", retries=0,  # type: ignore[arg-type]
                             connect_timeout_s=0.2)
        with pytest.raises(error) as raised:
            dut.connect()
        assert said in str(raised.value) and advice in raised.value.hint
    # control: the same phone listed as `device` connects
    listed = ServerAdbPhone("usb:R5CT1234", server=_ListingServer("device"), retries=0)  # type: ignore[arg-type]
    assert listed.connect().connected
