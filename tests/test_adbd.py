"""The emulated ADB daemon at the wire level: a raw-socket host, plus stock adb-shell as a client."""
from __future__ import annotations

import io
import json
import random
import re
import socket
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from adb_shell.adb_device import AdbDeviceTcp
from adb_shell.auth.keygen import keygen
from adb_shell.auth.sign_cryptography import CryptographySigner

from phonebench.core.errors import ConfigError
from phonebench.emulation import adb_shell_v2
from phonebench.emulation.adb_auth import AuthPolicy, load_keys, parse_android_pubkey
from phonebench.emulation.adbd import MAX_DATA, SUPPORTED_FEATURES, AdbDaemon, checksum, device_banner
from phonebench.emulation.device import EmulatedPhone, PhoneSpec
from phonebench.emulation.shell import CommandResult

WAIT_S = 10.0  # generous bound on any wait: a hang fails the test instead of blocking it


def _cmd(name: bytes) -> int:
    return int.from_bytes(name, "little")


class RawHost:
    """A minimal ADB host that checks every packet the daemon sends (checksum and magic)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)

    def send(self, command: bytes, arg0: int, arg1: int, payload: bytes = b"", magic: int | None = None) -> None:
        c = _cmd(command)
        header = struct.pack("<6I", c, arg0, arg1, len(payload), sum(payload) & 0xFFFFFFFF,
                             c ^ 0xFFFFFFFF if magic is None else magic)
        self.sock.sendall(header + payload)

    def _exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise EOFError("daemon closed the connection")
            data += chunk
        return data

    def recv(self) -> tuple[bytes, int, int, bytes]:
        c, arg0, arg1, length, check, magic = struct.unpack("<6I", self._exact(24))
        payload = self._exact(length) if length else b""
        assert magic == c ^ 0xFFFFFFFF, "daemon sent a bad magic"
        assert check == sum(payload) & 0xFFFFFFFF, "daemon sent a bad checksum"
        return c.to_bytes(4, "little"), arg0, arg1, payload

    def connect(self, maxdata: int = 1024 * 1024) -> bytes:
        self.send(b"CNXN", 0x01000000, maxdata, b"host::features=stat_v2\0")
        command, version, device_maxdata, banner = self.recv()
        assert (command, version, device_maxdata) == (b"CNXN", 0x01000000, MAX_DATA)
        return banner

    def open(self, local_id: int, service: str) -> int:
        self.send(b"OPEN", local_id, 0, service.encode() + b"\0")
        command, remote_id, arg1, _ = self.recv()
        assert (command, arg1) == (b"OKAY", local_id), command
        return remote_id

    def read_until_close(self, local_id: int, remote_id: int) -> tuple[bytes, list[int]]:
        """Stream output (acknowledging each WRTE) and the WRTE sizes seen."""
        out, sizes = b"", []
        while True:
            command, arg0, arg1, payload = self.recv()
            assert arg1 == local_id
            if command == b"CLSE":
                return out, sizes
            assert command == b"WRTE"
            out += payload
            sizes.append(len(payload))
            self.send(b"OKAY", local_id, remote_id)

    def close(self) -> None:
        self.sock.close()


def _sync_request(ident: bytes, path: str) -> bytes:
    raw = path.encode()
    return struct.pack("<4sI", ident, len(raw)) + raw


@pytest.fixture
def phone() -> EmulatedPhone:
    return EmulatedPhone(PhoneSpec(serial="EMU-ADBD-1"))


@pytest.fixture
def daemon(phone: EmulatedPhone):
    daemon = AdbDaemon(phone)
    daemon.start()
    yield daemon
    daemon.stop()


@pytest.fixture
def host(daemon: AdbDaemon):
    host = RawHost(daemon.port)
    yield host
    host.close()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("adbkeys")
    first, second = folder / "first", folder / "second"
    keygen(str(first))
    keygen(str(second))
    return first, second


def _stock(daemon: AdbDaemon, key: Path | None = None) -> AdbDeviceTcp:
    device = AdbDeviceTcp("127.0.0.1", daemon.port, default_transport_timeout_s=WAIT_S)
    device.connect(rsa_keys=[CryptographySigner(str(key))] if key else None, read_timeout_s=WAIT_S,
                   auth_timeout_s=WAIT_S)
    return device


def _blocking_command(phone: EmulatedPhone, name: str) -> threading.Event:
    release = threading.Event()

    def run(argv: list[str], ctx: object) -> CommandResult:
        release.wait(WAIT_S)
        return CommandResult(f"{name} released\n".encode())

    phone.shell.register(name, run)
    return release


# --- wire ------------------------------------------------------------------------------------------
def test_banner_comes_from_the_phone_and_lists_only_implemented_features(host: RawHost) -> None:
    banner = host.connect().rstrip(b"\0").decode()
    assert banner.startswith("device::ro.product.name=pbemu;ro.product.model=PB-Emu Pro;")
    features = banner.split("features=", 1)[1].split(",")
    assert set(features) == set(SUPPORTED_FEATURES)


def test_device_banner_drops_unimplemented_features() -> None:
    banner = device_banner(b"device::ro.product.name=x;features=stat_v2,sendrecv_v2,shell_v2,ls_v2\0")
    assert banner == b"device::ro.product.name=x;features=stat_v2,shell_v2,ls_v2\0"


def test_checksum_is_the_byte_sum_mod_2_32() -> None:
    data = bytes([255]) * (17 * 1024 * 1024 + 3)  # large enough to wrap 32 bits
    assert checksum(data) == (255 * len(data)) & 0xFFFFFFFF
    assert checksum(b"\x01\x02\x03") == 6


def test_shell_merges_stderr_and_exec_gives_stdout_only(host: RawHost) -> None:
    host.connect()
    remote = host.open(1, "shell:echo out; ls /nope")
    assert host.read_until_close(1, remote)[0] == b"out\nls: /nope: No such file or directory\n"
    remote = host.open(2, "exec:echo out; ls /nope")
    assert host.read_until_close(2, remote)[0] == b"out\n"


def test_writes_respect_the_hosts_maxdata(phone: EmulatedPhone, host: RawHost) -> None:
    phone.fs.write("/data/local/tmp/big", bytes(20_000))
    host.connect(maxdata=4096)
    remote = host.open(1, "exec:cat /data/local/tmp/big")
    output, sizes = host.read_until_close(1, remote)
    assert len(output) == 20_000
    assert max(sizes) == 4096


def test_bad_magic_drops_the_connection(host: RawHost) -> None:
    host.connect()
    host.send(b"OPEN", 1, 0, b"shell:true\0", magic=0x12345678)
    with pytest.raises((EOFError, ConnectionResetError)):
        host.recv()


def test_bad_checksum_drops_the_connection(host: RawHost) -> None:
    host.connect()
    c = _cmd(b"OPEN")
    payload = b"shell:true\0"
    host.sock.sendall(struct.pack("<6I", c, 1, 0, len(payload), 1, c ^ 0xFFFFFFFF) + payload)
    with pytest.raises((EOFError, ConnectionResetError)):
        host.recv()


def test_unknown_service_is_refused_with_clse(host: RawHost) -> None:
    host.connect()
    host.send(b"OPEN", 7, 0, b"framebuffer:\0")
    command, _, local_id, _ = host.recv()
    assert (command, local_id) == (b"CLSE", 7)


def test_interactive_shell_explains_and_closes(host: RawHost) -> None:
    host.connect()
    remote = host.open(1, "shell:")
    assert b"no interactive shell" in host.read_until_close(1, remote)[0]


def test_streams_of_one_connection_run_concurrently(phone: EmulatedPhone, host: RawHost) -> None:
    release = _blocking_command(phone, "slowcmd")
    host.connect()
    slow = host.open(1, "shell:slowcmd")
    fast = host.open(2, "shell:getprop ro.serialno")
    # The fast stream completes while the slow one is still blocked.
    assert host.read_until_close(2, fast)[0] == b"EMU-ADBD-1\n"
    release.set()
    assert host.read_until_close(1, slow)[0] == b"slowcmd released\n"


# --- sync ------------------------------------------------------------------------------------------
def _sync_reply(host: RawHost, size: int) -> bytes:
    data = b""
    while len(data) < size:
        command, arg0, arg1, payload = host.recv()
        assert command == b"WRTE"
        host.send(b"OKAY", arg1, arg0)
        data += payload
    return data


def test_sync_is_a_byte_stream(phone: EmulatedPhone, host: RawHost) -> None:
    phone.fs.write("/data/local/tmp/a", b"12345", mtime=1_700_000_000)
    host.connect()
    remote = host.open(1, "sync:")
    # Two requests in one WRTE ...
    host.send(b"WRTE", 1, remote, _sync_request(b"STAT", "/data/local/tmp/a") + _sync_request(b"STAT", "/nope"))
    assert host.recv()[0] == b"OKAY"
    replies = _sync_reply(host, 32)
    assert struct.unpack("<4sIII", replies[:16]) == (b"STAT", stat.S_IFREG | 0o644, 5, 1_700_000_000)
    assert struct.unpack("<4sIII", replies[16:]) == (b"STAT", 0, 0, 0)
    # ... and one request split over three.
    request = _sync_request(b"STA2", "/data/local/tmp/a")
    for piece in (request[:3], request[3:10], request[10:]):
        host.send(b"WRTE", 1, remote, piece)
        assert host.recv()[0] == b"OKAY"
    fields = struct.unpack("<4sIQQIIIIQqqq", _sync_reply(host, 72))
    assert (fields[0], fields[1], fields[4], fields[8], fields[10]) == (b"STA2", 0, stat.S_IFREG | 0o644, 5,
                                                                         1_700_000_000)


def test_sync_list_v2_and_missing_stat_v2(phone: EmulatedPhone, host: RawHost) -> None:
    phone.fs.write("/data/local/tmp/d/x", b"abc")
    host.connect()
    remote = host.open(1, "sync:")
    host.send(b"WRTE", 1, remote, _sync_request(b"STA2", "/nope") + _sync_request(b"LIS2", "/data/local/tmp/d"))
    assert host.recv()[0] == b"OKAY"
    record = struct.Struct("<4sIQQIIIIQqqqI")
    missing = struct.unpack("<4sIQQIIIIQqqq", _sync_reply(host, 72))
    assert missing[:2] == (b"STA2", 2)  # ENOENT
    names, data = [], b""
    while True:
        while len(data) < record.size:
            data += _sync_reply(host, 1)
        fields = record.unpack(data[:record.size])
        if fields[0] == b"DONE":
            break
        while len(data) < record.size + fields[-1]:
            data += _sync_reply(host, 1)
        names.append(data[record.size:record.size + fields[-1]].decode())
        data = data[record.size + fields[-1]:]
    assert names == [".", "..", "x"]


def test_sync_via_adb_shell(phone: EmulatedPhone, daemon: AdbDaemon) -> None:
    device = _stock(daemon)
    data = random.Random(1).randbytes(300_000)
    device.push(io.BytesIO(data), "/data/local/tmp/sub/file.bin", st_mode=stat.S_IFREG | 0o600, mtime=1_700_000_123)
    assert phone.fs.read("/data/local/tmp/sub/file.bin") == data
    assert device.stat("/data/local/tmp/sub/file.bin") == (stat.S_IFREG | 0o600, len(data), 1_700_000_123)
    assert device.stat("/nope") == (0, 0, 0)
    names = {bytes(f.filename).decode() for f in device.list("/data/local/tmp/sub")}
    assert names == {".", "..", "file.bin"}
    pulled = io.BytesIO()
    device.pull("/data/local/tmp/sub/file.bin", pulled)
    assert pulled.getvalue() == data
    device.close()


def test_sync_failures_answer_fail(daemon: AdbDaemon) -> None:
    from adb_shell.exceptions import AdbCommandFailureException, PushFailedError

    device = _stock(daemon)
    with pytest.raises(AdbCommandFailureException, match="No such file"):
        device.pull("/nope", io.BytesIO())
    device.close()
    device = _stock(daemon)
    with pytest.raises(PushFailedError):
        device.push(io.BytesIO(b"x"), "/data/local/tmp")  # a directory
    device.close()


# --- auth ------------------------------------------------------------------------------------------
def test_auth_none_connects_straight(daemon: AdbDaemon) -> None:
    device = _stock(daemon)
    assert device.shell("getprop ro.serialno") == "EMU-ADBD-1\n"
    device.close()


def test_listed_key_authenticates_by_signature(phone: EmulatedPhone, keys: tuple[Path, Path]) -> None:
    first, _ = keys
    with AdbDaemon(phone, auth=AuthPolicy(accept_any=False, allowed_keys=[Path(f"{first}.pub")])) as daemon:
        device = _stock(daemon, first)
        assert device.shell("echo ok") == "ok\n"
        device.close()


def test_unlisted_key_is_refused(phone: EmulatedPhone, keys: tuple[Path, Path]) -> None:
    first, second = keys
    with AdbDaemon(phone, auth=AuthPolicy(accept_any=False, allowed_keys=[Path(f"{first}.pub")])) as daemon:
        host = RawHost(daemon.port)
        host.send(b"CNXN", 0x01000000, MAX_DATA, b"host::\0")
        command, kind, _, token = host.recv()
        assert (command, kind, len(token)) == (b"AUTH", 1, 20)
        host.send(b"AUTH", 2, 0, CryptographySigner(str(second)).Sign(token))
        command, kind, _, new_token = host.recv()
        assert (command, kind) == (b"AUTH", 1) and new_token != token  # a fresh token after a bad signature
        host.send(b"AUTH", 3, 0, Path(f"{second}.pub").read_bytes() + b"\0")
        # Refused: as a real phone with its prompt refused, the link stays open and unanswered (no
        # CNXN, no close): the next packet the host gets is the CNXN a listed key's signature earns.
        host.send(b"OPEN", 1, 0, b"shell:echo hi\0")  # ignored before authentication
        host.send(b"AUTH", 2, 0, CryptographySigner(str(first)).Sign(new_token))
        assert host.recv()[0] == b"CNXN"
        host.close()
        # Control: the listed key offered the same way is accepted.
        host = RawHost(daemon.port)
        host.send(b"CNXN", 0x01000000, MAX_DATA, b"host::\0")
        host.recv()
        host.send(b"AUTH", 3, 0, Path(f"{first}.pub").read_bytes() + b"\0")
        assert host.recv()[0] == b"CNXN"
        host.close()


def test_a_trusting_phone_accepts_the_signature_of_a_key_it_never_saw(phone: EmulatedPhone,
                                                                      keys: tuple[Path, Path]) -> None:
    offered = []
    with AdbDaemon(phone, auth=AuthPolicy(accept_any=True)) as daemon:
        device = AdbDeviceTcp("127.0.0.1", daemon.port, default_transport_timeout_s=WAIT_S)
        device.connect(rsa_keys=[CryptographySigner(str(keys[1]))], auth_timeout_s=WAIT_S,
                       auth_callback=lambda _io: offered.append(True))
        assert device.shell("getprop ro.serialno", read_timeout_s=WAIT_S) == "EMU-ADBD-1\n"
        device.close()
        # Negative control: a signature of the wrong size is no RSA-2048 signature at all.
        host = RawHost(daemon.port)
        host.send(b"CNXN", 0x01000000, MAX_DATA, b"host::\0")
        assert host.recv()[0] == b"AUTH"
        host.send(b"AUTH", 2, 0, b"x" * 100)
        assert host.recv()[:2] == (b"AUTH", 1)  # a fresh token: not accepted
        host.close()
    assert offered == []  # straight online: the signature was enough


def test_prompt_remembers_an_offered_key(phone: EmulatedPhone, keys: tuple[Path, Path]) -> None:
    first, _ = keys
    policy = AuthPolicy(accept_any=True, prompt=True)
    offered = []
    with AdbDaemon(phone, auth=policy) as daemon:
        for _ in range(2):
            device = AdbDeviceTcp("127.0.0.1", daemon.port, default_transport_timeout_s=WAIT_S)
            device.connect(rsa_keys=[CryptographySigner(str(first))], auth_timeout_s=WAIT_S,
                           auth_callback=lambda _io: offered.append(True))
            device.close()
    assert offered == [True]  # the second connection signed the token with a key now known


def test_key_parsing(keys: tuple[Path, Path], tmp_path: Path) -> None:
    first, second = keys
    line = Path(f"{first}.pub").read_text()
    key = parse_android_pubkey(line)
    assert key.e == 65537 and key.n.bit_length() == 2048 and "@" in key.comment
    both = tmp_path / "adb_keys"
    both.write_text(line + "\n" + Path(f"{second}.pub").read_text() + "\n")
    assert len(load_keys(both)) == 2
    assert load_keys(line)[0].same_key(key)
    with pytest.raises(ConfigError, match="not an Android RSA public key"):
        load_keys("QUJD" * 200)  # long enough to be a key, but is not one
    with pytest.raises(ConfigError, match=f"allowed ADB key file {tmp_path}/nope.pub: No such file"):
        load_keys(str(tmp_path / "nope.pub"))
    bad = tmp_path / "bad.pub"
    bad.write_text("garbage\n")
    with pytest.raises(ConfigError, match="bad.pub line 1: not an Android RSA public key"):
        load_keys(bad)


# --- life cycle ------------------------------------------------------------------------------------
def _wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll a condition the daemon reaches on its own threads (bounded, never asserted on time)."""
    for _ in range(int(WAIT_S / 0.01)):
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


