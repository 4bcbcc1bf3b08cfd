"""The emulated N6705C, 33500B and DAQ970A as command tables (emulation/instruments/*_table.py).

- Behaviour unchanged: the answers and error queues the servers gave, before their command trees
  became tables, to 300 seeded random command scripts each (recorded by tests/emu_scripts.py in
  tests/data/emulated_tables/) are replayed and must be byte-identical.
"""
from __future__ import annotations

import pytest
from emu_scripts import INSTRUMENTS, load, run


@pytest.mark.parametrize("family", sorted(INSTRUMENTS))
def test_recorded_scripts_replay_byte_identical(family):
    mismatches = []
    for recorded in load(family):
        messages = [step[0] for step in recorded["steps"]]
        for want, got in zip(recorded["steps"], run(family, recorded["seed"], messages)):
            if want != got:
                mismatches.append(f"script {recorded['seed']}: {want[0]!r}: recorded {want[1:]!r}, now {got[1:]!r}")
    assert not mismatches, f"{len(mismatches)} answers differ:\n" + "\n".join(mismatches[:20])
