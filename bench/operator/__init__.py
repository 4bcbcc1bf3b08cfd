"""The operator station in a browser (`bench line serve`): a scan field per fixture, live progress
of the acceptance steps, a large PASS / FAIL with the reason in words, retest and send-to-repair
by the retest policy, the shift's last units, yield and units per hour.

Each fixture runs in its own process (fixture.py) holding its AcceptanceStation, so fixtures test
side by side; the web process (app.py) holds only the shift's state (shift.py) and never runs a
test itself. Every result is the same record `bench accept` writes, in the results store, with
the signed-in operator's name: operators sign in from the operators file (accounts.py), their
sessions and the sign-in throttle are signin.py, the routes page.py, where the page may listen
exposure.py."""
