"""The bench's station writer and the one parser agree: whatever `station_toml` writes for a
station's phones, `load_station` reads back to the same station, and writing that again gives the
same file (a USB phone, a key, every optional field)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from phonebench.core.station import DutConfig, StationConfig, load_station
from phonebench.core.station_writer import station_toml

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
