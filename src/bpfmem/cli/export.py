"""``bpfmem export``: a Prometheus exporter of the node's maps."""

from __future__ import annotations

import argparse
import sys

from . import args as a
from .command import EXIT_OK, Command

EPILOG = """examples:
  bpfmem export                                   http://127.0.0.1:9435/metrics
  bpfmem export --listen 0.0.0.0:9435 --interval 15s --entries     (in a DaemonSet)
  deploy/ has the DaemonSet, ServiceMonitor and a Grafana dashboard.
"""


class Export(Command):
    name = "export"
    help = "Prometheus exporter of the node's maps (root)"
    description = ("Serve Prometheus metrics of every BPF map on this host: memlock, model "
                   "charge, entries, max_entries and pressure per map (labelled by id, name, "
                   "type, owner comm and cgroup), sums per cgroup, the cgroup's memory usage "
                   "and limit, and the exporter's own scan duration and errors. One scan "
                   "serves every scrape within --interval.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--listen", type=a.listen_address, default=("127.0.0.1", 9435),
                       metavar="HOST:PORT",
                       help="address to serve /metrics on (default 127.0.0.1:9435: loopback "
                            "only unless told otherwise)")
        p.add_argument("--interval", type=a.duration, default=15.0, metavar="DUR",
                       help="reuse a scan for this long (default 15s)")
        p.add_argument("--recheck", type=a.duration, default=900.0, metavar="DUR",
                       help="read again at least this often what a scan keeps on trust "
                            "between scans: a memlock the kernel's model says cannot move "
                            "(arrays, preallocated hash maps, ...), a cgroup's path, the "
                            "programs' figures, the pins; a slice of the maps at a time, so "
                            "the cost is spread evenly (about 5 us a map: 10,000 maps at "
                            "--interval 15s cost 0.8 ms a scan at 15m, 2.5 ms at 5m). A map "
                            "whose memlock moved where the model said it could not is read "
                            "at every scan from then on (default 15m)")
        a.add_scan(p, programs=True)

    def run(self, args: argparse.Namespace) -> int:
        import signal
        import threading

        from .. import api
        from ..errors import HostError, UsageError
        from .snapshot import scan

        profile = api.profile()
        memo = api.scan_memo(profile, recheck=args.recheck)   # incremental scans: unchanged
        #                                   maps are not read again

        def scan_with_cgroups():
            snap = scan(args, parallel=False, memo=memo)
            return snap, api.cgroup_usage_of(snap)

        cache = api.metrics_cache(scan_with_cgroups, args.interval)
        cache.get()  # fail early (e.g. without CAP_SYS_ADMIN) before listening
        if cache.last_error:
            raise HostError(cache.last_error)
        host, port = args.listen
        try:
            server, _thread = api.serve_metrics(host, port, cache, profile)
        except OSError as e:
            raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        from ..units import count
        print(f"bpfmem: serving http://{host}:{port}/metrics "
              f"({count(len(cache.snapshot.maps), 'map')}; scans reused for {args.interval:g}s)",
              file=sys.stderr, flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        finally:
            server.shutdown()
            server.server_close()
        return EXIT_OK


COMMAND = Export()