def test_client_disconnect_is_cleaned_up(daemon: AdbDaemon, host: RawHost) -> None:
    host.connect()
    _wait_for(lambda: daemon.connection_count == 1, "the connection")
    host.close()
    _wait_for(lambda: daemon.connection_count == 0, "the daemon to notice the disconnect")


def test_kill_drops_connections_and_stops_accepting_until_revived(daemon: AdbDaemon, host: RawHost) -> None:
    host.connect()
    daemon.kill()
    with pytest.raises((EOFError, ConnectionResetError)):
        host.recv()
    with pytest.raises(ConnectionRefusedError):
        RawHost(daemon.port)
    daemon.revive()
    again = RawHost(daemon.port)
    again.connect()
    again.close()


def test_daemon_killed_fault_drops_every_connection() -> None:
    killer = EmulatedPhone(PhoneSpec(serial="EMU-K", faults=["kill-on:llmrt"]))
    with AdbDaemon(killer) as dying:
        bystander, victim = RawHost(dying.port), RawHost(dying.port)
        bystander.connect()
        victim.connect()
        victim.open(1, "shell:llmrt generate")
        for host in (victim, bystander):
            with pytest.raises((EOFError, ConnectionResetError)):
                while True:
                    host.recv()
        assert not dying.listening


def test_stop_ends_every_thread(phone: EmulatedPhone) -> None:
    daemon = AdbDaemon(phone)
    port = daemon.start()
    hosts = [RawHost(port) for _ in range(3)]
    for host in hosts:
        host.connect()
    host.open(1, "sync:")
    daemon.stop()
    assert not [t.name for t in threading.enumerate() if t.name.startswith(f"adbd-{port}-")]
    for host in hosts:
        host.close()


