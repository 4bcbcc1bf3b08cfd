"""How long the project's own checks take, and where the time goes.

Runs `make test` (or `make test-fast` with --fast) as a fresh clone would after its one-time
installs, with tests/costs_plugin.py recording every test's and every fixture's seconds, and prints:
the command's wall time against its target, the machine's load while it ran, the pytest sessions'
wall times, the costs grouped by what they do (whole bench runs, emulated stations, llama.cpp,
PostgreSQL clusters, Chromium, hypothesis, the rest), the costliest tests and fixtures, and the
same figures of the recorded baseline (the suite before it ran side by side) beside them, with the
tests compared by name.

    python benchmarks/bench_test_suite.py                # make test, against the baseline
    python benchmarks/bench_test_suite.py --fast         # make test-fast
    python benchmarks/bench_test_suite.py --from DIR     # read costs recorded earlier, run nothing
    python benchmarks/bench_test_suite.py --save FILE    # also keep this run's summary (a new baseline)

Exits 1 when the wall time misses its target (20 min for make test on a quiet machine, 35 on a
shared one, 45 s for make test-fast) or a baseline test is missing without being listed as merged."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINES = REPO / "benchmarks" / "data"
TARGET_S = {"full": (20 * 60, 35 * 60), "fast": (45, 45)}  # (quiet machine, shared machine)
QUIET_LOAD = 0.5  # the 1-minute load average below which the machine counts as quiet before the run

# Tests merged or renamed on purpose (old node id -> new node id, or "" when folded into another test).
MERGED: dict[str, str] = {
    # the line's outcome module is its disposition now (bench/procedures/acceptance/disposition.py)
    **{f"tests/test_acceptance_judge.py::{name}": f"tests/test_acceptance_disposition.py::{name}" for name in (
        "test_a_failing_verdict_fails_the_unit_in_plain_words",
        "test_a_required_check_never_proven_fails_and_a_killed_run_is_incomplete",
        "test_a_retest_replaces_only_the_retested_results",
        "test_a_run_stopped_at_a_retestable_failure_retests_it_and_what_it_did_not_reach",
        "test_an_assertion_fails_the_unit_but_lost_equipment_makes_it_incomplete",
        "test_every_required_check_proven_is_a_pass",
        "test_retest_policy_retests_only_retestable_failures",
        "test_the_check_a_test_proves_is_its_declaration_not_its_name",
        "test_the_operator_sees_one_large_word_and_the_reason",
    )},
    # one stop line, now for the fleet and for one bay
    "tests/test_first_contact.py::test_no_way_to_reach_a_phone_stops_the_run_once_before_its_tests":
        "tests/test_first_contact.py::test_no_way_to_reach_a_phone_stops_the_run_once_before_its_tests[fleet]",
    # the page's POSTs need a signed-in session now, not its page token
    "tests/test_operator_page.py::test_the_page_refuses_foreign_hosts_and_posts_without_its_token":
        "tests/test_operator_page.py::test_the_page_refuses_foreign_hosts_and_posts_without_a_session",
}

# What a test's time is spent on, decided in this order from the processes it started, its fixtures
# and its module. The first rule that matches names the group.
GROUPS: list[tuple[str, str]] = [
    ("PostgreSQL clusters", r"postgres|\bpg\b|scratch_pg|initdb"),
    ("Chromium (report and operator page)", r"browser|chromium|selenium|report_browser|operator_page"),
    ("llama.cpp", r"llama"),
    ("whole bench runs (bench run, plain pytest, the line)", r"bench run|bench line|pytest|bench_run|line_run"),
    ("emulated stations (bench emulate, in-process)", r"emulate|station|fleet|bays?\b|adbd|emulated|\brig\b|\bline\b|\bfixture\b"),
    ("hypothesis", r"<hypothesis>"),
]
OTHER = "the rest (unit tests, protocol servers)"


def run_suite(tier: str, folder: Path) -> dict[str, Any]:
    target = "test" if tier == "full" else "test-fast"
    before = os.getloadavg()
    start = time.perf_counter()
    done = subprocess.run(["make", "-s", target], cwd=REPO, env={**os.environ, "PHONEBENCH_TEST_COSTS": str(folder)},
                          stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return {"command": f"make {target}", "wall_s": wall, "exit": done.returncode,
            "load_before": before[0], "load_after": os.getloadavg()[0], "cores": os.cpu_count()}


def read_costs(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(folder.glob("costs-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def group_of(test: str, fixtures: list[str], children: list[str]) -> str:
    text = " ".join([test, *fixtures, *children]).lower()
    return next((name for name, pattern in GROUPS if re.search(pattern, text)), OTHER)


def without_group(nodeid: str) -> str:
    """The node id without the `@group` xdist's loadgroup appends; an `@` inside a parameter id
    (`[change1-@1 to @4]`) is the test's own name."""
    head, sep, tail = nodeid.rpartition("@")
    return head if sep and re.fullmatch(r"[\w.-]+", tail) else nodeid


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    children: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if "test" in row:
            row["test"] = without_group(row["test"])
    for row in rows:
        if row["kind"] == "child":
            argv = [Path(a).name if i == 0 else a for i, a in enumerate(row["argv"])]
            children[row["test"]].append(" ".join(argv).replace("-m phonebench.bench.cli", "bench"))
    tests: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["kind"] == "test":
            seconds = row.get("setup", 0.0) + row.get("call", 0.0) + row.get("teardown", 0.0)
            tests[row["test"]] = {"seconds": seconds, "outcome": row["outcome"], "worker": row["worker"],
                                  "group": group_of(row["test"], row["fixtures"], children.get(row["test"], []))}
    groups: dict[str, float] = defaultdict(float)
    modules: dict[str, float] = defaultdict(float)
    for name, test in tests.items():
        groups[test["group"]] += test["seconds"]
        modules[name.split("::")[0]] += test["seconds"]
    fixtures: dict[str, float] = defaultdict(float)
    for row in rows:
        if row["kind"] == "fixture" and row["scope"] != "function" or row["kind"] == "fixture" and row["seconds"] > 1:
            fixtures[f"{row['name']} ({row['scope']})"] += row["seconds"]
    sessions = [r for r in rows if r["kind"] == "session" and (r["worker"] == "main")]
    outcomes: dict[str, int] = defaultdict(int)
    for test in tests.values():
        outcomes[test["outcome"]] += 1
    return {"tests": {k: {"seconds": round(v["seconds"], 3), "outcome": v["outcome"], "group": v["group"]}
                      for k, v in sorted(tests.items())},
            "groups": dict(groups), "modules": dict(modules), "fixtures": dict(fixtures), "outcomes": dict(outcomes),
            "sessions_s": [round(s["end"] - s["start"], 1) for s in sessions],
            "test_seconds": sum(t["seconds"] for t in tests.values())}


