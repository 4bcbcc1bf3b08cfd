"""Where the operator page may listen: loopback as it is; any other address only over TLS (the
passwords and session cookies cross the line network) or with the loud opt-out
`--insecure-http-on-network`, which the page and the start-up both say."""
from __future__ import annotations

import ipaddress
import os
import ssl
import stat
from pathlib import Path

from phonebench.core.errors import ConfigError, UsageError

INSECURE_WARNING = ("the operator page is served over plain HTTP on the line network "
                    "(--insecure-http-on-network): passwords and sessions can be read and taken by any host on it")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def check_exposure(host: str, *, tls: bool, insecure_network: bool) -> bool:
    """Whether the page is served in plain HTTP on the network (the opt-out, to be warned of);
    UsageError (exit 4) for a page on the network with neither TLS nor the explicit opt-out."""
    if is_loopback(host) or tls:
        return False
    if insecure_network:
        return True
    raise UsageError(f"bench line serve --host {host}: the page would take passwords over plain HTTP on the "
                     "network", hint="give it a certificate (--tls-cert FILE --tls-key FILE), or keep it on "
                                     "loopback; --insecure-http-on-network serves it anyway, warned")


def tls_context(cert: str | Path | None, key: str | Path | None) -> ssl.SSLContext:
    """The server's TLS context from a PEM certificate (chain) and its key (TLS 1.2 at least)."""
    if cert is None or key is None:
        raise UsageError("bench line serve: TLS needs both --tls-cert and --tls-key",
                         hint="e.g. --tls-cert /etc/phonebench/line.pem --tls-key /etc/phonebench/line.key")
    key_path = Path(key)
    try:
        mode = key_path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"TLS key {key_path}: {exc.strerror}", hint="check --tls-key") from None
    if mode & stat.S_IROTH or mode & stat.S_IWOTH:
        raise ConfigError(f"TLS key {key_path} is readable by every user (mode {stat.S_IMODE(mode):04o})",
                          hint=f"chmod 600 {key_path} (or 640 with a group for the page's account), "
                               "and replace the key if others may have copied it")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(os.fspath(cert), os.fspath(key_path))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS certificate {cert} with key {key_path} cannot be loaded: "
                          f"{getattr(exc, 'strerror', None) or exc}",
                          hint="both PEM files, the key matching the certificate, without a passphrase") from None
    return context
