"""Every shell command shown in README.md, CONTRIBUTING.md, docs/*.md and the experiments' READMEs (```sh
blocks) is checked.

- ``make <target> [VAR=value ...]``: ``make -n`` accepts the target with those variables, and every
  VAR is one the Makefiles define or export, an experiment knob of ``suite/common/knobs.py`` ENV_KNOBS,
  or a named pass-through variable (PASS_THROUGH, each with the file that reads it);
- ``python -m suite.<mod> ...``: the module's own argparse accepts the arguments (its ``main`` is
  called with ``parse_args`` stopped right after parsing, so nothing runs);
- ``python <script> ...`` with an argparse parser: the same, the script run as ``__main__`` in this
  process (no second interpreter to import torch into) and stopped right after parsing;
- ``.venv/bin/<tool> <sub> ...``, and ``python <script>`` without argparse: ``--help`` exits 0;
- cheap commands without side effects (CHEAP) run for real;
- everything else is in SKIPS with its reason, and a line no rule covers fails.

``make -n`` still executes recipe lines that contain ``$(MAKE)``; the check therefore runs it with
``SHELL=/bin/true`` so that such a line (e.g. validate-predict's loop of compose runs) does nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from suite.common.config import ConfigError
from suite.common.knobs import ENV_KNOBS
from suite.common.switches import SWITCHES, check_switches

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "experiments").glob("*/README.md")),
    *sorted((ROOT / "examples").glob("*/README.md")),
]

# Lines (after placeholder substitution) whose first word is one of these are not run or parsed.
SKIPS = {
    "docker": "needs a Docker engine and builds or starts containers (tests/docker covers them)",
    "sbatch": "submits a Slurm job (tests/e2e/test_slurm.py covers the batch script)",
    "kubectl": "needs a Kubernetes cluster (tests/unit/test_k8s.py checks what make k8s renders for it)",
    "torchrun": "starts training processes",
    "python -m torch.distributed.run": "torchrun by another name: starts training processes",
    "git": "changes the checkout",
    "echo 200000": "writes a kernel setting (the vCPUs' halt-poll window), as root",
    "echo 0": "puts a kernel setting back (the vCPUs' halt-poll window), as root",
}

# A line that is only a comment (``# the same without make; ...``) is prose, not a command.
COMMENT = "comment: prose inside the block, nothing to run"

# Make variables that the recipes do not define but pass on: GNU make puts command-line variables
# into the recipes' environment, where the named file reads them.
PASS_THROUGH = {
    "GPUS": "Makefile",  # bench-gpu: $(or $(GPUS), every visible GPU)
    "NODE_RANK": "suite/launch/cli.py",
    "MASTER_ADDR": "suite/launch/cli.py",
    "MASTER_PORT": "suite/launch/cli.py",
    "COMPOSE_FILES": "docker/compose-run.sh",
    "NODE0_GPUS": "docker-compose.gpu.yml",
    "NODE1_GPUS": "docker-compose.gpu.yml",
}

# Commands cheap enough, and free of side effects, to run for real.
CHEAP = {("make", "help")}

_DEF = re.compile(r"^\s*(?:override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?=|:=|::=|\+=|=)", re.M)
_EXPORT = re.compile(r"^\s*export\s+([A-Za-z0-9_ ]+?)\s*(?:$|\?=|:=|=)", re.M)
_VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_PLACEHOLDER = re.compile(r"<[^<>\s][^<>]*>")


def make_variables(root: Path = ROOT) -> set[str]:
    """Variables the Makefile and mk/*.mk define (NAME ?=, :=, =, +=) or export, and ENV_KNOBS."""
    names: set[str] = {k.env for k in ENV_KNOBS}
    for f in [root / "Makefile", *sorted((root / "mk").glob("*.mk"))]:
        text = f.read_text()
        names.update(m.group(1) for m in _DEF.finditer(text))
        for m in _EXPORT.finditer(text):
            names.update(m.group(1).split())
    return names


def sh_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command) of every ```sh block line, continuations joined."""
    out, inside, buf, start = [], False, "", 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            inside = line.strip() == "```sh"
            continue
        if not inside:
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, (buf + line).strip()))
        buf = ""
    return out


def simple_commands(line: str, placeholder: str) -> list[list[str]]:
    """The simple commands of a doc line: comments dropped, <placeholders> and [optional] parts
    filled in, `...` dropped, split on && ; || |, redirections removed."""
    line = _PLACEHOLDER.sub(placeholder, line)
    line = re.sub(r"\[([^\[\]]*)\]", r"\1", line)  # [RUN=...] [--out DIR]: optional parts, shown
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commentchars = "#"
    cmds, cur, skip_next = [], [], False
    for tok in lex:
        if skip_next:
            skip_next = False
        elif tok in ("&&", "||", ";", "|", "&"):
            cmds.append(cur)
            cur = []
        elif tok in (">", ">>", "<", "2>"):
            skip_next = True
        elif tok != "...":
            cur.append(tok)
    cmds.append(cur)
    return [c for c in cmds if c]


class _Parsed(BaseException):
    """Raised by the patched parse_args once the arguments parsed: main stops before doing anything."""


@contextlib.contextmanager
def _stop_at_parse_args():
    orig = argparse.ArgumentParser.parse_args

    def stop(self, a=None, ns=None):
        raise _Parsed(orig(self, a, ns))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", stop):
        yield


def argparse_accepts(module: str, args: list[str]) -> tuple[bool, str]:
    mod = importlib.import_module(module)
    if hasattr(mod, "__path__"):  # a package: `python -m` runs its __main__
        mod = importlib.import_module(module + ".__main__")
    with _stop_at_parse_args():
        try:
            mod.main(list(args))
        except _Parsed:
            return True, ""
        except SystemExit as e:
            return False, f"argparse exited {e.code}"
    return False, "main returned without calling parse_args"


def script_accepts(path: Path, args: list[str]) -> tuple[bool, str]:
    """A script with an argparse parser, run as ``__main__`` until its arguments are parsed."""
    with _stop_at_parse_args(), mock.patch.object(sys, "argv", [str(path), *args]):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except _Parsed:
            return True, ""
        except SystemExit as e:
            return False, f"argparse exited {e.code}"
    return False, "the script ran to its end without calling parse_args"


def check(words: list[str], variables: set[str], tmp: str) -> tuple[str, str]:
    """('ok'|'skip'|'fail', detail) for one simple command."""
    env_prefix, switches = [], {}
    while words and _VAR.match(words[0]):
        name = _VAR.match(words[0]).group(1)
        if name in SWITCHES:  # read from the environment by the launcher and the ranks: make passes it on
            switches[name] = words[0].partition("=")[2]
        else:
            env_prefix.append(name)
        words = words[1:]
    if not words:
        return "fail", "only variable assignments"
    try:
        check_switches(switches)
    except ConfigError as e:
        return "fail", str(e)
    for key, reason in SKIPS.items():
        if words[: len(key.split())] == key.split():
            return "skip", f"{key}: {reason}"
    if words[0] == "make":
        assigns = [w for w in words[1:] if _VAR.match(w)]
        targets = [w for w in words[1:] if not _VAR.match(w) and not w.startswith("-")]
        known = variables | set(PASS_THROUGH)
        unknown = [v for v in env_prefix + [_VAR.match(a).group(1) for a in assigns] if v not in known]
        if unknown:
            return "fail", f"variables no Makefile defines or exports: {unknown}"
        if not targets:
            return "fail", "no target"
        if tuple(words) in CHEAP:
            r = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=60)
            return ("ok", "ran") if r.returncode == 0 else ("fail", f"exit {r.returncode}: {r.stderr[-300:]}")
        r = subprocess.run(
            ["make", "-n", "SHELL=/bin/true", *targets, *assigns], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        return ("ok", "make -n") if r.returncode == 0 else ("fail", f"make -n exit {r.returncode}: {r.stderr[-300:]}")
    py = {"python", "python3", ".venv/bin/python"}
    if words[0] in py and len(words) > 2 and words[1] == "-m" and words[2].startswith("suite."):
        ok, why = argparse_accepts(words[2], words[3:])
        return ("ok", "parsed") if ok else ("fail", why)
    if words[0] in py and len(words) > 1 and words[1].endswith(".py"):
        script = ROOT / words[1]
        if "ArgumentParser(" in script.read_text():
            ok, why = script_accepts(script, words[2:])
            return ("ok", "parsed") if ok else ("fail", why)
        cmd = [sys.executable, words[1], "--help"]
    elif words[0].startswith(".venv/bin/"):
        # the project's venv, wherever it is (.venv here, /opt/venv in the image): this interpreter's bin
        tool = Path(sys.executable).parent / words[0].removeprefix(".venv/bin/")
        cmd = [str(tool), *[w for w in words[1:2] if not w.startswith("-")], "--help"]
    else:
        return "fail", f"no rule checks {words[0]!r}: add one, or a named entry in SKIPS"
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return ("ok", "--help") if r.returncode == 0 else ("fail", f"{cmd} exit {r.returncode}")


def _all_lines():
    for path in DOCS:
        for n, line in sh_lines(path):
            yield pytest.param(path, n, line, id=f"{path.relative_to(ROOT)}:{n}")


@pytest.fixture(scope="module")
def variables():
    return make_variables()


@pytest.mark.parametrize("path,lineno,line", list(_all_lines()))
def test_doc_command(path, lineno, line, variables, tmp_path):
    if line.lstrip().startswith("#"):
        pytest.skip(COMMENT)
    results = [check(c, variables, str(tmp_path)) for c in simple_commands(line, str(tmp_path / "run"))]
    assert results, f"{path.name}:{lineno}: no command found in {line!r}"
    bad = [d for s, d in results if s == "fail"]
    assert not bad, f"{path.name}:{lineno}: {line}\n  " + "\n  ".join(bad)
    if all(s == "skip" for s, _ in results):
        pytest.skip("; ".join(d for _, d in results))


def test_docs_have_commands():
    assert sum(len(sh_lines(p)) for p in DOCS) > 40
    assert (ROOT / "docs").is_dir() and len(DOCS) > 3


def test_pass_through_variables_are_read():
    """A pass-through variable its file no longer reads, or that became a make variable, goes."""
    for name, reader in PASS_THROUGH.items():
        assert name in (ROOT / reader).read_text(), f"{name} is not read by {reader}"
        assert name not in make_variables(), f"{name} is now a make variable: drop it from PASS_THROUGH"


# --- the checker itself, on synthetic doc lines ---------------------------------------------------


def _check_line(line, tmp_path):
    return [check(c, make_variables(), str(tmp_path)) for c in simple_commands(line, str(tmp_path / "run"))]


def test_checker_rejects_nonexistent_target(tmp_path):
    ((s, d),) = _check_line("make no-such-target-xyz NPROC=2   # a comment", tmp_path)
    assert s == "fail" and "make -n" in d


def test_checker_rejects_unknown_variable(tmp_path):
    ((s, d),) = _check_line("make bench-cpu NO_SUCH_KNOB=3", tmp_path)
    assert s == "fail" and "NO_SUCH_KNOB" in d


def test_checker_takes_a_switch_before_make_and_checks_its_value(tmp_path):
    ((s, d),) = _check_line("SUITE_REPORT=0 make bench-cpu NPROC=2", tmp_path)
    assert s == "ok", d
    ((s, d),) = _check_line("SUITE_REPORT=maybe make bench-cpu", tmp_path)
    assert s == "fail" and d.startswith("SUITE_REPORT='maybe'"), d


def test_checker_rejects_bad_python_arguments(tmp_path):
    ((s, d),) = _check_line("python -m suite.report compare --no-such-flag", tmp_path)
    assert s == "fail"
    ((s, d),) = _check_line("python -m suite.launch --nproc 2 --no-such-option", tmp_path)
    assert s == "fail"


def test_checker_accepts_and_splits(tmp_path):
    out = _check_line("make report [RUN=results/<run-id>] && docker compose up > x.log", tmp_path)
    assert [s for s, _ in out] == ["ok", "skip"]
    ((s, _),) = _check_line("python -m suite.report compare BASE NEW [NEW ...] [--show changed]", tmp_path)
    assert s == "ok"


def test_checker_parses_a_scripts_arguments_in_process(tmp_path):
    ((s, d),) = _check_line("python examples/ddp_source_example.py --nprocs 2", tmp_path)
    assert (s, d) == ("ok", "parsed")
    ((s, d),) = _check_line("python examples/ddp_source_example.py --no-such-flag", tmp_path)
    assert s == "fail" and "argparse exited 2" in d


def test_checker_fails_uncovered_command(tmp_path):
    ((s, d),) = _check_line("curl http://example.invalid", tmp_path)
    assert s == "fail" and "SKIPS" in d


def test_sh_lines_joins_continuations(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```sh\nmake a \\\n  NPROC=2\n# only a comment\n```\n```\nmake ignored\n```\n")
    assert sh_lines(doc) == [(2, "make a    NPROC=2"), (4, "# only a comment")]
    assert simple_commands("# only a comment", "/t") == []
