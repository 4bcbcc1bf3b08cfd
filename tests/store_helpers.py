"""A recording process killed -9 mid-run: the store's acceptance scenario, shared by the SQLite
and PostgreSQL tests."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

KILLED_RUN = textwrap.dedent("""
    import sys, time
    from phonebench.core.records import TestRecord
    from phonebench.bench.results.run_record import RunRecorder
    from phonebench.bench.store import StoreSink
    from phonebench.core.judge import compare
    url, folder = sys.argv[1], sys.argv[2]
    rec = RunRecorder(folder, {"name": "rack"}, run_id="killed", sinks=[StoreSink(url, folder)])
    rec.add_dut("bay1", {"name": "bay1", "serial": "S1", "soc_model": "SM8650", "microcode": "mc"})
    for i in range(3):
        rec.add_test(TestRecord(f"t::{i}", "bay1", "passed", 0.1, verdicts=[compare("power_mean", 4.0, "W", 4.2)]))
    assert not rec.sink_errors, rec.sink_errors
    print("ready", flush=True)
    time.sleep(120)  # killed here, mid-run
""")


def run_and_kill(url: str, folder: Path) -> None:
    """Record three tests into `url` from another process, then kill it -9."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, url, str(folder)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
