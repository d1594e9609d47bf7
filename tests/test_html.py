"""The offline HTML report: what the page holds, and what a real browser does with it.

The browser test drives Debian's headless Chromium over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port, no websocket library) and checks that the page logs no
error, makes no request but for its own file, and draws one treemap cell per map.
The README's picture of a report is drawn by docs/pictures.py (tests/test_pictures.py).
"""

from __future__ import annotations

import fcntl
import html as _html
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


# --- results, made by the real api from the bundled example and examples/seed -----------------

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"
V054, BEFORE, AFTER = (str(SEED / f"cni_{v}.bpf.o") for v in ("v054", "v060_before", "v060_after"))
WHATIF = ["attachment_identity_table.flags+=no_prealloc"]


def write_html(path, html: str) -> None:
    """Write a page to ``path`` as UTF-8 (as the CLI's output files do)."""
    from bpfmem.outputs import output_file
    with output_file(path) as f:
        f.write(html)


def small_check(passing: bool = False):
    """The bundled example and the seed's v0.5.4 with a what-if, on 6.18 with 2 and 64 CPUs;
    the budget lies between the two totals, so 64 CPUs fails and 2 pass (``passing``: a limit
    both fit in)."""
    from bpfmem import api
    objs = [str(api.example_object_path()), V054]
    profiles = api.profiles(["6.18"], [2, 64])
    whatif = api.make_whatif(WHATIF)
    probe = api.check_objects(objs, limit=1 << 40, profiles=profiles, whatif=whatif)
    lo, hi = (r.total for r in probe.results)
    assert lo < hi  # 64 CPUs charge more (the per-CPU maps)
    return api.check_objects(objs, limit=(1 << 40) if passing else lo + hi, max_fraction=0.5,
                             profiles=profiles, whatif=whatif)


def small_diff():
    """v0.5.4 to the bundled example on 6.18, 2 CPUs: maps added, changed, removed and
    unchanged."""
    from bpfmem import api
    return api.diff_objects([V054], [str(api.example_object_path())],
                            profile=api.profile("6.18", cpus=2), limit=LIMIT)


