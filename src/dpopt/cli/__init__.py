"""The command-line tool ``dpopt``: commands and file I/O; it fits only through :mod:`dpopt.api`."""

from dpopt.cli.commands import main

__all__ = ["main"]
