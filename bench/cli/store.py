"""`bench store verify`, `bench store roles`: the results store's hash chain and its PostgreSQL roles
(docs/results.md, docs/security/store-chain.md)."""
from __future__ import annotations

import argparse
import sys

from phonebench.core.exits import STORE_CHAIN_BROKEN
from . import Subcommands
from .results import _open, _store_args


def register(subparsers: Subcommands) -> None:
    p = subparsers.add_parser("store", help="the results store: verify its hash chain, set up its PostgreSQL roles")
    sub = p.add_subparsers(dest="store_command", metavar="verify|roles", required=True)
    verify = sub.add_parser("verify", help="walk the store's hash chain; name the first record that does not match")
    _store_args(verify)
    verify.add_argument("--all", action="store_true", help="list every problem, not only the first")
    verify.add_argument("--expect-head", metavar="DIGEST",
                        help="a head digest noted earlier (lab log, nightly report): it must still be in the chain")
    verify.set_defaults(func=store_verify)
    roles = sub.add_parser("roles", help="PostgreSQL: create the writer role (INSERT/SELECT, no UPDATE/DELETE of "
                                         "records) on the store, as its owner")
    _store_args(roles)
    roles.add_argument("--writer", default="phonebench_writer", help="the group role stations write as")
    roles.add_argument("--login", help="also create this login role, a member of the writer role")
    roles.add_argument("--print", action="store_true", dest="print_only", help="print the SQL, change nothing")
    roles.set_defaults(func=store_roles)


def store_verify(args: argparse.Namespace) -> int:
    from ..store.db import describe
    from ..store.verify import head_in_chain, verify_store

    with _open(args) as store:  # an existing store only, migrated to the current schema
        url = store.url
    result = verify_store(url)
    if result.intact and args.expect_head and not head_in_chain(url, args.expect_head):
        print(f"bench store verify: the chain is consistent but does not hold the noted head {args.expect_head}: "
              f"it was rewritten or cut back since (exit {STORE_CHAIN_BROKEN})", file=sys.stderr)
        return STORE_CHAIN_BROKEN
    if result.intact:
        print(f"intact: {result.entries} chain entries, {result.records} records; head {result.head}")
        print("note the head digest in the lab log: `bench store verify --expect-head DIGEST` later shows the chain "
              "still holds it")
        return 0
    shown = result.problems if args.all else result.problems[:1]
    for problem in shown:
        print(f"BROKEN: {problem}", file=sys.stderr)
    more = len(result.problems) - len(shown)
    print(f"bench store verify: results store {describe(url)} does not match its chain"
          + (f" ({more} more problem{'s' if more != 1 else ''}: --all lists them)" if more else "")
          + f"; {result.entries} entries, {result.records} records (exit {STORE_CHAIN_BROKEN})", file=sys.stderr)
    return STORE_CHAIN_BROKEN


def store_roles(args: argparse.Namespace) -> int:
    from ..store.roles import apply_roles, roles_sql

    if args.print_only:
        for statement in roles_sql(args.writer, args.login):
            print(f"{statement};")
        return 0
    with _open(args) as store:  # migrated first: the grants cover every table of the current schema
        url = store.url
    for statement in apply_roles(url, args.writer, args.login):
        print(f"{statement};")
    print(f"writer role {args.writer} set up: stations connect as a member of it (docs/results.md)")
    return 0
