"""The emulated phone's shell answers like a real one for what the bench sends."""
from __future__ import annotations

import re

import pytest

from phonebench.emulation.device import EmulatedPhone, PhoneSpec

from phonebench.emulation.phones import emulated_phone


@pytest.fixture
def phone() -> EmulatedPhone:
    return emulated_phone(PhoneSpec(serial="SHELL1"))


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
    phone = emulated_phone(PhoneSpec(faults=["no-runtime", "low-battery", "skin-sensor-drift"]))
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


# --- the shell as mksh answers lab tools (issue 31) -----------------------------------------------
@pytest.mark.parametrize("line, status, out", [
    ("getprop | grep ro.serialno", 0, "[ro.serialno]: [SHELL1]\n"),
    ("echo abc | cat", 0, "abc\n"),
    ('X=42; echo "x=$X" \'$X\' ${X}', 0, "x=42 $X 42\n"),
    ("id -u", 0, "2000\n"),
    ("mkdir -p /data/local/tmp/t/u; echo hi > /data/local/tmp/t/u/f; rm -r /data/local/tmp/t; ls /data/local/tmp/t", 1, ""),
    ("log -t PBMARK hello there; logcat -d | grep -c PBMARK", 0, "1\n"),
    ("ls /nope 2>&1 | wc -l", 0, "1\n"),
    ("ls /nope 2>/dev/null || echo missing", 0, "missing\n"),
    ("false || echo alt && echo then", 0, "alt\nthen\n"),
    ("echo a; exit 4; echo b", 4, "a\n"),
    ("echo one | exit 3; echo after", 0, "after\n"),
    ("getprop ro.debuggable", 0, "0\n"),
])
def test_lines_lab_tools_send_answer_as_android(phone, line, status, out):
    done = phone.shell.execute(line)
    assert (done.status, done.stdout.decode()) == (status, out), done.stderr


@pytest.mark.parametrize("line", ["echo $(id)", "echo `id`", "echo a &", "if true; then echo x; fi", "(echo a)",
                                  "cat < /x", "echo 'open", "echo ${X:-d}", "a && && b", "| cat", "cd /sdcard"])
def test_what_the_emulated_shell_cannot_do_it_refuses_loudly(phone, line):
    done = phone.shell.execute(line)
    assert done.status == 2 and done.stdout == b"" and done.stderr.startswith((b"/system/bin/sh: ", b"cd: "))


def test_screencap_writes_a_valid_png(phone):
    import struct
    import zlib

    assert phone.shell.execute("screencap -p /sdcard/s.png").status == 0
    png = phone.fs.read("/sdcard/s.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1080, 2400) and zlib.crc32(png[12:29]) == struct.unpack(">I", png[29:33])[0]


def test_a_command_that_breaks_still_ends_with_a_status(phone):
    def broken(argv, ctx):
        raise IndexError("list index out of range")

    phone.shell.register("broken", broken)
    done = phone.shell.execute("broken; echo $?")
    assert done.status == 0 and done.stdout == b"1\n" and b"IndexError" in done.stderr


_WORDS = ["echo", "cat", "grep", "getprop", "ls", "rm", "-r", "-f", "id", "-u", "log", "-t", "T", "wc", "-l", "head",
          "tail", "true", "false", "exit", "1", "X=1", "$X", "${X}", "$?", "'a b'", '"c $X"', "|", ";", "&&", "||",
          ">", ">>", "2>&1", "2>/dev/null", "/data/local/tmp/f", "ro.serialno", "*", "\\", "'", '"', "$(", "`", "(",
          "&", "<", "#", "\n", "", "exec", "export", "Y=2", "mkdir", "-p", "sha256sum", "stat", "dumpsys", "battery"]


def test_fuzzed_lines_always_end_with_an_exit_status(phone):
    """Random command lines of the words lab tools use, quoting and operators: every one ends with a
    status 0..255 and never raises (adbd then always sends the shell protocol's exit packet)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=9))
    def run(words):
        done = phone.shell.execute(" ".join(words))
        assert isinstance(done.status, int) and 0 <= done.status <= 255

    run()
