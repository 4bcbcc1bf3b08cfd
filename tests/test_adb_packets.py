"""The bench's ADB packet layer (phonebench.drivers.adb_transport.HardenedAdbDevice) sends what
stock adb-shell 0.4.4 sends, packet for packet: handshake with a key the phone must be shown,
shell, push, stat, list, pull, reboot."""
from __future__ import annotations

import io
import random
import struct
from pathlib import Path
from typing import Any, Callable

import pytest
from adb_shell.adb_device import AdbDevice
from adb_shell.auth.keygen import keygen
from adb_shell.auth.sign_cryptography import CryptographySigner

from phonebench.drivers.adb_transport import HardenedAdbDevice, HardenedTcpTransport
from phonebench.emulation.adb_auth import AuthPolicy
from phonebench.emulation.adbd import AdbDaemon
from phonebench.emulation.device import PhoneSpec
from phonebench.emulation.phones import emulated_phone

_HEADER = struct.Struct("<6I")
_AUTH, _SIGNATURE = 0x48545541, 2
PAYLOAD = random.Random(23).randbytes(300 * 1024)  # several DATA blocks, one short


class RecordingTransport(HardenedTcpTransport):
    """Keeps every byte the host sends."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.sent = bytearray()

    def bulk_write(self, data: bytes | bytearray | memoryview, transport_timeout_s: float | None) -> int:
        self.sent += data
        return super().bulk_write(data, transport_timeout_s)


def _packets(sent: bytes) -> list[tuple[int, int, int, bytes]]:
    """(command, arg0, arg1, payload) of each packet; an AUTH signature's payload (it signs a
    random token) is left out."""
    packets, view = [], memoryview(sent)
    while view:
        command, arg0, arg1, length, _check, _magic = _HEADER.unpack(view[:24])
        payload = bytes(view[24:24 + length])
        packets.append((command, arg0, arg1, b"" if (command, arg0) == (_AUTH, _SIGNATURE) else payload))
        view = view[24 + length:]
    return packets


def _session(make_device: Callable[[RecordingTransport], Any], key: Path) -> list[tuple[int, int, int, bytes]]:
    phone = emulated_phone(PhoneSpec(serial="EMU-WIRE-1"))
    daemon = AdbDaemon(phone, auth=AuthPolicy(accept_any=True, prompt=True))  # the key is shown, then accepted
    daemon.start()
    try:
        host, port = daemon.address.rsplit(":", 1)
        transport = RecordingTransport(host, int(port))
        device = make_device(transport)
        device.connect(rsa_keys=[CryptographySigner(str(key))], transport_timeout_s=5, auth_timeout_s=5,
                       read_timeout_s=5)
        assert device.shell("echo wire", transport_timeout_s=5, read_timeout_s=5, decode=False) == b"wire\n"
        device.push(io.BytesIO(PAYLOAD), "/data/local/tmp/wire.bin", st_mode=0o100644, mtime=1234,
                    transport_timeout_s=5, read_timeout_s=5)
        assert device.stat("/data/local/tmp/wire.bin", transport_timeout_s=5, read_timeout_s=5)[1] == len(PAYLOAD)
        names = [bytes(e.filename) for e in device.list("/data/local/tmp", transport_timeout_s=5, read_timeout_s=5)]
        assert b"wire.bin" in names
        sink = io.BytesIO()
        device.pull("/data/local/tmp/wire.bin", sink, transport_timeout_s=5, read_timeout_s=5)
        assert sink.getvalue() == PAYLOAD
        device.reboot(transport_timeout_s=5, read_timeout_s=5)
        device.close()
        return _packets(bytes(transport.sent))
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wirekeys") / "adbkey"
    keygen(str(path))
    return path


def test_the_packets_on_the_wire_are_stock_adb_shells(key: Path) -> None:
    ours = _session(HardenedAdbDevice, key)
    stock = _session(AdbDevice, key)
    assert [p[:3] for p in ours] == [p[:3] for p in stock]
    assert ours == stock
    assert any(command == _AUTH and arg0 == 3 for command, arg0, _, _ in ours)  # the public key was offered
