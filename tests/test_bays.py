"""Bays: the station file's [[bay]] wiring (with the errors bad wiring gets), the emulated N6705C
mainframe with a module per bay, and `bench run` testing bays at once into one run, where one
bay's fault or crash leaves the others' results alone."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from phonebench.core.errors import ConfigError
from phonebench.core.station import StationConfig, EmulatedConfig, load_station

REPO = Path(__file__).resolve().parent.parent
IDENTITY = str(REPO / "suites" / "test_identity.py")

FOUR_BAYS = """
[station]
name = "rack-7"

[instruments.n6705c]
role = "supply"
family = "keysight-n6705c"
address = "TCPIP::10.0.0.6::5025::SOCKET"

[instruments.probes]
role = "thermal"
family = "generic-ascii"
address = "/dev/ttyUSB0"

[instruments.scope1]
role = "scope"
family = "keysight-infiniivision"
address = "TCPIP::10.0.0.5::5025::SOCKET"

[[dut]]
name = "p1"
adb = "10.0.1.21:5555"

[[dut]]
name = "p2"
adb = "10.0.1.22:5555"

[[bay]]
name = "bay1"
dut = "p1"
supply = "n6705c@1"
thermal = "probes@1"
scope = "scope1"

[[bay]]
name = "bay2"
dut = "p2"
supply = "n6705c@2"
thermal = "probes@2"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "station.toml"
    path.write_text(text)
    return path


def test_bays_wire_named_instruments_by_channel(tmp_path):
    station = load_station(write(tmp_path, FOUR_BAYS))
    assert station.bay_names() == ["bay1", "bay2"] and station.multi_bay
    assert station.inventory["n6705c"].shared and not station.inventory["scope1"].shared
    bay2 = station.for_bay("bay2")
    assert [d.name for d in bay2.duts] == ["p2"]
    assert bay2.instruments["supply"].options == {"channel": 2}
    assert bay2.instruments["thermal"].channel == "2"
    assert "scope" not in bay2.instruments  # bay2 has no scope: its scope tests skip
    assert station.for_bay("bay1").instruments["scope"].address == "TCPIP::10.0.0.5::5025::SOCKET"


def test_a_legacy_station_file_is_one_bay(tmp_path):
    station = load_station(write(tmp_path, '[[dut]]\nname = "a"\nadb = "1.2.3.4:5555"\n[[dut]]\nname = "b"\n'
                                           'adb = "1.2.3.5:5555"\n[instruments.supply]\nfamily = "keysight-n6705c"\n'
                                           'address = "X"\nattached_to = "b"\n'))
    assert not station.multi_bay and [b.duts for b in station.bays] == [["a", "b"]]
    assert station.instrument_dut("supply") == "b"


@pytest.mark.parametrize("change, message", [
    (("supply = \"n6705c@2\"\n", "supply = \"n6705c@1\"\n"), "wired to more than one bay"),
    (("supply = \"n6705c@2\"\n", "supply = \"n6705c@5\"\n"), "@1 to @4"),
    (("supply = \"n6705c@2\"\n", "supply = \"probes@2\"\n"), "probes is a thermal"),
    (("supply = \"n6705c@2\"\n", "supply = \"nothing\"\n"), "nothing"),
    (('dut = "p2"', 'dut = "p1"'), "a DUT no other bay holds"),
    (('dut = "p2"', 'dut = "p9"'), "p9"),
    (('role = "scope"', 'role = "camera"'), "camera"),
    (('name = "bay2"', 'name = "bay1"'), "duplicate bay names"),
])
def test_bad_wiring_names_the_file_and_key(tmp_path, change, message):
    text = FOUR_BAYS[::-1].replace(change[0][::-1], change[1][::-1], 1)[::-1]  # the last occurrence
    with pytest.raises(ConfigError) as err:
        load_station(write(tmp_path, text))
    assert message in str(err.value) and "station.toml" in str(err.value)


