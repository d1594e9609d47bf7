"""The offline HTML report: what the page holds, and what a real browser does with it.

The browser test drives Debian's headless Chromium over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port, no websocket library) and checks that the page logs no
error, makes no request but for its own file, and draws one treemap cell per map.
The README's picture of a report is drawn by docs/pictures.py (tests/test_pictures.py).
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from bpfmem.errors import UnsupportedError  # noqa: E402
from bpfmem.report import html as report_html  # noqa: E402

LIMIT = 128 << 20
CHROMIUM = os.environ.get("BPFMEM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    # belt and braces: even a request that slipped through could not resolve a name
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
]


# --- documents, in the shapes bpfmem check / bpfmem diff produce ---------------------------------

def _map(name, type_, ks, vs, entries, flags, memlock, charged, full=None):
    return {"name": name, "type": type_, "key_size": ks, "value_size": vs, "max_entries": entries,
            "flags": list(flags), "memlock_at_create": memlock, "charged_at_create": charged,
            "charged_full": charged if full is None else full}


def write_html(path, html: str) -> None:
    """Write a page to ``path`` as UTF-8 (as the CLI's output files do)."""
    from bpfmem.outputs import output_file
    with output_file(path) as f:
        f.write(html)


def _result(version, cpus, objects, budget, offenders=()):
    total = sum(o["total"] for o in objects)
    return {"kernel": {"version": version, "possible_cpus": cpus, "page_size": 4096},
            "pass": total <= budget, "total": total, "budget": budget, "objects": objects,
            "offenders": list(offenders)}


def _object(path, name, maps):
    total = sum(m["charged_at_create"] for m in maps)
    for m in maps:
        m["share"] = round(m["charged_at_create"] / total, 3)
    return {"path": path, "name": name, "total": total, "maps": maps}


def small_check_doc() -> dict:
    """Two objects, two kernel/CPU combinations: one fails, one passes."""
    def objs(scale):
        return [
            _object("build/cni.bpf.o", "cni", [
                _map("service_route_table", "hash", 20, 32, 65536, ["no_prealloc"],
                     7864320, 7866368, 7866368),
                _map("conntrack_table", "hash", 40, 40, 131072, [], 18874368, 18874368 * scale),
                _map("metrics_map", "percpu_array", 4, 16, 1024, [], 40960, 16384 * scale),
            ]),
            _object("build/lb.bpf.o", "lb", [
                _map("lb_backends", "array", 4, 64, 32768, [], 2101248, 2105344),
                _map("lb_events", "ringbuf", 0, 0, 1 << 20, [], 1065288, 1069584),
            ]),
        ]
    budget = LIMIT // 2
    fail = _result("6.18.0", 64, objs(4), budget,
                   [{"object": "cni", "map": "conntrack_table", "charged": 18874368 * 4,
                     "share": 0.8}])
    ok = _result("6.18.0", 2, objs(1), budget,
                 [{"object": "cni", "map": "conntrack_table", "charged": 18874368, "share": 0.6}])
    return {"schema": "bpfmem/check/v1", "limit": LIMIT, "max_fraction": 0.5, "budget": budget,
            "full": False, "pass": ok["pass"] and fail["pass"], "results": [ok, fail],
            "whatif": ["service_*.flags+=no_prealloc"]}


def small_diff_doc() -> dict:
    def side(type_, ks, vs, entries, flags, charged, full):
        return {"type": type_, "key_size": ks, "value_size": vs, "max_entries": entries,
                "flags": flags, "charged_at_create": charged, "charged_full": full}
    return {
        "schema": "bpfmem/diff/v1", "kernel": {"version": "6.18.0", "possible_cpus": 2},
        "limit": LIMIT,
        "old": {"paths": ["cni_v054.bpf.o"], "charged_at_create": 12000000, "charged_full": 15000000},
        "new": {"paths": ["cni_v060.bpf.o"], "charged_at_create": 62519296, "charged_full": 70000000},
        "delta_at_create": 50519296, "delta_full": 55000000, "upgrade_charge": 50519296,
        "new_share_of_limit": 0.466,
        "maps": [
            {"object": "cni", "map": "service_route_table", "status": "added", "pinned": True,
             "pin_incompatible": False, "changes": [], "old": None,
             "new": side("hash", 20, 32, 65536, ["no_prealloc"], 7866368, 7866368),
             "delta_at_create": 7866368, "delta_full": 7866368},
            {"object": "cni", "map": "conntrack_table", "status": "changed", "pinned": True,
             "pin_incompatible": True, "changes": ["max_entries: 32768 -> 131072"],
             "old": side("hash", 40, 40, 32768, [], 4718592, 4718592),
             "new": side("hash", 40, 40, 131072, [], 18874368, 18874368),
             "delta_at_create": 14155776, "delta_full": 14155776},
            {"object": "cni", "map": "legacy_nat", "status": "removed", "pinned": False,
             "pin_incompatible": False, "changes": [],
             "old": side("hash", 16, 16, 16384, [], 1573000, 1573000), "new": None,
             "delta_at_create": -1573000, "delta_full": -1573000},
            {"object": "cni", "map": "events", "status": "unchanged", "pinned": False,
             "pin_incompatible": False, "changes": [],
             "old": side("ringbuf", 0, 0, 1 << 20, [], 1069584, 1069584),
             "new": side("ringbuf", 0, 0, 1 << 20, [], 1069584, 1069584),
             "delta_at_create": 0, "delta_full": 0},
        ],
    }


# the bundled example's maps as the model prices them on 6.18, 2 CPUs, plus a per-CPU hash
_CNI = [
    ("service_route_table", "hash", 20, 32, 65536, ["no_prealloc"], 7865440, 7869448),
    ("service_reverse_table", "lru_hash", 20, 20, 131072, [], 14680960, 14681096),
    ("service_access_table", "hash", 8, 8, 131072, ["no_prealloc"], 10486800, 10490888),
    ("service_deny_table", "hash", 8, 4, 65536, ["no_prealloc"], 5243920, 5248008),
    ("service_remote_grant_table", "hash", 12, 16, 65536, ["no_prealloc"], 6292528, 6296584),
    ("attachment_identity_table", "hash", 20, 24, 65536, [], 7341136, 7345160),
    ("conntrack_table", "hash", 40, 40, 131072, [], 18875536, 18879496),
    ("metrics_map", "percpu_array", 4, 16, 1024, [], 41272, 16384),
    ("events", "ringbuf", 0, 0, 1048576, [], 1065288, 1069584),
    ("cni_data.rodata", "array", 4, 16, 1, ["rdonly_prog", "mmapable"], 8192, 8192),
]


def sample_check_doc() -> dict:
    """A realistic matrix: the example CNI plus a per-CPU stats hash, 2 kernels × 2 CPU counts."""
    budget = int(LIMIT * 0.55)
    results = []
    for version in ("6.1.0", "6.18.0"):
        for cpus in (2, 64):
            maps = [_map(*row) for row in _CNI]
            percpu = 16 * 16384 * cpus + 16384 * 40
            maps.append(_map("policy_stats", "percpu_hash", 8, 16, 16384, [], percpu, percpu))
            if version == "6.1.0":  # pre-6.4 memlock: a rougher estimate
                for m in maps:
                    m["memlock_at_create"] = m["max_entries"] * (m["key_size"] + m["value_size"])
            obj = _object("build/cni.bpf.o", "cni", maps)
            top = sorted(maps, key=lambda m: -m["charged_at_create"])[:3]
            results.append(_result(version, cpus, [obj], budget, [
                {"object": "cni", "map": m["name"], "charged": m["charged_at_create"],
                 "share": m["share"]} for m in top]))
    return {"schema": "bpfmem/check/v1", "limit": LIMIT, "max_fraction": 0.55, "budget": budget,
            "full": False, "pass": all(r["pass"] for r in results), "results": results,
            "whatif": ["service_*.flags+=no_prealloc"]}


def sample_diff_doc() -> dict:
    new = {m["name"]: m for m in sample_check_doc()["results"][2]["objects"][0]["maps"]}
    old = copy.deepcopy(new)
    for gone in ("service_remote_grant_table", "attachment_identity_table", "policy_stats"):
        del old[gone]
    ct = old["conntrack_table"]
    ct["max_entries"] //= 4
    ct["charged_at_create"] = ct["charged_full"] = ct["charged_at_create"] // 4
    rt = old["service_route_table"]
    rt["value_size"], rt["flags"] = 24, []
    rt["charged_at_create"] = rt["charged_full"] = rt["charged_at_create"] * 7 // 8
    old["legacy_nat_table"] = _map("legacy_nat_table", "hash", 16, 16, 16384, [], 1572864, 1573000)
    keys = ("type", "key_size", "value_size", "max_entries", "flags", "charged_at_create",
            "charged_full")
    rows = []
    for name in sorted(set(old) | set(new)):
        o = {k: old[name][k] for k in keys} if name in old else None
        n = {k: new[name][k] for k in keys} if name in new else None
        status = "added" if o is None else "removed" if n is None else (
            "unchanged" if o == n else "changed")
        changes = [f"{k}: {o[k] or 0} -> {n[k] or 0}" for k in keys[:5]
                   if o and n and o[k] != n[k]]
        pinned = name in ("conntrack_table", "service_route_table", "metrics_map")
        rows.append({"object": "cni", "map": name, "status": status, "pinned": pinned,
                     "pin_incompatible": pinned and name == "service_route_table",
                     "changes": changes, "old": o, "new": n,
                     "delta_at_create": (n or {}).get("charged_at_create", 0)
                     - (o or {}).get("charged_at_create", 0),
                     "delta_full": (n or {}).get("charged_full", 0) - (o or {}).get("charged_full", 0)})
    oc = sum(m["charged_at_create"] for m in old.values())
    nc = sum(m["charged_at_create"] for m in new.values())
    of = sum(m["charged_full"] for m in old.values())
    nf = sum(m["charged_full"] for m in new.values())
    return {"schema": "bpfmem/diff/v1", "kernel": {"version": "6.18.0", "possible_cpus": 2},
            "limit": LIMIT,
            "old": {"paths": ["cni_v054.bpf.o"], "charged_at_create": oc, "charged_full": of},
            "new": {"paths": ["cni_v060.bpf.o"], "charged_at_create": nc, "charged_full": nf},
            "delta_at_create": nc - oc, "delta_full": nf - of, "upgrade_charge": nc,
            "newly_charged": nc - oc, "new_share_of_limit": nc / LIMIT,
            "pin_incompatible": ["cni/service_route_table"], "maps": rows}


# --- helpers on the page's text -------------------------------------------------------------------

def figures(page: str) -> dict[str, dict]:
    """Each figure's JSON, by the id of the div it is drawn into."""
    out = {}
    dec = json.JSONDecoder()
    page = page[page.index("</main>"):]  # the figures' script follows the content
    for m in re.finditer(r"\(function\(\)\{var f=", page):
        fig, end = dec.raw_decode(page, m.end())
        div = re.match(r';Plotly\.newPlot\("([^"]+)"', page[end:])
        assert div, "every figure is drawn right after its JSON"
        out[div.group(1)] = fig
    return out


def strip_plotlyjs(page: str) -> str:
    """The page without the embedded plotly.js, which must be the library verbatim."""
    from plotly.offline import get_plotlyjs

    opener = f'<script id="{report_html.PLOTLYJS_ID}">'
    start = page.index(opener) + len(opener)
    end = page.index("</script>", start)
    assert page[start:end] == get_plotlyjs(), "the embedded script is plotly.js, unchanged"
    assert page.count(opener) == 1
    return page[:start] + page[end:]


def leaf_labels(fig: dict, trace: int) -> list[str]:
    t = fig["data"][trace]
    parents = set(t["parents"])
    return [lab for i, lab in zip(t["ids"], t["labels"]) if i not in parents]


def visible_trace(fig: dict) -> int:
    vis = [i for i, t in enumerate(fig["data"]) if t.get("visible", True) is True]
    assert len(vis) == 1
    return vis[0]


@pytest.fixture(scope="module")
def plotly():
    return pytest.importorskip("plotly")


# --- pure tests -----------------------------------------------------------------------------------

def test_import_is_cheap():
    code = "import sys, bpfmem.report.html; print('plotly' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip() == "False"


def test_without_plotly_says_how_to_get_it(monkeypatch):
    for name in list(sys.modules):
        if name == "plotly" or name.startswith("plotly."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(UnsupportedError, match=r"pip install '\.\[html\]'"):
        report_html.render_html(small_check_doc())


def test_needs_a_document(plotly):
    with pytest.raises(ValueError):
        report_html.render_html()


def test_treemap_one_cell_per_map(plotly):
    doc = small_check_doc()
    page = report_html.render_html(doc)
    fig = figures(page)[report_html.TREEMAP_ID]
    assert len(fig["data"]) == len(doc["results"])  # one treemap per kernel/CPU combination
    shown = visible_trace(fig)
    assert doc["results"][shown]["pass"] is False  # a failing combination is shown first
    for i, result in enumerate(doc["results"]):
        t = fig["data"][i]
        assert t["type"] == "treemap"
        names = [m["name"] for o in result["objects"] for m in o["maps"]]
        assert sorted(leaf_labels(fig, i)) == sorted(names)
        by_label = dict(zip(t["labels"], t["values"]))
        for o in result["objects"]:
            assert by_label[o["name"]] == o["total"]  # objects group their maps
            for m in o["maps"]:
                assert by_label[m["name"]] == m["charged_at_create"]
        assert t["branchvalues"] == "total"
    # hover names every figure the brief asks for
    hover = " ".join(fig["data"][shown]["hovertemplate"])
    for word in ("memlock at create", "charged at create", "charged full", "type",
                 "key / value size", "max_entries", "flags"):
        assert word in hover
    custom = fig["data"][shown]["customdata"]
    assert any("no_prealloc" in c for row in custom for c in row)
    assert any("7.5Mi" in row for row in custom)  # memlock 7864320


def test_treemap_shares_in_the_one_share_style(plotly):
    """Cells and hover show a map's share of the whole as bpfmem prints shares everywhere
    (units.format_share: whole percent, one decimal below 1%), never plotly's own."""
    from bpfmem.units import format_share
    doc = small_check_doc()
    fig = figures(report_html.render_html(doc))[report_html.TREEMAP_ID]
    for t in fig["data"]:
        assert "percentRoot" not in t["texttemplate"] + " ".join(t["hovertemplate"])
        assert t["texttemplate"].endswith("%{customdata[8]}")
        assert all("%{customdata[8]} of the total" in h for h in t["hovertemplate"])
        root = t["values"][t["ids"].index("root")]
        shares = dict(zip(t["labels"], (row[8] for row in t["customdata"])))
        for label, value in zip(t["labels"], t["values"]):
            assert shares[label] == format_share(value / root)
    shares = dict(zip(fig["data"][0]["labels"], (r[8] for r in fig["data"][0]["customdata"])))
    # 2 CPUs, of 29932048 B: conntrack 63.06% and lb_events 3.57% in whole percent (plotly
    # said 63.1% and 3.6%), metrics_map's 0.05% below the one decimal
    assert (shares["conntrack_table"], shares["lb_events"], shares["metrics_map"]) == (
        "63%", "4%", "<0.1%")


def test_usage_bar_against_budget_and_limit(plotly):
    doc = small_check_doc()
    fig = figures(report_html.render_html(doc))[report_html.USAGE_ID]
    bar = fig["data"][0]
    assert bar["type"] == "bar"
    assert bar["y"] == pytest.approx([r["total"] / (1 << 20) for r in doc["results"]])
    colors = bar["marker"]["color"]
    assert colors[0] != colors[1]  # pass and fail differ
    assert [t["name"] for t in fig["data"][1:]] == ["pass", "fail", "budget"]
    assert fig["data"][3]["y"] == pytest.approx([64.0, 64.0])
    assert any(s["y0"] == 128 for s in fig["layout"]["shapes"])  # the limit


def test_no_url_outside_the_library(plotly):
    page = report_html.render_html(sample_check_doc(), sample_diff_doc())
    rest = strip_plotlyjs(page)
    assert not re.search(r"https?:|wss?:|ftp:", rest, re.I), re.findall(r".{40}https?:.{40}", rest)
    assert "//" not in re.sub(r"<script.*?</script>", "", rest, flags=re.S)  # no protocol-relative
    assert not re.search(r"<(link|img|iframe|object|embed|base)\b", rest, re.I)
    assert not re.search(r"\bsrc\s*=", rest, re.I)
    assert "@import" not in rest and "url(" not in rest
    assert "mathjax" not in rest.lower().replace("mathjaxconfig", "")
    # the page forbids every load; plotly is told not to fetch topojson or typeset math
    assert "default-src 'none'" in rest and "connect-src 'none'" in rest
    assert '"typesetMath": false' in rest and '"topojsonURL": "data:,"' in rest


def test_header_and_verdict(plotly):
    doc = small_check_doc()
    page = report_html.render_html(doc, title="cni check")
    assert '<span class="verdict fail" id="bpfmem-verdict">FAIL</span>' in page
    assert "<title>cni check</title>" in page
    assert "6.18.0" in page and "2, 64" in page and "128Mi" in page and "64Mi (50%)" in page
    doc["pass"] = True
    page = report_html.render_html(doc)
    assert '<span class="verdict pass" id="bpfmem-verdict">PASS</span>' in page


def test_diff_table_and_summary(plotly):
    doc = small_diff_doc()
    page = report_html.render_html(None, doc)
    assert ("upgrade charges 48.2Mi at first start; new total 59.6Mi = 47% of the "
            "128Mi limit") in page
    start = page.index('id="bpfmem-diff-table"')
    table = page[start:page.index("</table>", start)]
    rows = re.findall(r"<tr class=\"([^\"]*)\">(.*?)</tr>", table, re.S)
    assert [re.search(r"<code>(.*?)</code>", r).group(1) for _, r in rows] == [
        "service_route_table", "conntrack_table", "legacy_nat", "events"]  # added, changed, ...
    classes = {re.search(r"<code>(.*?)</code>", r).group(1): c for c, r in rows}
    assert "pin-incompatible" in classes["conntrack_table"]
    assert "pin-incompatible" not in classes["service_route_table"]
    ct = dict(rows)[classes["conntrack_table"]]
    assert "4.5Mi" in ct and "18Mi" in ct and "+13.5Mi" in ct
    assert "max_entries: 32768 -&gt; 131072" in ct
    assert "-1.5Mi" in page  # the removed map frees 1573000 B
    counts = page[page.index('<table class="diff counts"'):start]
    assert re.search(r"changed</span></td><td class=num>1</td>", counts)
    assert "+48.2Mi" in counts  # all maps: the document's delta at create
    totals = figures(page)[report_html.DIFF_ID]
    assert [t["name"] for t in totals["data"]] == ["old", "new"]
    assert totals["data"][1]["y"][0] == pytest.approx(62519296 / (1 << 20))
    assert 'id="bpfmem-treemap"' not in page  # no check document, no treemap
    assert "</span> 1 pinned map cannot be reused by the new object" in page


def test_pin_incompatible_maps_counted_in_words(plotly):
    doc = small_diff_doc()
    for m in doc["maps"]:
        m["pin_incompatible"] = True
    page = report_html.render_html(None, doc)
    assert "</span> 4 pinned maps cannot be reused by the new object" in page
    assert "map(s)" not in strip_plotlyjs(page)
    for m in doc["maps"]:
        m["pin_incompatible"] = False
    assert "cannot be reused" not in report_html.render_html(None, doc)


def test_tolerates_missing_keys(plotly):
    check = {"results": [{"objects": [{"maps": [{"name": "only"}, {}]}]}, {}]}
    diff = {"maps": [{"map": "x", "status": "added"}, {}]}
    page = report_html.render_html(check, diff)
    assert "only" in page and "<title>bpfmem report</title>" in page
    fig = figures(page)[report_html.TREEMAP_ID]
    assert sorted(leaf_labels(fig, 0)) == ["map 1", "only"]
    report_html.render_html({"results": []})
    report_html.render_html(None, {})


def test_escapes_names(plotly):
    doc = small_check_doc()
    evil = "<img src=x onerror=alert(1)></script>"
    doc["results"][0]["objects"][0]["maps"][0]["name"] = evil
    diff = small_diff_doc()
    diff["maps"][0]["map"] = evil
    page = report_html.render_html(doc, diff, title=evil)
    assert evil not in page
    fig = figures(page)[report_html.TREEMAP_ID]
    assert evil in fig["data"][0]["labels"]  # intact in the data, escaped in the page


def test_write_html(tmp_path, plotly):
    page = report_html.render_html(small_check_doc())
    out = tmp_path / "r.html"
    write_html(out, page)
    assert out.read_text(encoding="utf-8") == page


SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent / "src"))
    return subprocess.run([sys.executable, "-m", "bpfmem", *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.skipif(not (SEED / "cni_v060_before.bpf.o").exists(), reason="no examples/seed")
def test_cli_documents_render(tmp_path, plotly):
    """The documents `bpfmem check`/`diff` really produce: one treemap cell per map."""
    before, old = str(SEED / "cni_v060_before.bpf.o"), str(SEED / "cni_v054.bpf.o")
    common = ["--limit", "128Mi", "--kernel", "6.18", "--cpus", "2"]
    check = _cli("check", before, old, *common, "--max-fraction", "0.4", "--format", "json")
    assert check.returncode == 1, check.stderr  # 59.6 MiB of 51.2: fails
    doc = json.loads(check.stdout)
    out = tmp_path / "check.html"
    r = _cli("check", before, old, *common, "--max-fraction", "0.4", "--format", "html",
             "-o", str(out))
    assert r.returncode == 1, r.stderr
    page = out.read_text()
    assert '<span class="verdict fail" id="bpfmem-verdict">FAIL</span>' in page
    names = [m["name"] for o in doc["results"][0]["objects"] for m in o["maps"]]
    assert sorted(leaf_labels(figures(page)[report_html.TREEMAP_ID], 0)) == sorted(names)
    out = tmp_path / "diff.html"
    r = _cli("diff", old, before, "--limit", "128Mi", "--kernel", "6.18", "--cpus", "2",
             "--format", "html", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert re.search(r"upgrade charges [\d.]+Mi at first start; new total [\d.]+Mi = "
                     r"[\d.]+% of the 128Mi limit", page)
    assert "service_reverse_table" in page and report_html.DIFF_ID in page


# --- the page in a real browser -------------------------------------------------------------------

class Chromium:
    """Headless Chromium driven over the DevTools protocol on fds 3/4 (--remote-debugging-pipe)."""

    def __init__(self, extra: list[str] | None = None):
        self.profile = tempfile.mkdtemp(prefix="bpfmem-chromium-")
        self.proc = None
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        self._w, self._r = cmd_w, res_r

        def child_fds():  # the browser reads commands on fd 3 and writes answers on fd 4
            hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            hi_w = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        try:
            with open(os.path.join(self.profile, "stderr.log"), "wb") as err:
                self.proc = subprocess.Popen(
                    [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                     "--remote-debugging-pipe", *(extra or []), "about:blank"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    preexec_fn=child_fds, close_fds=False, start_new_session=True)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise EOFError(f"chromium closed the DevTools pipe: {self.stderr()[-2000:]}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def stderr(self) -> str:
        try:
            return Path(self.profile, "stderr.log").read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:  # the browser we started leads its own process group: end it and its helpers
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=30)
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_page(path: Path) -> tuple[Chromium, str]:
    """Opens ``path`` in a new tab; returns the browser and the tab's session (the caller closes
    the browser)."""
    b = Chromium(["--window-size=1280,900"])
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            b.send(f"{domain}.enable", session=s)
        b.send("Page.navigate", {"url": path.resolve().as_uri()}, session=s)
        b.wait_event("Page.loadEventFired")
        # let plotly finish drawing (it draws on load, some parts on the next frames)
        b.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 500))",
                                    "awaitPromise": True}, session=s)
    except BaseException:
        b.close()
        raise
    return b, s


