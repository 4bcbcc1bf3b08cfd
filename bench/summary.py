"""The readable end-of-run summary printed by `bench run`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.verdict import GOOD_OUTCOMES, TestOutcome

OUTCOME_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def verdict_text(v: dict[str, Any]) -> str:
    limit = f" {v['comparator']} {_fmt(v['limit'])}" if v["limit"] is not None else ""
    bound = f" (bound {_fmt(v['bound'])} @ {v['confidence']})" if v.get("bound") is not None else ""
    n = f" n={v['n']}" if v.get("n") is not None else ""
    u = (v.get("uncertainty") or {}).get("expanded")
    value = f"{_fmt(v['value'])} ±{_fmt(u)}" if u is not None else _fmt(v["value"])  # expanded U, k = 2
    evidence = f" [{v['evidence']}]" if v.get("evidence") else " [evidence unstated]"
    return f"{v['outcome']}: {v['name']} {v['statistic']} {value} {v['unit']}{bound}{limit}{n}{evidence}"


def summary_lines(data: dict[str, Any], quiet: bool = False) -> list[str]:
    lines = [f"run {data['run_id']} on station {data['station']['name']} ({data['status']})"]
    for name, ident in data["duts"].items():
        if "error" in ident:
            lines.append(f"  DUT {name} @ {ident.get('address')}: {ident['error'].splitlines()[0]}")
        else:
            lines.append(f"  DUT {name}: serial {ident.get('serial')} {ident.get('soc_manufacturer')} "
                         f"{ident.get('soc_model')} microcode {ident.get('microcode') or '-'}")
    for role, inst in data["instruments"].items():
        ident = inst.get("identity") or {}
        lines.append(f"  {role}: {ident.get('manufacturer', '?')} {ident.get('model', '?')} @ {inst['address']}")
    lines.append("")
    for test in data["tests"]:
        bad = TestOutcome(test["outcome"]).is_bad
        if quiet and not bad:
            continue
        mark = OUTCOME_MARK.get(test["outcome"], test["outcome"])
        lab = f"  ({test['lab_time_s'] / 60:.1f} lab min)" if test.get("lab_time_s") else ""
        lines.append(f"  {mark:5} {test['nodeid']}{lab}")
        for v in test["verdicts"]:
            if not quiet or v["outcome"] not in GOOD_OUTCOMES:
                lines.append(f"          {verdict_text(v)}")
        if (bad or test["outcome"] == "skipped") and test["message"]:
            lines.append(f"          {test['message'].splitlines()[0][:200]}")
    s = data["summary"]
    for problem in data.get("problems", []):
        lines.append(f"  problem: {problem.splitlines()[0][:300]}")
    lines.extend(lab_time_lines(data))
    lines.append("")
    lines.append(" ".join(f"{k}={s[k]}" for k in ("passed", "failed", "error", "skipped", "verdicts_failed") if k in s))
    return lines


def lab_time_lines(data: dict[str, Any]) -> list[str]:
    """Station-clock minutes per phone, and per claim on each phone (a study feeding several claims
    counts for each of them)."""
    from bench import labtime

    lines = []
    for dut, seconds in (data.get("lab_time_s") or {}).items():
        claims = labtime.per_claim(data, dut)
        by_claim = ", ".join(f"{c}: {s / 60:.1f}" for c, s in sorted(claims.items()))
        lines.append(f"  lab time {dut}: {labtime.minutes(seconds)}" + (f" (per claim, min: {by_claim})"
                                                                        if by_claim else ""))
    return lines


def print_summary(data: dict[str, Any], results_path: Path, quiet: bool = False) -> None:
    print("\n".join(summary_lines(data, quiet)))
    print(f"results: {results_path}")
