"""The project's fault catalogue, part 2: process faults. Disk full and read-only folders, kill -9
and Ctrl-C, locked, corrupt and shared stores, concurrent runs, reused run ids, and a seeded
crash-consistency check of results.json against the store. Each case asserts what the user sees
(message and exit code) and that every measurement taken is kept or recoverable with the command
the message names (docs/faults.md)."""
from __future__ import annotations

import errno
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from phonebench.bench.cli import main
from phonebench.core import files
from phonebench.core.exits import RESULTS_NOT_WRITTEN
from phonebench.core.records import TestRecord
from phonebench.core.judge import compare
from phonebench.bench.results.run_record import RESCUE_ENV, RunIdTaken, RunRecorder, claim_run_dir
from phonebench.bench.store import StoreSink, open_store
from phonebench.bench.store import db
from store_helpers import run_and_kill

REPO = Path(__file__).resolve().parent.parent


def _test(i: int) -> TestRecord:
    return TestRecord(f"suites/t.py::t{i}[bay1]", "bay1", "passed", 0.1,
                      verdicts=[compare("power_mean", 4.0 + i / 100, "W", 4.2)])


def _stored(url: str, run_id: str) -> list[str]:
    with open_store(url) as store:
        return [t["nodeid"] for t in store.load_run(run_id).data["tests"]]


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, good_writes: int, disk: Path) -> None:
    """Writes under `disk` fail with ENOSPC after `good_writes` succeeded (an LD_PRELOAD-free full disk)."""
    import phonebench.bench.results.run_record as results

    real, calls = results.write_atomically, {"n": 0}

    def writer(path: Path, data: Any) -> None:
        calls["n"] += Path(path).is_relative_to(disk)
        if calls["n"] > good_writes and Path(path).is_relative_to(disk):
            raise files.describe_os_error(Path(path), OSError(errno.ENOSPC, "No space left on device"))
        real(path, data)

    monkeypatch.setattr(results, "write_atomically", writer)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted after the test; skipped where mounting is not permitted."""
    yield from _mounted(tmp_path, "1m")


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 96 KiB tmpfs: less than one phone's identity and numerics suites write into the run folder."""
    yield from _mounted(tmp_path, "96k")


def _mounted(tmp_path: Path, size: str) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode(errors='replace').strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# --- disk full ------------------------------------------------------------------------------
def test_disk_full_mid_run_keeps_every_test_in_the_store_and_rescues_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv(RESCUE_ENV, str(tmp_path / "rescue"))
    (tmp_path / "rescue").mkdir()
    _disk_full_after(monkeypatch, good_writes=3, disk=tmp_path / "reports")  # start + 2 tests, then full
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r1", sinks=[StoreSink(url, tmp_path / "reports")])
    for i in range(4):
        rec.add_test(_test(i))
    rec.finish()
    assert rec.write_failed is not None and rec.write_failed.disk_full
    assert len(json.loads(rec.results_path.read_text())["tests"]) == rec.tests_on_disk == 2
    rescued = json.loads(rec.rescued_to.read_text())
    assert len(rescued["tests"]) == 4 and rescued["status"] == "incomplete"
    assert _stored(url, "r1") == [t["nodeid"] for t in rescued["tests"]]
    assert "disk full" in caplog.text and "the last complete results.json has 2 of 3 tests" in caplog.text
    assert f"copy it to {rec.results_path}" in caplog.text and "bench store-import" in caplog.text
    assert "results.json is complete" not in caplog.text


def test_disk_full_rescue_is_recoverable_with_store_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(RESCUE_ENV, str(tmp_path))
    _disk_full_after(monkeypatch, good_writes=2, disk=tmp_path / "reports")
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r2")
    for i in range(3):
        rec.add_test(_test(i))
    rec.finish()
    monkeypatch.undo()
    rec.results_path.write_text(rec.rescued_to.read_text())  # what the message says to do
    url = f"sqlite:///{tmp_path / 'later.sqlite'}"
    assert main(["store-import", "--database", url, str(rec.run_dir)]) == 0
    assert "r2: 3 tests (3 new)" in capsys.readouterr().out
    assert len(_stored(url, "r2")) == 3


def test_no_folder_takes_the_record_it_is_logged_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    import phonebench.bench.results.run_record as results

    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r3")
    monkeypatch.setattr(results, "write_atomically", lambda path, data: (_ for _ in ()).throw(
        files.describe_os_error(Path(path), OSError(errno.ENOSPC, "No space left on device"))))
    rec.add_test(_test(0))
    rec.finish()
    assert rec.rescued_to is None and '"nodeid": "suites/t.py::t0[bay1]"' in caplog.text


