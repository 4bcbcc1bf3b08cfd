"""The local user on a shared host (issue 48, docs/security/host.md): what another user of the
bench's host can plant, read or take, and what the bench does about it. Each test is the attack,
written first against main."""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from phonebench.bench.results import run_record
from phonebench.bench.results.aggregate import BayOutcome, bay_folder, merge_bays
from phonebench.bench.results.run_record import BAY_OF_RUN_ENV, RESCUE_ENV, RunRecorder, rescue_name, rescue_record
from phonebench.core import files
from phonebench.core.judge import compare
from phonebench.core.records import RunRecord, TestRecord
from phonebench.drivers import locks


# --- 1. no record from outside the run --------------------------------------------------------------------
def _test(i: int, outcome: str) -> TestRecord:
    return TestRecord(f"suites/t.py::t{i}[bay1]", "bay1", outcome, 0.1,
                      verdicts=[compare("power_mean", 4.0 + i / 100, "W", 4.2)])


def _record(run_id: str, outcomes: list[str], finished: bool) -> dict[str, Any]:
    record = RunRecord(run_id=run_id, started="2026-12-06T00:00:00+00:00", station={"name": "s"},
                       status="complete" if finished else "running",
                       finished="2026-12-06T00:10:00+00:00" if finished else None,
                       tests=[_test(i, o) for i, o in enumerate(outcomes)])
    return record.to_dict()


@pytest.fixture
def shared_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system temp folder every user writes (1777, like /tmp), and this user's own home; no
    $PHONEBENCH_RESCUE_DIR. Returns the shared temp folder."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(RESCUE_ENV, raising=False)
    return shared


def _bay_run(tmp_path: Path, own: dict[str, Any] | None) -> Path:
    run_dir = tmp_path / "reports" / "20261206-000000-abcd"
    folder = bay_folder(run_dir, "bay1")
    folder.mkdir(parents=True)
    if own is not None:
        (folder / "results.json").write_text(json.dumps(own))
    return run_dir


def _plant(folder: Path, name: str, data: dict[str, Any]) -> Path:
    """What another user of the host writes: a record under the guessable rescue name."""
    path = folder / rescue_name(name)
    path.write_text(json.dumps(data))
    return path


def test_a_planted_rescue_file_does_not_replace_a_bays_failed_record(tmp_path: Path, shared_host: Path) -> None:
    run_dir = _bay_run(tmp_path, _record("bay1", ["failed"], finished=True))
    name = f"{run_dir.name}-bay1"  # the run id is in every worker's command line
    planted = _plant(shared_host, name, _record("bay1", ["passed", "passed"], finished=True))
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", 1)])
    assert [t["outcome"] for t in data["tests"]] == ["failed"]
    assert data["station"]["bays"]["bay1"]["record"] == str(bay_folder(run_dir, "bay1") / "results.json")
    assert planted.exists()  # not ours to delete either


def test_a_planted_record_is_not_taken_for_a_bay_whose_own_record_is_partial(tmp_path: Path,
                                                                             shared_host: Path) -> None:
    """A worker killed mid-run leaves a partial record: more tests elsewhere is no reason to believe them."""
    run_dir = _bay_run(tmp_path, _record("bay1", ["failed"], finished=False))
    _plant(shared_host, f"{run_dir.name}-bay1", _record("bay1", ["passed", "passed"], finished=True))
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", None)])
    assert [t["outcome"] for t in data["tests"]] == ["failed"] and data["status"] == "incomplete"


def test_an_unsealed_record_in_the_users_own_folder_is_not_used(tmp_path: Path, shared_host: Path) -> None:
    """Even where only this user writes (a record of another run, or a hand-made one), a rescued
    record counts only with this run's seal, and the run record says it was refused."""
    run_dir = _bay_run(tmp_path, _record("bay1", ["failed"], finished=False))
    private = run_record.private_temp_folder()
    _plant(private, f"{run_dir.name}-bay1", _record("bay1", ["passed", "passed"], finished=True))
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", 1)], token=run_record.new_run_token())
    assert [t["outcome"] for t in data["tests"]] == ["failed"]
    assert any("not sealed by this run" in p for p in data["problems"]), data["problems"]


