"""Drivers as tables (drivers/scpi_table.py) on the real families: a channel is an object whose
settings are properties, values are validated before anything is sent, and a step out of order
is refused by its declared guard."""
from __future__ import annotations

import pytest
from instrument_helpers import TranscriptResource, ok

from phonebench.core.errors import ConfigError
from phonebench.drivers.power import KeysightN6705C
from phonebench.drivers.scope import KEYSIGHT, RIGOL, KeysightInfiniiVision

KEYSIGHT_IDN = "KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50.2021102830"
N6705C_OPENING = [("*IDN?", "Keysight Technologies,N6705C,MY56001234,D.03.04.1296"),
                  ("SYST:CHAN:MOD? (@2)", '"N6781A"')]


def test_a_scope_channel_is_an_object_with_settings_as_properties():
    res = TranscriptResource([("*IDN?", KEYSIGHT_IDN), *ok(":CHANnel2:SCALe 0.1"), (":CHANnel2:SCALe?", "+1.0E-01"),
                              *ok(":CHANnel1:DISPlay ON", ":CHANnel1:PROBe 10", ":CHANnel1:SCALe 0.5",
                                  ":CHANnel1:OFFSet 0", ":CHANnel1:COUPling AC"),
                              *ok(":CHANnel1:PROBe:SKEW 1e-09")])
    scope = KeysightInfiniiVision("TCPIP::192.0.2.7::5025::SOCKET", poll_s=0, resource=res)
    scope.channel(2).scale = 0.1
    assert scope.channel(2).scale == pytest.approx(0.1)
    ch1 = scope.channel(1)
    scope.configure_channel(ch1, 0.5, coupling="AC", probe=10)  # the interface takes the object or its number
    scope.set_deskew(ch1, 1e-9)
    with pytest.raises(ConfigError, match=r"DSOX3024T s/n MY58101234\): coupling 'XX' is not one of"):
        scope.configure_channel(1, 0.5, coupling="XX")  # refused before anything reaches the wire
    with pytest.raises(ConfigError, match="no setting"):
        ch1.bandwidth = 20e6
    res.assert_done()


def test_the_two_scope_families_share_the_channel_table_but_deskew():
    differs = {k for k in KEYSIGHT["channel"] if KEYSIGHT["channel"][k] != RIGOL["channel"][k]}
    assert differs == {"skew"}


def test_the_supply_refuses_a_digitizer_step_out_of_order_and_addresses_its_slot():
    res = TranscriptResource([*N6705C_OPENING, *ok("VOLT 3.7,(@2)", "VOLT:RES:STAT OFF,(@2)")])
    supply = KeysightN6705C("TCPIP::192.0.2.9::5025::SOCKET", channel=2, poll_s=0, resource=res)
    supply.set_voltage(3.7)
    supply.set_output_resistance(None)
    for step in (supply.trigger, supply.fetch):
        with pytest.raises(ConfigError, match=rf"N6705C s/n MY56001234\): {step.__name__}\(\) before arm_digitizer"):
            step()
    res.assert_done()
