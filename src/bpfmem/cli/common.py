"""What several commands make of their parsed arguments: the config file, the loader, the
kernel profile(s), the what-if, the object list. Each turns a bad value into the one
:class:`~bpfmem.errors.UsageError` (exit 2)."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from typing import Iterator, Sequence

from ..errors import UsageError


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


def profile_of(args: argparse.Namespace):
    """The one kernel profile of a command's --kernel/--kernel-btf/--cpus (api.profile)."""
    from .. import api
    with as_usage():
        return api.profile(args.kernel, btf=getattr(args, "kernel_btf", None), cpus=args.cpus,
                           page_size=getattr(args, "page_size", None),
                           arch=getattr(args, "arch", None))


def kernels_of(args: argparse.Namespace, cfg) -> list:
    """The kernels a one-kernel command (maps, diff, advise) runs on: --kernel/--kernel-btf
    (--kernel may name a [[kernels]] entry of bpfmem.toml), else every kernel bpfmem.toml
    lists, one after the other, else this host's."""
    from dataclasses import replace

    from .. import api
    btf = getattr(args, "kernel_btf", None)
    with as_usage():
        if args.kernel or btf:
            entry = next((e for e in cfg.kernel_entries if e.name == args.kernel), None)
            if entry is not None and not btf:
                cpus = (args.cpus,) if args.cpus else entry.cpus
                return api.profiles((), cfg.cpus, (), [replace(entry, cpus=cpus)])
            return [profile_of(args)]
        if cfg.kernel_entries or cfg.kernels:
            return api.profiles(cfg.kernels, [args.cpus] if args.cpus else cfg.cpus, (),
                                cfg.kernel_entries)
        return [profile_of(args)]


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


def _has_magic(path: str) -> bool:
    """glob.has_magic without importing glob (and its re, fnmatch) for plain paths."""
    return any(c in path for c in "*?[")


def expand_objects(arguments: Sequence[str]) -> list[str]:
    """The one rule for object arguments in every command: each argument is a path, a glob
    bpfmem expands itself when quoted ('build/*.o'), or a quoted list of them
    ('a.o b/*.o'); a glob that matches nothing is a usage error, not a silent empty list. A file
    that exists is itself, even with glob characters in its name (``build[arm]/x.o``)."""
    import os
    paths: list[str] = []
    for arg in arguments:
        parts = [arg] if os.path.exists(arg) else arg.split()
        for part in parts:
            if not os.path.exists(part) and _has_magic(part):   # build[arm]/x.o: a file
                import glob
                hits = sorted(glob.glob(part))
                if not hits:
                    raise UsageError(f"no file matches {part!r}")
                paths += hits
            else:
                paths.append(part)
    return paths


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