# --- shell protocol, reboot, logcat ----------------------------------------------------------------
def _read_shell_packets(host: RawHost, local_id: int, remote_id: int) -> list[tuple[int, bytes]]:
    raw, _ = host.read_until_close(local_id, remote_id)
    packets = []
    while raw:
        kind, length = struct.unpack("<BI", raw[:5])
        packets.append((kind, raw[5:5 + length]))
        raw = raw[5 + length:]
    return packets


@pytest.mark.parametrize("service", ["shell,v2:", "shell,v2,raw:", "shell,v2,TERM=xterm-256color,raw:"])
def test_shell_v2_keeps_stdout_stderr_apart_and_sends_the_exit_status(host: RawHost, service: str) -> None:
    host.connect()
    remote = host.open(1, service + "echo out; ls /nope")
    packets = _read_shell_packets(host, 1, remote)
    assert packets == [(1, b"out\n"), (2, b"ls: /nope: No such file or directory\n"), (3, b"\x01")]


def test_shell_v2_streams_what_a_command_emits_as_the_host_stamps_it(phone: EmulatedPhone, host: RawHost) -> None:
    """Like the bench through an adb server: each stdout packet acknowledged with an empty stdin packet."""
    host.connect()
    remote = host.open(1, "shell,v2,raw:llmrt generate --max-tokens 3 --prompt-tokens 4")
    packets, seen_at = [], []
    while True:
        command, _, _, payload = host.recv()
        if command == b"CLSE":
            break
        if command == b"OKAY":  # the daemon took an acknowledgement
            continue
        host.send(b"OKAY", 1, remote)
        kind, length = struct.unpack("<BI", payload[:5])
        assert length == len(payload) - 5  # one shell packet per WRTE here
        packets.append((kind, bytes(payload[5:])))
        if kind == 1:
            seen_at.append(phone.world.clock.now())
            host.send(b"WRTE", 1, remote, adb_shell_v2.packet(adb_shell_v2.STDIN, b""))
    lines = [data for kind, data in packets if kind == 1]
    assert len(lines) == 5 and all(line.count(b"\n") == 1 for line in lines)  # start, 3 tokens, done: one each
    said = [json.loads(line)["t"] for line in lines]
    assert seen_at == pytest.approx(said, abs=1e-9)  # the world stood at each event until it was acknowledged
    assert packets[-1] == (3, b"\x00")


