"""Many hosts through labgrid (docs/lab.md): an exporter per host publishes each bay as labgrid
resources, one place per bay; `bench run --place NAME` acquires a place through the coordinator,
builds the station from its resources, runs, and releases it.

labgrid has no ADB or SCPI-instrument resource in a release (an ADB resource is an open pull
request), so the bench defines its own resource classes, `PhonebenchPhone` and
`PhonebenchInstrument`. The exporter publishes a class it has no export handler for as a plain
resource entry with its parameters, which is how labgrid carries site-specific resources; the
coordinator matches, locks and hands them out like any other. The bench talks to labgrid only
through `labgrid-client` and `labgrid-exporter`, its documented interface.
"""
