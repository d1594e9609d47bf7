"""The one place a :class:`~bpfmem.analysis.hints.Hinted` note's remedy becomes words: the
command line's spelling of it (analysis/ names no flag)."""

from __future__ import annotations

from ..analysis.hints import MEASURE_PROGRAMS, RESIZE, SAMPLE_FASTER, Hinted

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterable

# remedy -> how bpfmem's command line says it ({arg}: what the note names)
WORDS = {
    RESIZE: ": --set '{arg}.max_entries=N'",
    MEASURE_PROGRAMS: ": measure --programs",
    SAMPLE_FASTER: " (sample faster with --interval)",
}


def word(note: str) -> str:
    """A note as a user reads it: a Hinted note with its remedy worded, any other as is."""
    if isinstance(note, Hinted):
        return note.text + WORDS[note.hint].format(arg=note.arg) + note.tail
    return note


def words(notes: Iterable[str]) -> list[str]:
    """:func:`word` of every note, in order."""
    return [word(n) for n in notes]