def _held(sink: Callable[[bytes], None]) -> threading.Event:
    done = threading.Event()
    threading.Thread(target=lambda: (sink(b"line\n"), done.set()), daemon=True).start()
    return done


def test_a_streamed_packet_is_held_until_the_host_acknowledges_it_on_stdin() -> None:
    pace, sent = adb_shell_v2.HostPace("test"), []
    sink = pace.paced(sent.append, lambda: False)
    done = _held(sink)
    assert not done.wait(0.2) and sent == [adb_shell_v2.packet(adb_shell_v2.STDOUT, b"line\n")]
    pace.feed(adb_shell_v2.packet(adb_shell_v2.STDIN, b"typed\n"))  # stdin data is no acknowledgement
    pace.feed(b"\x00\x00\x00")                                      # an empty stdin packet, across two WRTEs
    assert not done.wait(0.1)
    pace.feed(b"\x00\x00")
    assert done.wait(WAIT_S)
    pace.feed(adb_shell_v2.packet(adb_shell_v2.CLOSE_STDIN, b""))      # a host that closes stdin is not waited for
    assert _held(sink).wait(WAIT_S)


def test_a_host_that_never_acknowledges_is_waited_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adb_shell_v2, "PACE_WAIT_S", 0.05)
    pace = adb_shell_v2.HostPace("test")
    sink = pace.paced(lambda data: None, lambda: False)
    assert _held(sink).wait(WAIT_S) and _held(sink).wait(WAIT_S)  # the second without waiting
    closed = adb_shell_v2.HostPace("test").paced(lambda data: None, lambda: True)
    assert _held(closed).wait(WAIT_S)  # a closed stream is not waited for


