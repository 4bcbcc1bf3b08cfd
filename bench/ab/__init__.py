"""Which build did it: an A/B of two catalogue builds on the same phones, and a bisection over a
catalogue's range with A/Bs as its steps (docs/ab-and-bisect.md).

gates (what a segment measures), schedule (ABBA per phone), sequential (the rule), run (the A/B),
measure (segments on a station), install (catalogue builds onto a phone), session (a station ready
for A/Bs), bisect (the search), records and report (what is kept and shown), operating and
simulated (operating characteristics by Monte-Carlo through the same code).
"""
