"""Overflow adapters end to end on emulated phones: bit-exact tokens on every known persona,
divergence without them, refusal of unsigned/tampered adapters, and atomic activation."""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from phonebench.bench.phone.adapters import AdapterInstallFailed, AdapterRefused, apply_adapter, choose_adapter
from phonebench.bench.phone.fingerprint import fingerprint
from phonebench.bench.specs.profiles import load_library
from device_double import make_device
from phonebench.drivers.runtime import RuntimeClient, RuntimeCommandFailed
from phonebench.emulation import runtime as emulated_runtime
from phonebench.emulation.npu_personas import PERSONAS
from phonebench.emulation.tinymodel import golden_tokens, prompt_tokens
from phonebench.core import signing

REPO = Path(__file__).resolve().parent.parent
PROMPT = prompt_tokens(12, 1)
TOKENS = 24
KNOWN = sorted(n for n in PERSONAS if n not in ("SM8650-MP2", "MT6989-ES-RELABEL"))

@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


@pytest.fixture(scope="module")
def library():
    return load_library()


@pytest.fixture(scope="module")
def golden() -> list[int]:
    return golden_tokens(PROMPT, TOKENS, seed=1)


def _tokens(client: RuntimeClient) -> list[int]:
    return client.generate(TOKENS, seed=1, prompt=PROMPT).tokens


@pytest.mark.parametrize("name", KNOWN)
def test_known_persona_is_bit_exact_after_its_adapter(library, golden, name):
    device = make_device(name)
    client = RuntimeClient(device)
    report = fingerprint(device, library, client)
    adapter = choose_adapter(report, library)
    outcome = apply_adapter(client, adapter, library.trusted)
    assert _tokens(client) == golden  # the raw divergence of each signature: tests/test_tinymodel.py
    if adapter is not None:
        assert outcome.action == "activated" and client.adapter_status().active == adapter.sha256


def test_reapplying_is_a_no_op(library):
    client = RuntimeClient(make_device("SM8650-ES"))
    adapter = library.adapters["tile-k-256"]
    assert apply_adapter(client, adapter, library.trusted).action == "activated"
    assert apply_adapter(client, adapter, library.trusted).action == "already-active"
    assert apply_adapter(client, None, library.trusted).action == "deactivated"
    assert client.adapter_status().active is None


