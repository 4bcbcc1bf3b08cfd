"""Exit codes of `bench run` and the store's commands beyond pytest's own (docs/faults.md lists them all)."""
from __future__ import annotations

# 0-5 are pytest's: 0 all passed, 1 a test failed, 2 interrupted (or a bench error before the
# run started), 3 internal error, 4 usage error, 5 no tests selected. 6 is a pytest run that
# --require-calibration refused (phonebench.bench.procedures.calibration.state.REFUSED_EXIT).
USAGE = 4  # pytest's usage error: a DUT, bay, persona or fault that does not exist, a bad option
NO_TESTS = 5  # pytest's: -k / -m / --dut selected no test
RESULTS_NOT_WRITTEN = 8  # the run folder refused part of the record (disk full, read-only): see the message
STORE_BEHIND = 9  # results.json is whole but the results store lacks tests: `bench store-import` adds them
PHONE_BUSY = 10  # another bench held a phone of this run past --phone-wait: the message names the holder
PHONES_UNREACHABLE = 11  # no selected phone could be reached (no adb, a refusing server, every phone down): stopped before any test
REPORTED_PARTS_HELD = 12  # every test passed, but a claim passed partly on the phone's word and the profile holds that
STORE_CHAIN_BROKEN = 13  # `bench store verify`: a record or chain entry of the results store does not match (edited, deleted, reordered)
