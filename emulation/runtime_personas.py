"""SLA personas on the runtime side: how one emulated unit's runtime behaves (PhoneSpec.sla_persona).

"nominal" meets every runtime claim; each other persona breaks one, as the negative control of
that claim's check. The world's personas (phonebench.emulation.world: slow voice, hot cover, ...) are
validated there; a name this module does not know runs the nominal runtime (never a crash).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimePersona:
    name: str
    timing: str = "nominal"                  # phonebench.emulation.runtime_timing.PROFILES key
    redundancy_works: bool = True            # False: the mode is reported but never engages
    redundancy_trigger_mv: float | None = None  # fixed engage threshold, ignoring the config
    trip_c: float = 72.0                     # NPU temperature at which layers migrate to the CPU
    kill_at_trip: bool = False               # the old behaviour: the process is killed at the trip
    corrupt_weight_page: bool = False        # one weight page corrupted at rest
    audit_leaks_prompt: bool = False         # prompt token ids written into the audit log
    audit_bad_signatures: bool = False       # audit records signed wrongly
    counters: dict[str, float] = field(default_factory=dict)  # overrides of the counter rates
    # --- self-reports that disagree with what the unit does (the trust checks' negative controls) ---
    trip_reported_c: float | None = None     # the trip event's npu_c says this, whatever it acted on
    redundancy_flag_only: bool = False       # status says engaged, but it computes once (no vote, no cost)
    ripple_sense_gain: float = 1.0           # the PMIC's ripple reading as a fraction of the real ripple
    spot_read_omitted: bool = False          # a slow flash whose weights-read time leaves the page read out
    audit_drop_rate: float = 0.0             # audit records lost on the way to storage, at random
    # What the runtime says about itself, apart from what it does (liars; see the block below).
    report_compression: float = 1.0          # reported token gaps = this x the real ones
    report_shift_s: float = 0.0              # every token reported this much earlier than it came
    gpuload_fake_busy: float | None = None   # the GPU load tool reports this busy fraction, loads nothing
    counters_reported: dict[str, float] = field(default_factory=dict)  # rates reported, not incurred
    # --- forgers: every answer the phone gives is rewritten consistently (docs/evidence.md) ---
    fabricate_first_token: bool = False      # a made-up token streamed with the start line, the real first dropped
    patch_kills: bool = False                # a killed dialog is finished with made-up tokens, done, exit 0, same pid
    consistent_counters: bool = False        # vmstat and the status' NPU clock agree with the reported counters
    gpuload_real_busy: float | None = None   # with gpuload_fake_busy: the real (lighter) load it runs
    gpu_counters_fake: bool = False          # the GPU driver's busy counters read gpuload_fake_busy too
    forge_known_answers: bool = False        # probes that look like known-answer ones are answered 0 uncomputed
    npu_sensor_offset_c: float = 0.0         # every NPU temperature the phone gives (zone, dumpsys, runtime) is off by this
    npu_hot_offset_c: float = 0.0            # ... by this much only while the die is hot (HOT_OFFSET_FROM_C up, full at _FULL_C)
    audit_second_log: bool = False           # a clean audit log (template counts, temperatures) handed over, the real one kept aside
    replay_answers: bool = False             # a prompt it has answered before is replayed from a cache: no prefill, even cadence


PERSONA_COUNTERS_BAD = {"kv_cache_miss_rate": 0.19, "weight_page_fault_rate": 0.021, "prefetch_accuracy": 0.71}
PERSONA_COUNTERS_SAID = {"kv_cache_miss_rate": 0.06, "mac_utilisation": 0.97, "memory_bandwidth_utilisation": 0.96,
                         "weight_page_fault_rate": 0.002, "prefetch_accuracy": 0.93}

PERSONAS: dict[str, RuntimePersona] = {p.name: p for p in (
    RuntimePersona("nominal"),
    RuntimePersona("jittery", timing="jittery",  # per-token std > 23 ms; stalls waste MAC and bus cycles (physics)
                   counters={"prefetch_accuracy": 0.71}),
    RuntimePersona("slow", timing="slow",  # first token >= 300 ms: weight paging on the critical path
                   counters={"kv_cache_miss_rate": 0.19, "weight_page_fault_rate": 0.021}),
    RuntimePersona("contention-sensitive", timing="contention-sensitive"),
    RuntimePersona("no-redundancy", redundancy_works=False),
    RuntimePersona("late-redundancy", redundancy_trigger_mv=45.0),
    RuntimePersona("costly-redundancy", timing="costly-redundancy"),
    RuntimePersona("thermal-kill", kill_at_trip=True),
    RuntimePersona("early-trip", trip_c=65.0),  # the CPU's threshold applied to the NPU
    RuntimePersona("corrupt-weights", corrupt_weight_page=True),
    RuntimePersona("leaky-log", audit_leaks_prompt=True),
    RuntimePersona("unsigned-log", audit_bad_signatures=True),
    # --- liars: the unit's report of itself is wrong; only the bench's own measurement shows it ---
    RuntimePersona("trip-misreported", trip_c=65.0, trip_reported_c=72.0),
    RuntimePersona("redundancy-flag-only", redundancy_flag_only=True),
    RuntimePersona("ripple-sensed-low", ripple_sense_gain=0.5),
    RuntimePersona("spot-time-omits-read", spot_read_omitted=True),
    RuntimePersona("audit-drop", audit_drop_rate=1.0 / 7.0),
    # --- liars about tokens, GPU load and counters (negative controls of docs/evidence.md) --------
    # Each does what a slow or idle unit does and reports what a good one would.
    RuntimePersona("compressed-timestamps", timing="jittery", report_compression=0.35),
    RuntimePersona("shifted-timestamps", timing="slow", report_shift_s=0.15),
    RuntimePersona("fake-gpu-load", gpuload_fake_busy=0.80),
    # --- forgers: slow, and whatever the phone says over ADB agrees with the lie -------------------
    RuntimePersona("fabricated-first-token", timing="slow", fabricate_first_token=True),
    # Its NPU sensor reads 7 degC high everywhere, so its governor's "72" is a real 65 (the CPU's).
    RuntimePersona("thermal-offset", npu_sensor_offset_c=7.0),
    # Right at rest, 7 degC high once the die is hot: its "72" is a real 65, and idle it reads true.
    RuntimePersona("hot-thermal-offset", npu_hot_offset_c=7.0),
    RuntimePersona("patched-kills", kill_at_trip=True, patch_kills=True),
    RuntimePersona("phantom-gpu-load", gpuload_fake_busy=0.80, gpu_counters_fake=True),
    # A real load at 30 % (it draws and slows a little), the tool and the GPU's counters say 80 %.
    RuntimePersona("light-gpu-load", gpuload_fake_busy=0.80, gpuload_real_busy=0.30, gpu_counters_fake=True),
    RuntimePersona("faked-redundancy", redundancy_flag_only=True, redundancy_trigger_mv=20.0,
                   forge_known_answers=True),  # raises its flag early, never votes
    RuntimePersona("inflated-counters", timing="jittery",  # stalls and pages like "jittery" and "slow"
                   counters=PERSONA_COUNTERS_BAD, counters_reported=PERSONA_COUNTERS_SAID),
    RuntimePersona("consistent-counters", timing="jittery", consistent_counters=True,  # as above, and
                   counters=PERSONA_COUNTERS_BAD, counters_reported=PERSONA_COUNTERS_SAID),  # vmstat, clock agree
    # Jittery when it computes; an answer it has given before streams from its cache, fast and even:
    # a check that repeats its prompts sees mostly replays (everything it says about them is true).
    RuntimePersona("answer-replay", timing="jittery", replay_answers=True),
    # Keeps its real audit log (prompts and all) aside and hands the bench a clean one, signed, chained
    # and timed with the live inferences, its counts and temperatures from a compliance run's template.
    RuntimePersona("second-log", audit_second_log=True),
)}

SLA_PERSONAS_RUNTIME: set[str] = set(PERSONAS)


def runtime_persona(name: str) -> RuntimePersona:
    """The runtime behaviour for an SLA persona name; unknown names (world-side ones) run nominal."""
    persona = PERSONAS.get(name)
    if persona is None:
        log.debug("SLA persona %r changes nothing in the runtime", name)
        return PERSONAS["nominal"]
    return persona
