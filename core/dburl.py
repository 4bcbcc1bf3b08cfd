"""A results-store URL's password: kept out of every file, log and command line the bench writes.

libpq finds the password on its own (~/.pgpass or $PGPASSFILE, $PGPASSWORD, a pg_service.conf
`service=`), and $PHONEBENCH_DATABASE carries a whole URL in the environment, which only the
user's own processes can read; a station file or argv is readable by every user of the host."""
from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

PASSWORD_HINT = ("leave the password out of the URL and put it in ~/.pgpass (chmod 600; psycopg reads it), "
                 "or in $PGPASSWORD, or give the whole URL in $PHONEBENCH_DATABASE (docs/results.md)")


def _userinfo(url: str) -> tuple[str, str | None, str]:
    """(user, password or None, host part) of a URL's authority."""
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return "", None, netloc
    userinfo, _, host = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    return user, (password if colon else None), host


def password_of(url: str | None) -> str | None:
    """The password a URL carries (percent-decoded), None when it carries none."""
    if not url or "://" not in url:
        return None
    try:
        password = _userinfo(url)[1]
    except ValueError:
        return None
    return unquote(password) if password else None


def without_password(url: str) -> str:
    """The URL with its password removed (not masked: the result still connects through libpq's
    own password sources); anything without one is returned as given."""
    if password_of(url) is None:
        return url
    user, _, host = _userinfo(url)
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"{user}@{host}" if user else host, parts.path, parts.query, parts.fragment))
