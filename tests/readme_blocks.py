"""The command blocks of README.md files, as the tests that run them see them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^```(?P<lang>[A-Za-z]*)\n(?P<body>.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    path: Path          # the README
    line: int           # line of the opening fence
    lang: str           # "sh", "python", "" ...
    body: str           # the text between the fences
    heading: str        # the nearest "## " heading above it

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(text: str, path: Path) -> list[Block]:
    """Every fenced block of a Markdown text, with its line and the section it is in."""
    out = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()]
        headings = re.findall(r"^#+ (.+)$", before, re.M)
        out.append(Block(path, before.count("\n") + 1, m.group("lang"), m.group("body"),
                         headings[-1] if headings else ""))
    return out


def read_blocks(path: Path) -> list[Block]:
    return parse_blocks(path.read_text(), path)


def readmes() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "examples").glob("*/README.md"))]


def quickstart_commands() -> list[str]:
    """The README's quick start: its shell blocks under "Quick start", in order."""
    return [b.body.strip() for b in read_blocks(ROOT / "README.md")
            if b.lang == "sh" and b.heading.startswith("Quick start")]
