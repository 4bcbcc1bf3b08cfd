"""The emulated phone: identity, file store, shell, sensors; one per emulated DUT.

The ADB daemon (phonebench.emulation.adbd) exposes it on loopback; the runtime (phonebench.emulation.runtime) is one
of its shell commands; its physical state lives in its World.
"""
from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Sequence

import numpy as np

from .filesystem import DeviceFileSystem
from .logbuffer import LogBuffer
from .logcat import logcat
from .phone_spec import PhoneSpec
from .runtime_personas import runtime_persona
from .shell import CommandResult, Shell, ShellContext
from . import unit_variation
from .unit_variation import unit_seed
from .world import World

log = logging.getLogger(__name__)

# Android thermal types (android.os.Temperature)
TYPE_CPU, TYPE_GPU, TYPE_BATTERY, TYPE_SKIN, TYPE_NPU = 0, 1, 2, 3, 9
# Skin throttling thresholds of a real phone's thermal config -> THERMAL_STATUS 1..6
SKIN_STATUS_THRESHOLDS_C = (39.0, 43.0, 45.0, 47.0, 51.0, 55.0)


DATA_FREE_BYTES = 8 << 30  # /data's free space on a unit in the lab
DATA_FULL_FREE_BYTES = 16 << 10  # fault "data-full": a pushed build or batch no longer fits
HOT_OFFSET_FROM_C, HOT_OFFSET_FULL_C = 55.0, 63.0  # "hot-thermal-offset": where its offset starts, where it is whole
THERMAL_WATCH_S = 1.0  # how often (simulated) the thermal service re-evaluates the skin status


# An app installs itself on a phone: registers its commands, writes its files, watches the shell.
App = Callable[["EmulatedPhone"], object]


