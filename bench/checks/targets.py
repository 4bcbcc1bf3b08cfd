"""Where a check's target comes from: the station's SLA profile, else the checks' own targets.

The product profile (sla_profiles/default.toml) holds the product's claims 1-12 as issue 5 lists
them; targets.toml next to this module holds the rest the runtime-side checks judge (claims 13,
14 and the procedure checks). A metric defined in the station's profile always wins.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..specs.sla import SlaEntry, SlaProfile, load_profile

TARGETS_PATH = Path(__file__).resolve().parent / "targets.toml"


@lru_cache(maxsize=1)
def own_targets() -> SlaProfile:
    return load_profile(TARGETS_PATH)


def target(profile: SlaProfile | None, metric: str) -> SlaEntry:
    """The entry judging `metric`: the profile's if it has one, else the checks' default."""
    if profile is not None and metric in profile:
        return profile.get(metric)
    return own_targets().get(metric)


def targets(profile: SlaProfile | None, **metrics: str) -> dict[str, SlaEntry]:
    """Several entries by metric id (each as `target` finds it), keyed by the names a check's
    parameters give them: ``audit_check(device, runtime, **targets(sla, missing="audit_records_missing", ...))``."""
    return {name: target(profile, metric) for name, metric in metrics.items()}
