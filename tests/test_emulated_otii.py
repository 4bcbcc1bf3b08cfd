"""The emulated Otii server (emulation/instruments/otii.py) through Qoitech's own client,
`otii_tcp_client`, unchanged: licensing, the device, the Arc's refusals with the client's error
codes, the main output powering the phone, meters, recordings in simulated time, and the cut-off
over max current. A raw socket covers what the client never sends (bad JSON, no license)."""
from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from otii_tcp_client import arc as otii_arc
from otii_tcp_client import otii as otii_module
from otii_tcp_client import otii_client, otii_exception

from phonebench.emulation.instruments.otii import LICENSE_ID, RECORDING_POLL_S, OtiiServer
from phonebench.emulation.world import World

SEED = 7
LOAD_W = 2.0  # a load beside the idle phone, so the current is well clear of the meter's noise
RATE = 50000
POINTS = 30000  # 0.6 s at 50 kS/s: a few polls of the recording


@pytest.fixture
def world() -> World:
    world = World(seed=SEED)
    world.set_background("load", LOAD_W)
    return world


@pytest.fixture
def server(world: World) -> Iterator[OtiiServer]:
    server = OtiiServer(world)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(server: OtiiServer) -> Iterator[otii_client.OtiiClient]:
    client = otii_client.OtiiClient()
    client.connect(host="127.0.0.1", port=server.port, try_for_seconds=1)
    yield client
    client.disconnect()


@pytest.fixture
def arc(client: otii_client.OtiiClient) -> otii_arc.Arc:
    assert client.otii is not None
    devices = client.otii.get_devices(1)
    assert len(devices) == 1
    return devices[0]


def refusal(call: Any, *args: Any) -> otii_exception.Otii_Exception:
    with pytest.raises(otii_exception.Otii_Exception) as caught:
        call(*args)
    return caught.value


def request(otii: Any, cmd: str, **data: Any) -> dict:
    """One request through the client's own connection; an error must build an Otii_Exception."""
    response = otii.connection.send_and_receive({"type": "request", "cmd": cmd, "data": data})
    if response["type"] == "error":
        otii_exception.Otii_Exception(response)
    return response