def test_disk_full_raw_data_stops_the_run_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    import phonebench.bench.results.run_record as results

    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r4")
    monkeypatch.setattr(results, "write_atomically", lambda path, data: (_ for _ in ()).throw(
        files.describe_os_error(Path(path), OSError(errno.ENOSPC, "No space left on device"))))
    with pytest.raises(files.WriteFailed, match=r"raw/t1/trace.npz: disk full .*\n  hint: free space"):
        rec.save_raw("t1", "trace", np.zeros(4))
    assert rec.write_failed is not None


def test_too_little_free_space_refuses_the_run_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(files.MIN_FREE_ENV, str(10**9))
    assert main(["run", "--results-dir", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err
    assert f"results folder {tmp_path / 'reports'}:" in err and "MiB free, a run needs at least" in err
    assert "PHONEBENCH_MIN_FREE_MB" in err and not (tmp_path / "reports").exists()


def test_read_only_results_folder_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        assert main(["run", "--results-dir", str(folder)]) == 2
        err = capsys.readouterr().err
        assert f"results folder {folder}: {folder} is not writable" in err and "--results-dir" in err
        with pytest.raises(files.WriteFailed, match=r"cannot write \(Read-only file system\)"):
            RunRecorder(folder, {"name": "s"}, run_id="x")
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
def test_bench_run_on_a_full_tmpfs_stops_cleanly_and_keeps_every_test(small_tmpfs: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tmpfs = small_tmpfs
    env = {**os.environ, files.MIN_FREE_ENV: "0", RESCUE_ENV: str(tmp_path),
           "PHONEBENCH_DATABASE": f"sqlite:///{tmp_path / 'store.sqlite'}"}  # the run folder is what fills
    station = tmp_path / "one-phone.toml"  # one station, one recorder: the path that rescues what it measured
    station.write_text('[emulated]\n[[emulated.phone]]\nserial = "EMU0001"\nnpu_persona = "SM8650-MP"\n')
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--station", str(station), "--results-dir",
                           str(tmpfs), "--run-id", "full", "-q", "-k", "identity or numerics"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == RESULTS_NOT_WRITTEN, out
    assert "Traceback" not in out and "disk full" in out
    rescue, results = tmp_path / "phonebench-full-results.json", tmpfs / "full" / "results.json"
    record = json.loads((rescue if rescue.exists() else results).read_text())
    shown = [line for line in done.stdout.splitlines() if line.startswith(("passed=", "failed="))]
    assert shown and f"passed={record['summary'].get('passed', 0)}" in shown[-1]
    if f"{results} has all {len(record['tests'])} tests" not in done.stderr:  # results.json fell behind:
        assert f"all {len(record['tests'])} are in {rescue}" in done.stderr  # the rescue copy and the way
        assert f"bench store-import {tmpfs / 'full'}" in done.stderr  # back are named
    assert "junit.xml not written" in out or (tmpfs / "full" / "junit.xml").exists()


@pytest.mark.slow
def test_a_bays_run_on_a_full_disk_rescues_one_record_named_by_its_run(small_tmpfs: Path, tmp_path: Path) -> None:
    """The default multi-bay path on a full results disk: exit 8, one rescued record named by the
    run id (never by a bay, which the next run would overwrite), named in the parent's one line."""
    env = {**os.environ, files.MIN_FREE_ENV: "0", RESCUE_ENV: str(tmp_path),
           "PHONEBENCH_DATABASE": f"sqlite:///{tmp_path / 'store.sqlite'}"}
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--bays", "2", "--results-dir",
                           str(small_tmpfs), "--run-id", "fullbays", "-q", "-k", "identity or numerics"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == RESULTS_NOT_WRITTEN, out
    assert "Traceback" not in out
    rescued = sorted(p.name for p in tmp_path.glob("phonebench-*-results.json"))
    assert rescued == ["phonebench-fullbays-results.json"], rescued
    record = json.loads((tmp_path / rescued[0]).read_text())
    assert str(tmp_path / rescued[0]) in done.stderr and f"bench store-import {small_tmpfs / 'fullbays'}" in done.stderr
    assert {t["dut"] for t in record["tests"]} == {"EMU0001", "EMU0002"}


# --- run ids --------------------------------------------------------------------------------
def test_reused_run_id_is_refused_and_the_first_run_is_untouched(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    first = RunRecorder(tmp_path, {"name": "s"}, run_id="nightly")
    first.add_test(_test(0))
    first.finish()
    before = first.results_path.read_text()
    assert main(["run", "--results-dir", str(tmp_path), "--run-id", "nightly"]) == 2
    err = capsys.readouterr().err
    assert "run id 'nightly' is already used" in err and "choose another --run-id" in err
    with pytest.raises(RunIdTaken):
        RunRecorder(tmp_path, {"name": "s"}, run_id="nightly")
    assert first.results_path.read_text() == before


@pytest.mark.parametrize("run_id", ["../..", "/tmp/x", "a;rm -rf ~"])
def test_cli_refuses_a_run_id_that_escapes_the_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                              run_id: str) -> None:
    assert main(["run", "--results-dir", str(tmp_path / "r"), "--run-id", run_id]) == 2
    assert "is not a plain name" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_store_refuses_a_run_id_another_recorder_owns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    with open_store(url) as store:
        store.sync_run({"schema": "phonebench.results/1", "run_id": "shared", "station": {"name": "s"},
                        "tests": [_test(9).to_dict()], "summary": {}}, recorder=("other-host", 1))
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="shared", sinks=[StoreSink(url, tmp_path)])
    rec.add_test(_test(0))
    assert any("already has a run 'shared'" in e and "never reused" in e for e in rec.sink_errors)
    assert _stored(url, "shared") == ["suites/t.py::t9[bay1]"]  # nothing mixed in
    assert len(json.loads(rec.results_path.read_text())["tests"]) == 1
    assert main(["store-import", "--database", url, str(rec.run_dir)]) == 1  # nor by importing it
    assert _stored(url, "shared") == ["suites/t.py::t9[bay1]"]


def test_concurrent_claims_of_one_run_id_let_exactly_one_win(tmp_path: Path) -> None:
    outcomes: list[str] = []

    def claim() -> None:
        try:
            claim_run_dir(tmp_path, "same", reuse_empty=False)  # as `bench run` claims it
            outcomes.append("won")
        except RunIdTaken:
            outcomes.append("refused")

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("won") == 1 and outcomes.count("refused") == 7


def test_generated_run_ids_never_collide(tmp_path: Path) -> None:
    dirs = {claim_run_dir(tmp_path, None) for _ in range(200)}
    assert len(dirs) == 200


# --- the store: locked, corrupt, killed -----------------------------------------------------
def test_locked_store_keeps_results_json_whole_and_catches_up_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(db, "SQLITE_LOCK_TIMEOUT_S", 0.2)
    path = tmp_path / "store.sqlite"
    url = f"sqlite:///{path}"
    open_store(url).close()
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r1", sinks=[StoreSink(url, tmp_path / "reports")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    rec.add_test(_test(0))
    rec.add_test(_test(1))
    assert "is locked by another process" in caplog.text and "bench store-import" in caplog.text
    assert "results.json is complete" in caplog.text
    holder.execute("ROLLBACK")
    holder.close()
    rec.finish()  # the last event retries at once
    assert len(_stored(url, "r1")) == 2 == len(json.loads(rec.results_path.read_text())["tests"])


def test_store_still_locked_at_the_end_is_recoverable_with_store_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "SQLITE_LOCK_TIMEOUT_S", 0.2)
    path = tmp_path / "store.sqlite"
    url = f"sqlite:///{path}"
    open_store(url).close()
    sink = StoreSink(url, tmp_path / "reports")
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r1", sinks=[sink])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    rec.add_test(_test(0))
    rec.finish()
    sink.close()
    assert sink.stored_tests < 1  # what `bench run` turns into exit 9 with the command to run
    holder.execute("ROLLBACK")
    holder.close()
    assert main(["store-import", "--database", url, str(rec.run_dir)]) == 0
    assert len(_stored(url, "r1")) == 1


def test_corrupt_store_never_costs_a_measurement(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "store.sqlite"
    bad.write_bytes(b"not a database" * 100)
    rec = RunRecorder(tmp_path / "reports", {"name": "s"}, run_id="r1", sinks=[StoreSink(str(bad), tmp_path)])
    rec.add_test(_test(0))
    rec.finish()
    assert "is not an SQLite database" in caplog.text and "this one was not changed" in caplog.text
    assert bad.read_bytes() == b"not a database" * 100
    assert len(json.loads(rec.results_path.read_text())["tests"]) == 1


def test_kill_9_keeps_what_was_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    run_and_kill(url, tmp_path)
    data = json.loads((tmp_path / "killed" / "results.json").read_text())
    assert len(data["tests"]) == 3 and len(_stored(url, "killed")) == 3
    with open_store(url) as store:
        assert store.load_run("killed").data["status"] == "incomplete"


def test_ctrl_c_marks_the_run_incomplete_and_keeps_its_tests(tmp_path: Path) -> None:
    rec = RunRecorder(tmp_path, {"name": "s"}, run_id="r1")
    rec.add_test(_test(0))
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        rec.finish("incomplete")  # what the plugin does when pytest reports INTERRUPTED
    data = json.loads(rec.results_path.read_text())
    assert data["status"] == "incomplete" and len(data["tests"]) == 1


def test_junit_xml_that_cannot_be_written_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "blocker").write_text("a file where junit.xml's folder should be")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",  # the plugin: an entry point
                           "--rootdir", str(tmp_path), "--junitxml", str(tmp_path / "blocker" / "junit.xml"),
                           str(tmp_path / "test_one.py")], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "INTERNALERROR" not in done.stdout
    assert "phonebench: junit.xml not written" in done.stdout and "blocker/junit.xml" in done.stdout