def test_corrupted_push_keeps_the_previous_adapter(library):
    device = make_device("SM8650-ES")
    client = RuntimeClient(device)
    previous = library.adapters["tile-k-256"]
    apply_adapter(client, previous, library.trusted)
    device.push_hook = lambda remote, data: data[: len(data) // 2]  # transfer cut halfway
    with pytest.raises(AdapterInstallFailed, match="checksum mismatch.*keeps adapter " + previous.sha256):
        apply_adapter(client, library.adapters["tile-k-512"], library.trusted)
    assert client.adapter_status().active == previous.sha256


def test_interrupted_activation_keeps_the_previous_adapter(library, golden):
    device = make_device("SM8650-ES", faults=["adapter-activate-crash"])
    client = RuntimeClient(device)
    with pytest.raises(AdapterInstallFailed, match="activation interrupted.*keeps adapter none"):
        apply_adapter(client, library.adapters["tile-k-256"], library.trusted)
    status = client.adapter_status()
    assert status.active is None and status.installed  # installed, never half-activated
    assert _tokens(client) != golden  # still the raw NPU, as before


def test_tampered_adapter_is_never_pushed(library):
    device = make_device("SM8650-ES")
    client = RuntimeClient(device)
    good = library.adapters["tile-k-256"]
    tampered = replace(good, data=good.data.replace(b'"tile": 256', b'"tile": 2560'))
    with pytest.raises(AdapterRefused, match="signature does not match"):
        apply_adapter(client, tampered, library.trusted)
    assert not any(line.startswith("push") for line in device.log)


def test_unsigned_adapter_is_never_pushed(library, tmp_path):
    device = make_device("SM8650-ES")
    good = library.adapters["tile-k-256"]
    copy = tmp_path / good.path.name
    copy.write_bytes(good.data)
    with pytest.raises(AdapterRefused, match="unsigned"):
        apply_adapter(RuntimeClient(device), replace(good, path=copy), library.trusted)
    assert not any(line.startswith("push") for line in device.log)


@pytest.mark.parametrize("name", ["SM8650-MP2", "MT6989-ES-RELABEL"])
def test_untrusted_builds_get_no_adapter(library, name):
    report = fingerprint(make_device(name), library)
    with pytest.raises(AdapterRefused, match=report.verdict):
        choose_adapter(report, library)


def test_a_runtime_that_ignores_the_adapter_is_caught(library, golden):
    """Negative control for the bit-exact check: the adapter is active but not applied."""
    client = RuntimeClient(make_device("SM8650-ES", faults=["adapter-ignored"]))
    apply_adapter(client, library.adapters["tile-k-256"], library.trusted)
    assert client.adapter_status().active is not None
    assert _tokens(client) != golden


def test_a_corrupted_active_adapter_stops_generation(library):
    device = make_device("SM8650-ES")
    client = RuntimeClient(device)
    adapter = library.adapters["tile-k-256"]
    apply_adapter(client, adapter, library.trusted)
    device.phone.fs.write(f"{emulated_runtime.ADAPTER_DIR}/{adapter.sha256}.json", b"{}")
    with pytest.raises(RuntimeCommandFailed, match="corrupt"):
        _tokens(client)


def _run_suite(tmp_path: Path, *args: str) -> dict[str, str]:
    """Run the HIL numerics suite on in-process phones; outcome per test id."""
    junit = tmp_path / f"junit-{len(list(tmp_path.iterdir()))}.xml"
    # The bench plugin (an entry point) would parametrize `dut` a second time: the double replaces it.
    subprocess.run([sys.executable, "-m", "pytest", "--noconftest", "-p", "no:phonebench", "-p", "tests.device_double",
                    "-p", "no:cacheprovider", "-q", str(REPO / "suites" / "test_numerics.py"), f"--junitxml={junit}", *args],
                   cwd=REPO, capture_output=True, text=True, timeout=600)
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[case.get("name")] = kind
    return outcomes


def test_hil_suite_verdicts_on_in_process_phones(tmp_path):
    outcomes = _run_suite(tmp_path, "--double-persona", "SM8650-MP", "--double-persona", "MT6989-ES-RELABEL",
                          "--double-persona", "SM8650-MP2", "--double-persona", "SM8650-ES-RELABEL")
    assert outcomes["test_microcode_fingerprint[SM8650-MP]"] == "passed"
    assert outcomes["test_tokens_bit_exact_after_adapter[SM8650-MP]"] == "passed"
    assert outcomes["test_overflow_probes_exact_through_adapter[SM8650-MP]"] == "passed"
    assert outcomes["test_corrupt_adapter_transfer_keeps_previous[SM8650-MP]"] == "passed"
    assert outcomes["test_microcode_fingerprint[MT6989-ES-RELABEL]"] == "failure"
    assert outcomes["test_tokens_bit_exact_after_adapter[MT6989-ES-RELABEL]"] == "skipped"
    assert outcomes["test_microcode_fingerprint[SM8650-MP2]"] == "passed"  # recorded as information + stub
    assert outcomes["test_tokens_bit_exact_after_adapter[SM8650-MP2]"] == "skipped"
    # A relabelled SoC with the claimed build's overflow rule: its NPU's speed on the station clock
    assert outcomes["test_microcode_fingerprint[SM8650-ES-RELABEL]"] == "failure"
    assert outcomes["test_tokens_bit_exact_after_adapter[SM8650-ES-RELABEL]"] == "skipped"


def test_hil_suite_fails_when_the_runtime_ignores_adapters(tmp_path):
    outcomes = _run_suite(tmp_path, "--double-persona", "SM8650-ES", "--double-fault", "adapter-ignored",
                          "-k", "bit_exact or through_adapter")
    assert outcomes["test_tokens_bit_exact_after_adapter[SM8650-ES]"] == "failure"
    assert outcomes["test_overflow_probes_exact_through_adapter[SM8650-ES]"] == "failure"