class Raw:
    """A bare socket client: what Qoitech's client never sends."""

    def __init__(self, server: OtiiServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        self.lines = self.sock.makefile("rb")
        self.greeting = json.loads(self.lines.readline())

    def ask(self, message: bytes | dict) -> dict:
        self.sock.sendall((message if isinstance(message, bytes) else json.dumps(message).encode()) + b"\r\n")
        line = self.lines.readline()
        assert line.endswith(b"\r\n")
        return json.loads(line)

    def close(self) -> None:
        self.lines.close()
        self.sock.close()


def wait_for(predicate: Any, timeout_s: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def power_phone(arc: otii_arc.Arc, volts: float = 3.8, max_amps: float = 3.0) -> None:
    arc.set_power_regulation("voltage")
    arc.set_main_voltage(volts)
    arc.set_max_current(max_amps)
    arc.set_main(True)


def record(client: otii_client.OtiiClient, arc: otii_arc.Arc, points: int, channels: tuple[str, ...] = ("mc", "mv"),
           during: Any = None) -> Any:
    """A recording of `points` samples at RATE, polled as a driver does; `during` runs once midway."""
    assert client.otii is not None
    project = client.otii.create_project()
    for channel in channels:
        arc.enable_channel(channel, True)
        arc.set_channel_samplerate(channel, RATE)
    project.start_recording()
    recording = project.get_last_recording()
    assert recording is not None and recording.is_running()
    while (count := recording.get_channel_data_count(arc.id, channels[0])) < points:
        if during is not None and count >= points // 2:
            during()
            during = None
    project.stop_recording()
    assert not recording.is_running()
    return project, recording


# --- connection, licensing, devices -------------------------------------------------------------
def test_the_client_connects_reserves_the_automation_license_and_returns_it(server: OtiiServer):
    assert server.address == f"127.0.0.1:{server.port}" and server.family == "qoitech-otii"
    client = otii_client.OtiiClient()
    otii = client.connect(host="127.0.0.1", port=server.port, try_for_seconds=1)
    assert otii.is_logged_in() and otii.has_license("Automation") and not otii.has_license("Battery")
    assert otii.get_licenses() == [{"id": LICENSE_ID, "type": "Automation", "available": True,
                                    "reserved_to": "phonebench", "hostname": "emulated"}]
    assert otii.auto_reserved_licenses == [LICENSE_ID] and not otii.auto_logged_in
    client.disconnect()
    other = otii_client.OtiiClient().connect(host="127.0.0.1", port=server.port,
                                             licensing=otii_client.LicensingMode.MANUAL)
    try:
        assert other.get_licenses()[0]["reserved_to"] == "" and not other.has_license("Automation")
        assert refusal(other.return_license, LICENSE_ID).type == "License could not be returned"
        assert refusal(other.reserve_license, 99).type == "Invalid key value"
    finally:
        other.disconnect()


def test_a_license_is_returned_when_its_connection_closes(server: OtiiServer):
    otii = otii_client.OtiiClient().connect(host="127.0.0.1", port=server.port,
                                            licensing=otii_client.LicensingMode.MANUAL)
    otii.reserve_license(LICENSE_ID)
    assert otii.has_license("Automation")
    otii.connection.close_connection()  # the session ends without returning it
    assert wait_for(lambda: server.license_holder is None)


def test_logging_out_returns_the_license_and_login_comes_back(server: OtiiServer):
    otii = otii_client.OtiiClient().connect(host="127.0.0.1", port=server.port)
    try:
        otii.logout()
        assert not otii.is_logged_in() and server.license_holder is None
        assert refusal(otii.get_licenses).type == "Not logged in"
        otii.login("lab", 'pa"ss')  # an escaped quote inside a JSON string: the line still ends
        assert otii.is_logged_in()
    finally:
        otii.connection.close_connection()


def test_one_arc_with_a_stable_id_from_its_serial(client: otii_client.OtiiClient, arc: otii_arc.Arc,
                                                  server: OtiiServer, world: World):
    assert (arc.name, arc.type) == ("Arc", "Arc")
    assert re.fullmatch(r"Arc[0-9a-f]{32}", arc.id)
    elsewhere = World()  # building a server writes its output state into its world's supply
    assert arc.id == OtiiServer(elsewhere).device_id != OtiiServer(elsewhere, serial="ARC-000124").device_id
    assert client.otii is not None and client.otii.get_device_id("Arc") == arc.id
    assert refusal(client.otii.get_device_id, "Ace").type == "Invalid key value"
    assert arc.get_version() == {"hw_version": "Arc 1.1", "fw_version": "1.2.6"}
    assert arc.is_connected()
    server.idn = "Qoitech,Otii Arc,ARC-000124,1.2.6"  # a rack gives each bay's unit its own serial
    assert server.device_id == OtiiServer(elsewhere, serial="ARC-000124").device_id


# --- refusals -------------------------------------------------------------------------------------
def test_main_voltage_in_range_is_taken_and_out_of_range_refused(arc: otii_arc.Arc, world: World):
    arc.set_main_voltage(4.2)
    assert arc.get_main_voltage() == pytest.approx(4.2)
    error = refusal(arc.set_main_voltage, 5.0)
    assert error.type == "Invalid key value" and '"value"' in error.message and "5.0" in error.message
    assert refusal(arc.set_main_voltage, 0.4).type == "Invalid key value"
    assert arc.get_main_voltage() == pytest.approx(4.2) and world.supply.setpoint_v == pytest.approx(4.2)
    assert refusal(arc.set_max_current, 5.5).type == "Invalid key value"
    assert refusal(arc.set_range, "medium").type == "Invalid key value"
    assert refusal(arc.set_power_regulation, "battery").type == "Invalid key value"
    assert refusal(arc.enable_channel, "xx", True).type == "Invalid key value"


def test_wrong_types_and_missing_keys_are_named(client: otii_client.OtiiClient, arc: otii_arc.Arc):
    otii = client.otii
    response = request(otii, "arc_set_main_voltage", device_id=arc.id, value="3.3")
    assert response["errorcode"] == "Invalid key type"
    assert response["data"] == {"key": "value", "expected_type": "number", "received_type": "string"}
    response = request(otii, "arc_set_main", device_id=arc.id, enable=1)
    assert (response["errorcode"], response["data"]["received_type"]) == ("Invalid key type", "number")
    response = request(otii, "arc_set_main_voltage", device_id=arc.id)
    assert (response["errorcode"], response["data"]) == ("Missing key in request", {"key": "value"})


def test_a_sample_rate_not_in_the_list_is_refused(arc: otii_arc.Arc):
    assert arc.get_channel_samplerate("mc") == 4000
    arc.set_channel_samplerate("mc", 50000)
    assert arc.get_channel_samplerate("mc") == 50000
    error = refusal(arc.set_channel_samplerate, "mc", 3000)
    assert error.type == "Invalid key value" and "3000" in error.message
    assert arc.get_channel_samplerate("mc") == 50000
    assert refusal(arc.set_channel_samplerate, "zz", 4000).type == "Invalid key value"


def test_an_unknown_device_is_not_connected(client: otii_client.OtiiClient):
    ghost = otii_arc.Arc({"device_id": "Arc" + "0" * 32, "name": "Arc", "type": "Arc"}, client.otii.connection)
    error = refusal(ghost.get_main)
    assert error.type == "Device not connected" and "Arc" + "0" * 32 in error.message


def test_unknown_commands_are_invalid_and_unmodelled_ones_not_supported(client: otii_client.OtiiClient,
                                                                        arc: otii_arc.Arc):
    assert request(client.otii, "arc_frobnicate", device_id=arc.id)["errorcode"] == "Invalid command"
    assert refusal(arc.enable_5v, True).type == "Operation not supported"
    assert refusal(arc.get_value, "tp").type == "Operation not supported"


def test_every_command_of_the_client_exists_and_every_error_builds_an_otii_exception(
        client: otii_client.OtiiClient, arc: otii_arc.Arc):
    sources = Path(otii_client.__file__).parent
    commands = sorted({cmd for path in sources.glob("*.py")
                       for cmd in re.findall(r'"cmd":\s*"([a-z0-9_-]+)"', path.read_text())})
    assert len(commands) > 80
    for cmd in commands:
        if cmd in ("otii_logout", "otii_shutdown"):
            continue  # they would end the session the loop runs in
        response = request(client.otii, cmd)  # no data at all: a refusal, never an unknown command
        assert response.get("errorcode") != "Invalid command", cmd
        response = request(client.otii, cmd, device_id=arc.id)
        assert response.get("errorcode") != "Invalid command", cmd


def test_without_a_license_and_with_bad_json_a_raw_client_is_refused(server: OtiiServer):
    raw = Raw(server)
    try:
        assert raw.greeting == {"type": "information", "info": "connected",
                                "data": {"otii_version": "3.5.5", "protocol_version": "0.1", "server": "otii-server"}}
        answers = [
            raw.ask({"type": "request", "cmd": "arc_get_main", "data": {"device_id": server.device_id}, "trans_id": "1"}),
            raw.ask({"type": "request", "cmd": "otii_create_project", "trans_id": "2"}),
            raw.ask(b'{"type": "request", "cmd": '),
            raw.ask({"type": "request", "data": {}, "trans_id": "3"}),
            raw.ask({"type": "request", "cmd": "otii_get_devices", "data": [], "trans_id": "4"}),
        ]
        assert [a["errorcode"] for a in answers] == ["No license", "No license", "Not able to parse request",
                                                     "Missing key in request", "Invalid key type"]
        assert [a.get("trans_id") for a in answers] == ["1", "2", None, "3", "4"]
        for answer in answers:
            otii_exception.Otii_Exception(answer)
        assert raw.ask({"type": "request", "cmd": "otii_get_devices", "trans_id": "5"})["type"] == "response"
    finally:
        raw.close()


# --- the output and its meters --------------------------------------------------------------------
def test_main_powers_the_phone_and_the_meter_reads_its_current(arc: otii_arc.Arc, world: World):
    power_phone(arc, 3.8, 3.0)
    supply = world.supply
    assert supply.emulator_on and supply.setpoint_v == pytest.approx(3.8)
    assert supply.output_resistance_ohm == 0.0 and supply.current_limit_a == pytest.approx(3.0)
    assert not supply.ripple_running and supply.ripple_amplitude_v == 0.0
    _, amps = world.electrical_at(np.array([world.clock.now()]))
    assert amps[0] > 0.5  # idle phone plus the load at 3.8 V
    assert arc.get_value("mc") == pytest.approx(amps[0], abs=0.5e-3)
    assert arc.get_value("mv") == pytest.approx(3.8, abs=0.5e-3)
    assert arc.get_value("mp") == pytest.approx(3.8 * amps[0], rel=2e-3)
    before = world.clock.now()
    arc.get_value("mc")
    assert world.clock.now() - before == pytest.approx(0.04)
    arc.set_main(False)
    assert not supply.emulator_on and not arc.get_main()
    assert abs(arc.get_value("mc")) < 0.5e-3 and abs(arc.get_value("mv")) < 3e-3
    arc.set_main(True)
    arc.set_power_regulation("off")  # accepted; only voltage regulation powers the phone here
    assert not supply.emulator_on and abs(arc.get_value("mc")) < 0.5e-3


def test_max_current_below_the_phones_draw_cuts_main_off(arc: otii_arc.Arc, world: World):
    power_phone(arc, 3.8, 3.0)
    arc.set_max_current(0.1)
    assert not arc.get_main() and not world.supply.emulator_on


def test_a_surge_over_max_current_cuts_main_off_unless_the_source_limit_is_on(arc: otii_arc.Arc, world: World):
    power_phone(arc, 3.8, 1.0)
    world.wait(0.2)
    assert arc.get_main()
    world.set_background("surge", 4.0)  # 6.45 W at 3.8 V: 1.7 A
    world.wait(0.1)
    assert not arc.get_main() and not world.supply.emulator_on
    arc.set_src_cur_limit_enabled(True)  # constant current instead of cut-off
    assert arc.get_src_cur_limit_enabled()
    arc.set_main(True)
    world.wait(0.2)
    assert arc.get_main() and arc.get_value("mc") == pytest.approx(1.0, abs=1e-3)


# --- projects and recordings ----------------------------------------------------------------------
def test_a_recording_holds_the_phones_current_sample_for_sample(client: otii_client.OtiiClient, arc: otii_arc.Arc,
                                                                server: OtiiServer, world: World):
    power_phone(arc)
    project, recording = record(client, arc, POINTS, during=lambda: world.set_background("burst", 1.5))
    assert client.otii.get_active_project().id == project.id
    assert recording.name == "Recording 1" and [r.id for r in project.get_recordings()] == [recording.id]
    t_start = server.project.recordings[recording.id].t_start
    assert recording.start_time.timestamp() == pytest.approx(t_start, abs=1e-3)
    count = recording.get_channel_data_count(arc.id, "mc")
    assert POINTS <= count < POINTS + RECORDING_POLL_S * RATE + 1
    data = recording.get_channel_data(arc.id, "mc", 0, POINTS)
    assert data["data_type"] == "analog" and data["timestamp"] == 0.0 and data["interval"] == pytest.approx(2e-5)
    current = np.asarray(data["values"])
    volts, amps = world.electrical_at(t_start + np.arange(POINTS) / RATE)
    assert current.size == POINTS and amps.max() - amps.min() > 0.3  # the burst is in the window
    assert abs(current.mean() - amps.mean()) < 0.1e-3  # offset 50 uA, noise 0.2 mA / sqrt(N)
    assert np.abs(current - amps).max() < 1.5e-3  # sample for sample, within the meter's noise
    voltage = np.asarray(recording.get_channel_data(arc.id, "mv", 0, POINTS)["values"])
    assert abs(voltage.mean() - volts.mean()) < 0.1e-3
    stats = recording.get_channel_statistics(arc.id, "mc", 0.0, POINTS / RATE)
    assert stats["average"] == pytest.approx(current.mean(), abs=1e-6)
    assert stats["min"] == pytest.approx(current.min()) and stats["max"] == pytest.approx(current.max())
    assert stats["energy"] == pytest.approx(float(np.sum(current * voltage)) / RATE, rel=1e-6)
    assert recording.get_channel_data_index(arc.id, "mc", 0.1) == 5000
    # A sample is the same whichever chunk fetches it (here across a noise block's edge).
    assert recording.get_channel_data(arc.id, "mc", 3990, 20)["values"] == data["values"][3990:4010]


def test_samples_beyond_the_recording_are_refused(client: otii_client.OtiiClient, arc: otii_arc.Arc):
    power_phone(arc)
    _, recording = record(client, arc, 1000, channels=("mc",))
    count = recording.get_channel_data_count(arc.id, "mc")
    assert recording.get_channel_data_count(arc.id, "mc") == count  # stopped: it no longer grows
    error = refusal(recording.get_channel_data, arc.id, "mc", 0, count + 1)
    assert error.type == "Invalid key value" and '"count"' in error.message
    assert refusal(recording.get_channel_data, arc.id, "mc", count, 1).type == "Invalid key value"
    assert refusal(recording.get_channel_data, arc.id, "mc", -1, 10).type == "Invalid key value"
    response = request(client.otii, "recording_get_channel_data", recording_id=recording.id, device_id=arc.id,
                       channel="mc", index=0, count=0)  # the client itself never asks for none
    assert (response["errorcode"], response["data"]["key"]) == ("Invalid key value", "count")
    assert recording.get_channel_data_count(arc.id, "mv") == 0  # not enabled: not recorded
    assert refusal(recording.get_channel_data, arc.id, "mv", 0, 1).type == "Invalid key value"
    assert refusal(recording.get_channel_data, "Arc" + "1" * 32, "mc", 0, 1).type == "Device not connected"


def test_main_off_records_zeros(client: otii_client.OtiiClient, arc: otii_arc.Arc):
    arc.set_main(False)
    _, recording = record(client, arc, 5000, channels=("mc",))
    current = np.asarray(recording.get_channel_data(arc.id, "mc", 0, 5000)["values"])
    assert abs(current.mean()) < 0.1e-3 and current.std() < 0.3e-3


def test_projects_and_recordings_refuse_what_the_server_refuses(client: otii_client.OtiiClient, arc: otii_arc.Arc):
    otii = client.otii
    with pytest.raises(otii_module.OtiiException):  # none open: the client raises its own exception
        otii.get_active_project()
    project = otii.create_project()
    assert project.id == 1 and project.get_last_recording() is None
    assert refusal(otii.create_project).type == "Command failure"
    error = refusal(project.start_recording)  # no channel enabled
    assert error.type == "Command failure" and "channel" in error.message
    arc.enable_channel("mp", True)
    project.start_recording()
    assert refusal(project.start_recording).type == "Command failure"
    recording = project.get_last_recording()
    assert refusal(recording.delete).type == "Command failure"  # still running
    project.stop_recording()
    assert refusal(project.close).type == "Command failure"  # an unsaved recording: only with force
    recording.delete()
    assert project.get_last_recording() is None
    ghost = type(project)(42, otii.connection)
    assert refusal(ghost.start_recording).type == "Project does not exist"
    project.close()
    with pytest.raises(otii_module.OtiiException):
        otii.get_active_project()
    assert otii.create_project().id == 2


def test_a_recording_keeps_running_and_keeps_its_data_after_the_client_goes(server: OtiiServer, world: World):
    first = otii_client.OtiiClient()
    otii = first.connect(host="127.0.0.1", port=server.port)
    arc = otii.get_devices()[0]
    power_phone(arc)
    arc.enable_channel("mc", True)
    project = otii.create_project()
    project.start_recording()
    recording_id = project.get_last_recording().id
    otii.connection.close_connection()  # lost, without returning anything
    assert wait_for(lambda: server.license_holder is None)
    world.wait(0.5)
    second = otii_client.OtiiClient()
    otii = second.connect(host="127.0.0.1", port=server.port)
    try:
        project = otii.get_active_project()
        recording = project.get_last_recording()
        assert recording.id == recording_id and recording.is_running()
        count = recording.get_channel_data_count(arc.id, "mc")
        assert count >= 0.5 * 4000
        project.stop_recording()
        current = np.asarray(recording.get_channel_data(arc.id, "mc", 0, count)["values"])
        assert current.size == count and current.mean() > 0.5
    finally:
        second.disconnect()