# --- crash consistency ----------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import os, signal, sys
    import phonebench.bench.results.run_record as results
    from phonebench.core.records import TestRecord
    from phonebench.core.judge import compare
    from phonebench.bench.store import StoreSink
    from phonebench.bench.store.store import Store
    url, folder, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    count = {"n": 0}
    def point():
        count["n"] += 1
        if count["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    def wrap(fn):
        def inner(*a, **k):
            point()
            out = fn(*a, **k)
            point()
            return out
        return inner
    results.write_atomically = wrap(results.write_atomically)
    Store.sync_run = wrap(Store.sync_run)
    add = Store._add_test
    def add_test(self, *a, **k):  # inside the store's transaction, before its commit
        out = add(self, *a, **k)
        point()
        return out
    Store._add_test = add_test
    rec = results.RunRecorder(folder, {"name": "rack"}, run_id="crash", sinks=[StoreSink(url, folder)])
    for i in range(6):
        rec.add_test(TestRecord(f"t::{i}", "bay1", "passed", 0.1, verdicts=[compare("power_mean", 4.0, "W", 4.2)]))
    rec.finish()
    print("finished", count["n"])
""")


@pytest.mark.slow
def test_killed_at_random_points_results_json_and_store_agree_or_store_import_reconciles(tmp_path: Path) -> None:
    # The child passes 38 points (before and after each results.json write and store sync, and
    # inside each store transaction); 8 of them, seeded, so every run kills at the same places.
    rng = random.Random(20261201)
    points = sorted(rng.sample(range(1, 39), 8))
    for kill_at in points:
        folder = tmp_path / f"k{kill_at}"
        url = f"sqlite:///{folder / 'store.sqlite'}"
        done = subprocess.run([sys.executable, "-c", CHILD, url, str(folder), str(kill_at)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == -signal.SIGKILL, f"kill at {kill_at}: {done.stderr[-500:]}"
        results = folder / "crash" / "results.json"
        on_disk = [t["nodeid"] for t in json.loads(results.read_text())["tests"]] if results.exists() else []
        try:
            stored = _stored(url, "crash")
        except db.StoreError:
            stored = []
        assert stored == on_disk[:len(stored)], f"kill at {kill_at}: the store is not a prefix of results.json"
        assert len(on_disk) - len(stored) <= 1, f"kill at {kill_at}: the store is more than one test behind"
        if results.exists():
            assert main(["store-import", "--database", url, str(folder / "crash")]) == 0
            assert _stored(url, "crash") == on_disk, f"kill at {kill_at}: store-import did not reconcile"


@pytest.mark.slow
def test_bench_run_with_a_corrupt_store_exits_9_naming_the_import(tmp_path: Path) -> None:
    from phonebench.core.exits import STORE_BEHIND

    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(b"\x00garbage" * 64)
    env = {**os.environ, db.ENV_VAR: str(bad), files.MIN_FREE_ENV: "0"}
    done = subprocess.run([sys.executable, "-m", "phonebench.bench.cli", "run", "--results-dir", str(tmp_path / "reports"),
                           "--run-id", "r9", "-q", "-k", "identity"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == STORE_BEHIND, done.stdout + done.stderr
    assert f"add the rest with `bench store-import {tmp_path / 'reports' / 'r9'}`" in done.stderr
    data = json.loads((tmp_path / "reports" / "r9" / "results.json").read_text())
    url = f"sqlite:///{tmp_path / 'fixed.sqlite'}"
    assert main(["store-import", "--database", url, str(tmp_path / "reports" / "r9")]) == 0
    assert len(_stored(url, "r9")) == len(data["tests"]) > 0
