"""A results-store URL: which store a run uses, and its password, kept out of every file, log and
command line the bench writes.

libpq finds the password on its own (~/.pgpass or $PGPASSFILE, $PGPASSWORD, a pg_service.conf
`service=`), and $PHONEBENCH_DATABASE carries a whole URL in the environment, which only the
user's own processes can read; a station file or argv is readable by every user of the host."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

ENV_VAR = "PHONEBENCH_DATABASE"  # a whole store URL, password and all, in the environment
DEFAULT_FILE = "results.sqlite"

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


def to_url(url_or_path: str | Path) -> str:
    """A store URL; a plain path means an SQLite file."""
    text = str(url_or_path)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def resolve_database_url(configured: str | None = None, results_dir: str | Path = "reports") -> str:
    """The store to use: $PHONEBENCH_DATABASE, else the station's `database`, else
    <results_dir>/results.sqlite. A plain path means an SQLite file."""
    chosen = os.environ.get(ENV_VAR) or configured
    return to_url(chosen) if chosen else to_url(Path(results_dir) / DEFAULT_FILE)


def with_password(url: str, *sources: str | None) -> str:
    """`url`, a store named without its password (a run request's), with the password that
    $PHONEBENCH_DATABASE or one of `sources` (a station's `database`) gives that same store; as
    given when none does (libpq then finds it in ~/.pgpass or $PGPASSWORD)."""
    for source in (os.environ.get(ENV_VAR), *sources):
        if source and without_password(to_url(source)) == url:
            return to_url(source)
    return url
