"""The operators who may sign in to the operator page: a file of names and password hashes
(scrypt, through werkzeug.security), readable by its owner only, managed by `bench line operators`.

The page re-reads the file when it changes, so an operator removed from it cannot sign in (or act
on a session already open) without restarting the page."""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from phonebench.core.errors import ConfigError, UsageError
from phonebench.core.files import write_atomically

log = logging.getLogger(__name__)

ENV_VAR = "PHONEBENCH_OPERATORS"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")  # shown on the page, written in every record
MIN_PASSWORD = 8
MAX_PASSWORD = 1024  # scrypt over an unbounded input is a free CPU burn for whoever posts it
METHOD = "scrypt"
FORMAT = 1


class OperatorsFileError(ConfigError):
    """The operators file is missing, unsafe (readable by others) or not an operators file."""


@dataclass(frozen=True)
class Operator:
    name: str
    password_hash: str
    added: str  # ISO time, UTC


def default_path() -> Path:
    """$PHONEBENCH_OPERATORS, else the user's config folder (the bench's own data folders are the
    installation's and may be shared or read-only)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        return Path(chosen)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "phonebench" / "operators.json"


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise UsageError(f"operator name {name[:60]!r} is not a name (1-40 letters, digits, . _ -, "
                         "starting with a letter or digit)", hint="e.g. `bench line operators add alice`")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD or len(password) > MAX_PASSWORD:
        raise UsageError(f"a password needs {MIN_PASSWORD} to {MAX_PASSWORD} characters",
                         hint="choose a longer one (a passphrase of a few words is easy to type)")
    return password


class OperatorBook:
    """The operators file: read (and re-read when it changes) by the page, written by the CLI."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) of what _operators holds
        self._operators: dict[str, Operator] = {}
        self._dummy = ""  # a hash to check unknown names against: the same time as a known one

    # --- reading -----------------------------------------------------------------------
    def operators(self) -> dict[str, Operator]:
        """Every operator in the file (OperatorsFileError if it is missing, unsafe or malformed)."""
        with self._lock:
            info = self._safe_stat()
            key = (info.st_ino, info.st_mtime_ns, info.st_size)
            if key != self._seen:
                self._operators = self._read()
                self._seen = key
            return dict(self._operators)

    def _safe_stat(self) -> os.stat_result:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            raise OperatorsFileError(f"operators file {self.path} does not exist",
                                     hint="add an operator first: `bench line operators add NAME` "
                                          f"(--operators FILE or ${ENV_VAR} to choose the file)") from None
        except OSError as exc:
            raise OperatorsFileError(f"operators file {self.path}: {exc.strerror}") from None
        if not stat.S_ISREG(info.st_mode):
            raise OperatorsFileError(f"operators file {self.path} is not a regular file")
        if info.st_mode & 0o077:
            raise OperatorsFileError(
                f"operators file {self.path} is readable or writable by its group or others "
                f"(mode {stat.S_IMODE(info.st_mode):04o}): its password hashes could be guessed offline",
                hint=f"chmod 600 {self.path}, and change the passwords if others may have copied it")
        return info

    def _read(self) -> dict[str, Operator]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or not isinstance(data.get("operators"), dict):
                raise ValueError(f"not format {FORMAT}")
            found = {}
            for name, entry in data["operators"].items():
                if not NAME.match(name) or not str(entry["hash"]).startswith(METHOD + ":"):
                    raise ValueError(f"entry {name[:60]!r}")
                found[name] = Operator(name, str(entry["hash"]), str(entry.get("added", "")))
            return found
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise OperatorsFileError(f"operators file {self.path} is not an operators file ({exc})",
                                     hint="write it with `bench line operators add NAME`, not by hand") from None

    # --- signing in --------------------------------------------------------------------
    def verify(self, name: str, password: str) -> bool:
        """Whether `password` is `name`'s; an unknown name costs the same scrypt as a known one."""
        if len(password) > MAX_PASSWORD:
            return False
        operator = self.operators().get(name)
        if operator is None:
            if not self._dummy:
                self._dummy = generate_password_hash(METHOD, method=METHOD)
            check_password_hash(self._dummy, password)
            return False
        return check_password_hash(operator.password_hash, password)  # hmac.compare_digest inside

    def exists(self, name: str) -> bool:
        try:
            return name in self.operators()
        except OperatorsFileError:
            return False

    # --- managing (the CLI) --------------------------------------------------------------
    def add(self, name: str, password: str) -> Operator:
        """Add `name`, or set a new password for an operator already there."""
        check_name(name)
        check_password(password)
        current = self.operators() if self.path.exists() else {}
        operator = Operator(name, generate_password_hash(password, method=METHOD),
                            dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        self._write({**current, name: operator})
        return operator

    def remove(self, name: str) -> None:
        current = self.operators()
        if name not in current:
            raise UsageError(f"no operator {name[:60]!r} in {self.path}",
                             hint="`bench line operators list` shows who is there")
        del current[name]
        self._write(current)

    def _write(self, operators: dict[str, Operator]) -> None:
        """The whole file anew, created 0600 and renamed over the old one (never half written)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"format": FORMAT, "operators": {o.name: {"hash": o.password_hash, "added": o.added}
                                                for o in sorted(operators.values(), key=lambda o: o.name)}}
        write_atomically(self.path, json.dumps(body, indent=1) + "\n", mode=0o600)
        with self._lock:
            self._seen = None
        log.info("operators file %s: %d operators", self.path, len(operators))