def test_rescued_records_live_in_a_folder_only_this_user_writes(tmp_path: Path, shared_host: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    private = run_record.private_temp_folder()
    info = os.lstat(private)
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert shared_host not in run_record.rescue_folders()
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    monkeypatch.setenv(RESCUE_ENV, str(open_folder))
    assert open_folder not in run_record.rescue_folders()  # another user could plant there
    link = tmp_path / "link"
    link.symlink_to(private)
    monkeypatch.setenv(RESCUE_ENV, str(link))
    assert link not in run_record.rescue_folders()
    path = rescue_record(_record("r", ["passed"], finished=True), "r", tmp_path)
    assert path is not None and path.parent == private


def _disk_full(monkeypatch: pytest.MonkeyPatch, disk: Path, good_writes: int) -> None:
    real, calls = run_record.write_atomically, {"n": 0}

    def writer(path: Path, data: Any) -> None:
        calls["n"] += Path(path).is_relative_to(disk)
        if calls["n"] > good_writes and Path(path).is_relative_to(disk):
            raise files.describe_os_error(Path(path), OSError(errno.ENOSPC, "No space left on device"))
        real(path, data)

    monkeypatch.setattr(run_record, "write_atomically", writer)


def test_a_bay_worker_that_could_not_write_is_rescued_sealed_and_merged(tmp_path: Path, shared_host: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The rescue path itself still works: the worker's disk fills, it seals its whole record with
    the run's token (from the environment), the merge takes it and says so, then drops it."""
    run_dir = _bay_run(tmp_path, None)
    token = run_record.new_run_token()
    monkeypatch.setenv(BAY_OF_RUN_ENV, run_dir.name)
    monkeypatch.setenv(run_record.RUN_TOKEN_ENV, token)
    real = run_record.write_atomically
    _disk_full(monkeypatch, run_dir, good_writes=2)  # start + 1 test, then full
    rec = RunRecorder(run_dir / "bays", {"name": "s"}, run_id="bay1")
    for i, outcome in enumerate(["passed", "failed", "passed"]):
        rec.add_test(_test(i, outcome))
    rec.finish()
    monkeypatch.setattr(run_record, "write_atomically", real)  # the disk has room again for the merge
    assert rec.rescued_to is not None and rec.rescued_to.parent == run_record.private_temp_folder()
    assert token not in rec.rescued_to.read_text()  # a seal, not the secret
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", 1)], token=token)
    assert [t["outcome"] for t in data["tests"]] == ["passed", "failed", "passed"]
    assert data["station"]["bays"]["bay1"]["record"] == str(rec.rescued_to)
    assert not rec.rescued_to.exists()


def test_a_whole_bay_record_is_preferred_to_a_larger_sealed_one(tmp_path: Path, shared_host: Path) -> None:
    run_dir = _bay_run(tmp_path, _record("bay1", ["failed"], finished=True))
    token = run_record.new_run_token()
    rescue_record(_record("bay1", ["passed", "passed"], finished=True), f"{run_dir.name}-bay1", run_dir, token=token)
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", 1)], token=token)
    assert [t["outcome"] for t in data["tests"]] == ["failed"]


def test_a_sealed_record_of_another_bay_or_run_is_not_used(tmp_path: Path, shared_host: Path) -> None:
    run_dir = _bay_run(tmp_path, _record("bay1", ["failed"], finished=False))
    token = run_record.new_run_token()
    other = rescue_record(_record("bay2", ["passed", "passed"], finished=True), f"{run_dir.name}-bay2",
                          run_dir, token=token)
    assert other is not None
    other.rename(other.with_name(rescue_name(f"{run_dir.name}-bay1")))  # bay2's seal under bay1's name
    data = merge_bays(run_dir, {"name": "s"}, [BayOutcome("bay1", 1)], token=token)
    assert [t["outcome"] for t in data["tests"]] == ["failed"]


# --- 4. locks shared by every user of a host ------------------------------------------------------------------
def _holder_seen_from(home: Path, address: str) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k != locks.ENV_DIR}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    code = ("import json, sys; from phonebench.drivers import locks; "
            "print(json.dumps(locks.holder(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", code, address], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_default_lock_folder_is_the_hosts_not_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(locks.ENV_DIR, raising=False)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    monkeypatch.setenv("HOME", str(alice))
    monkeypatch.setenv("XDG_CACHE_HOME", str(alice / ".cache"))
    folder = locks.lock_dir()
    assert not folder.is_relative_to(tmp_path)
    mode = stat.S_IMODE(os.lstat(folder).st_mode)
    assert mode & 0o1777 == 0o1777, oct(mode)  # every user creates lock files; nobody deletes another's
    address = f"TCPIP0::host-security-{uuid.uuid4().hex}::INSTR"  # this test's own: parallel-safe
    held = locks.acquire(address, "scope", wait_s=0)
    path = locks.lock_path(address)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666  # another user opens and flocks it
        seen = _holder_seen_from(bob, address)  # another HOME, another cache: the same lock
        assert seen is not None and seen["pid"] == os.getpid() and seen["name"] == "scope"
    finally:
        held.release()
        path.unlink(missing_ok=True)


# --- 3. secrets stay secret ---------------------------------------------------------------------------------
PASSWORD = "s3cr3t-host-security"


def test_station_files_the_bench_writes_carry_no_store_password(tmp_path: Path) -> None:
    from phonebench.core.station import EmulatedConfig, StationConfig, load_station
    from phonebench.core.station_writer import emulated_station_toml

    url = f"postgresql://bench:{PASSWORD}@db.lab:5432/phonebench?sslmode=verify-full"
    config = StationConfig(name="emu", source=None, database=url, emulated=EmulatedConfig())
    text = emulated_station_toml(config, config.emulated)
    assert PASSWORD not in text
    (tmp_path / "emu.toml").write_text(text)
    assert load_station(tmp_path / "emu.toml").database == "postgresql://bench@db.lab:5432/phonebench?sslmode=verify-full"


def test_a_password_on_the_command_line_is_refused(capsys: pytest.CaptureFixture) -> None:
    from phonebench.bench.cli import main

    assert main(["runs", "--database", f"postgresql://bench:{PASSWORD}@127.0.0.1:1/bench"]) == 2
    err = capsys.readouterr().err
    assert "carries a password" in err and "pgpass" in err and PASSWORD not in err


def test_sslmode_reaches_libpq() -> None:
    from phonebench.bench.store import StoreError, open_store

    with pytest.raises(StoreError) as err:
        open_store("postgresql://bench@127.0.0.1:1/bench?sslmode=no-such-mode")
    assert "sslmode" in str(err.value)  # libpq read it: a lab's sslmode=verify-full is honoured


def _postgres() -> Any:
    sys.path.insert(0, str(Path(__file__).parent))
    from postgres_helpers import ScratchPostgres, postgres_bindir

    if postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    return ScratchPostgres()


def test_a_run_with_a_password_in_its_store_url_writes_it_nowhere(tmp_path: Path) -> None:
    """A bench run on an emulated station whose store URL carries a password (the scratch cluster
    trusts every local login, so the password is carried, not checked): the run stores into
    PostgreSQL, and no file the bench wrote under the results folder, and no command line of the
    bench's processes while it ran, holds the password."""
    import psutil
    from phonebench.bench.store import open_store

    with _postgres() as cluster:
        url = cluster.create_database("host_security").replace("bench@", f"bench:{PASSWORD}@", 1)
        (tmp_path / "station.toml").write_text(
            f'[station]\nname = "pw-rack"\ndatabase = "{url}"\nresults_dir = "reports"\n[emulated]\n'
            'instruments = false\n[[emulated.phone]]\nserial = "EMU0001"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("PHONEBENCH_DATABASE", "PGPASSWORD")}
        env["PHONEBENCH_MIN_FREE_MB"] = "0"
        proc = subprocess.Popen([sys.executable, "-m", "phonebench.bench.cli", "run", "--station", "station.toml",
                                 "--no-preflight", "-q", "-k", "identity", "--run-id", "pw-run"],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen: list[str] = []
        while proc.poll() is None:  # every command line of the run's process tree, as `ps` shows it
            try:
                family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
                seen.extend(" ".join(p.cmdline()) for p in family)
            except psutil.Error:
                pass
            time.sleep(0.05)
        output = proc.communicate(timeout=900)[0]
        assert proc.returncode == 0, output[-3000:]
        assert seen and not [line for line in seen if PASSWORD in line]
        written = [p for p in (tmp_path / "reports").rglob("*") if p.is_file()]
        assert any(p.suffix == ".toml" for p in written)  # the emulated station's files are among them
        leaks = [str(p) for p in written if PASSWORD.encode() in p.read_bytes()]
        assert not leaks
        assert PASSWORD not in output
        with open_store(url) as store:
            assert len(store.load_run("pw-run").data["tests"]) == 4


# --- 2. keys that mean something ------------------------------------------------------------------------------
def _weights_phone() -> tuple[Any, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from device_double import make_device
    from phonebench.drivers.runtime import RuntimeClient

    device = make_device("SM8650-ES", "EMU-keys")
    return device, RuntimeClient(device)


def _root_verdict() -> Any:
    from phonebench.bench.checks import weights
    from phonebench.bench.checks.targets import target
    from phonebench.bench.specs.sla import load_profile

    device, runtime = _weights_phone()
    entry = target(load_profile("default"), "weights_root_mismatches")
    return weights.root_check(device, runtime, root_mismatches=entry).verdicts[0]


def _station(tmp_path: Path, text: str) -> Any:
    from phonebench.core.station import load_station

    path = tmp_path / "station.toml"
    path.write_text(text, encoding="utf-8")
    return load_station(path)


HARDWARE = '[station]\nname = "rack-7"\n[[dut]]\nname = "p1"\nadb = "10.0.0.9:5555"\n'


def test_a_development_signed_manifest_is_refused_where_the_station_did_not_opt_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claim 12 on a lab station: the emulated update is signed with the development key, whose
    private half is in the repository; a station that did not opt in refuses it, saying why."""
    from phonebench.core import signing
    from phonebench.core.verdict import Outcome

    monkeypatch.delenv(signing.TRUSTED_KEYS_ENV, raising=False)
    station = _station(tmp_path, HARDWARE)
    assert not station.trusts_development_key
    with signing.trusting(station.name, station.trusts_development_key):
        verdict = _root_verdict()
    assert verdict.outcome is Outcome.FAIL
    assert "DEVELOPMENT key" in verdict.explanation and "rack-7" in verdict.explanation


def test_a_station_that_opts_in_accepts_it_and_the_verdict_says_so(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from phonebench.core import signing
    from phonebench.core.station_writer import station_toml
    from phonebench.core.verdict import Outcome

    monkeypatch.delenv(signing.TRUSTED_KEYS_ENV, raising=False)
    station = _station(tmp_path, "trust_development_key = true\n" + HARDWARE)
    assert station.trusts_development_key
    assert "trust_development_key = true" in station_toml(station, "round trip")
    with signing.trusting(station.name, station.trusts_development_key):
        verdict = _root_verdict()
    assert verdict.outcome is Outcome.PASS
    assert verdict.extra["signing_key"] == signing.DEV_KEY_NOTE and signing.DEV_KEY_NOTE in verdict.explanation


def test_the_emulated_station_files_the_bench_writes_opt_in(tmp_path: Path) -> None:
    from phonebench.core.station import EmulatedConfig, StationConfig
    from phonebench.core.station_writer import emulated_station_toml

    config = StationConfig(name="emu", source=None, emulated=EmulatedConfig())
    assert _station(tmp_path, emulated_station_toml(config, config.emulated)).trusts_development_key
    shipped = Path(__file__).resolve().parent.parent / "stations" / "emulated-fleet.toml"
    assert "trust_development_key = true" in shipped.read_text()


def _signed_library(tmp_path: Path, version: int) -> tuple[Path, list[Any]]:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from phonebench.bench.specs.profiles import DEFAULT_ROOT
    from phonebench.core import signing

    root = tmp_path / f"profiles-v{version}"
    (root / "adapters").mkdir(parents=True)
    for path in (DEFAULT_ROOT / "adapters").glob("*.json"):
        (root / "adapters" / path.name).write_bytes(path.read_bytes())
    text = (DEFAULT_ROOT / "qualcomm-sm8650.toml").read_text()
    (root / "qualcomm-sm8650.toml").write_text(text.replace("version = 1 ", f"version = {version} ", 1))
    private = Ed25519PrivateKey.generate()
    for path in [*root.glob("*.toml"), *(root / "adapters").glob("*.json")]:
        signing.sign_file(path, private)
    pub = tmp_path / f"lab-v{version}.pub"
    pub.write_bytes(signing.public_pem(private))
    return root, signing.trusted_keys([pub])


def test_a_station_never_goes_back_to_an_older_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from phonebench.bench.specs import profile_versions
    from phonebench.bench.specs.profiles import load_library
    from phonebench.core import signing

    monkeypatch.setenv(profile_versions.STATE_ENV, str(tmp_path / "state"))
    newer, newer_keys = _signed_library(tmp_path, 3)
    older, older_keys = _signed_library(tmp_path, 2)  # validly signed, but the one version 3 replaced
    with signing.trusting("rack-7", development=False):
        assert load_library(newer, newer_keys).socs["SM8650"].version == 3
        with pytest.raises(profile_versions.ProfileRollback) as err:
            load_library(older, older_keys)
        load_library(newer, newer_keys)  # the same version again is no rollback
    message = str(err.value)
    assert "version 2" in message and "version 3" in message and "rack-7" in message
    with signing.trusting("rack-8", development=False):  # another station keeps its own record
        load_library(older, older_keys)


def test_a_generated_adb_key_is_private_to_its_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from phonebench.drivers.adb import AdbPhone

    monkeypatch.setenv("HOME", str(tmp_path))
    old = os.umask(0o022)  # the usual umask: what adb_shell's keygen leaves the private key at
    try:
        AdbPhone("127.0.0.1:1", name="p1")._load_signer()
    finally:
        os.umask(old)
    key = tmp_path / ".android" / "adbkey"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert (tmp_path / ".android" / "adbkey.pub").is_file()