def test_two_instruments_of_one_role_need_bays(tmp_path):
    text = FOUR_BAYS.split("[[dut]]")[0] + '[instruments.other]\nrole = "supply"\nfamily = "f"\naddress = "Y"\n' \
        '[[dut]]\nname = "p1"\nadb = "10.0.1.21:5555"\n'
    with pytest.raises(ConfigError, match="a second supply without \\[\\[bay\\]\\] tables"):
        load_station(write(tmp_path, text))


def test_the_mainframe_routes_each_channel_to_its_bay_and_refuses_empty_slots():
    from phonebench.drivers.registry import open_instrument
    from phonebench.emulation.station import EmulatedStation

    with EmulatedStation(EmulatedConfig(bays=2, seed=1)) as emulated:
        station = emulated.merge_into(StationConfig(name="emulated", source=None))
        worlds = [d.phone.world for d in emulated.duts]
        address = station.inventory["n6705c"].address
        one, two = (open_instrument("supply", "keysight-n6705c", address, channel=k) for k in (1, 2))
        try:
            one.set_voltage(3.9)
            one.output(True)
            assert worlds[0].supply.emulator_on and worlds[0].supply.setpoint_v == pytest.approx(3.9)
            assert not worlds[1].supply.emulator_on  # bay 2's module is untouched
            assert two.measure_current() == pytest.approx(0.0018, abs=0.002)  # output off: zero offset only
        finally:
            one.close()
            two.close()
        with pytest.raises(Exception, match="slot 3"):
            open_instrument("supply", "keysight-n6705c", address, channel=3)  # no module fitted there


def test_a_bay_sees_only_its_channels_of_the_shared_probe_board():
    from phonebench.bench.station.backend import open_station
    from phonebench.drivers.registry import open_instrument
    from phonebench.drivers.bay_view import BayChannels

    with open_station(emulated=EmulatedConfig(bays=2, seed=1)) as station:
        board = open_instrument("thermal", "generic-ascii", station.inventory["probes"].address)
        try:
            view = BayChannels(board, "2")
            assert view.channels == ["T1", "T2", "T3", "T4"]  # T4: the SoC's shield
            assert sorted(view.read().celsius) == ["T1", "T2", "T3", "T4"]
        finally:
            board.close()


# --- bench run with bays at once -------------------------------------------------------------
def two_bays(tmp_path: Path, faults: list[str]) -> str:
    path = tmp_path / "bays.toml"
    path.write_text("[emulated]\nseed = 1\nbays = 2\ninstruments = false\n"
                    '[[emulated.phone]]\nserial = "EMU-A"\n'
                    f'[[emulated.phone]]\nserial = "EMU-B"\nfaults = {json.dumps(faults)}\n')
    return str(path)


def bench(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PHONEBENCH_STATION", None)
    env.pop("PHONEBENCH_DATABASE", None)
    return subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def latest(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "reports" / "latest" / "results.json").read_text())


def test_bays_run_at_once_into_one_run_and_a_faulty_bay_fails_alone(tmp_path):
    proc = bench(tmp_path, "--station", two_bays(tmp_path, ["no-runtime"]), IDENTITY)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 1, out
    data = latest(tmp_path)
    assert data["status"] == "complete" and sorted(data["station"]["bays"]) == ["bay1", "bay2"]
    by_bay = {bay: [t for t in data["tests"] if t["bay"] == bay] for bay in ("bay1", "bay2")}
    assert len(by_bay["bay1"]) == len(by_bay["bay2"]) == 4
    assert all(t["outcome"] == "passed" for t in by_bay["bay1"])
    assert any(t["outcome"] == "failed" for t in by_bay["bay2"])
    run_dir = tmp_path / "reports" / data["run_id"]
    suites = ET.parse(run_dir / "junit.xml").getroot()
    assert sum(int(s.get("tests")) for s in suites) == 8  # one junit for the run
    run_ids = {p.get("value") for p in suites.iter("property") if p.get("name") == "phonebench.run_id"}
    assert run_ids == {data["run_id"]}  # each bay's suite names the run, not its worker's folder
    assert (run_dir / "report.html").exists()
    assert sorted(p.name for p in (tmp_path / "reports").iterdir() if p.name != "results.sqlite") == \
        sorted([data["run_id"], "latest"])  # one run folder
    from phonebench.bench.store import open_store

    with open_store(tmp_path / "reports" / "results.sqlite") as store:
        runs = store.list_runs()
    assert [r.run_id for r in runs] == [data["run_id"]]  # one store row


