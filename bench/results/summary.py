"""The end-of-run summary printed by `bench run` and `make run`: the claims x phones grid first,
then what failed, the counts and where the detail is. `bench run -v` adds every test and verdict
(the report holds all of it either way)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import display
from ..specs.claims import NOT_MEASURED, ClaimsGrid, claims_grid
from phonebench.core.verdict import GOOD_OUTCOMES, TestOutcome, Verdict, verdicts_of

OUTCOME_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}
CELL_WIDTH = 14


def verdict_text(v: Verdict) -> str:
    """One verdict in one line: outcome, check, what was judged against what, evidence."""
    return f"{v.outcome.value}: {display.check_name(v)} {display.value_text(v)} [{display.evidence_text(v)}]"


def grid_lines(grid: ClaimsGrid) -> list[str]:
    """The claims x phones grid: a row per claim with each phone's outcome, and under it, per phone,
    the check that decided it, its evidence and its lab time."""
    title = "claims (- not measured; * partly the phone's word)"
    name_width = max([len(f"{r.claim.number:>2} {r.claim.name}") for r in grid.rows] + [len(title)]) + 2
    lines = [(title.ljust(name_width)
              + "".join(p[:CELL_WIDTH - 1].ljust(CELL_WIDTH) for p in grid.phones)).rstrip()]
    for row in grid.rows:
        head = f"{row.claim.number:>2} {row.claim.name}".ljust(name_width)
        lines.append(head + "".join(_mark(c.outcome, c.qualifier).ljust(CELL_WIDTH) for c in row.cells.values()).rstrip())
        for phone, cell in row.cells.items():
            if not cell.verdicts:
                continue
            v = cell.decisive
            lab = f", lab time {display.duration_text(cell.lab_time_s)}" if cell.lab_time_s is not None else ""
            more = f", {len(cell.verdicts)} checks" if len(cell.verdicts) > 1 else ""
            partly = f"; {cell.qualifier}" if cell.qualifier else ""
            lines.append(f"     {phone}: {display.check_name(v)} {display.value_text(v)} "
                         f"[{cell.evidence}{more}{partly}{lab}]")
    return lines


def _mark(outcome: str, qualifier: str = "") -> str:
    """A grid cell: a passing claim partly resting on the phone's word is "pass*" (the line under
    the row says how much), never a plain pass."""
    if outcome == NOT_MEASURED:
        return "-"
    return outcome.upper() if outcome not in GOOD_OUTCOMES else f"{outcome}*" if qualifier else outcome


def summary_lines(data: dict[str, Any], quiet: bool = False, verbose: bool = False) -> list[str]:
    station = data.get("station") or {}
    seed = f", emulated noise seed {station['seed']} (replay: bench run --seed {station['seed']})" \
        if station.get("seed") is not None else ""
    lines = [f"run {data['run_id']} on station {station.get('name', '?')} ({data['status']}){seed}"]
    for name, ident in data["duts"].items():
        if "error" in ident:
            lines.append(f"  DUT {name} @ {ident.get('address')}: {ident['error'].splitlines()[0]}")
        elif verbose:
            lines.append(f"  DUT {name}: serial {ident.get('serial') or '?'} {ident.get('soc_manufacturer') or ''} "
                         f"{ident.get('soc_model') or ''} microcode {ident.get('microcode') or '-'}")
    if verbose:
        for role, inst in data["instruments"].items():
            ident = inst.get("identity") or {}
            lines.append(f"  {role}: {ident.get('manufacturer', '?')} {ident.get('model', '?')} @ {inst['address']}")
    lines.append("")
    lines += grid_lines(claims_grid(data))
    lines.append("")
    lines += _test_lines(data, failed_only=not verbose)
    for problem in data.get("problems", []):
        lines.append(f"  problem: {problem.splitlines()[0][:300]}")
    lines.extend(lab_time_lines(data))
    s = data["summary"]
    lines.append(" ".join(f"{k}={s[k]}" for k in ("passed", "failed", "error", "skipped", "verdicts_failed") if k in s))
    return lines


def _test_lines(data: dict[str, Any], failed_only: bool) -> list[str]:
    lines = []
    for test in data["tests"]:
        bad = TestOutcome(test["outcome"]).is_bad
        if failed_only and not bad:
            continue
        mark = OUTCOME_MARK.get(test["outcome"], test["outcome"])
        lab = f"  ({test['lab_time_s'] / 60:.1f} lab min)" if test.get("lab_time_s") else ""
        lines.append(f"  {mark:5} {test['nodeid']}{lab}")
        for v in verdicts_of(test):
            if not failed_only or not v.outcome.is_good:
                lines.append(f"          {verdict_text(v)}")
                if failed_only and v.explanation:  # what went wrong, in the judge's and the check's words
                    lines.append(f"            {display.prose(v.explanation)[:300]}")
        if (bad or test["outcome"] == "skipped") and test["message"] and not (failed_only and test["verdicts"]):
            lines.append(f"          {test['message'].splitlines()[0][:200]}")
    if failed_only:
        lines.insert(0, "what failed:" if lines else "nothing failed")
    return lines + [""]


def lab_time_lines(data: dict[str, Any]) -> list[str]:
    """Station-clock minutes per phone, and per claim on each phone (a study feeding several claims
    counts for each of them)."""
    from . import labtime

    lines = []
    for dut, seconds in (data.get("lab_time_s") or {}).items():
        claims = labtime.per_claim(data, dut)
        by_claim = ", ".join(f"{c}: {s / 60:.1f}" for c, s in sorted(claims.items()))
        lines.append(f"  lab time {dut}: {labtime.minutes(seconds)}" + (f" (per claim, min: {by_claim})"
                                                                        if by_claim else ""))
    return lines


def print_summary(data: dict[str, Any], results_path: Path, quiet: bool = False, verbose: bool = False) -> None:
    print("\n".join(summary_lines(data, quiet, verbose)))
    print(f"results: {results_path}")
