"""Progress of long operator commands (metrics refresh, ledger export): a tqdm bar when
the progress stream is a terminal, plain lines otherwise (logs, CI, pipes), so that
whatever reads the output is not fed carriage returns and escape codes."""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


class Progress:
    """Counts `total` steps. `step(line)` advances by one and shows `line`: above the bar
    on a terminal, as a line of its own otherwise (every step when `every` is 1, else
    only every `every` steps and at the end, so a million rows do not print a million
    lines)."""

    def __init__(self, total: int, description: str, stream: TextIO | None = None,
                 lines: TextIO | None = None, every: int = 1, bar: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.lines = lines if lines is not None else self.stream
        self.total, self.description, self.every, self.done = total, description, every, 0
        isatty = getattr(self.stream, "isatty", lambda: False)
        self.bar = tqdm(total=total, desc=description, file=self.stream, leave=True) \
            if (isatty() if bar is None else bar) else None

    def step(self, line: str | None = None) -> None:
        self.done += 1
        if self.bar is not None:
            if line:
                self.bar.write(line, file=self.lines)
            self.bar.update(1)
        elif self.done % self.every == 0 or self.done == self.total:
            text = line or f"{self.description}: {self.done}/{self.total}"
            print(text, file=self.lines, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