def write_order(modules: dict[str, float]) -> None:
    """Merge this run's module costs into tests/module_seconds.json (modules not run keep theirs)."""
    path = REPO / "tests" / "module_seconds.json"
    known = json.loads(path.read_text()) if path.is_file() else {}
    known.update({Path(m).stem: round(s, 1) for m, s in modules.items()})
    path.write_text(json.dumps(dict(sorted(known.items(), key=lambda kv: -kv[1])), indent=1) + "\n")
    print(f"module order written: {path} ({len(known)} modules)")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:5.1f} min" if seconds >= 90 else f"{seconds:5.1f} s"


def show(now: dict[str, Any], base: dict[str, Any] | None) -> int:
    run, summary = now["run"], now["summary"]
    tier = now["tier"]
    quiet = run["load_before"] < QUIET_LOAD
    target = TARGET_S[tier][0 if quiet else 1]
    print(f"\n{run['command']}: {minutes(run['wall_s'])} wall on {run['cores']} cores "
          f"(load {run['load_before']:.2f} before, {run['load_after']:.2f} after: "
          f"{'a quiet' if quiet else 'a shared'} machine); target {minutes(target)}: "
          f"{'PASS' if run['wall_s'] <= target else 'MISS'}; exit {run['exit']}")
    if base is not None:
        b = base["run"]
        print(f"  baseline ({base.get('label', '?')}): {b['command']} {minutes(b['wall_s'])} "
              f"(load {b['load_before']:.2f} before) -> now {minutes(run['wall_s'])}: "
              f"{b['wall_s'] / run['wall_s']:.2f}x faster")
    print(f"  pytest sessions: {', '.join(minutes(s) for s in summary['sessions_s'])}; "
          f"test time summed over workers {minutes(summary['test_seconds'])}; outcomes {summary['outcomes']}")

    print(f"\n{'where the time goes (test seconds, summed)':58} {'now':>10} {'baseline':>10}")
    names = sorted(set(summary["groups"]) | set(base["summary"]["groups"] if base else ()),
                   key=lambda g: -summary["groups"].get(g, 0.0))
    for name in names:
        old = base["summary"]["groups"].get(name, 0.0) if base else None
        print(f"  {name:56} {minutes(summary['groups'].get(name, 0.0)):>10} "
              f"{minutes(old) if old is not None else '':>10}")

    print("\ncostliest modules (summed test seconds):")
    for module, seconds in sorted(summary["modules"].items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {minutes(seconds):>10}  {module}")
    print("\ncostliest tests:")
    for name, test in sorted(summary["tests"].items(), key=lambda kv: -kv[1]["seconds"])[:15]:
        print(f"  {minutes(test['seconds']):>10}  {name}  [{test['group']}]")
    print("\ncostliest shared fixtures (set-up seconds):")
    for name, seconds in sorted(summary["fixtures"].items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {minutes(seconds):>10}  {name}")
    return 0 if run["wall_s"] <= target and run["exit"] == 0 else 1


def compare_names(now: dict[str, Any], base: dict[str, Any]) -> int:
    old, new = set(base["summary"]["tests"]), set(now["summary"]["tests"])
    missing = sorted(old - new - set(MERGED))
    added = sorted(new - old)
    passed_before = {k for k, v in base["summary"]["tests"].items() if v["outcome"] == "passed"}
    not_passing = sorted(k for k in passed_before & new if now["summary"]["tests"][k]["outcome"] != "passed")
    print(f"\ntests by name: {len(old)} in the baseline, {len(new)} now; {len(missing)} missing, "
          f"{len(added)} added, {len(set(MERGED) & old)} merged on purpose, "
          f"{len(not_passing)} passed before and not now")
    for name in missing[:20]:
        print(f"  missing: {name}")
    for name in not_passing[:20]:
        print(f"  not passing now: {name}")
    for old_name, new_name in sorted(MERGED.items()):
        print(f"  merged: {old_name} -> {new_name or '(folded into another test)'}")
    return 1 if missing or not_passing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="time make test-fast instead of make test")
    parser.add_argument("--from", dest="source", type=Path, help="a costs folder recorded earlier: run nothing")
    parser.add_argument("--run-info", type=Path, help="with --from: the run's JSON (wall, load) if kept")
    parser.add_argument("--save", type=Path, help="write this run's summary here (a baseline for later runs)")
    parser.add_argument("--label", default=None, help="what this run is, kept with --save")
    parser.add_argument("--baseline", type=Path, default=None, help="the summary to compare with")
    parser.add_argument("--write-order", action="store_true",
                        help="write each module's measured seconds to tests/module_seconds.json (the order "
                             "make test starts modules in: costliest first)")
    args = parser.parse_args()
    tier = "fast" if args.fast else "full"
    baseline = args.baseline or BASELINES / f"test-suite-{tier}-baseline.json"
    with tempfile.TemporaryDirectory(prefix="phonebench-costs-") as scratch:
        if args.source is not None:
            folder = args.source
            run = json.loads(args.run_info.read_text()) if args.run_info else \
                {"command": "(recorded)", "wall_s": float("nan"), "exit": 0, "load_before": float("nan"),
                 "load_after": float("nan"), "cores": os.cpu_count()}
        else:
            folder = Path(scratch)
            run = run_suite(tier, folder)
        now = {"tier": tier, "label": args.label, "run": run, "summary": summarize(read_costs(folder))}
    base = json.loads(baseline.read_text()) if baseline.is_file() else None
    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    if args.write_order:
        write_order(now["summary"]["modules"])
    code = show(now, base)
    if base is not None and base["summary"]["tests"]:
        code |= compare_names(now, base)
    else:
        print(f"\n(no baseline at {baseline})")
    return code


if __name__ == "__main__":
    sys.exit(main())
