"""Notes that end by pointing at something the user can do (price a map at its real size,
measure the programs, sample faster). analysis/ knows what the remedy is, never how a
command line spells it: a :class:`Hinted` note carries the remedy as a value and reads, as a
plain string, as its words without it; whoever shows it to a user words the remedy
(``report/hints.word``: the CLI's flags)."""

from __future__ import annotations

# the remedies a note can point at
RESIZE = "resize"                    # price a map at the size the agent sets at load (arg: map)
MEASURE_PROGRAMS = "measure-programs"  # load the programs for real and measure them
SAMPLE_FASTER = "sample-faster"      # sample a trace more often


class Hinted(str):
    """A note ``text`` + (the remedy ``hint``, worded by the caller) + ``tail``; ``arg`` is
    what the remedy names (a map). As a string it is ``text + tail``."""

    def __new__(cls, text: str, hint: str, arg: str = "", tail: str = ""):
        self = super().__new__(cls, text + tail)
        self.text, self.hint, self.arg, self.tail = text, hint, arg, tail
        return self

    def __reduce__(self):
        return (Hinted, (self.text, self.hint, self.arg, self.tail))