def page_errors(b: Chromium) -> list[str]:
    errs = []
    for e in b.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            errs.append(f"console.{p['type']}: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            errs.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
        elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
            errs.append(f"log {p['entry'].get('source')}: {p['entry'].get('text')}")
        elif m == "Network.loadingFailed":
            errs.append(f"load failed: {p.get('errorText')} {p.get('blockedReason', '')}")
    return errs


def requested_urls(b: Chromium) -> list[str]:
    """Every URL the page asked for, but data: and blob: ones, which never leave the page
    (plotly.js probes the browser with an inline data: image)."""
    return [url for e in b.events if e.get("method") == "Network.requestWillBeSent"
            for url in [e["params"]["request"]["url"]]
            if not url.startswith(("data:", "blob:"))]


def evaluate(b: Chromium, session: str, js: str):
    r = b.send("Runtime.evaluate", {"expression": js, "returnByValue": True}, session=session)
    assert "exceptionDetails" not in r, r
    return r["result"]["value"]


needs_chromium = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                    reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")

_TREEMAP_CELLS = f"""(() => {{
  const cells = document.querySelectorAll('#{report_html.TREEMAP_ID} .treemaplayer g.slice');
  return Array.from(cells).map(e => {{
    const n = e.__data__ && e.__data__.data;  // d3 hierarchy node of the cell
    return {{label: n.data.label, leaf: !n.children}};
  }});
}})()"""


@needs_chromium
def test_browser_draws_offline_without_errors(tmp_path, plotly):
    check, diff = small_check_doc(), small_diff_doc()
    page = tmp_path / "report.html"
    write_html(page, report_html.render_html(check, diff))
    b, s = load_page(page)
    try:
        assert page_errors(b) == []
        assert requested_urls(b) == [page.resolve().as_uri()]  # the file, nothing else
        cells = evaluate(b, s, _TREEMAP_CELLS)
        shown = check["results"][1]  # the failing combination comes first
        names = [m["name"] for o in shown["objects"] for m in o["maps"]]
        assert sorted(c["label"] for c in cells if c["leaf"]) == sorted(names)
        assert sorted(c["label"] for c in cells if not c["leaf"]) \
            == ["all objects (6.18.0 · 64 CPUs)", "cni", "lb"]
        # the usage bars (one per combination) and the diff's old/new bars are drawn too
        assert evaluate(b, s, f"document.querySelectorAll('#{report_html.USAGE_ID} "
                              ".barlayer g.point').length") == len(check["results"])
        assert evaluate(b, s, f"document.querySelectorAll('#{report_html.DIFF_ID} "
                              ".barlayer g.point').length") == 4
        assert evaluate(b, s, "document.getElementById('bpfmem-verdict').textContent") == "FAIL"
        assert evaluate(b, s, "document.querySelectorAll('#bpfmem-diff-table tbody tr"
                              ".pin-incompatible').length") == 1
        # switching combination with the menu shows the other treemap
        evaluate(b, s, f"Plotly.restyle('{report_html.TREEMAP_ID}', "
                       "{visible: [true, false]}).then(() => true)")
        b.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 300))",
                                    "awaitPromise": True}, session=s)
        leaves = [c["label"] for c in evaluate(b, s, _TREEMAP_CELLS) if c["leaf"]]
        assert sorted(leaves) == sorted(names)
        assert page_errors(b) == []
        assert requested_urls(b) == [page.resolve().as_uri()]
    finally:
        b.close()
    assert not Path(b.profile).exists()


@needs_chromium
def test_browser_test_sees_a_stray_request(tmp_path, plotly):
    """The control: the same checks catch a page that tries to load something from the net."""
    html = report_html.render_html(small_check_doc())
    html = html.replace("<footer>", '<img src="https://example.invalid/pixel.png"><footer>')
    page = tmp_path / "leaky.html"
    write_html(page, html)
    b, s = load_page(page)
    try:
        seen = requested_urls(b)[1:] + page_errors(b)
        assert any("example.invalid" in x for x in seen), seen
    finally:
        b.close()