def test_a_crashed_bay_keeps_the_other_bays_results(tmp_path):
    proc = bench(tmp_path, "--station", two_bays(tmp_path, []), IDENTITY)
    for line in proc.stdout:
        if line.startswith("bay bay2: started (pid"):
            pid = int(line.split("pid ")[1].rstrip(")\n"))
            os.kill(pid, signal.SIGKILL)  # at once: a worker still starting cannot have finished (no timing bet)
            break
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 1, out
    data = latest(tmp_path)
    assert data["status"] == "incomplete"
    assert any(p.startswith("bay bay2:") for p in data["problems"])
    bay1 = [t for t in data["tests"] if t["bay"] == "bay1"]
    assert len(bay1) == 4 and all(t["outcome"] == "passed" for t in bay1)


def test_an_unknown_bay_is_a_clear_error(tmp_path):
    proc = bench(tmp_path, "--station", two_bays(tmp_path, []), "--bay", "bay9", IDENTITY)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 4 and "--bay bay9: not a bay of" in out and "bay1, bay2" in out  # a usage error


@pytest.mark.parametrize("name", ["four-bays.toml", "emulated-bays.toml"])
def test_the_example_bay_stations_load(name):
    station = load_station(REPO / "stations" / name)
    assert station.bay_names() == ["bay1", "bay2", "bay3", "bay4"]


def test_bays_sharing_instruments_use_them_one_test_at_a_time(tmp_path):
    """Two bays of a hardware-style station file share one N6705C and one probe board (an
    emulated fleet serving both bays' workers): each use of a shared instrument (a connection,
    opened for one test) has it to itself; no other connection's commands come in between."""
    from phonebench.emulation.station import EmulatedStation

    with EmulatedStation(EmulatedConfig(bays=2, seed=1)) as emulated:
        fleet = emulated.merge_into(StationConfig(name="emulated", source=None))
        servers = emulated.fleet.servers
        order: dict[str, list] = {"n6705c": [], "probes": []}  # connections, kept alive: ids stay unique
        for name, seen in order.items():
            handle = servers[name].handle_message

            def logged(conn, message, handle=handle, seen=seen):
                seen.append(conn)
                return handle(conn, message)

            servers[name].handle_message = logged
        lines = []
        for name, inst in fleet.inventory.items():
            lines += [f'[instruments."{name}"]', f'role = "{inst.role}"', f'family = "{inst.family}"',
                      f'address = "{inst.address}"']
        for dut in fleet.duts:
            lines += ["[[dut]]", f'name = "{dut.name}"', f'adb = "{dut.address}"']
        for bay in fleet.bays:
            lines += ["[[bay]]", f'name = "{bay.name}"', f'dut = "{bay.duts[0]}"',
                      *(f'{role} = "{ref}"' for role, ref in bay.wiring.items())]
        station = tmp_path / "shared.toml"
        station.write_text("\n".join(lines) + "\n")
        proc = bench(tmp_path, "--station", str(station), str(REPO / "suites" / "test_instruments.py"),
                     "-k", "supply or power or probes or thermal")
        out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 0, out
    assert {t["bay"] for t in latest(tmp_path)["tests"]} == {"bay1", "bay2"}
    for name, seen in order.items():
        runs = [conn for i, conn in enumerate(seen) if i == 0 or seen[i - 1] is not conn]
        assert len(runs) >= 2, f"{name}: used by fewer than two bays' tests"
        assert len({id(c) for c in runs}) == len(runs), f"{name}: two connections' commands interleaved"
