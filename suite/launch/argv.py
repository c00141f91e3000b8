"""The launcher's command line as argparse reads it, with bad input refused like any other bad input: one line
and status 2 (ConfigError), never argparse's usage text."""

from __future__ import annotations

import argparse

from suite.common.knobs import KNOBS
from suite.errors import ConfigError


class OptionParser(argparse.ArgumentParser):
    """argparse whose usage errors (a missing value, an unknown option) are one line: a ConfigError."""

    def parse_args(self, args=None, namespace=None):
        return super().parse_args(None if args is None else join_dash_values(list(args)), namespace)

    def error(self, message):
        raise ConfigError(f"{message} (python -m suite.launch --help lists the options)")


def join_dash_values(argv: list[str]) -> list[str]:
    """``--min-bytes -1K`` as ``--min-bytes=-1K``: argparse takes a value that starts with '-' (other than a plain
    negative number) for an option, so the knob's own check (MIN_BYTES=-1K: not a size) would never see it."""
    flags, out = {f"--{k.flag}" for k in KNOBS}, []
    for arg in argv:
        if out and out[-1] in flags and arg.startswith("-") and not arg.startswith("--"):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out
