"""The emulated phone: identity, file store, shell, sensors; one per emulated DUT.

The ADB daemon (emulation.adbd) exposes it on loopback; the runtime (emulation.runtime) is one
of its shell commands; its physical state lives in its World.
"""
from __future__ import annotations

import logging

from emulation.filesystem import DeviceFileSystem
from emulation.phone_spec import DEVICE_FAULTS, PhoneSpec
from emulation.shell import Shell
from emulation.world import World

log = logging.getLogger(__name__)

# Android thermal types (android.os.Temperature)
TYPE_CPU, TYPE_GPU, TYPE_BATTERY, TYPE_SKIN, TYPE_NPU = 0, 1, 2, 3, 9
# Skin throttling thresholds of a real phone's thermal config -> THERMAL_STATUS 1..6
SKIN_STATUS_THRESHOLDS_C = (39.0, 43.0, 45.0, 47.0, 51.0, 55.0)


class EmulatedPhone:
    def __init__(self, spec: PhoneSpec, world: World | None = None) -> None:
        self.spec = spec
        self.world = world or World(seed=spec.seed)
        self.props = spec.props()
        self.fs = DeviceFileSystem(self.world.clock.now)
        self.shell = Shell(self)
        self.dumpsys = {"thermalservice": self._dumpsys_thermal, "battery": self._dumpsys_battery}
        self.kill_on_commands = {f.split(":", 1)[1] for f in spec.faults if f.startswith("kill-on:")}
        for d in ("/data/local/tmp", "/sdcard", "/system/bin", "/data/vendor/llm"):
            self.fs.mkdir(d)
        self._install_sysfs()
        if "low-battery" in spec.faults:
            self.world.supply_v = 3.1
        for name in self.shell.commands:  # the toybox builtins, reachable by path too
            self.fs.write(f"/system/bin/{name}", b"\x7fELF emulated", mode=0o100755)
        if "no-runtime" not in spec.faults:
            from emulation import runtime  # local import: the runtime builds on this class

            runtime.install(self)
        if "no-llamacpp" not in spec.faults:
            from emulation import llamacpp

            llamacpp.install(self)

    @property
    def banner(self) -> bytes:
        p = self.props
        return (f"device::ro.product.name={p['ro.product.name']};ro.product.model={p['ro.product.model']};"
                f"ro.product.device={p['ro.product.device']};features=cmd,stat_v2,ls_v2,fixed_push_mkdir,"
                f"apex,abb,fixed_push_symlink_timestamp,abb_exec,remount_shell,track_app,sendrecv_v2\0").encode()

    # --- sensors ------------------------------------------------------------------------
    def thermal_zones(self) -> list[tuple[str, int, float]]:
        """(name, android type, °C) for each zone the phone exposes."""
        t = self.world.temperatures()
        return [("cpu0", TYPE_CPU, t["cpu"]), ("gpu", TYPE_GPU, t["board"]),
                ("battery", TYPE_BATTERY, t["battery"]), ("skin", TYPE_SKIN, t["skin"]),
                ("npu", TYPE_NPU, t["npu"])]

    def thermal_status(self) -> int:
        skin = self.world.temperatures()["skin"]
        return sum(1 for limit in SKIN_STATUS_THRESHOLDS_C if skin >= limit)

    def _sysfs_celsius(self, index: int) -> float:
        name, _type, celsius = self.thermal_zones()[index]
        # Fault: a skin sensor whose sysfs node drifted away from what the thermal HAL reports.
        return celsius + (6.0 if name == "skin" and "skin-sensor-drift" in self.spec.faults else 0.0)

    def _install_sysfs(self) -> None:
        for index, (name, _type, _c) in enumerate(self.thermal_zones()):
            base = f"/sys/class/thermal/thermal_zone{index}"
            self.fs.provide(f"{base}/type", lambda name=name: f"{name}\n".encode())
            self.fs.provide(f"{base}/temp", lambda index=index: f"{round(self._sysfs_celsius(index) * 1000)}\n".encode())
        bat = "/sys/class/power_supply/battery"
        state = self.world.battery_state
        self.fs.provide(f"{bat}/voltage_now", lambda: f"{round(state().voltage_v * 1e6)}\n".encode())
        # Most Qualcomm kernels report discharge as negative µA.
        self.fs.provide(f"{bat}/current_now", lambda: f"{-round(state().current_a * 1e6)}\n".encode())
        self.fs.provide(f"{bat}/temp", lambda: f"{round(state().temp_c * 10)}\n".encode())
        self.fs.provide(f"{bat}/capacity", lambda: f"{int(state().capacity_pct)}\n".encode())

    def _dumpsys_thermal(self) -> str:
        zones = self.thermal_zones()
        lines = ["IsStatusOverride: false", "ThermalEventListeners:", "\tcallbacks: 0",
                 "ThermalStatusListeners:", "\tcallbacks: 0",
                 f"Thermal Status: {self.thermal_status()}", "Cached temperatures:"]
        for name, kind, celsius in zones:
            lines.append(f"\tTemperature{{mValue={celsius:.1f}, mType={kind}, mName={name}, mStatus={self.thermal_status() if kind == TYPE_SKIN else 0}}}")
        lines += ["HAL Ready: true", "HAL connection:", "\tThermalHAL 2.0 connected: yes",
                  "Current temperatures from HAL:"]
        for name, kind, celsius in zones:
            lines.append(f"\tTemperature{{mValue={celsius:.1f}, mType={kind}, mName={name}, mStatus=0}}")
        return "\n".join(lines) + "\n"

    def _dumpsys_battery(self) -> str:
        s = self.world.battery_state()
        return ("Current Battery Service state:\n  AC powered: false\n  USB powered: true\n"
                "  Wireless powered: false\n  Max charging current: 0\n  status: 3\n  health: 2\n"
                f"  present: true\n  level: {int(s.capacity_pct)}\n  scale: 100\n"
                f"  voltage: {round(s.voltage_v * 1000)}\n  temperature: {round(s.temp_c * 10)}\n"
                "  technology: Li-ion\n")