def test_shell_v2_exit_status_of_exit_and_of_a_missing_command(host: RawHost) -> None:
    host.connect()
    assert _read_shell_packets(host, 1, host.open(1, "shell,v2:echo a; exit 3"))[-1] == (3, b"\x03")
    assert _read_shell_packets(host, 2, host.open(2, "shell,v2:nosuchtool"))[-1] == (3, bytes([127]))
    # Negative control: v1 on the same connection has no exit packet, just the merged bytes.
    raw, _ = host.read_until_close(3, host.open(3, "shell:false"))
    assert raw == b""


def test_reboot_drops_connections_and_comes_back_booted(phone: EmulatedPhone, daemon: AdbDaemon) -> None:
    host = RawHost(daemon.port)
    host.connect()
    before = phone.world.clock.now()
    host.send(b"OPEN", 1, 0, b"reboot:\0")
    with pytest.raises((EOFError, ConnectionResetError, AssertionError)):
        while True:
            host.recv()  # OKAY, then the connection drops
    host.close()
    assert not phone.booted
    deadline = time.monotonic() + WAIT_S
    while not phone.booted and time.monotonic() < deadline:
        time.sleep(0.02)
    assert phone.booted and daemon.listening
    assert phone.world.clock.now() - before >= 29.9  # down and booting took the phone's time
    again = RawHost(daemon.port)
    again.connect()
    assert _read_shell_packets(again, 1, again.open(1, "shell,v2:getprop sys.boot_completed"))[0] == (1, b"1\n")
    again.close()


