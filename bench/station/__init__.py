"""Who holds what: the station owner, waits, the station backend, the selection it offers."""
