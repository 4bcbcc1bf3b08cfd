"""Does the suite still bite? Each planted fault is a deliberate small bug in a core path (the
judge's rule order, a comparator, the evidence rule, a unit conversion, the store's sync, the Holm
correction, the lock, ...). For each one this script copies the checkout to a scratch folder,
plants the fault there (the original text must occur exactly once: a fault that no longer applies
is reported, not skipped), and runs the tier that should catch it against the copy: the fast tier
(`make test-fast`'s selection, stopping at the first failure) unless the fault names the modules
whose job it is. A fault is caught when the tests fail; it escapes when they pass.

The copy is imported instead of the checkout by a folder of links in the copy's root,
`phonebench/<top folder>` -> the copy's folders, with the root first on PYTHONPATH (and where a
test sets PYTHONPATH to the checkout for a process it starts, that is the copy's root too):
Python's path finder comes before the editable install's finder, so the tests, every bench they
start and the emulated station all run the planted code.

    python benchmarks/planted_faults.py            # every fault
    python benchmarks/planted_faults.py --list     # what is planted where
    python benchmarks/planted_faults.py -k holm    # the faults whose name contains 'holm'

Prints one line per fault (caught / ESCAPED / no longer applies, the tests that caught it, the
seconds it took) and exits 1 unless every fault is caught."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOP_FOLDERS = ("core", "drivers", "emulation", "bench", "fixtures")
FAST_TIER = ("-m", "not slow and not alone")


@dataclass(frozen=True)
class Fault:
    name: str
    path: str  # in the checkout
    original: str  # must occur exactly once
    planted: str
    tests: tuple[str, ...] = ()  # the modules whose job it is (and a -k); empty: the fast tier

    def command(self, python: str) -> list[str]:
        selection = list(self.tests) if self.tests else ["tests", *FAST_TIER]
        return [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:phonebench",
                "-rfE", "-n", "2", "--dist", "loadfile", *selection]


FAULTS: tuple[Fault, ...] = (
    Fault("judge: rule order (contradiction after invalid)", "core/judge.py",
          "RULES: tuple[Rule, ...] = (guard_band, sequential_stop, invalid, outside_validity, contradiction,",
          "RULES: tuple[Rule, ...] = (guard_band, sequential_stop, outside_validity, contradiction, invalid,",
          tests=("tests/test_judge.py",)),
    Fault("judge: a comparator ('<=' as '<')", "core/verdict.py",
          'COMPARATORS = {"<=": operator.le,', 'COMPARATORS = {"<=": operator.lt,',
          tests=("tests/test_judge.py", "tests/test_stats.py")),
    Fault("judge: the guard band's FAIL side without the sampling error", "core/judge.py",
          "passes, fails = test(x + band, limit), not test(x - whole, limit)",
          "passes, fails = test(x + band, limit), not test(x - band, limit)",
          tests=("tests/test_uncertainty.py", "tests/test_judge.py")),
    Fault("judge: the evidence rule (a reported PASS stays a PASS)", "core/judge.py",
          "    if outcome is Outcome.PASS and verdict.evidence is Evidence.REPORTED:\n"
          "        return Ruling(Outcome.INFO,",
          "    if False:\n        return Ruling(Outcome.INFO,",
          tests=("tests/test_judge.py", "tests/test_check_shape.py")),
    Fault("unit conversion: a Fluke probe's Fahrenheit", "drivers/thermal_fluke.py",
          '"F": lambda v: (v - 32) * 5 / 9', '"F": lambda v: (v - 32) * 9 / 5',
          tests=("tests/test_thermal.py",)),
    Fault("unit conversion: voice latency seconds to milliseconds", "bench/checks/voice.py",
          'UNIT_SCALE = {"s": 1.0, "ms": 1e3,', 'UNIT_SCALE = {"s": 1.0, "ms": 1e2,',
          tests=("tests/test_sla_instruments.py", "-k", "unanswered or calibrated_fixture")),
    Fault("store: a run's sync stores it complete whatever it was", "bench/store/store.py",
          'run.status = data.get("status") or "running"', 'run.status = "complete"',
          tests=("tests/test_store.py", "tests/test_heal.py")),
    Fault("nightly: Holm's correction left out", "bench/results/compare.py",
          "running = max(running, min(1.0, (m - rank) * p_value))", "running = max(running, min(1.0, p_value))",
          tests=("tests/test_compare.py",)),
    Fault("lock: an instrument lock taken shared", "drivers/locks.py",
          "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", "fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)",
          tests=("tests/test_locks.py",)),
    Fault("stats: the Clopper-Pearson lower bound at the two-sided level", "bench/stats/verdicts.py",
          "float(sps.beta.ppf(alpha, successes, n - successes + 1))",
          "float(sps.beta.ppf(alpha / 2, successes, n - successes + 1))",
          tests=("tests/test_stats.py",)),
    Fault("stats: a proportion's n off by one", "bench/stats/verdicts.py",
          "    if n <= 0 or not 0 <= successes <= n:\n",
          "    n = n + 1\n    if n <= 0 or not 0 <= successes <= n:\n",
          tests=("tests/test_stats.py",)),
)


def scratch_copy(target: Path) -> None:
    """The checkout's tracked and new files (what `git ls-files` knows, nothing ignored) under target."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    links = target / "phonebench"  # the copy's root is on sys.path wherever a test puts the checkout there
    links.mkdir()
    for folder in TOP_FOLDERS:
        (links / folder).symlink_to(target / folder, target_is_directory=True)


def plant(root: Path, fault: Fault) -> str | None:
    """Plant the fault in the copy; the reason when it no longer applies."""
    path = root / fault.path
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    count = text.count(fault.original)
    if count != 1:
        return f"{fault.path}: the original text occurs {count} times (update the fault)"
    path.write_text(text.replace(fault.original, fault.planted), encoding="utf-8")
    return None


def run_fault(fault: Fault, python: str) -> tuple[str, str, float]:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="phonebench-planted-") as scratch:
        root = Path(scratch)
        scratch_copy(root)
        why = plant(root, fault)
        if why is not None:
            return "no longer applies", why, 0.0
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root),
                                                                          os.environ.get("PYTHONPATH")]))}
        env.pop("PHONEBENCH_TEST_COSTS", None)
        done = subprocess.run(fault.command(python), cwd=root, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    seconds = time.perf_counter() - start
    if done.returncode in (1, 2) and failed:  # 2: xdist's -x stops the session once one test failed
        return "caught", f"{failed[0]} ({last})", seconds
    if done.returncode == 0:
        return "ESCAPED", last, seconds
    return "ERRORED", f"exit {done.returncode}: {last} {done.stderr.strip()[-300:]}", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the faults and where they are planted")
    parser.add_argument("-k", default="", help="only the faults whose name contains this")
    args = parser.parse_args()
    faults = [f for f in FAULTS if args.k.lower() in f.name.lower()]
    if args.list:
        for f in faults:
            print(f"{f.name}\n    {f.path}: {f.original!r} -> {f.planted!r}\n    tier: {' '.join(f.tests) or 'fast'}")
        return 0
    python = sys.executable
    results = []
    for fault in faults:
        status, detail, seconds = run_fault(fault, python)
        results.append(status)
        print(f"{status:>17}  {fault.name}  [{seconds:.0f} s]\n{'':19}{detail}", flush=True)
    caught = results.count("caught")
    print(f"\n{caught} of {len(results)} planted faults caught")
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