class EmulatedPhone:
    def __init__(self, spec: PhoneSpec, world: World | None = None, apps: Sequence[App] = ()) -> None:
        self.spec = spec
        self.world = world or World(seed=unit_seed(spec.seed, spec.serial))
        self.world.apply_unit(unit_variation.for_spec(spec))  # this unit's own process variation
        self.props = spec.props()
        self.npu_sensor_offset_c = runtime_persona(spec.sla_persona).npu_sensor_offset_c
        self.npu_hot_offset_c = runtime_persona(spec.sla_persona).npu_hot_offset_c
        self.fs = DeviceFileSystem(self.world.clock.now)
        self.shell = Shell(self)
        self.logs = LogBuffer(self.world.clock.now)
        self.shell.register("logcat", logcat)
        self.shell.register("date", _date)
        self.shell.register("bugreport", _bugreport)
        self.dumpsys = {"thermalservice": self._dumpsys_thermal, "battery": self._dumpsys_battery}
        self.kill_on_commands = {f.split(":", 1)[1] for f in spec.faults if f.startswith("kill-on:")}
        for d in ("/data/local/tmp", "/sdcard", "/system/bin", "/data/vendor/llm"):
            self.fs.mkdir(d)
        self._install_sysfs()
        if "low-battery" in spec.faults:
            self.world.supply_v = 3.1
        for name in self.shell.commands:  # the toybox builtins, reachable by path too
            self.fs.write(f"/system/bin/{name}", b"\x7fELF emulated", mode=0o100755)
        for app in apps:  # what the lab installed on it (phones.py: the runtime, llama.cpp)
            app(self)
        self.fs.set_free(DATA_FULL_FREE_BYTES if "data-full" in spec.faults else DATA_FREE_BYTES)
        self._thermal_status, self._thermal_checked = 0, self.world.clock.now()
        self.world.clock.add_listener(self._watch_thermal)
        self.boot()

    # --- life cycle -----------------------------------------------------------------------
    def boot(self) -> None:
        """What a boot leaves in the log (the buffer starts empty, as after a real boot)."""
        self.logs.clear()
        self.logs.log("I", "init", f"starting service 'adbd' (build {self.spec.fingerprint})", pid=1)
        self.logs.log("I", "ActivityManager", "System now ready", pid=1000)
        self.logs.log("I", "ThermalManagerService", f"Thermal Status: {self.thermal_status()}", pid=1000)

    def log_runtime(self, argv: list[str], result: CommandResult | None) -> None:
        """The runtime's starts and stops in the log, as its service logs them."""
        verb = argv[1] if len(argv) > 1 else ""
        if result is None:
            self.logs.log("I", "llmrt", f"llmrt {verb}: start", pid=4242)
            return
        detail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] if result.status else []
        self.logs.log("I" if result.status == 0 else "E", "llmrt",
                      f"llmrt {verb}: exit {result.status}" + (f" ({detail[0]})" if detail else ""), pid=4242)

    def _watch_thermal(self, t: float, dt: float) -> None:
        if t + dt - self._thermal_checked < THERMAL_WATCH_S:
            return
        self._thermal_checked = t + dt
        status = self.thermal_status()
        if status != self._thermal_status:
            level = "W" if status > self._thermal_status else "I"
            skin = self.world.temperatures()["skin"]
            self.logs.log(level, "ThermalManagerService",
                          f"Thermal status changed {self._thermal_status} -> {status} (skin {skin:.1f} C)")
            self._thermal_status = status

    @property
    def booted(self) -> bool:
        return self.props.get("sys.boot_completed") == "1"

    @property
    def banner(self) -> bytes:
        p = self.props
        return (f"device::ro.product.name={p['ro.product.name']};ro.product.model={p['ro.product.model']};"
                f"ro.product.device={p['ro.product.device']};features=cmd,shell_v2,stat_v2,ls_v2,fixed_push_mkdir,"
                f"apex,abb,fixed_push_symlink_timestamp,abb_exec,remount_shell,track_app,sendrecv_v2\0").encode()

    # --- sensors ------------------------------------------------------------------------
    def sensor_temperatures(self) -> dict[str, float]:
        """What the phone's own sensors read, °C: the world's, except a forger's NPU sensor (runtime
        persona `npu_sensor_offset_c`), which every part of the phone then repeats."""
        t = self.world.temperatures()
        hot = float(np.clip((t["npu"] - HOT_OFFSET_FROM_C) / (HOT_OFFSET_FULL_C - HOT_OFFSET_FROM_C), 0.0, 1.0))
        t["npu"] += self.npu_sensor_offset_c + self.npu_hot_offset_c * hot
        return t

    def thermal_zones(self) -> list[tuple[str, int, float]]:
        """(name, android type, °C) for each zone the phone exposes."""
        t = self.sensor_temperatures()
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


def _date(argv: list[str], ctx: ShellContext) -> CommandResult:
    """toybox `date` on the phone's clock: `+%s`, `+%s.%N` (what the bench asks), else the default form."""
    now = ctx.phone.world.clock.now()
    if len(argv) > 1 and argv[1].startswith("+"):
        text = argv[1][1:].replace("%s", str(int(now))).replace("%N", f"{int((now % 1) * 1e9):09d}")
        return CommandResult(f"{text}\n".encode())
    return CommandResult(_time.strftime("%a %b %d %H:%M:%S UTC %Y\n", _time.gmtime(now)).encode())


def _bugreport(argv: list[str], ctx: ShellContext) -> CommandResult:
    """The plain-text bugreport of older Android (dumpstate's sections): properties, services, log."""
    phone = ctx.phone
    sections = [("SYSTEM PROPERTIES", "".join(f"[{k}]: [{v}]\n" for k, v in sorted(phone.props.items())))]
    sections += [(f"DUMPSYS {name}", render()) for name, render in sorted(phone.dumpsys.items())]
    sections.append(("SYSTEM LOG", "".join(e.threadtime() + "\n" for e in phone.logs.entries())))
    header = f"== dumpstate: {_time.strftime('%Y-%m-%d %H:%M:%S', _time.gmtime(phone.world.clock.now()))}\n"
    return CommandResult((header + "".join(f"------ {title} ------\n{body}" for title, body in sections)).encode())
