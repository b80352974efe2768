"""``python -m app <command>``: operations for the app.

Core commands live here; each domain may add its own in ``app/<domain>/cli.py`` with a
``register(subparsers)`` function (for example ``users create``, ``ledger check``,
``worker``, ``simulate``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app import i18n_tools, worker
from app.accounts import cli as accounts_cli
from app.catalog import cli as catalog_cli
from app.ledger import cli as ledger_cli
from app.migrate import upgrade
from app.orders import cli as orders_cli
from app.seed import seed_demo
from app.settings import Settings

CLI_MODULES = (accounts_cli, catalog_cli, ledger_cli, orders_cli, worker)


def cmd_upgrade(args: argparse.Namespace) -> int:

    upgrade(Settings().database_url)
    print("database at the latest migration")
    return 0


def cmd_seed(args: argparse.Namespace) -> int:

    for line in seed_demo():
        print(line)
    return 0


def cmd_i18n(args: argparse.Namespace) -> int:

    if args.action == "compile":
        for p in i18n_tools.compile_all():
            print(f"compiled {p.relative_to(i18n_tools.ROOT)}")
        return 0
    if args.action == "missing":
        n = i18n_tools.write_missing(Path(args.out))
        print(f"{n} untranslated strings written to {args.out}")
        return 0
    todo = i18n_tools.missing()
    for mid, where in sorted(todo.items()):
        print(f"{where[0]}: {mid!r}")
    print(f"{len(todo)} strings without a Chinese translation")
    return 1 if todo else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    sub = parser.add_subparsers(dest="command", required=True)
    db = sub.add_parser("db", help="database migrations")
    db_sub = db.add_subparsers(dest="action", required=True)
    db_sub.add_parser("upgrade", help="migrate to head").set_defaults(func=cmd_upgrade)
    sub.add_parser("seed", help="seed demo data once (catalog, demo accounts)").set_defaults(
        func=cmd_seed
    )
    i18n = sub.add_parser("i18n", help="translation catalogs")
    i18n.add_argument("action", choices=["compile", "check", "missing"])
    i18n.add_argument("--out", default="var/missing.po")
    i18n.set_defaults(func=cmd_i18n)
    for module in CLI_MODULES:
        module.register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
