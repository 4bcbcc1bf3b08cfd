"""Production-line acceptance (issue 7): `bench accept` runs the acceptance profile on one
scanned unit, judges it PASS / FAIL / INCOMPLETE with the failing check in plain words, retests
what the policy allows and stores every attempt.

Modules: runner (AcceptanceStation.accept), disposition (checks, the unit's outcome, retest policy), attempts
(the attempts in the results store), display (what the operator sees).
"""
from .attempts import FAIL, INCOMPLETE, PASS, REFUSED, WRONG_UNIT, AttemptBook, AttemptRecord
from .disposition import CHECKS, REQUIRED, Disposition, RetestPolicy, disposition_of
from .runner import EXIT_CODES, AcceptanceStation, AttemptResult, UnitResult

__all__ = ["CHECKS", "EXIT_CODES", "FAIL", "INCOMPLETE", "PASS", "REFUSED", "REQUIRED", "WRONG_UNIT",
           "AcceptanceStation", "AttemptBook", "AttemptRecord", "AttemptResult", "Disposition", "RetestPolicy",
           "UnitResult", "disposition_of"]
