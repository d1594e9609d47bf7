"""prometheus_client as the peer of bpfmem's own page writer: bpfmem's families
(:func:`bpfmem.api.export.families`) in a prometheus_client registry, with its own process
collector, so its encoders write the page bpfmem's must equal."""

from __future__ import annotations

from bpfmem.api.export import ScanCache, families


class BpfmemCollector:
    """bpfmem's families as a prometheus_client collector."""

    def __init__(self, cache: ScanCache, profile=None, *, maps: bool = True):
        self.cache = cache
        self.profile = profile
        self.maps = maps

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        for f in families(self.cache, self.profile, maps=self.maps):
            kind = CounterMetricFamily if f.type == "counter" else GaugeMetricFamily
            if f.labels:
                fam = kind(f.name, f.doc, labels=list(f.labels))
                for values, v in f.samples:
                    fam.add_metric(list(values), v)
            else:
                fam = kind(f.name, f.doc, value=f.samples[0][1]) if f.samples else \
                    kind(f.name, f.doc, labels=[])
            yield fam


def make_registry(cache: ScanCache, profile=None, *, maps: bool = True):
    from prometheus_client import CollectorRegistry
    from prometheus_client.process_collector import ProcessCollector
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BpfmemCollector(cache, profile, maps=maps))
    ProcessCollector(registry=reg)
    return reg
