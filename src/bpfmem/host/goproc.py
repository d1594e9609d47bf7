"""One process read in detail, from outside and without changing it: its smaps by class,
whether its executable is a Go program (and which Go), the Go settings in its environment,
and, when it serves them, its runtime's own figures (Prometheus ``/metrics``) and heap
profile (``/debug/pprof/heap``).

Endpoints are the ones the user named, or found: a TCP listener the process itself holds
that is reachable on loopback (bound to 127.0.0.1, ::1 or any address), asked for
``/metrics``; when the process has a network namespace of its own (a pod's), the request is
made from inside it (one thread enters it with setns), to the pod's own loopback. Nothing
else is contacted. Every failure (endpoint down,
slow, garbage, huge; no prometheus_client) becomes a note on the reading, never an error.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from dataclasses import dataclass, field, replace

from ..errors import BpfmemError, ParseError
from ..parse.gobin import GoBuildInfo, parse_go_buildinfo
from ..parse.gometrics import (HINT, MAX_MEMORY, GoRuntimeFigures, have_parser,
                               parse_go_metrics)
from ..parse.pprof import TopFunction, parse_pprof, top_functions
from . import httpget
from .listeners import read_listeners, same_netns
from .pagemap import PageOwners, PageReader
from .smaps import MemClasses, classify_mappings, read_environ, read_exe, read_smaps

__all__ = ["Endpoints", "ProcDetail", "GoProber", "read_go_buildinfo", "GO_ENV"]

GO_ENV = ("GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS")
_RETRY_AFTER = 5.0          # seconds an endpoint that failed is left alone in a trace
_DISCOVER_EVERY = 0.25      # seconds between looks for a listener that was not there yet
_MAX_PROBES = 8             # listeners tried per look
_PROBE_TIMEOUT = 0.5
_WORKERS = 2                # endpoints read at once in a trace (threads: they share the
#                             interpreter with the sampling, so few)
_POD_WORKERS = 16           # Go processes whose endpoints a one-shot reading asks at once
_POD_BYTES = 2 * httpget.MAX_BODY   # answers those readers hold together


@dataclass(frozen=True)
class Endpoints:
    """Where to read one process's runtime (None: find it, when ``discover``)."""
    metrics: str | None = None
    pprof: str | None = None


@dataclass(frozen=True)
class ProcDetail:
    pid: int
    exe: str | None
    go: GoBuildInfo | None               # None: not a Go binary (or unreadable: see notes)
    classes: MemClasses | None
    env: dict = field(default_factory=dict)        # GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS
    figures: GoRuntimeFigures | None = None
    metrics_url: str | None = None
    top: tuple[TopFunction, ...] | None = None
    pprof_url: str | None = None
    pprof_total: int | None = None       # inuse_space over all samples
    notes: tuple[str, ...] = ()
    binary_pages: PageOwners | None = None   # the executable's present file pages, by who
    #                                          is charged (None: pagemap/kpagecgroup unread)
    file_pages: PageOwners | None = None     # the same for its other file mappings
    pages_unread: str | None = None          # why they are None
    stale: float | None = None           # a trace's: this reading is that many seconds old


