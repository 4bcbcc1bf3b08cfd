"""The plugin's `runtime` fixtures ask the capabilities a test's markers name, the module's first,
and skip with the runtime's own reason at the first one missing."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from phonebench.core.errors import UnsupportedCapability
from phonebench.fixtures.phones import with_capabilities



class _Runtime:
    def __init__(self, offers: set[str]) -> None:
        self.offers = offers
        self.asked: list[str] = []

    def require(self, capability: str) -> None:
        self.asked.append(capability)
        if capability not in self.offers:
            raise UnsupportedCapability(f"EMU-T1: runtime 3.4.0 has no `{capability}` capability")


def _request(*marks: tuple[str, ...]) -> SimpleNamespace:
    """Markers as pytest gives them: the test's own first, then its module's."""
    found = [pytest.mark.capabilities(*names).mark for names in marks]
    return SimpleNamespace(node=SimpleNamespace(iter_markers=lambda name: iter(found if name == "capabilities" else [])))


def test_every_named_capability_is_asked_the_module_s_first():
    runtime = _Runtime({"generate", "status", "weights"})
    assert with_capabilities(_request(("weights",), ("generate", "status")), runtime) is runtime
    assert runtime.asked == ["generate", "status", "weights"]


def test_a_missing_capability_skips_with_the_runtime_s_reason():
    runtime = _Runtime({"generate", "status"})
    with pytest.raises(pytest.skip.Exception, match="has no `weights` capability"):
        with_capabilities(_request(("weights",), ("generate", "status")), runtime)


def test_no_marker_asks_nothing():
    runtime = _Runtime(set())
    assert with_capabilities(_request(), runtime) is runtime
    assert runtime.asked == []
