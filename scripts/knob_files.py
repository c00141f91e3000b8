"""The experiments' knobs outside their folders, written from their one table: each settings field's
``metadata["env"]`` (suite.common.knobs.ENV_KNOBS) becomes a line of mk/knobs.mk (declared and exported, so
that ``make help``'s readers and ``make -n`` see it) and of docker-compose.yml's node environment (compose
passes a node only the variables its file names). A new or renamed settings field: run this, commit both.

    python scripts/knob_files.py            rewrite mk/knobs.mk and docker-compose.yml's knob lines
    python scripts/knob_files.py --check    exit 1 naming each file that differs (tests/unit/test_knobs.py)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suite.common.knobs import ENV_KNOBS, HOST_KNOBS, EnvKnob  # noqa: E402

NOT_PASSED = {"SUITE_FAKE_NODES": "pretends one host is several; compose nodes are real hosts"}
"""Experiment knobs that neither file names, each with why (a make line still passes them to a local run)."""
MK = "mk/knobs.mk"
COMPOSE = "docker-compose.yml"
BEGIN = "    # the experiments' knobs: written by python scripts/knob_files.py from their settings' fields\n"
END = "    # end of the experiments' knobs\n"
SOURCE = {"inject": "suite/inject/plan.py"}
"""Where a section's knobs are documented, where not in experiments/<section>/settings.py."""


def _passed(knobs: tuple[EnvKnob, ...]) -> dict[str, list[str]]:
    """Experiment -> its knobs' variables that the files name, in the settings' order; then the knobs the launcher
    alone reads (HOST_KNOBS: the injector's plan)."""
    out: dict[str, list[str]] = {}
    for k in (*knobs, *HOST_KNOBS):
        if k.env not in NOT_PASSED:
            out.setdefault(k.section, []).append(k.env)
    return out


def mk_text(knobs: tuple[EnvKnob, ...] = ENV_KNOBS) -> str:
    lines = [
        "# The experiments' knobs, each declared and exported (make passes a knob set on its command line or in",
        "# the environment to the launcher, which reads it once into the run's config.json). Written by",
        "# python scripts/knob_files.py from each settings field's metadata: edit experiments/<name>/settings.py.",
    ]
    for section, names in _passed(knobs).items():
        where = SOURCE.get(section, f"experiments/{section}/settings.py")
        lines += [f"# {section} ({where})", *(f"{n} ?=" for n in names)]
        lines.append("export " + " ".join(names))
    return "\n".join(lines) + "\n"


def compose_text(current: str, knobs: tuple[EnvKnob, ...] = ENV_KNOBS) -> str:
    """``current`` (docker-compose.yml) with the lines between BEGIN and END written anew."""
    if current.count(BEGIN) != 1 or current.count(END) != 1:
        raise ValueError(f"{COMPOSE} needs one line {BEGIN.strip()!r} and one {END.strip()!r}")
    head, rest = current.split(BEGIN)
    _, tail = rest.split(END)
    body = "".join(f"    {n}: ${{{n}:-}}\n" for names in _passed(knobs).values() for n in names)
    return head + BEGIN + body + END + tail


def stale(root: Path = ROOT) -> list[str]:
    """The files whose knob lines differ from what the settings say."""
    out = []
    mk, compose = root / MK, root / COMPOSE
    if not mk.is_file() or mk.read_text() != mk_text():
        out.append(MK)
    text = compose.read_text()
    if compose_text(text) != text:
        out.append(COMPOSE)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/knob_files.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs")
    args = ap.parse_args(argv)
    differ = stale()
    if args.check:
        for f in differ:
            print(f"{f}: its knob lines differ from the settings' fields (run python scripts/knob_files.py)")
        return 1 if differ else 0
    (ROOT / MK).write_text(mk_text())
    (ROOT / COMPOSE).write_text(compose_text((ROOT / COMPOSE).read_text()))
    for f in differ:
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
