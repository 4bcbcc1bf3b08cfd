"""The bench's station writer and the one parser agree: whatever `station_toml` writes for a
station's phones, `load_station` reads back to the same station, and writing that again gives the
same file (a USB phone, a key, every optional field). Every station file goes through the
writer's `write_station`, atomically: a folder it cannot write is one WriteFailed, and no
half-written file or temporary is left."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from phonebench.core.files import WriteFailed
from phonebench.core.station import DutConfig, EmulatedConfig, EmulatedPhoneConfig, StationConfig, load_station
from phonebench.core.station_writer import station_toml, write_emulated_station, write_station

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
usb = names.map(lambda serial: f"usb:{serial.upper()}")
tcp = st.tuples(st.sampled_from(["127.0.0.1", "10.0.0.7", "phone-rack.lab"]),
                st.integers(1, 65535)).map(lambda hp: f"{hp[0]}:{hp[1]}")
optional = st.none() | names
duts = st.builds(DutConfig, name=names, address=usb | tcp,
                 key=st.none() | names.map(lambda n: f"/keys/{n}.adbkey"), expected_serial=optional,
                 transport=st.sampled_from(["server", "direct"]),
                 recovery_timeout_s=st.none() | st.sampled_from([5.0, 60.0, 120.5]),
                 expected_soc=st.none() | st.sampled_from(["SM8650", "MT6989"]),
                 shield_channel=st.none() | st.sampled_from(["T4", "105"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(duts, min_size=1, max_size=3, unique_by=lambda d: d.name))
def test_written_phones_parse_back_and_write_the_same(tmp_path_factory, phones):
    folder = tmp_path_factory.mktemp("station")
    config = StationConfig(name="rack", source=None, results_dir=folder, duts=phones)
    written = station_toml(config, "round trip")
    path = folder / "station.toml"
    path.write_text(written)
    parsed = load_station(path)
    assert parsed.duts == phones
    assert station_toml(parsed, "round trip") == written


def test_write_station_writes_the_writers_text_and_leaves_no_temporary(tmp_path):
    config = StationConfig(name="rack", source=None, duts=[DutConfig(name="a", address="127.0.0.1:5555")])
    path = write_station(tmp_path / "deep" / "station.toml", config, "the fixture")
    assert path.read_text(encoding="utf-8") == station_toml(config, "the fixture")
    assert load_station(path).duts == config.duts
    assert [p.name for p in path.parent.iterdir()] == ["station.toml"]


def test_write_emulated_station_parses_back(tmp_path):
    emulated = EmulatedConfig(transport="direct", phones=[EmulatedPhoneConfig(serial="EMU0001", seed=3)])
    path = write_emulated_station(tmp_path / "emu.toml", StationConfig(name="emu", source=None), emulated)
    assert load_station(path).emulated == emulated


def test_write_station_into_an_unwritable_place_is_one_write_failed(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    config = StationConfig(name="rack", source=None, duts=[DutConfig(name="a", address="127.0.0.1:5555")])
    with pytest.raises(WriteFailed):
        write_station(tmp_path / "a-file" / "station.toml", config, "x")