def read_go_buildinfo(path: str) -> GoBuildInfo | None:
    """The build info of an executable file (mapped, not read: binaries are big)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return parse_go_buildinfo(m)


class GoProber:
    """Reads :class:`ProcDetail` for processes again and again: build info cached per
    executable file, discovered endpoints cached per process, failing endpoints left alone
    for a few seconds (a trace must not stall on them)."""

    def __init__(self, endpoints: dict | None = None, *, discover: bool = True,
                 pprof: bool = False, timeout: float = httpget.TIMEOUT,
                 max_bytes: int = httpget.MAX_BODY, root: str = "/"):
        """``endpoints``: pid -> :class:`Endpoints`; the key None names the endpoints of
        "the" Go process of the pod (the largest one, when there are several)."""
        eps = dict(endpoints or {})
        self.default: Endpoints | None = eps.pop(None, None)
        self.default_pid: int | None = None
        self.endpoints: dict = eps
        self.discover = discover
        self.pprof = pprof
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.root = root
        self._builds: dict = {}
        self._found: dict[int, str | None] = {}
        self._looked: dict[int, float] = {}
        self._failed: dict[tuple, tuple[float, str]] = {}   # (netns pid, url) -> when, why
        self._netns: dict[int, bool] = {}     # pid -> its endpoint is in its own netns
        self._no_listener: set[int] = set()   # pids a trace's last look found no listener of
        self._have_parser: bool | None = None
        self._pages: PageReader | None = None
        self._pool = None                     # background endpoint readers (a trace's)
        self._asking: dict = {}               # pid -> Future of a _Runtime
        self._answered: dict = {}             # pid -> (when, _Runtime)
        self._last: dict[int, ProcDetail] = {}
        self._read_at: dict[int, float] = {}
        self._fresh = 0                       # processes read afresh by the last reading
        self._tables: dict = {}

    # ---- pieces ----

    def _parser(self) -> bool:
        if self._have_parser is None:
            self._have_parser = have_parser()
        return self._have_parser

    def _build(self, pid: int, notes: list[str]):
        try:
            exe = read_exe(pid, self.root)
        except OSError as e:
            notes.append(f"executable unreadable: {e.strerror or e}")
            return None, None
        key = (exe.dev, exe.inode, exe.size, exe.mtime)
        if key not in self._builds:
            try:
                self._builds[key] = read_go_buildinfo(exe.open_path)
            except (OSError, ValueError) as e:
                notes.append(f"cannot read {exe.path}: {getattr(e, 'strerror', None) or e}")
                return exe, None
            except BpfmemError as e:
                notes.append(f"{exe.path}: Go build info unreadable: {e}")
                self._builds[key] = None
        return exe, self._builds[key]

    def _get(self, url: str, *, loopback_only: bool, notes: list[str],
             timeout: float | None = None, netns_of: int | None = None,
             deadline: float | None = None, budget=None) -> bytes | None:
        """The body of ``url`` (None: why not, in ``notes``); with ``budget`` (a
        :class:`~bpfmem.host.httpget.ByteBudget`) the caller gives it back."""
        now = time.monotonic()
        key = (netns_of, url)       # the same loopback URL in two pods is two endpoints
        failed = self._failed.get(key)
        if failed is not None and now - failed[0] < _RETRY_AFTER:
            notes.append(failed[1] + " (not asked again for a few seconds)")
            return None
        if deadline is not None and deadline - now <= 0.05:
            notes.append(f"{url}: not asked: the pod's endpoints used up the time they "
                         "share")
            return None
        try:
            if netns_of is not None:
                body = httpget.http_get_in_netns(netns_of, url,
                                                 timeout=timeout or self.timeout,
                                                 max_bytes=self.max_bytes, root=self.root,
                                                 deadline=deadline, budget=budget)
            else:
                body = httpget.http_get(url, timeout=timeout or self.timeout,
                                        max_bytes=self.max_bytes, loopback_only=loopback_only,
                                        deadline=deadline, budget=budget)
        except BpfmemError as e:
            self._failed[key] = (time.monotonic(), str(e))
            notes.append(str(e))
            return None
        self._failed.pop(key, None)
        return body

    def _discover(self, pid: int, notes: list[str], end: float | None = None, budget=None
                  ) -> tuple[str | None, GoRuntimeFigures | None]:
        """A loopback /metrics of ``pid`` (and the figures it just gave, when asked now),
        all its probes ending by ``end`` (default: the timeout from now)."""
        now = time.monotonic()
        if pid in self._found and (self._found[pid] is not None
                                   or now - self._looked.get(pid, 0) < _DISCOVER_EVERY):
            return self._found[pid], None
        self._looked[pid] = now
        self._found[pid] = None
        inside = pid if same_netns(pid, self.root) is False else None
        try:
            listeners = [s for s in read_listeners(pid, self.root) if s.loopback_reachable]
        except OSError as e:
            notes.append(f"its sockets are unreadable: {e.strerror or e}")
            return None, None
        if end is None:
            end = now + self.timeout    # all probes of one process: the one bound
        tried = 0
        why = None                      # the last probe's failure
        for s in listeners[:_MAX_PROBES]:
            left = end - time.monotonic()
            if left <= 0.05:
                break
            tried += 1
            host = s.connect_host
            url = f"http://{'[' + host + ']' if ':' in host else host}:{s.port}/metrics"
            quiet: list[str] = []
            body = self._get(url, loopback_only=True, notes=quiet,
                             timeout=min(_PROBE_TIMEOUT, left), netns_of=inside,
                             budget=budget)
            if body is None:
                why = quiet[-1] if quiet else why
                continue
            try:
                figures = parse_go_metrics(body.decode(errors="replace"))
            except BpfmemError as e:
                why = f"{url}: {e}"
                continue
            finally:
                if budget is not None:
                    budget.give(len(body))
            self._found[pid] = url
            self._netns[pid] = inside is not None
            return url, figures
        last = f"; the last: {why}" if why else ""
        notes.append("no loopback listener of it serves Go /metrics"
                     + (f" (tried {tried} of {len(listeners)} within {self.timeout:g}s{last})"
                        if tried < min(len(listeners), _MAX_PROBES) else
                        f" (tried {tried}{last})" if listeners else
                        " (it listens on no loopback TCP port)"))
        return None, None

    # ---- readings ----

    def read_all(self, procs, *, smaps: bool = True,
                 inodes: frozenset[int] | None = None,
                 budget: float | None = None) -> dict:
        """pid -> ProcDetail for ``procs`` (ProcMem-like: pid, rss); gone ones left out.
        ``inodes``: the pod's memory cgroups (:func:`bpfmem.host.pagemap.cgroup_inodes`), to
        say who is charged for each Go process's file pages.

        ``budget`` (seconds; a trace's): the reading stops reading processes afresh once it
        is spent, least recently read first, and gives the others' last reading (its
        ``stale`` set to its age); the endpoints are asked all at once in the background,
        each with its own deadline (the HTTP timeout), and a reading takes what has
        arrived by the end of the budget (else the last figures, with their age)."""
        if self.default is not None and self.default_pid is None:
            for p in sorted(procs, key=lambda p: -(p.rss or 0)):
                if self._build(p.pid, [])[1] is not None:
                    self.default_pid = p.pid
                    break
        if budget is None:
            return self._read_together(procs, smaps, inodes)
        return self._read_in_budget(procs, smaps, inodes, budget)

    def _read_together(self, procs, smaps, inodes) -> dict:
        """A one-shot reading: the endpoints of every Go process asked at once (a few
        threads, largest processes first) under one deadline for all of them (/metrics
        within the timeout of the start, the heap profile within twice it, their answers
        holding :data:`_POD_BYTES` at most together), while /proc is read here. Any process
        of a pod serves what it likes there: N dripping or hanging ones cost one bound,
        not N."""
        start = time.monotonic()
        go = []
        for p in sorted(procs, key=lambda p: -(p.rss or 0)):
            if self._build(p.pid, [])[1] is not None:
                go.append(p.pid)
        pool = None
        asked: dict = {}
        if go:
            from concurrent.futures import ThreadPoolExecutor
            from concurrent.futures import TimeoutError as FutureTimeout
            self._parser()
            budget = httpget.ByteBudget(_POD_BYTES)
            pool = ThreadPoolExecutor(max_workers=min(_POD_WORKERS, len(go)),
                                      thread_name_prefix="bpfmem-endpoint")
        try:
            for pid in go:
                asked[pid] = pool.submit(self._runtime, pid, self._build(pid, [])[1],
                                         start, budget)
            out = {}
            for p in procs:
                d = self._local(p.pid, smaps, inodes)
                if d is not None:
                    out[p.pid] = d
            end = start + 2 * self.timeout + 1.0    # every wait inside ends before
            for pid, fut in asked.items():
                if pid not in out or out[pid].go is None:
                    continue
                try:
                    run = fut.result(timeout=max(0.0, end - time.monotonic()))
                except FutureTimeout:  # every wait inside ends before: a last resort
                    run = _Runtime(notes=(f"its endpoints gave no answer within "
                                          f"{2 * self.timeout:g}s",))
                out[pid] = self._combine(out[pid], run)
            return out
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _read_in_budget(self, procs, smaps, inodes, budget: float) -> dict:
        start = time.monotonic()
        deadline = start + budget
        live = {p.pid for p in procs}
        for pid in [p for p in self._last if p not in live]:
            self._last.pop(pid, None)
            self._read_at.pop(pid, None)
        order = sorted(procs, key=lambda p: self._read_at.get(p.pid, -1.0))
        self._tables = {}      # network namespace -> its listening sockets, this reading
        # the endpoints of the processes next in turn are asked first (they answer while
        # smaps is read): as many as were read last time, and a few more
        for p in order[:max(_WORKERS * 2, self._fresh * 2)]:
            if time.monotonic() > start + budget / 2:   # finding endpoints costs too
                break
            self._ask(p.pid)
        out: dict = {}
        fresh: list[int] = []
        local_end = start + budget * 0.7     # the rest: the answers, parsed here
        for p in order:
            if time.monotonic() > local_end:
                last = self._last.get(p.pid)
                if last is not None:
                    out[p.pid] = replace(last, stale=start - self._read_at[p.pid])
                continue
            local = self._local(p.pid, smaps, inodes)
            if local is None:
                continue
            out[p.pid] = local
            fresh.append(p.pid)
        for pid in fresh:
            local = out[pid]
            run = self._answer(pid, max(0.0, deadline - time.monotonic()))
            d = self._combine(local, run)
            self._last[pid] = d
            self._read_at[pid] = start
            out[pid] = d
        self._fresh = len(fresh)
        return out

    def _ask(self, pid: int) -> None:
        """Start fetching ``pid``'s /metrics in the background, unless a fetch is under way
        (a slow endpoint is asked again only once it answered or timed out). The threads
        only wait on sockets: finding the endpoint (its listeners) and parsing the answer
        happen in the sampling thread, which they would otherwise slow down."""
        if pid in self._asking:
            return
        notes: list[str] = []
        _exe, build = self._build(pid, notes)
        if build is None:
            return
        ep = self.endpoints.get(pid) or (self.default if pid == self.default_pid
                                         else None) or Endpoints()
        if ep.metrics is not None:
            urls, named, inside = [ep.metrics], True, None
        elif not self.discover:
            self._answered[pid] = (time.monotonic(), _Runtime(notes=(
                "its runtime is not read: no endpoint named for it, and discovery is off",)))
            return
        elif self._found.get(pid):
            urls, named = [self._found[pid]], False
            inside = pid if self._netns.get(pid) else None
        else:
            now = time.monotonic()
            # a process that listened nowhere yet (starting up) is looked at again soon;
            # one whose listeners did not serve Go /metrics after a few seconds
            wait = _DISCOVER_EVERY if pid in self._no_listener else _RETRY_AFTER
            if now - self._looked.get(pid, -1e9) < wait:
                return
            self._looked[pid] = now
            self._no_listener.discard(pid)
            inside = pid if same_netns(pid, self.root) is False else None
            try:
                listeners = [x for x in read_listeners(pid, self.root, self._tables)
                             if x.loopback_reachable]
            except OSError as e:
                self._answered[pid] = (now, _Runtime(notes=(
                    f"its sockets are unreadable: {e.strerror or e}",)))
                return
            urls = []
            for x in listeners[:_MAX_PROBES]:
                host = x.connect_host
                urls.append(f"http://{'[' + host + ']' if ':' in host else host}:{x.port}"
                            "/metrics")
            named = False
            if not urls:
                self._no_listener.add(pid)
                self._answered[pid] = (now, _Runtime(notes=(
                    "no loopback listener of it serves Go /metrics (it listens on no "
                    "loopback TCP port)",)))
                return
        if not self._parser():
            self._answered[pid] = (time.monotonic(), _Runtime(notes=(HINT,)))
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(max_workers=_WORKERS,
                                            thread_name_prefix="bpfmem-endpoint")
        timeout = self.timeout if named or len(urls) == 1 else _PROBE_TIMEOUT
        self._asking[pid] = (self._pool.submit(self._fetch, urls, named, inside, timeout),
                             named, inside,
                             not named and (len(urls) > 1 or not self._found.get(pid)))

    def _fetch(self, urls, named, inside, timeout) -> list:
        """(url, body or error text) for each of ``urls`` until one answers (a thread's)."""
        out = []
        for url in urls:
            try:
                if inside is not None:
                    body = httpget.http_get_in_netns(inside, url, timeout=timeout,
                                                     max_bytes=self.max_bytes, root=self.root)
                else:
                    body = httpget.http_get(url, timeout=timeout, max_bytes=self.max_bytes,
                                            loopback_only=not named)
            except BpfmemError as e:
                out.append((url, None, str(e)))
                continue
            out.append((url, body, None))
            if len(urls) == 1:
                break
            if b"go_memstats_" in body or b"go_gc_" in body:
                break
        return out

    def _answer(self, pid: int, wait: float):
        """The runtime reading of ``pid`` that arrived within ``wait`` seconds (parsed
        here), else the last one (with a note of its age), else None."""
        entry = self._asking.get(pid)
        if entry is not None:
            fut, named, inside, probing = entry
            try:
                got = fut.result(timeout=wait)
            except Exception:          # still under way (asked again once it is done)
                if fut.done():
                    self._asking.pop(pid, None)
            else:
                self._asking.pop(pid, None)
                run = self._parsed(pid, got, named, inside, probing)
                self._answered[pid] = (time.monotonic(), run)
                return run
        last = self._answered.get(pid)
        if last is None:
            return _Runtime(notes=("its endpoint has not answered yet",))
        age = time.monotonic() - last[0]
        if age < 1.0 or last[1].figures is None:
            return last[1]
        return replace(last[1], notes=last[1].notes + (
            f"runtime figures from {age:.1f}s ago (its endpoint is slower than the trace, "
            "or it is read in turns)",))

    def _parsed(self, pid: int, got: list, named: bool, inside, probing: bool) -> "_Runtime":
        notes = []
        for url, body, err in got:
            if body is None:
                if not probing:
                    notes.append(err)
                    self._found.pop(pid, None) if not named else None
                continue
            try:
                figures = parse_go_metrics(body.decode(errors="replace"))
            except BpfmemError as e:
                if not probing:
                    notes.append(f"{url}: {e}")
                continue
            if not named:
                self._found[pid] = url
                self._netns[pid] = inside is not None
            return _Runtime(figures, url, notes=tuple(notes))
        if probing:
            notes.append(f"no loopback listener of it serves Go /metrics (tried {len(got)})")
        return _Runtime(notes=tuple(notes))

    def close(self) -> None:
        """Stop the background endpoint readers (a trace's end)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._pages is not None:
            self._pages.close()
            self._pages = None

    def _owners(self, pid: int, maps, kinds, inodes) -> tuple:
        if self._pages is None:
            self._pages = PageReader(self.root)
        exe = [(m.start, m.end) for m, k in zip(maps, kinds)
               if k in ("binary_text", "binary_rodata", "binary_data")]
        files = [(m.start, m.end) for m, k in zip(maps, kinds) if k == "files" and m.rss]
        b = self._pages.owners(pid, exe, inodes)
        f = self._pages.owners(pid, files, inodes) if b is not None else None
        return b, f, (self._pages.why_not if b is None or f is None else None)

    def read(self, pid: int, *, smaps: bool = True,
             inodes: frozenset[int] | None = None) -> ProcDetail | None:
        """``pid`` in detail (smaps and the runtime only for a Go program: the split is
        made for those); None when it has gone."""
        local = self._local(pid, smaps, inodes)
        if local is None:
            return None
        run = self._runtime(pid, local.go) if local.go is not None else _Runtime()
        return self._combine(local, run)

    @staticmethod
    def _combine(local: ProcDetail, run: "_Runtime | None") -> ProcDetail:
        if run is None:
            return local
        return replace(local, figures=run.figures, metrics_url=run.metrics_url, top=run.top,
                       pprof_url=run.pprof_url, pprof_total=run.pprof_total,
                       notes=local.notes + run.notes)

    def _local(self, pid: int, smaps: bool, inodes) -> ProcDetail | None:
        """What /proc says of ``pid``: executable, smaps by class, page owners, settings."""
        notes: list[str] = []
        exe, build = self._build(pid, notes)
        classes = None
        pages: tuple = (None, None, None)
        if smaps and build is not None:
            try:
                maps = read_smaps(pid, self.root)
            except (FileNotFoundError, ProcessLookupError):
                return None
            except OSError as e:
                notes.append(f"smaps unreadable: {e.strerror or e}")
            else:
                classes, kinds = classify_mappings(
                    maps, exe.path if exe else None, (exe.dev, exe.inode) if exe else None,
                    go=build is not None)
                if inodes is not None:
                    pages = self._owners(pid, maps, kinds, inodes)
        env: dict = {}
        if build is not None:
            try:
                raw = read_environ(pid, self.root)
                env = {k: raw[k] for k in GO_ENV if k in raw}
            except OSError:
                notes.append("environment unreadable: Go settings unknown")
        return ProcDetail(pid, exe.path if exe else None, build, classes, env,
                          notes=tuple(notes), binary_pages=pages[0], file_pages=pages[1],
                          pages_unread=pages[2])

    def _runtime(self, pid: int, build, start: float | None = None,
                 budget=None) -> "_Runtime":
        """What ``pid``'s runtime says through its endpoints (named, or found on loopback):
        /metrics by ``start`` + the timeout, the heap profile (fetched and decoded) by
        ``start`` + twice it (``start``: now); answers charged to ``budget`` while held."""
        if start is None:
            start = time.monotonic()
        metrics_by, pprof_by = start + self.timeout, start + 2 * self.timeout
        notes: list[str] = []
        ep = self.endpoints.get(pid) or (self.default if pid == self.default_pid
                                         else None) or Endpoints()
        figures = top = pprof_total = None
        metrics_url = ep.metrics
        named = metrics_url is not None
        body = None
        if (metrics_url is not None or (build is not None and self.discover)) \
                and not self._parser():
            notes.append(HINT)
            metrics_url = None
        elif metrics_url is None and build is not None and self.discover:
            metrics_url, figures = self._discover(pid, notes, metrics_by, budget)
        if metrics_url is not None and figures is None:
            inside = pid if not named and self._netns.get(pid) else None
            body = self._get(metrics_url, loopback_only=not named, notes=notes,
                             netns_of=inside, deadline=metrics_by, budget=budget)
            if body is not None:
                try:
                    figures = parse_go_metrics(body.decode(errors="replace"))
                except BpfmemError as e:
                    notes.append(f"{metrics_url}: {e}")
                    self._failed[(inside, metrics_url)] = (time.monotonic(), notes[-1])
                finally:
                    if budget is not None:
                        budget.give(len(body))
        pprof_url = ep.pprof
        if (pprof_url is None and self.pprof and figures is not None
                and metrics_url.endswith("/metrics")):
            pprof_url = metrics_url[:-len("/metrics")] + "/debug/pprof/heap"
        if pprof_url is not None:
            # the fetch and the decoding: the timeout, ending by pprof_by
            deadline = min(time.monotonic() + self.timeout, pprof_by)
            body = self._get(pprof_url, loopback_only=ep.pprof is None, notes=notes,
                             netns_of=pid if ep.pprof is None and self._netns.get(pid)
                             else None, deadline=deadline, budget=budget)
            if body is not None:
                try:
                    top, pprof_total = _decode_pprof_locked(body, deadline)
                except BpfmemError as e:
                    notes.append(f"{pprof_url}: {e}")
                finally:
                    if budget is not None:
                        budget.give(len(body))
                    del body
        return _Runtime(figures, metrics_url, top, pprof_url, pprof_total, tuple(notes))


_DECODING = threading.Lock()


def _decode_pprof_locked(body: bytes, deadline: float) -> tuple[tuple, int]:
    """(top functions, inuse total) of a heap profile, decoded by one thread at a time:
    a profile may cost up to :data:`~bpfmem.parse.pprof.MAX_PROFILE` decompressed and its
    tables, and threads reading a pod's processes at once must not hold that many times
    over (decoding is CPU work: taking turns costs no time)."""
    if not _DECODING.acquire(timeout=max(0.0, deadline - time.monotonic())):
        raise ParseError("not decoded: the pod's other profiles took the time until the "
                         "deadline", section="pprof")
    try:
        prof = parse_pprof(body, deadline=deadline)
        kind = "inuse_space" if ("inuse_space", "bytes") in prof.sample_types else None
        top = tuple(top_functions(prof, kind, n=10, deadline=deadline))
        idx = prof.index_of(kind)
        total = sum(v[idx] for _l, v in prof.samples if idx < len(v))
    finally:
        _DECODING.release()
    if not 0 <= total < MAX_MEMORY or any(not 0 <= x.flat <= x.cum < MAX_MEMORY
                                          for x in top):
        raise ParseError("sample values no heap has (negative, or past any address space)",
                         section="pprof")
    return top, total


@dataclass(frozen=True)
class _Runtime:
    """One reading of a process's endpoints."""
    figures: GoRuntimeFigures | None = None
    metrics_url: str | None = None
    top: tuple | None = None
    pprof_url: str | None = None
    pprof_total: int | None = None
    notes: tuple[str, ...] = ()
