"""The product docs speak of the product, not of how it was made.

README.md, docs/*.md and the experiments' and examples' READMEs name no issue number ("issue 26",
"#26"), no working session, no "slice" of work, no commit hash as history, no session-numbered run id
(``s14-base``) and no word of what the product was ("the earlier pattern"): each says what it is. The history is
CHANGELOG.md's; how to work on the project is CONTRIBUTING.md's.

What the rules leave alone, because the product's own words need it: c10d's per-group sequence numbers
(``all_reduce #26``, ``op #80``), an upstream reference (``pytorch/pytorch#58467``), a tensor's slice
(``its slice of the sequence``), and code (fenced blocks and inline spans: ``session.once(key, factory)``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PRODUCT_DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "experiments").glob("*/README.md")),
    *sorted((ROOT / "examples").glob("*/README.md")),
    ROOT / "tests" / "fixtures" / "README.md",
]

_LINK_TARGET = re.compile(r"\]\([^)\s]*\)|^\[[^\]\n]+\]:[ \t]*\S+", re.M)  # inline, or a reference's target
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
_SPAN = re.compile(r"`[^`]*`")

# c10d's sequence numbers follow the op's name (docs/failures.md, the hang diagnosis): not a reference
_SEQUENCE = re.compile(
    r"\b(?:op|barrier|send|recv|isend|irecv|broadcast|reduce|gather|scatter|all_\w+|reduce_\w+)\s+#\d+"
)

# (what it is, the pattern, whether code spans and fenced blocks are searched too)
RULES = [
    ("an issue number", re.compile(r"\b(?:issues?|pr|pull request|tickets?)\s*#?\d+", re.I), True),
    ("a reference '#N'", re.compile(r"(?<![\w/.#-])#\d+\b"), False),
    ("a working session", re.compile(r"\bsessions?\b", re.I), False),
    (
        "a slice of work",
        re.compile(
            r"\b(?:first|second|third|fourth|next|this|that|last|previous|later|earlier|final|current|another)"
            r"\s+slices?\b|\bslices?\s+\d",
            re.I,
        ),
        True,
    ),
    ("a commit as history", re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"), False),
    ("a session-numbered run id", re.compile(r"\bs\d{1,3}-[a-z][\w-]*"), True),
    (
        "what the product was",
        re.compile(
            r"\bthe\s+(?:earlier|former|old|previous)\s+(?:pattern|version|design|behaviou?r|code|implementation|"
            r"default|format|rule)s?\b",
            re.I,
        ),
        False,
    ),
    # a development machine's dated or load-stamped figures go in docs/measurements/, which the manuals link
    ("a dated measurement", re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), False),
    ("a machine's load at a measurement", re.compile(r"\bload(?: average)?(?: of| about| at)? ~?\d", re.I), False),
]


def _blank(m: re.Match) -> str:
    """The match replaced by spaces, its newlines kept (line numbers stay right)."""
    return re.sub(r"[^\n]", " ", m.group(0))


def findings(text: str) -> list[tuple[int, str, str]]:
    """(line, rule, the words) of every rule a document breaks."""
    no_code = _SPAN.sub(_blank, _FENCE.sub(_blank, text))
    no_code = _SEQUENCE.sub(_blank, no_code)
    no_code = _LINK_TARGET.sub(_blank, no_code)  # a link to a dated file of docs/measurements/ is where they go
    out = []
    for what, pattern, in_code in RULES:
        for m in pattern.finditer(text if in_code else no_code):
            out.append((text.count("\n", 0, m.start()) + 1, what, m.group(0)))
    return sorted(out)


@pytest.mark.parametrize("path", PRODUCT_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_product_doc_names_no_development_history(path: Path):
    bad = findings(path.read_text())
    assert not bad, f"{path.relative_to(ROOT)}: history belongs in CHANGELOG.md, working rules in CONTRIBUTING.md\n" + (
        "\n".join(f"  line {n}: {what}: {words!r}" for n, what, words in bad)
    )


def test_changelog_and_contributing_exist_and_are_linked():
    readme = (ROOT / "README.md").read_text()
    for name in ("CHANGELOG.md", "CONTRIBUTING.md"):
        assert (ROOT / name).is_file(), name
        assert f"({name})" in readme, f"README.md links no {name}"


# --- the rules themselves, on lines of the old docs and on what the product must still say --------


@pytest.mark.parametrize(
    "line",
    [
        "Issue 26's first slice. The experiment trains one model family",
        "## Not done yet (issue 26)",
        "deadlock demonstration (issue 24).",
        "fixed in #26, see there",
        "With the new default, at 742f0ce (after the session's restructuring; load 0.5 at its start),",
        "Its output here (2 ranks at load 1.7, `RUN_ID=s14-um2`; pytest's warnings left out):",
        "the next slice adds the NCCL cases",
        "each fails with status 6. The earlier pattern, `(index + 3·rank) % 8 + 1`, let all of these pass",
        "Measured on this 2-core machine, 2026-12-01, with other work running",
        "(2 cores, shared with other jobs: load average 9–14 during the cold builds)",
        "5 min 41 s at load ~8, of which `make image` 216 s",
    ],
)
def test_rules_catch_history(line):
    assert findings(line), line


@pytest.mark.parametrize(
    "line",
    [
        "`sp` | LayerNorm | its slice of the sequence |",
        "the in-place form uses a slice of the output as input (as nccl-tests)",
        "# ranks 0,2 wait in all_reduce #26 (case ...); rank 1 never entered it",
        "both ranks are at op #80, in barrier #80",
        "Gloo in different orders on different ranks and abort the job, pytorch/pytorch#58467)",
        "gets it from `session.once(key, factory)`; `resolve=` is for sizes",
        "```\nbuild=lambda ctx, session, s=s: my_buffers(ctx, s)\n```",
        "measured with `make bench-cpu RESULTS=/tmp/bench` in 173.4 s, 30 of 436 cases cut",
        "a run never writes into an earlier attempt's directory; the directory of an earlier run",
        "records its load average at the start (`load_avg`)",
        "its times: [measurements](measurements/2026-12-06-cpu-2core.md#the-doctor)",
        "[readme-run]: docs/measurements/2026-12-06-cpu-2core.md#the-readme-excerpt",
    ],
)
def test_rules_leave_the_product_alone(line):
    assert not findings(line), findings(line)


def test_the_image_holds_the_docs_the_tests_read():
    """The image runs the unit tier (`docker run ... make test-cpu`): every doc this test and
    tests/unit/test_docs_commands.py read must be copied into it."""
    copied = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            copied.update(w.rstrip("/") for w in line.split()[1:-1])
    wanted = {"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs", "experiments", "examples"}
    assert wanted <= copied, f"the Dockerfile copies none of {sorted(wanted - copied)}"


_OUTSIDE = re.compile(r"\breview_[a-z]+(?:_\d+)?(?:\.md)?\b")
"""A review document of the project's research notes (``review_<theme>_<n>.md``), which live outside the
repository: a reader of the repository cannot open it, so a rule or a number says its reason in place."""
_TREES = ("suite", "experiments", "examples", "scripts", "tests", "docs")


def test_no_file_cites_a_document_outside_the_repository():
    files = [ROOT / f for f in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "Makefile")]
    files += [p for t in _TREES for p in sorted((ROOT / t).rglob("*")) if p.suffix in (".py", ".md")]
    me = Path(__file__).resolve()
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        if p.resolve() != me
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert found == [], found
    assert _OUTSIDE.search("(review_structure_2.md §5.2)") and _OUTSIDE.search("every run of review_verification_2")