def pinned_diff():
    """The seed's v0.6.0 before to after: pinned maps whose flags change (pin-incompatible)
    and one reused."""
    from bpfmem import api
    return api.diff_objects([BEFORE], [AFTER], profile=api.profile("6.18", cpus=2), limit=LIMIT)

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
    check = small_check()
    for name in list(sys.modules):
        if name == "plotly" or name.startswith("plotly."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(UnsupportedError, match=r"pip install '\.\[html\]'"):
        report_html.render_html(check)


def test_needs_a_result(plotly):
    with pytest.raises(ValueError):
        report_html.render_html()


def test_the_renderer_table_draws_the_typed_results(plotly):
    """check_html and diff_html are render_html of the result itself (no document between)."""
    import io
    from bpfmem.report.formats import render
    check, diff = small_check(), small_diff()
    for result, page in ((check, report_html.render_html(check)),
                         (diff, report_html.render_html(None, diff))):
        out = io.StringIO()
        render(result, "html", out)
        assert out.getvalue() == page


def test_treemap_one_cell_per_map(plotly):
    from bpfmem.units import format_size
    check = small_check()
    page = report_html.render_html(check)
    fig = figures(page)[report_html.TREEMAP_ID]
    assert len(fig["data"]) == len(check.results) == 2  # one treemap per kernel/CPU combination
    shown = visible_trace(fig)
    assert check.results[shown].passed is False  # a failing combination is shown first
    for i, result in enumerate(check.results):
        t = fig["data"][i]
        assert t["type"] == "treemap"
        names = [m.cost.name for o in result.objects for m in o.maps]
        assert len(names) == 15  # the example's 10 maps and v0.5.4's 5
        assert sorted(leaf_labels(fig, i)) == sorted(names)
        by_id = dict(zip(t["ids"], t["values"]))
        for oi, o in enumerate(result.objects):
            assert by_id[f"o{oi}"] == o.total  # objects group their maps
            for mi, m in enumerate(o.maps):
                assert by_id[f"o{oi}/m{mi}"] == m.cost.charged_at_create
        assert by_id["root"] == result.total
        assert t["branchvalues"] == "total"
    # hover names every figure the brief asks for
    hover = " ".join(fig["data"][shown]["hovertemplate"])
    for word in ("memlock at create", "charged at create", "charged full", "type",
                 "key / value size", "max_entries", "flags"):
        assert word in hover
    t = fig["data"][shown]
    ident = check.results[shown].objects[0].maps[5].cost
    assert ident.name == "attachment_identity_table"
    row = t["customdata"][t["ids"].index("o0/m5")]
    assert row[:4] == ["hash", "20 / 24", "65,536", "no_prealloc"]  # the what-if's flag
    assert row[4:7] == [format_size(ident.memlock_at_create), format_size(ident.charged_at_create),
                        format_size(ident.charged_full)]


def test_treemap_shares_in_the_one_share_style(plotly):
    """Cells and hover show a map's share of the whole as bpfmem prints shares everywhere
    (units.format_share: whole percent, one decimal below 1%), never plotly's own."""
    from bpfmem.units import format_share
    check = small_check()
    fig = figures(report_html.render_html(check))[report_html.TREEMAP_ID]
    for t, result in zip(fig["data"], check.results):
        assert "percentRoot" not in t["texttemplate"] + " ".join(t["hovertemplate"])
        assert t["texttemplate"].endswith("%{customdata[8]}")
        assert all("%{customdata[8]} of the total" in h for h in t["hovertemplate"])
        shares = dict(zip(t["ids"], (row[8] for row in t["customdata"])))
        assert shares["root"] == "100%"
        for oi, o in enumerate(result.objects):
            for mi, m in enumerate(o.maps):
                # the share the check itself computed, in the one style
                assert shares[f"o{oi}/m{mi}"] == format_share(m.share)
        # whole percent for the example's conntrack_table, and v0.5.4's interface_table
        # (266640 B, 0.3% of the total) with one decimal
        assert shares["o0/m6"] == "24%"
        assert (result.objects[1].maps[2].cost.name, shares["o1/m2"]) == ("interface_table",
                                                                          "0.3%")


def test_usage_bar_against_budget_and_limit(plotly):
    check = small_check()
    fig = figures(report_html.render_html(check))[report_html.USAGE_ID]
    bar = fig["data"][0]
    assert bar["type"] == "bar"
    assert bar["y"] == pytest.approx([r.total / (1 << 20) for r in check.results])
    colors = bar["marker"]["color"]
    assert colors[0] != colors[1]  # pass and fail differ
    assert [t["name"] for t in fig["data"][1:]] == ["pass", "fail", "budget"]
    assert fig["data"][3]["y"] == pytest.approx([check.budget.budget / (1 << 20)] * 2)
    assert any(s["y0"] == pytest.approx(check.budget.limit / (1 << 20))
               for s in fig["layout"]["shapes"])  # the limit


def test_no_url_outside_the_library(plotly):
    page = report_html.render_html(small_check(), small_diff())
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
    from bpfmem.units import format_size
    check = small_check()
    page = report_html.render_html(check, title="cni check")
    assert '<span class="verdict fail" id="bpfmem-verdict">FAIL</span>' in page
    assert "<title>cni check</title>" in page
    b = check.budget
    facts = page[page.index('<dl class="facts">'):page.index("</header>")]
    assert re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", facts) == [
        ("kernel", "6.18.0"), ("possible CPUs", "2, 64"), ("limit", format_size(b.limit)),
        ("budget", f"{format_size(b.budget)} (50%)"), ("judged at", "create"),
        ("what-if", "; ".join(check.whatif))]
    assert check.whatif and "no_prealloc" in check.whatif[0]
    page = report_html.render_html(small_check(passing=True))
    assert '<span class="verdict pass" id="bpfmem-verdict">PASS</span>' in page


