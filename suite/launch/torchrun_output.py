"""What torchrun prints, read by the launcher: its own Python traceback held back from the terminal
(``ElasticTraceback``), and the rank its failure summary names first (``root_cause``)."""

from __future__ import annotations

import re


class ElasticTraceback:
    """Keeps torchrun's own Python traceback off the terminal. When a rank fails, torchrun ends by
    raising ChildFailedError (SignalException when interrupted): a wall of frames of torchrun itself
    above its failure summary, which the launcher's lines say better. A traceback block (from an
    unprefixed ``Traceback (most recent call last):`` to its exception line) is held back until it ends;
    torchrun's (a frame of torch/distributed/run.py, or a torch.distributed.elastic exception) goes to
    ``held`` (the launcher writes it to failures/torchrun.log), also when torchrun was killed before it
    finished printing it; any other (a rank's own crash) passes through unchanged. A rank's
    ``[rank<r>]:`` line in between is shown at once. Once ``interrupted`` is set, torchrun's log lines
    (``W1205 12:00:00.5 123 .../torch/distributed/elastic/...] Received 2 death signal, shutting down
    workers``) are held too: the launcher says what an interrupt did."""

    START = "Traceback (most recent call last):"
    FRAME = 'torch/distributed/run.py", line'
    LOG = re.compile(r"[DIWEF]\d{4} [\d:.]+ +\d+ \S*torch/distributed/elastic/\S+:\d+\] ")

    def __init__(self):
        self.block: list[str] | None = None
        self.held: list[str] = []
        self.interrupted = False

    def feed(self, line: str) -> list[str]:
        """The lines to show now, given the next line of torchrun's stderr."""
        body = line.rstrip("\n")
        if self.interrupted and self.LOG.match(body):
            self.held.append(line)
            return []
        if self.block is None:
            if body != self.START:
                return [line]
            self.block = [line]
            return []
        if body.startswith("[rank"):  # a rank's line, interleaved: not part of the block
            return [line]
        self.block.append(line)
        if not body or body[0].isspace() or body.startswith(("During handling", "The above exception", self.START)):
            return []
        return self._end()  # the exception line ends the block

    def flush(self) -> list[str]:
        """At the end of the stream: a block left open (torchrun killed while it printed) ends here."""
        return self._end() if self.block else []

    def _end(self) -> list[str]:
        block, self.block = self.block or [], None
        if block[-1].startswith("torch.distributed.elastic.") or any(self.FRAME in line for line in block):
            self.held += block
            return []
        return block


def root_cause(lines: list[str]) -> dict | None:
    """The first failed rank from torchrun's error summary ("Root Cause" block)."""
    text = "".join(lines)
    i = text.rfind("Root Cause")
    if i < 0:
        return None
    block = text[i:]
    rank = re.search(r"rank\s*:\s*(\d+)", block)
    host = re.search(r"host\s*:\s*(\S+)", block)
    code = re.search(r"exitcode\s*:\s*(-?\d+)(?:.*?\((SIG\w+)\))?", block)
    if not rank or not code:
        return None
    return {
        "rank": int(rank.group(1)),
        "host": host.group(1) if host else "?",
        "exitcode": int(code.group(1)),
        "signal": code.group(2),
    }
