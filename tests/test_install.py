"""Installing a catalogue build on an emulated phone over ADB (bench/catalogue/install.py,
emulation/runtime_install.py, docs/builds.md): what the bench pushed recorded beside what the phone
then says, and every way an install fails."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from phonebench.bench.catalogue.catalogue import CatalogueError, load_catalogue
from phonebench.bench.catalogue.install import InstallFailed, install_build
from phonebench.bench.cli import main
from phonebench.core import signing
from phonebench.drivers.runtime import RuntimeClient
from phonebench.emulation.catalogue_factory import write_catalogue
from tests.adb_helpers import EmulatedStation, adb_key, adb_server, over_adb  # noqa: F401 - fixtures

SLOW_ON_SM8650 = {2: {"npu_time": 1.06, "models": ["SM8650"]}}
BROKEN = {3: "bad-signature", 4: "crash-on-start", 5: "disk-full", 6: "digest-mismatch", 7: "missing-artefact"}


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return load_catalogue(write_catalogue(tmp_path_factory.mktemp("catalogue"), 8, SLOW_ON_SM8650, broken=BROKEN))


@pytest.fixture
def direct(adb_key):
    station = EmulatedStation("direct", adb_key)
    yield station
    station.close()


def runtime_of(emulated):
    return emulated.shell.commands["llmrt"]


def pushed_left(emulated) -> list[str]:
    fs = emulated.fs
    folder = "/data/local/tmp/phonebench/builds"
    return fs.listdir(folder) if fs.exists(folder) else []


def test_a_build_is_pushed_installed_and_recorded_beside_the_phones_word(over_adb, cat):
    emulated, device, clock = over_adb.start(npu="SM8650-MP")
    before = emulated.world.clock.now()
    record = install_build(device, cat.get("3.6.0-dev.003"), station_clock=clock)
    assert record.outcome == "installed" and record.device == device.name
    assert record.pushed_sha256 == cat.get("3.6.0-dev.003").sha256
    assert record.previous_version == "llmrt 3.4.0-emu"
    assert record.reported_version == "llmrt 3.6.0-dev.003-emu"  # the phone's word, read back
    assert record.reported_sha256 == record.pushed_sha256
    # The install took the phone's time (verify, stop, unpack, start) and the station clock saw it.
    assert 1.5 < record.phone_seconds < 10 and record.station_seconds >= record.phone_seconds - 0.01
    assert emulated.world.clock.now() - before >= record.phone_seconds
    assert record.to_dict()["evidence"]["reported_version"] == "reported"
    assert pushed_left(emulated) == []  # the pushed copy is removed
    # From now on the runtime behaves as the artefact says (this build slows NPU work on SM8650 only).
    assert runtime_of(emulated).build.npu_time == pytest.approx(1.06)
    assert RuntimeClient(device).identity().runtime_version == "llmrt 3.6.0-dev.003-emu"


def test_a_change_for_one_model_leaves_the_others_alone(direct, cat):
    emulated, device, clock = direct.start(npu="MT6989-MP")
    record = install_build(device, cat.get("3.6.0-dev.003"), station_clock=clock)
    assert record.outcome == "installed" and runtime_of(emulated).build.npu_time == 1.0


@pytest.mark.parametrize("build, kind, says", [
    ("3.6.0-dev.004", "bad-signature", "signature verification failed: signed by key"),
    ("3.6.0-dev.005", "crash-on-start", "crashed on start (SIGSEGV); rolled back to llmrt 3.6.0-dev.002-emu"),
    ("3.6.0-dev.006", "disk-full", "No space left on device: the build takes 1099511627776 bytes"),
])
def test_a_build_the_phone_refuses_leaves_the_previous_one_running(direct, cat, build, kind, says):
    emulated, device, clock = direct.start(npu="SM8650-MP")
    install_build(device, cat.get("3.6.0-dev.002"), station_clock=clock)
    pid = RuntimeClient(device).status().pid
    with pytest.raises(InstallFailed) as err:
        install_build(device, cat.get(build), station_clock=clock)
    assert err.value.kind == kind and says in str(err.value)
    record = err.value.record
    assert record.outcome == kind and record.pushed_sha256 == cat.get(build).sha256
    assert record.reported_version == "llmrt 3.6.0-dev.002-emu"  # what runs now, in the phone's word
    assert runtime_of(emulated).build.version == "llmrt 3.6.0-dev.002-emu"
    assert pushed_left(emulated) == []
    restarted = RuntimeClient(device).status().pid != pid
    assert restarted == (kind == "crash-on-start")  # only a crash got as far as stopping the runtime


def test_a_full_data_partition_refuses_the_push(direct, cat):
    emulated, device, clock = direct.start(npu="SM8650-MP", faults=["data-full"])
    with pytest.raises(InstallFailed) as err:
        install_build(device, cat.get("3.6.0-dev.002"), station_clock=clock)
    assert err.value.kind == "disk-full" and "No space left on device" in str(err.value)
    assert err.value.record.reported_version == "llmrt 3.4.0-emu"


@pytest.mark.parametrize("build, kind", [("3.6.0-dev.007", "digest-mismatch"), ("3.6.0-dev.008", "missing-artefact")])
def test_an_artefact_that_is_not_the_catalogues_is_never_pushed(direct, cat, build, kind):
    emulated, device, clock = direct.start(npu="SM8650-MP")
    with pytest.raises(InstallFailed) as err:
        install_build(device, cat.get(build), station_clock=clock)
    assert err.value.kind == kind and err.value.record is None
    assert pushed_left(emulated) == [] and runtime_of(emulated).inferences == 0
    assert not emulated.fs.exists("/data/local/tmp/phonebench/builds")


def test_a_build_made_from_the_docs_alone_installs(direct, tmp_path):
    """docs/builds.md's recipe, by hand: build.toml, its signature, a tar, a catalogue."""
    library = b"\x7fELF not really a library" * 100
    manifest = ('format = "llmrt-build/1"\nversion = "llmrt 9.9.9-lab"\n\n[behaviour]\nnpu_time = 1.02\n\n'
                '[behaviour.models."PB-Emu Snapdragon 8 Gen 3"]\nnpu_time = 1.5\nnpu_power = 1.2\n\n'
                f'[files]\n"lib/libllmrt.so" = "{hashlib.sha256(library).hexdigest()}"\n').encode()
    signature = signing.sign_bytes(manifest, signing.load_private_key(signing.DEV_PRIVATE_KEY)).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in (("build.toml", manifest), ("build.toml.sig", signature), ("lib/libllmrt.so", library)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "lab-9.9.9.tar.gz").write_bytes(out.getvalue())
    (tmp_path / "catalogue.toml").write_text(
        '[[build]]\nid = "9.9.9"\norder = 1\ndate = 2026-12-24\nartefact = "lab-9.9.9.tar.gz"\n'
        f'sha256 = "{hashlib.sha256(out.getvalue()).hexdigest()}"\n')
    emulated, device, clock = direct.start(npu="SM8650-MP")
    record = install_build(device, load_catalogue(tmp_path).get("9.9.9"), station_clock=clock)
    assert record.reported_version == "llmrt 9.9.9-lab"
    build = runtime_of(emulated).build
    assert (build.npu_time, build.npu_power) == (1.5, 1.2)  # its model's entry, not the base


