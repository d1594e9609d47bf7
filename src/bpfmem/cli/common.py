"""What several commands make of their parsed arguments: the config file, the loader, the
kernel profile(s), the what-if, the object list. Each turns a bad value into the one
:class:`~bpfmem.errors.UsageError` (exit 2)."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager

from ..errors import UsageError

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Iterator, Sequence


@contextmanager
def as_usage(*kinds: type[Exception]) -> Iterator[None]:
    """Inside, a ValueError (or one of ``kinds``) is a usage error: the library says a value
    the user gave is wrong, in one line; the CLI exits 2 with it."""
    try:
        yield
    except (ValueError, *kinds) as e:
        raise UsageError(str(e)) from None


def config_of(args: argparse.Namespace):
    """bpfmem.toml (--config FILE, else found from the current directory)."""
    from ..config import load_config
    return load_config(getattr(args, "config", None))


def loader_of(name: str | None, cfg=None) -> str:
    """--loader NAME, else bpfmem.toml's `loader`, else auto; a bad name is a usage error."""
    name = name or (cfg.loader if cfg is not None else None) or "auto"
    if name == "auto":
        return name
    from .. import api
    with as_usage():
        return api.loader_name(name)


def profile_of(args: argparse.Namespace, cfg=None):
    """The one kernel profile of a one-kernel command (estimate, maps --from-bpftool):
    --kernel (a release or a [[kernels]] name)/--kernel-btf/--cpus, else this host's, by
    :func:`bpfmem.api.resolve_kernels`; several is a usage error."""
    found = kernels_of(args, config_of(args) if cfg is None else cfg, use_defaults=False)
    if len(found) != 1:
        raise UsageError(f"this command models one kernel, not {len(found)}: name one with "
                         "--kernel and --cpus")
    return found[0]


def kernels_of(args: argparse.Namespace, cfg=None, *, use_defaults: bool = True) -> list:
    """The kernels a command runs on, by the one rule (:func:`bpfmem.api.resolve_kernels`):
    --kernel (releases or [[kernels]] names of bpfmem.toml), --kernel-btf files, --cpus;
    else every kernel bpfmem.toml lists; else this host's. Several: one result each."""
    from .. import api
    from . import args as a

    def listed(value) -> list[str]:
        values = value if isinstance(value, list) else [value] if value else []
        return [x for v in values for x in a.comma_list(str(v))]
    cpus = [a.positive(c) for c in listed(getattr(args, "cpus", None))]
    with as_usage(argparse.ArgumentTypeError):
        return api.resolve_kernels(
            listed(getattr(args, "kernel", None)), listed(getattr(args, "kernel_btf", None)),
            cpus, default_cpus=cfg.cpus if cfg is not None else (),
            entries=cfg.kernel_entries if cfg is not None else (),
            defaults=cfg.kernels if cfg is not None else (), use_defaults=use_defaults,
            page_size=getattr(args, "page_size", None), arch=getattr(args, "arch", None))


def whatif_of(args: argparse.Namespace, cfg):
    """bpfmem.toml's `set` and [dynamic] with --set/--size-ratio/--node-memory."""
    from .. import api
    from ..errors import WhatIfError
    try:
        return api.make_whatif(list(cfg.sets) + list(args.set), args.size_ratio,
                               args.node_memory, cfg.dynamic)
    except WhatIfError as e:
        raise UsageError(whatif_message(e)) from None
    except ValueError as e:
        raise UsageError(str(e)) from None


def whatif_message(e) -> str:
    """A WhatIfError in the command line's words."""
    if e.kind == e.SETTING:
        return f"bad --set {e.setting!r}: {e.problem}"
    return "dynamic sizing needs both --size-ratio and --node-memory"


def size_of(text: str, option: str | None = None) -> int:
    """A size as people write it (128Mi, 1.5Gi, 500M, bytes); a bad one is a usage error
    (prefixed with ``option`` when given)."""
    from ..units import parse_size
    try:
        return parse_size(text)
    except ValueError as e:
        raise UsageError(f"{option}: {e}" if option else str(e)) from None


def expand_objects(arguments: Sequence[str]) -> list[str]:
    """The one rule for object and binary arguments in every command
    (:func:`bpfmem.api.expand_paths`): paths, quoted globs, quoted lists; a glob matching
    nothing is a usage error; a file named twice is read once, said on stderr."""
    from .. import api
    with as_usage():
        found = api.expand_paths(arguments)
    for n in found.notes:
        print(f"bpfmem: note: {n}", file=sys.stderr)
    return list(found.paths)


def default_objects(arguments: Sequence[str]) -> list[str]:
    """The objects given (globs expanded), or the bundled example, said on stderr."""
    paths = expand_objects(arguments)
    if not paths:
        from .. import api
        paths = [str(api.example_object_path())]
        print(f"bpfmem: no object given; showing the bundled example:\n  {paths[0]}",
              file=sys.stderr)
    return paths


def unmodelled_releases(kernels: list[str]) -> list[str]:
    """A warning per release newer than the newest one bpfmem models."""
    from .. import api
    newest_rel = api.newest_modelled_release()
    newest = ".".join(map(str, newest_rel))
    out = []
    for k in kernels:
        try:
            rel = api.parse_release(k)
        except ValueError:
            continue            # a [[kernels]] name, or a usage error the model reports
        if rel[:2] > newest_rel:
            out.append(f"Linux {k} is newer than the newest release bpfmem models ({newest}): "
                       f"its figures are {newest}'s rules, unchecked on {k}")
    return out


def note_leftovers() -> None:
    """Before making scratch state: remove (and name) what killed runs left behind."""
    from .. import api
    removed, failed = api.sweep_leftovers()
    if removed:
        print(f"bpfmem: removed what an earlier run killed before cleaning up left behind: "
              f"{', '.join(removed)}", file=sys.stderr)
    if failed:
        print(f"bpfmem: warning: could not remove leftovers of an earlier run: "
              f"{', '.join(failed)}", file=sys.stderr)


def progress(what: str):
    """A spinner on stderr saying ``what`` when stderr is a terminal: (status, say) where
    ``say(text)`` shows "``what`` text"; (None, None) otherwise."""
    if not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    status = Console(stderr=True).status(what)
    status.start()
    return status, (lambda text: status.update(f"{what} {text}"))
