"""`bench line operators add NAME | remove NAME | list`: who may sign in to the operator page.

A password is read at the terminal (twice, not echoed) or, with --password-stdin, from stdin's
first line; never from the command line, where every user of the host can read it."""
from __future__ import annotations

import argparse
import getpass
import sys

from phonebench.core.errors import UsageError

VERBS = ("add", "remove", "list")


def manage_operators(args: argparse.Namespace) -> int:
    from ..operator.accounts import OperatorBook, check_name, default_path

    verb, names = (args.words[0], args.words[1:]) if args.words else ("", [])
    if verb not in VERBS or (verb == "list" and names) or (verb != "list" and len(names) != 1):
        raise UsageError("bench line operators: say `add NAME`, `remove NAME` or `list`",
                         hint="e.g. `bench line operators add alice` (the password is asked for)")
    book = OperatorBook(args.operators or default_path())
    if verb == "list":
        for operator in book.operators().values():
            print(f"{operator.name}\tadded {operator.added}")
        return 0
    name = check_name(names[0])
    if verb == "remove":
        book.remove(name)
        print(f"operator {name} removed from {book.path}: they can no longer sign in (an open session ends)")
        return 0
    book.add(name, _password(args.password_stdin, name))
    print(f"operator {name} may sign in: {book.path}")
    return 0


def _password(from_stdin: bool, name: str) -> str:
    from ..operator.accounts import check_password

    if from_stdin:
        return check_password(sys.stdin.readline().rstrip("\r\n"))
    if not sys.stdin.isatty():
        raise UsageError("bench line operators add: no terminal to ask the password at",
                         hint="run it at a terminal, or pipe the password in with --password-stdin")
    first = check_password(getpass.getpass(f"password for {name}: "))
    if getpass.getpass("the same again: ") != first:
        raise UsageError("the two passwords differ: nothing changed", hint="run the command again")
    return first