def station_file(tmp_path: Path) -> str:
    path = tmp_path / "station.toml"
    path.write_text('[station]\nresults_dir = "out"\n[emulated]\ninstruments = false\n'
                    '[[emulated.phone]]\nserial = "EMU-I1"\nnpu_persona = "SM8650-MP"\n')
    return str(path)


def test_bench_install_records_and_says_what_happened(tmp_path, cat, capsys):
    station = station_file(tmp_path)
    assert main(["install", "3.6.0-dev.003", "--catalogue", str(cat.path), "--dut", "EMU-I1",
                 "--station", station]) == 0
    out = capsys.readouterr().out
    assert "EMU-I1: build 3.6.0-dev.003 installed" in out and "(reported: the phone's word)" in out
    records = list((tmp_path / "out" / "installs").glob("*.json"))
    assert len(records) == 1
    saved = json.loads(records[0].read_text())
    assert saved["outcome"] == "installed" and saved["reported_version"] == "llmrt 3.6.0-dev.003-emu"
    assert main(["install", "3.6.0-dev.004", "--catalogue", str(cat.path), "--dut", "EMU-I1",
                 "--station", station]) == 1  # bad signature: the phone refused it
    assert len(list((tmp_path / "out" / "installs").glob("*.json"))) == 2  # the failed attempt is kept too


@pytest.mark.parametrize("argv, code, says", [
    (["nosuch", "--dut", "EMU-I1"], 2, "no build 'nosuch'"),
    (["3.6.0-dev.007", "--dut", "EMU-I1"], 2, "the catalogue says"),
    (["3.6.0-dev.001", "--dut", "EMU0009"], 4, "--dut EMU0009: not a phone of"),
])
def test_bench_install_mistakes_are_one_message_and_a_documented_code(tmp_path, cat, capsys, argv, code, says):
    argv = ["install", argv[0], "--catalogue", str(cat.path), *argv[1:], "--station", station_file(tmp_path)]
    assert main(argv) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_malformed_catalogue_stops_bench_install_naming_file_and_key(tmp_path, capsys):
    (tmp_path / "catalogue.toml").write_text('[[build]]\nid = "a"\norder = 1\ndate = 2026-01-01\nartefact = "x"\n')
    assert main(["install", "a", "--catalogue", str(tmp_path), "--dut", "EMU-I1"]) == 2
    assert f"{(tmp_path / 'catalogue.toml').resolve()}: [[build]] #1.sha256: missing" in capsys.readouterr().err
    with pytest.raises(CatalogueError):
        load_catalogue(tmp_path)
