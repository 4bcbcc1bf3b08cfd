"""Any instrument mix on demand: the [emulated] table names a family per role, validated against
what the emulated station can build (emulation/instruments/registry.py)."""
from __future__ import annotations

import pytest

from phonebench.core.errors import ConfigError
from phonebench.core.station import EMULATED_FAMILIES, load_station
from phonebench.emulation.instruments.registry import emulated_families, make_server
from phonebench.emulation.world import World


def test_the_parser_and_the_factory_know_the_same_families():
    built = emulated_families()
    assert {role: sorted(families) for role, families in EMULATED_FAMILIES.items()} == \
           {role: built[role] for role in EMULATED_FAMILIES}


def test_station_file_names_a_family_per_role(tmp_path):
    path = tmp_path / "station.toml"
    path.write_text('[emulated]\nscope = "rigol-ds1000z"\nthermal = "fluke-1529"\n')
    emulated = load_station(path).emulated
    assert emulated.families == {"scope": "rigol-ds1000z", "thermal": "fluke-1529"}


@pytest.mark.parametrize("text, message", [
    ('scope = "tektronix-mso5"', "'tektronix-mso5' is not an emulated scope family"),
    ('thermal = 3', "expected str"),
])
def test_an_unknown_family_is_named_with_the_valid_ones(tmp_path, text, message):
    path = tmp_path / "station.toml"
    path.write_text(f"[emulated]\n{text}\n")
    with pytest.raises(ConfigError, match=message) as err:
        load_station(path)
    assert "station.toml" in str(err.value)
    if "tektronix" in text:
        assert "keysight-infiniivision, rigol-ds1000z" in err.value.hint


@pytest.mark.parametrize("role, family, model", [
    ("scope", "rigol-ds1000z", "DS1104Z"), ("scope", None, "DSOX3024T"), ("thermal", "fluke-1529", "1529"),
    ("thermal", "keysight-daq970a", "DAQ970A"), ("stimulus", None, "33522B"), ("supply", None, "N6705C"),
])
def test_the_factory_builds_each_family(role, family, model):
    server = make_server(role, family, World(seed=1))
    assert model in server.idn and server.family == (family or server.family)


def test_the_factory_refuses_what_it_cannot_build():
    with pytest.raises(ConfigError, match="no emulated scope of family 'tektronix'"):
        make_server("scope", "tektronix", World(seed=1))


def test_the_shared_rack_refuses_a_supply_it_cannot_be_built_with(tmp_path):
    path = tmp_path / "station.toml"
    path.write_text('[emulated]\nbays = 2\nsupply = "qoitech-otii"\n')
    with pytest.raises(ConfigError, match="shared rack, one N6705C mainframe") as err:
        load_station(path)
    assert "leave bays out" in err.value.hint


@pytest.mark.parametrize("family", ["keysight-n6705c", "qoitech-otii"])
def test_each_supply_family_is_built(family):
    server = make_server("supply", family, World(seed=1))
    assert server.family == family
