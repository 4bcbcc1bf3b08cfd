"""An emulated phone as a lab receives it: the phone with the apps installed on it.

The phone (device.py) knows no app; the apps (the LLM runtime with its GPU load tool, llama.cpp)
install themselves on it. A spec's faults can leave an app off (`no-runtime`, `no-llamacpp`).
"""
from __future__ import annotations

from . import llamacpp, runtime
from .device import App, EmulatedPhone
from .phone_spec import PhoneSpec
from .world import World


def installed_apps(spec: PhoneSpec) -> list[App]:
    """The apps a phone of this spec carries."""
    apps: list[App] = []
    if "no-runtime" not in spec.faults:
        apps.append(runtime.install)
    if "no-llamacpp" not in spec.faults:
        apps.append(llamacpp.install)
    return apps


def emulated_phone(spec: PhoneSpec, world: World | None = None) -> EmulatedPhone:
    """A phone of `spec` on `world` (a world of its own when None), its apps installed."""
    return EmulatedPhone(spec, world, apps=installed_apps(spec))