def test_a_phone_that_never_returns_from_a_reboot() -> None:
    stuck = EmulatedPhone(PhoneSpec(serial="EMU-STUCK", faults=["no-return-after-reboot"]))
    with AdbDaemon(stuck) as daemon:
        daemon.reboot()
        time.sleep(1.0)  # longer than the whole emulated reboot; only the fault keeps it away
        assert not daemon.listening and not stuck.booted


def test_logcat_dump_since_a_time(phone: EmulatedPhone) -> None:
    phone.logs.log("I", "bench", "first")
    phone.world.wait(5.0)
    since = phone.world.clock.now()
    phone.logs.log("W", "bench", "second")
    text = phone.shell.execute(f"logcat -d -T {int(since * 1000) / 1000:.3f}").stdout.decode()
    assert "second" in text and "first" not in text
    line = text.splitlines()[-1]
    assert re.match(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ W bench +: second$", line), line
    assert "first" in phone.shell.execute("logcat -d").stdout.decode()
    assert phone.shell.execute("logcat -t 1").stdout.decode().splitlines()[-1].endswith("second")
    assert phone.shell.execute("logcat").status == 1  # streaming is refused, not hung


def test_logcat_logs_the_runtime_and_boot(phone: EmulatedPhone) -> None:
    phone.shell.execute("llmrt identity")
    text = phone.shell.execute("logcat -d").stdout.decode()
    assert "System now ready" in text
    assert "llmrt identity: start" in text and "llmrt identity: exit 0" in text