def _table_rows(page: str) -> list[tuple[str, str]]:
    start = page.index('id="bpfmem-diff-table"')
    return re.findall(r"<tr class=\"([^\"]*)\">(.*?)</tr>",
                      page[start:page.index("</table>", start)], re.S)


def _row_name(row: str) -> str:
    return re.search(r"<code>(.*?)</code>", row).group(1)


def test_diff_table_and_summary(plotly):
    from bpfmem.units import format_delta, format_share, format_size
    diff = small_diff()
    page = report_html.render_html(None, diff)
    assert (f"upgrade charges {format_size(diff.upgrade_charge)} at first start; new total "
            f"{format_size(diff.new.charged_at_create)} = "
            f"{format_share(diff.new_share_of_limit)} of the 128Mi limit") in page
    rows = _table_rows(page)
    status = {m.map: m.status for m in diff.maps}
    assert sorted(status.values()) == ["added"] * 6 + ["changed"] * 2 + ["removed"] + [
        "unchanged"] * 2
    # added, changed, removed, unchanged; the largest change first within each
    order = {"added": 0, "changed": 1, "removed": 2, "unchanged": 3}
    names = [_row_name(r) for _, r in rows]
    assert names == [m.map for m in sorted(diff.maps, key=lambda m: (
        order[m.status], -abs(m.delta_at_create), m.object, m.map))]
    assert names[0] == "service_reverse_table" and names[8] == "interface_table"
    assert [c for c, _ in rows] == [f"st-{status[n]}" for n in names]  # no pin trouble here
    ct = next(m for m in diff.maps if m.map == "conntrack_table")
    row = dict((_row_name(r), r) for _, r in rows)["conntrack_table"]
    for figure in (format_size(ct.old.charged_at_create), format_size(ct.new.charged_at_create),
                   format_delta(ct.delta_at_create)):
        assert figure in row
    assert "max_entries: 65536 -&gt; 131072" in row and "type: 9 -&gt; 1" in row
    gone = next(m for m in diff.maps if m.status == "removed")
    assert gone.delta_at_create < 0 and format_delta(gone.delta_at_create) in page  # it frees
    start = page.index('id="bpfmem-diff-table"')
    counts = page[page.index('<table class="diff counts"'):start]
    assert re.search(r"changed</span></td><td class=num>2</td>", counts)
    assert f'<td class=num>11</td><td class="num up">{format_delta(diff.delta_at_create)}' \
        in counts  # all maps: the result's delta at create
    totals = figures(page)[report_html.DIFF_ID]
    assert [t["name"] for t in totals["data"]] == ["old", "new"]
    assert totals["data"][1]["y"][0] == pytest.approx(diff.new.charged_at_create / (1 << 20))
    assert 'id="bpfmem-treemap"' not in page  # no check, no treemap
    assert "cannot be reused" not in page  # nothing pinned


def test_pin_incompatible_maps_counted_in_words(plotly):
    import dataclasses
    diff = pinned_diff()
    bad = [m.map for m in diff.maps if m.pin_incompatible]
    assert len(bad) == 5  # v0.6.0 after adds no_prealloc to five pinned maps
    page = report_html.render_html(None, diff)
    assert "</span> 5 pinned maps cannot be reused by the new object" in page
    assert "map(s)" not in strip_plotlyjs(page)
    classes = {_row_name(r): c for c, r in _table_rows(page)}
    assert sorted(n for n, c in classes.items() if "pin-incompatible" in c) == sorted(bad)
    reused = dict((_row_name(r), r) for _, r in _table_rows(page))["service_reverse_table"]
    assert '<span class="badge pin">reused</span>' in reused
    one = dataclasses.replace(diff, maps=tuple(m for m in diff.maps
                                               if not m.pin_incompatible or m.map == bad[0]))
    page = report_html.render_html(None, one)
    assert "</span> 1 pinned map cannot be reused by the new object" in page


