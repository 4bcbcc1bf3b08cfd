"""The emulated phone's shell answers like a real one for what the bench sends."""
from __future__ import annotations

import re

import pytest

from phonebench.emulation.device import EmulatedPhone, PhoneSpec


@pytest.fixture
def phone() -> EmulatedPhone:
    return EmulatedPhone(PhoneSpec(serial="SHELL1"))


def run(phone: EmulatedPhone, line: str) -> tuple[str, int]:
    result = phone.shell.execute(line)
    return (result.stdout + result.stderr).decode(), result.status


def test_unknown_command_is_127_with_sh_message(phone):
    out, status = run(phone, "frobnicate --now")
    assert status == 127 and "frobnicate: not found" in out


def test_sequences_and_status_expansion(phone):
    assert run(phone, "false; echo s=$?") == ("s=1\n", 0)
    assert run(phone, "false && echo no || echo yes") == ("yes\n", 0)
    assert run(phone, "echo '$?' \"a b\"") == ("$? a b\n", 0)
    assert run(phone, "echo a; exit 3; echo b") == ("a\n", 3)


def test_files_redirect_hash_and_move(phone):
    run(phone, "echo hello > /data/local/tmp/x")
    assert run(phone, "cat /data/local/tmp/x") == ("hello\n", 0)
    out, _ = run(phone, "sha256sum /data/local/tmp/x")
    assert out.startswith("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
    assert run(phone, "mv /data/local/tmp/x /data/local/tmp/y && ls /data/local/tmp/x /data/local/tmp/y") == (
        "/data/local/tmp/y\nls: /data/local/tmp/x: No such file or directory\n", 1)
    out, status = run(phone, "cat /nope")
    assert status == 1 and "No such file" in out


def test_getprop_identity_and_listing(phone):
    assert run(phone, "getprop ro.serialno") == ("SHELL1\n", 0)
    out, _ = run(phone, "getprop")
    assert "[ro.soc.manufacturer]: [Qualcomm]" in out


def test_sysfs_and_dumpsys_formats(phone):
    out, _ = run(phone, "cat /sys/class/thermal/thermal_zone3/type /sys/class/thermal/thermal_zone3/temp")
    name, millic = out.split()
    assert name == "skin" and 15000 < int(millic) < 60000
    out, _ = run(phone, "dumpsys thermalservice")
    assert "Thermal Status: 0" in out and "mType=3, mName=skin" in out
    out, _ = run(phone, "dumpsys battery")
    assert re.search(r"^  voltage: [34]\d{3}$", out, re.MULTILINE)
    assert "Can't find service: nope" in run(phone, "dumpsys nope")[0]


def test_sleep_advances_simulated_time_only(phone):
    t0 = phone.world.clock.now()
    run(phone, "sleep 30")
    assert phone.world.clock.now() == pytest.approx(t0 + 30)


def test_faults_change_what_the_phone_reports():
    phone = EmulatedPhone(PhoneSpec(faults=["no-runtime", "low-battery", "skin-sensor-drift"]))
    assert run(phone, "llmrt identity")[1] == 127
    assert run(phone, "cat /sys/class/power_supply/battery/voltage_now")[0] == "3100000\n"
    sysfs = int(run(phone, "cat /sys/class/thermal/thermal_zone3/temp")[0]) / 1000
    assert sysfs - phone.world.temperatures()["skin"] == pytest.approx(6.0, abs=0.01)


def test_env_assignments_and_commands_by_path(phone):
    assert run(phone, "LD_LIBRARY_PATH=/x FOO=1 /system/bin/getprop ro.serialno") == ("SHELL1\n", 0)
    out, status = run(phone, "/data/local/tmp/llmrt identity")  # exists elsewhere, not at this path
    assert status == 127 and "not found" in out


def test_export_and_exec_as_adb_logcat_sends_them(phone):
    out, status = run(phone, "export ANDROID_LOG_TAGS=\"''\" ; exec logcat -d")
    assert status == 0 and "System now ready" in out
    assert run(phone, "exec nosuchtool")[1] == 127
