"""A throwaway PostgreSQL cluster (initdb + pg_ctl from Debian's `postgresql` package) on a unix
socket in a temporary folder, for the store's tests and benchmarks. Never used by a bench run."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, text

from phonebench.core.errors import BenchError


def postgres_bindir() -> Path | None:
    """The newest installed server's bin folder, or None if the server is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def _reachable_tempdir() -> str | None:
    """Where the cluster's folder goes: the temporary folder, unless (as root, whose cluster runs as
    `postgres`) some folder above it is closed to other users (a test worker's private TMPDIR under
    pytest's 0700 base); then /tmp, where mkdtemp still makes a private, unique folder."""
    chosen = Path(tempfile.gettempdir()).resolve()
    if os.geteuid() != 0:
        return None
    for folder in (chosen, *chosen.parents):
        if not folder.stat().st_mode & 0o001:
            return "/tmp"
    return None


class ScratchPostgres:
    """Started by start(), gone after stop(). As root it runs as the `postgres` user (the server
    refuses root); it listens on a unix socket only, so it never takes a TCP port."""

    def __init__(self, bindir: Path | None = None) -> None:
        found = bindir or postgres_bindir()
        if found is None:
            raise BenchError("PostgreSQL server binaries not found under /usr/lib/postgresql",
                             hint="install Debian's `postgresql` package (`make system-deps` does, as root)")
        self.bindir = found
        self.root = Path(tempfile.mkdtemp(prefix="phonebench-pg-", dir=_reachable_tempdir()))
        self.data = self.root / "data"
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                uid = pwd.getpwnam("postgres").pw_uid
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                raise BenchError("running as root and there is no `postgres` user to own a scratch cluster",
                                 hint="install Debian's `postgresql` package, which creates it") from None
            self.user = "postgres"
            os.chown(self.root, uid, -1)
        self.root.chmod(0o755)

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def start(self) -> ScratchPostgres:
        done = self._run("initdb", "-D", str(self.data), "-U", "bench", "--auth=trust", "-E", "UTF8",
                         "--no-instructions")
        if done.returncode != 0:
            self.stop()
            raise BenchError(f"initdb failed: {done.stderr.strip()}")
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.root}' -c fsync=off"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
                         "-o", options, "start")
        if done.returncode != 0:
            log_text = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            self.stop()
            raise BenchError(f"pg_ctl start failed: {done.stderr.strip()}\n{log_text[-2000:]}")
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ScratchPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, database: str) -> str:
        return f"postgresql://bench@/{database}?host={self.root}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        engine = create_engine(self.url("postgres").replace("postgresql://", "postgresql+psycopg://", 1),
                               isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)