def test_tolerates_what_is_missing(plotly):
    """Maps the kernel refuses (no figure), a check on no profile and a diff of no maps
    still make a page, saying so."""
    import dataclasses
    from bpfmem import api
    old = api.check_objects([str(api.example_object_path())], limit=LIMIT,
                            profiles=api.profiles(["5.4"], [2]))
    refused = [m.cost.name for o in old.results[0].objects for m in o.maps
               if m.cost.charged_at_create is None]
    assert refused == ["events"]  # a ring buffer needs 5.8
    page = report_html.render_html(old)
    assert "not sized (unknown to the model): cni_datapath/events" in page
    fig = figures(page)[report_html.TREEMAP_ID]
    t = fig["data"][0]
    assert t["values"][t["labels"].index("events")] == 0
    assert t["customdata"][t["labels"].index("events")][5:7] == ["?", "?"]
    nothing = api.check_objects([str(api.example_object_path())], limit=LIMIT, profiles=[])
    page = report_html.render_html(nothing)
    assert "no results in the check" in page and "<title>bpfmem report</title>" in page
    page = report_html.render_html(None, dataclasses.replace(small_diff(), maps=()))
    assert '<td colspan="11" class="muted">no maps</td>' in page


def _renamed_map(check, name: str):
    """``check`` with its first result's first map named ``name``."""
    from dataclasses import replace
    r = check.results[0]
    o = r.objects[0]
    m = o.maps[0]
    m = replace(m, cost=replace(m.cost, spec=replace(m.cost.spec, name=name)))
    o = replace(o, maps=(m,) + o.maps[1:])
    return replace(check, results=(replace(r, objects=(o,) + r.objects[1:]),) + check.results[1:])


def test_escapes_names(plotly):
    from dataclasses import replace
    evil = "<img src=x onerror=alert(1)></script>"
    check = _renamed_map(small_check(), evil)
    diff = small_diff()
    diff = replace(diff, maps=(replace(diff.maps[0], map=evil),) + diff.maps[1:])
    page = report_html.render_html(check, diff, title=evil)
    assert evil not in page
    assert _html.escape(evil) in page  # the diff table and the title
    fig = figures(page)[report_html.TREEMAP_ID]
    assert evil in fig["data"][0]["labels"]  # intact in the data, escaped in the page


def test_write_html(tmp_path, plotly):
    page = report_html.render_html(small_check())
    out = tmp_path / "r.html"
    write_html(out, page)
    assert out.read_text(encoding="utf-8") == page




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
    check, diff = small_check(), pinned_diff()
    page = tmp_path / "report.html"
    write_html(page, report_html.render_html(check, diff))
    b, s = load_page(page)
    try:
        assert page_errors(b) == []
        assert requested_urls(b) == [page.resolve().as_uri()]  # the file, nothing else
        cells = evaluate(b, s, _TREEMAP_CELLS)
        shown = check.results[1]  # the failing combination comes first
        assert not shown.passed
        names = [m.cost.name for o in shown.objects for m in o.maps]
        assert sorted(c["label"] for c in cells if c["leaf"]) == sorted(names)
        assert sorted(c["label"] for c in cells if not c["leaf"]) \
            == ["all objects (6.18.0 · 64 CPUs)", "cni_datapath", "cni_v054"]
        # the usage bars (one per combination) and the diff's old/new bars are drawn too
        assert evaluate(b, s, f"document.querySelectorAll('#{report_html.USAGE_ID} "
                              ".barlayer g.point').length") == len(check.results)
        assert evaluate(b, s, f"document.querySelectorAll('#{report_html.DIFF_ID} "
                              ".barlayer g.point').length") == 4
        assert evaluate(b, s, "document.getElementById('bpfmem-verdict').textContent") == "FAIL"
        assert evaluate(b, s, "document.querySelectorAll('#bpfmem-diff-table tbody tr"
                              ".pin-incompatible').length") == 5
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
    html = report_html.render_html(small_check())
    html = html.replace("<footer>", '<img src="https://example.invalid/pixel.png"><footer>')
    page = tmp_path / "leaky.html"
    write_html(page, html)
    b, s = load_page(page)
    try:
        seen = requested_urls(b)[1:] + page_errors(b)
        assert any("example.invalid" in x for x in seen), seen
    finally:
        b.close()
