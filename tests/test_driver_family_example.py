"""The guide's example family (docs/instruments.md, "Adding a family"): the code block in the guide
is run as written, against the dialogue of the Rigol DP800 programming guide, step by step."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from instrument_helpers import TranscriptResource, ok

from phonebench.core.errors import ConfigError

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "instruments.md"
IDN = "RIGOL TECHNOLOGIES,DP832,DP8C123456789,00.01.14"


def example() -> dict[str, Any]:
    section = GUIDE.read_text(encoding="utf-8").split("### Adding a family", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "the guide's example has no python block"
    namespace: dict[str, Any] = {"__name__": "guide_example"}
    exec(compile(code.group(1), f"{GUIDE}:Adding a family", "exec"), namespace)  # noqa: S102 - our own guide
    return namespace


def dp832(steps: list, channel: int = 1) -> tuple[Any, TranscriptResource]:
    res = TranscriptResource([("*IDN?", IDN), *steps])
    return example()["RigolDP832"]("TCPIP::192.0.2.11::5555::SOCKET", channel=channel, resource=res), res


def test_the_guides_supply_follows_the_manuals_dialogue():
    supply, res = dp832([*ok(":SOURce1:VOLTage 3.85", ":SOURce1:CURRent 1.5", ":OUTPut:STATe CH1,ON"),
                         (":MEASure:VOLTage? CH1", "3.8490"), (":MEASure:CURRent? CH1", "0.2310"),
                         *ok(":OUTPut:STATe CH1,OFF")])
    supply.set_voltage(3.85)
    supply.set_current_limit(1.5)
    supply.output(True)
    assert supply.measure_voltage() == pytest.approx(3.849)
    assert supply.measure_current() == pytest.approx(0.231)
    supply.output(False)
    res.assert_done()


def test_the_table_refuses_before_sending_and_the_guard_names_the_missing_step():
    supply, res = dp832([(":SOURce3:VOLTage?", "5.0000")], channel=3)
    with pytest.raises(ConfigError, match=r"rigol-dp832 at TCPIP::192.0.2.11::5555::SOCKET \(DP832 s/n "
                                          r"DP8C123456789\): voltage 6 V is outside 0..5.3 V"):
        supply.set_voltage(6)  # channel 3 is the 5 V output: nothing reaches the wire
    with pytest.raises(ConfigError, match=r"measure_voltage\(\) before output\(True\)"):
        supply.measure_voltage()
    assert supply.ch.voltage == pytest.approx(5.0)  # a row read back as a property
    res.assert_done()
    with pytest.raises(ConfigError, match="the DP832 has 1, 2 and 3"):
        example()["RigolDP832"]("TCPIP::192.0.2.11::5555::SOCKET", channel=4, resource=res)
