"""Privacy audit log (claim 13): a signed record per inference, the required fields, no raw content.

The check runs inferences with canary prompts (random token ids the bench chose), pulls the log
file as stored (not an export the runtime could filter) and judges the records that appeared:

- missing: inferences without a record, or records missing from the seq / prev hash chain;
- field errors: a required field absent or of the wrong type, token counts that disagree with the
  inference, a timestamp outside it, an implausible temperature or clock;
- records that are not of the bench's inferences: every record is matched to the inference the bench
  issued in its place. Prompt and answer lengths are drawn per inference from the bench's entropy
  (PROMPT_TOKENS_RANGE, GENERATED_TOKENS_RANGE), so a log written without seeing them (a clean
  second log, prepared or replayed) disagrees on its token counts; the record's time, through the
  phone-to-station offset the bench estimates from the done lines' arrivals, must fall inside the
  inference as the station clock saw it (STATION_SLACK_S beyond the offset's own spread); its
  model_version must name the model and digest the runtime runs ("<model> <first 12 hex of its
  SHA-256>"); and with a thermocouple on the SoC's shield (scanned every SHIELD_EVERY
  inferences), its npu_temp_c may not lie below the die the shield implies at rest at the scans
  either side (the die is the heat's source; under load it only runs hotter) by more than the
  comparison's expanded uncertainty. These land in the field errors;
- bad signatures: Ed25519 over the record's canonical JSON without `sig` (sorted keys, no
  spaces), with the public key `llmrt audit status` publishes (the bench trusts that key as the
  unit's; attesting it is the platform's job);
- content leaks: a field the schema does not have, or a run of LEAK_RUN consecutive token ids of a
  canary prompt or its answer anywhere in a record (whatever the encoding, as long as the ids
  appear in order as decimal numbers).

How many inferences: enough that a log losing records at the rate `detect_drop_rate` (the entry's
parameter; default 1 in 7) is caught with probability `detect_probability` (default 0.99). Each
record is lost independently with probability q, so n inferences show no loss with probability
(1 - q)^n, and n = ceil(ln(1 - P) / ln(1 - q)): 30 for q = 1/7, P = 0.99 (1 - (6/7)^30 = 0.9901).
A leak, a bad signature or a missing field is in every record, so one record would do for them.
Everything judged is the bench's own work on the file as stored: MEASURED evidence.

What no bench can show: that the phone keeps no other record. A second writer that copies every
live observable (lengths, times, clock, temperature) writes a log indistinguishable from an honest
one; the claim's "no raw content" beyond the log handed over needs the platform's attestation of
its storage (docs/evidence.md, residual list).
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import CheckResult, Tick, no_tick
from .thermal_trip import SHIELD_PROBE_ACCURACY_C, ShieldProbe, ShieldReading, ShieldRelation
from phonebench.core.verdict import Evidence
from ..specs.sla import SlaEntry
from phonebench.drivers.device import Device
from phonebench.drivers.runtime import Generation, RuntimeClient

log = logging.getLogger(__name__)

# audit_check's entries and the metric ids that hold them (targets(profile, **ENTRIES)).
ENTRIES = {"records_missing": "audit_records_missing", "field_errors": "audit_field_errors",
           "bad_signatures": "audit_bad_signatures", "content_leaks": "audit_content_leaks"}

REQUIRED = {"seq": int, "t": (int, float), "input_tokens": int, "output_tokens": int, "model_version": str,
            "npu_freq_mhz": (int, float), "npu_temp_c": (int, float), "sig": str}
ALLOWED = set(REQUIRED) | {"prev"}
NOT_CONTENT = ("sig", "prev")  # base64 / hex: digits in them are not token ids
LEAK_RUN = 4
PROMPT_TOKENS_RANGE = (12, 48)     # drawn per inference, inclusive: a log must have seen them
GENERATED_TOKENS_RANGE = (4, 16)
STATION_SLACK_S = 0.25            # a record's time beyond the inference the station saw, after the offset
SHIELD_EVERY = 3                  # inferences between shield scans (a scan: ~0.2 s on a DAQ970A)
NPU_TEMP_RANGE_C = (-20.0, 130.0)
DETECT_DROP_RATE = 1.0 / 7.0
DETECT_PROBABILITY = 0.99
_INT = re.compile(r"\d+")


def canonical(record: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in record.items() if k != "sig"}, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class AuditFindings:
    missing: list[str] = field(default_factory=list)
    field_errors: list[str] = field(default_factory=list)
    bad_signatures: list[int] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)


def inferences_to_detect(drop_rate: float, probability: float) -> int:
    """Inferences after which a log losing each record with probability drop_rate has lost at
    least one with probability >= `probability`."""
    if not 0.0 < drop_rate < 1.0 or not 0.0 < probability < 1.0:
        raise ValueError(f"need 0 < drop rate, probability < 1, got {drop_rate}, {probability}")
    return max(1, math.ceil(math.log(1.0 - probability) / math.log(1.0 - drop_rate) - 1e-9))


def detection_probability(drop_rate: float, inferences: int) -> float:
    return 1.0 - (1.0 - drop_rate) ** inferences


def _is_type(value: Any, kind: Any) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _runs(ids: list[int]) -> set[tuple[int, ...]]:
    return {tuple(ids[i:i + LEAK_RUN]) for i in range(len(ids) - LEAK_RUN + 1)}


def _leaks(record: dict[str, Any], canaries: set[tuple[int, ...]]) -> list[str]:
    found = [f"unknown field {k!r}" for k in record if k not in ALLOWED]
    text = json.dumps({k: v for k, v in record.items() if k not in NOT_CONTENT}, sort_keys=True)
    numbers = [int(n) for n in _INT.findall(text)]
    if any(tuple(numbers[i:i + LEAK_RUN]) in canaries for i in range(len(numbers) - LEAK_RUN + 1)):
        found.append("token ids of a prompt or answer")
    return found


@dataclass(frozen=True)
class Matching:
    """What the bench knows of its own inferences, against which each record is matched."""

    model_version: str | None  # "<model> <sha256[:12]>"; None: the runtime names no digest
    offset_s: float | None     # station clock minus phone clock (None: no arrivals on the station clock)
    offset_spread_s: float = 0.0


def station_offset(gens: list[Generation]) -> tuple[float | None, float]:
    """Station minus phone clock, from each done line's arrival against the phone's done time: the
    median, and the spread of the estimates (transport delay varies; a constant lie cancels)."""
    offsets = [g.arrivals.done_t - g.done_time for g in gens if g.arrivals is not None and g.arrivals.done_t is not None]
    if not offsets:
        return None, 0.0
    return float(np.median(offsets)), float(max(offsets) - min(offsets))


def die_floors(scans: list[tuple[int, ShieldReading]], inferences: int,
               relation: ShieldRelation) -> tuple[tuple[float, ...], float]:
    """Per inference, the coolest its die can have been: the cooler of the shield scans either side
    of it (the shield moves slowly and one way between scans SHIELD_EVERY inferences apart), less
    the comparison's expanded uncertainty (k = 2: thermocouple, rectangular, and the relation's fit).
    scans: (index of the last inference before the scan, -1 before the first; reading)."""
    u = float(np.hypot(SHIELD_PROBE_ACCURACY_C / np.sqrt(3.0), relation.fit_u_c))
    floors = []
    for i in range(inferences):
        before = max((s for s in scans if s[0] < i), key=lambda s: s[0])
        after = min((s for s in scans if s[0] >= i), key=lambda s: s[0])
        floors.append(min(relation.die_c(before[1]), relation.die_c(after[1])) - 2.0 * u)
    return tuple(floors), 2.0 * u


def _field_errors(record: dict[str, Any], gen: Generation | None, prompt_len: int, match: Matching,
                  die_floor_c: float | None) -> list[str]:
    errors = [f"{name} missing" for name in REQUIRED if name not in record]
    errors += [f"{name} is {type(record[name]).__name__}" for name, kind in REQUIRED.items()
               if name in record and not _is_type(record[name], kind)]
    if errors or gen is None:
        return errors
    if record["input_tokens"] != prompt_len:
        errors.append(f"input_tokens {record['input_tokens']} != {prompt_len} (the bench's prompt)")
    if record["output_tokens"] != len(gen.tokens):
        errors.append(f"output_tokens {record['output_tokens']} != {len(gen.tokens)} (the tokens streamed)")
    if not gen.start_time - 1.0 <= record["t"] <= gen.done_time + 1.0:
        errors.append(f"t {record['t']} outside the inference ({gen.start_time}..{gen.done_time})")
    if match.offset_s is not None and gen.arrivals is not None and gen.arrivals.done_t is not None:
        slack = match.offset_spread_s + STATION_SLACK_S
        on_station = record["t"] + match.offset_s
        if not gen.arrivals.sent_t - slack <= on_station <= gen.arrivals.done_t + slack:
            errors.append(f"t {record['t']} is {on_station:.3f} s on the station clock, outside the inference "
                          f"({gen.arrivals.sent_t:.3f}..{gen.arrivals.done_t:.3f} +- {slack:.3f} s)")
    if match.model_version is not None and record["model_version"] != match.model_version:
        errors.append(f"model_version {record['model_version']!r} is not the model run ({match.model_version!r})")
    if not NPU_TEMP_RANGE_C[0] <= record["npu_temp_c"] <= NPU_TEMP_RANGE_C[1]:
        errors.append(f"npu_temp_c {record['npu_temp_c']} implausible")
    elif die_floor_c is not None and record["npu_temp_c"] < die_floor_c:
        errors.append(f"npu_temp_c {record['npu_temp_c']} below the die the shield implies (>= {die_floor_c:.2f})")
    if record["npu_freq_mhz"] <= 0:
        errors.append(f"npu_freq_mhz {record['npu_freq_mhz']} not positive")
    return errors


def _verify(key: Ed25519PublicKey, record: dict[str, Any]) -> bool:
    try:
        key.verify(base64.b64decode(str(record.get("sig", "")), validate=True), canonical(record))
        return True
    except (InvalidSignature, ValueError):
        return False


def _read_log(device: Device, path: str, rotated: str | None) -> list[str]:
    text = ""
    for name in (rotated, path):
        if name and device.shell(["ls", name]).exit_code == 0:
            text += device.pull_bytes(name).decode("utf-8", errors="replace")
    return [line for line in text.splitlines() if line.strip()]


def audit_check(device: Device, runtime: RuntimeClient, shield: ShieldProbe | None = None, *,
                records_missing: SlaEntry, field_errors: SlaEntry, bad_signatures: SlaEntry, content_leaks: SlaEntry,
                inferences: int | None = None, seed: int | None = None,
                relation: ShieldRelation = ShieldRelation(), tick: Tick = no_tick) -> CheckResult:
    """The entries judge the log's four findings (ENTRIES: the metric ids that usually hold them).

    inferences: None derives the count from the missing-records entry's detect_drop_rate and
    detect_probability (see the module doc). seed: None draws the canaries and lengths from
    entropy (recorded); shield: the SoC's shield thermocouple, scanned before and after the series."""
    entries = {"audit_records_missing": records_missing, "audit_field_errors": field_errors,
               "audit_bad_signatures": bad_signatures, "audit_content_leaks": content_leaks}
    params = records_missing.parameters
    drop_rate = float(params.get("detect_drop_rate", DETECT_DROP_RATE))
    wanted = float(params.get("detect_probability", DETECT_PROBABILITY))
    if inferences is None:
        inferences = inferences_to_detect(drop_rate, wanted)
    detect_p = detection_probability(drop_rate, inferences)
    status = runtime.audit_status()
    key = Ed25519PublicKey.from_public_bytes(status.public_key)
    identity = runtime.identity()
    vocab = int(identity.extra.get("vocab", 512))
    entropy = secrets.randbits(128) if seed is None else seed
    rng = np.random.default_rng(entropy)
    scans = [(-1, shield())] if shield is not None else []
    canaries: set[tuple[int, ...]] = set()
    runs: list[tuple[list[int], Generation]] = []
    for i in range(inferences):
        prompt = [int(t) for t in rng.integers(0, vocab, int(rng.integers(PROMPT_TOKENS_RANGE[0],
                                                                            PROMPT_TOKENS_RANGE[1] + 1)))]
        wanted_tokens = int(rng.integers(GENERATED_TOKENS_RANGE[0], GENERATED_TOKENS_RANGE[1] + 1))
        gen = runtime.generate(wanted_tokens, seed=int(rng.integers(0, 2**31)), prompt=prompt)
        canaries |= _runs(prompt) | _runs(gen.tokens)
        runs.append((prompt, gen))
        if shield is not None and (i % SHIELD_EVERY == SHIELD_EVERY - 1 or i == inferences - 1):
            scans.append((i, shield()))
        tick(1)
    offset, spread = station_offset([g for _, g in runs])
    floors, floor_u = die_floors(scans, inferences, relation) if scans else ((), 0.0)
    match = Matching(f"{identity.model} {identity.model_sha256[:12]}" if identity.model_sha256 else None,
                     offset, spread)
    lines = _read_log(device, status.path, status.rotated)
    findings = AuditFindings()
    records: list[tuple[dict[str, Any], str]] = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            findings.field_errors.append(f"not JSON: {line[:80]!r}")
            continue
        if isinstance(record, dict) and _is_type(record.get("seq"), int) and record["seq"] > status.records:
            records.append((record, line))
    records.sort(key=lambda r: r[0]["seq"])
    expected = list(range(status.records + 1, status.records + inferences + 1))
    by_seq = {r["seq"]: (r, line) for r, line in records}
    findings.missing += [f"seq {s} absent" for s in expected if s not in by_seq]
    previous_line: str | None = None
    for index, ((prompt, gen), seq) in enumerate(zip(runs, expected)):
        if seq not in by_seq:
            previous_line = None
            continue
        record, line = by_seq[seq]
        if previous_line is not None and record.get("prev") != hashlib.sha256(previous_line.encode()).hexdigest():
            findings.missing.append(f"seq {seq}: prev does not chain to seq {seq - 1}")
        previous_line = line + "\n"
        findings.field_errors += [f"seq {seq}: {e}" for e in _field_errors(record, gen, len(prompt), match,
                                                                              floors[index] if floors else None)]
        if not _verify(key, record):
            findings.bad_signatures.append(seq)
        findings.leaks += [f"seq {seq}: {x}" for x in _leaks(record, canaries)]
    counts = {"audit_records_missing": len(findings.missing),
              "audit_field_errors": len({e.split(":")[0] for e in findings.field_errors}),
              "audit_bad_signatures": len(findings.bad_signatures),
              "audit_content_leaks": len({x.split(":")[0] for x in findings.leaks})}
    details = {"audit_records_missing": findings.missing, "audit_field_errors": findings.field_errors,
               "audit_bad_signatures": [f"seq {s}" for s in findings.bad_signatures],
               "audit_content_leaks": findings.leaks}
    verdicts = []
    for metric, count in counts.items():
        extra: dict[str, Any] = {"key_id": status.key_id}
        if metric == "audit_records_missing":
            extra.update(detect_drop_rate=drop_rate, detection_probability=detect_p)
        verdicts.append(entries[metric].evaluate(count, evidence=Evidence.MEASURED, name=metric, raw="audit_log",
                                                 extra=extra, n=inferences,
                                                 detail="; ".join(details[metric][:5])
                                                 or f"none in {inferences} inferences"))
    raw = {"records": [r for r, _ in records],
           "inferences": [{"prompt": p, "tokens": g.tokens, "start": g.start_time, "done": g.done_time,
                           "sent_station_s": g.arrivals.sent_t if g.arrivals else None,
                           "done_station_s": g.arrivals.done_t if g.arrivals else None} for p, g in runs],
           "entropy": str(entropy), "matching": {"model_version": match.model_version, "station_offset_s": offset,
                                            "offset_spread_s": spread, "die_floors_c": list(floors),
                                            "die_floor_u_c": floor_u,
                                            "shield": [{"after_inference": i, "shield_c": r.shield_c,
                                                        "cover_c": r.cover_c} for i, r in scans],
                                            "relation": relation.source},
           "public_key": base64.b64encode(status.public_key).decode(), "findings": details}
    return CheckResult(verdicts, {"audit_log": raw})
