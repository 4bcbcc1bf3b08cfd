"""Station files: valid ones parse, malformed ones name the file, the key and the expectation."""
from __future__ import annotations

from pathlib import Path

import pytest

from phonebench.core.errors import ConfigError
from phonebench.core.station import load_station

GOOD = """
[station]
name = "lab-rack-3"
results_dir = "out"
sla_profile = "default"

[[dut]]
name = "bay1"
adb = "192.168.1.20:5555"
key = "keys/adbkey"

[[dut]]
name = "bay2"
usb = "R5CT1234"
transport = "direct"

[instruments.scope]
family = "keysight-infiniivision"
address = "TCPIP::10.0.0.5::5025::SOCKET"
attached_to = "bay2"

[instruments.thermal]
family = "generic-ascii"
address = "/dev/ttyUSB0"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "station.toml"
    path.write_text(text)
    return path


def test_good_station_parses(tmp_path):
    config = load_station(write(tmp_path, GOOD))
    assert config.name == "lab-rack-3"
    assert config.results_dir == tmp_path / "out"
    assert [d.address for d in config.duts] == ["192.168.1.20:5555", "usb:R5CT1234"]
    assert config.duts[0].key == str(tmp_path / "keys/adbkey")
    assert [d.transport for d in config.duts] == ["server", "direct"]  # the adb server unless told
    assert config.instrument_dut("scope") == "bay2"
    assert config.instrument_dut("thermal") == "bay1"  # default: the first DUT
    assert config.instrument_dut("supply") is None
    assert config.emulated is None


def test_emulated_station_table(tmp_path):
    config = load_station(write(tmp_path, """
[emulated]
auth = "none"
[[emulated.phone]]
serial = "A1"
npu_persona = "SM8650-ES"
faults = ["kill-on:llmrt"]
"""))
    assert config.emulated.auth == "none"
    assert config.emulated.phones[0].faults == ["kill-on:llmrt"]
    assert config.duts == []


@pytest.mark.parametrize("text, expected", [
    ("[station]\nname = 3\n[[dut]]\nname='a'\nadb='h:1'", r"station\.toml: \[station\]\.name: expected str, got int 3"),
    ("[[dut]]\nname='a'\nadb='nohostport'", r"\[\[dut\]\] #1\.adb: expected a \"host:port\" address"),
    ("[[dut]]\nname='a'", r"give exactly one of adb"),
    ("[[dut]]\nadb='h:1'", r"\[\[dut\]\] #1\.name: missing \(required\)"),
    ("[[dut]]\nname='a'\nadb='h:1'\ncolour='red'", r"\[\[dut\]\] #1\.colour: unknown key"),
    ("[[dut]]\nname='a'\nadb='h:1'\n[[dut]]\nname='a'\nadb='h:2'", r"duplicate DUT names \['a'\]"),
    ("[[dut]]\nname='a'\nadb='h:1'\n[instruments.laser]\nfamily='x'\naddress='y'", r"unknown instrument role"),
    ("[[dut]]\nname='a'\nadb='h:1'\n[instruments.scope]\nfamily='x'\naddress='y'\nattached_to='b'",
     r"attached_to: expected one of the DUT names \['a'\]"),
    ("[station]\nname='x'", r"no \[\[dut\]\] and no \[emulated\] table"),
    ("[station\nname='x'", r"not valid TOML"),
    ("[emulated]\nauth='maybe'", r"\[emulated\]\.auth: expected \"any\", \"prompt\", \"none\" or \"listed\""),
    ("[[dut]]\nname='a'\nadb='h:1'\ntransport='usb'", r"\[\[dut\]\] #1\.transport: expected \"server\" .* or \"direct\""),
])
def test_bad_station_names_file_key_and_expectation(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        load_station(write(tmp_path, text))
    assert "station.toml" in str(err.value)


def test_missing_station_file_says_what_to_do(tmp_path):
    with pytest.raises(ConfigError, match="(?s)does not exist.*omit it to use the emulated station"):
        load_station(tmp_path / "nope.toml")
