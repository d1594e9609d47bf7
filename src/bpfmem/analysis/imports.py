"""Why a package is linked, and what dropping an import would save.

Over the import graph of the program (``go list -deps``), weighted by the bytes each package
has in the binary: the chain from the main package to a package (shortest), and for every
import edge X -> Y the bytes of the packages that only that edge makes reachable. Those are
the nodes the edge dominates: each edge is split by a node of its own and the dominator tree
is computed over the split graph (Cooper, Harvey, Kennedy: "A Simple, Fast Dominance
Algorithm"). Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..parse.golist import ImportGraph


class ImportTree:
    """The shortest chains from the main package, all at once: each package reachable from
    it -> the package it is first reached from (breadth first, imports in their order), its
    depth, and the packages in the order they were reached."""
    __slots__ = ("prev", "depth", "order")

    def __init__(self, graph: ImportGraph):
        prev: dict[str, str | None] = {graph.main: None}
        depth = {graph.main: 0}
        order = [graph.main]
        q = deque([graph.main])
        while q:
            pkg = graph.packages.get(q.popleft())
            for nxt in (pkg.imports if pkg else ()):
                if nxt in graph.packages and nxt not in prev:
                    prev[nxt] = pkg.import_path
                    depth[nxt] = depth[pkg.import_path] + 1
                    order.append(nxt)
                    q.append(nxt)
        self.prev, self.depth, self.order = prev, depth, order

    def path(self, target: str) -> tuple[str, ...]:
        """main -> ... -> ``target`` (empty if unreachable)."""
        prev = self.prev
        if target not in prev:
            return ()
        out = []
        cur: str | None = target
        while cur is not None:
            out.append(cur)
            cur = prev[cur]
        return tuple(reversed(out))


class Chain:
    """main -> ... -> importer -> imported along an :class:`ImportTree`, a sequence of names
    made when first read: a saving carries one per import edge, and on a chain-shaped graph
    of 6,000 packages those would hold 18 M names; only the printed ones are read. Equal to
    the tuple of its names."""
    __slots__ = ("tree", "importer", "imported", "_names")

    def __init__(self, tree: ImportTree, importer: str, imported: str):
        self.tree, self.importer, self.imported = tree, importer, imported
        self._names: tuple[str, ...] | None = None

    def names(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = self.tree.path(self.importer) + (self.imported,)
        return self._names

    def __len__(self) -> int:
        return self.tree.depth[self.importer] + 2

    def __iter__(self):
        return iter(self.names())

    def __getitem__(self, i):
        return self.names()[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, Chain):
            other = other.names()
        return self.names() == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.names())

    def __add__(self, other: tuple) -> tuple[str, ...]:
        return self.names() + tuple(other)

    def __repr__(self) -> str:
        return f"Chain({self.names()!r})"


@dataclass(frozen=True, slots=True)
class ImportSaving:
    importer: str
    imported: str
    saves: int                      # bytes of the packages only this import brings in
    packages: tuple[str, ...]       # those packages (with bytes), largest first: at most
                                    # TOP_PACKAGES of them
    chain: Sequence[str]            # main -> ... -> importer -> imported (a shortest one;
                                    # a Chain from import_savings, made when read)
    package_count: int = -1         # how many there are (-1: len(packages))

    @property
    def count(self) -> int:
        return len(self.packages) if self.package_count < 0 else self.package_count


#: the most packages a saving lists (a chain of 6,000 packages would list 18 M in all)
TOP_PACKAGES = 64


def chain_to(graph: ImportGraph, target: str) -> tuple[str, ...]:
    """A shortest import chain from the main package to ``target`` (empty if unreachable)."""
    return ImportTree(graph).path(target)


def _dominators(succ: list[list[int]], root: int) -> list[int]:
    """idom of every node reachable from ``root`` (-1 for unreachable ones)."""
    n = len(succ)
    order: list[int] = []
    seen = [False] * n
    seen[root] = True
    stack = [(root, 0)]
    while stack:                          # iterative DFS, postorder
        v, i = stack[-1]
        if i < len(succ[v]):
            stack[-1] = (v, i + 1)
            w = succ[v][i]
            if not seen[w]:
                seen[w] = True
                stack.append((w, 0))
        else:
            stack.pop()
            order.append(v)
    po = [-1] * n
    for i, v in enumerate(order):
        po[v] = i
    rpo = list(reversed(order))
    preds: list[list[int]] = [[] for _ in range(n)]
    for v in order:
        for w in succ[v]:
            preds[w].append(v)
    idom = [-1] * n
    idom[root] = root
    changed = True
    while changed:
        changed = False
        for v in rpo:
            if v == root:
                continue
            new = -1
            for p in preds[v]:
                if idom[p] == -1:
                    continue
                if new == -1:
                    new = p
                    continue
                a, b = p, new
                while a != b:
                    while po[a] < po[b]:
                        a = idom[a]
                    while po[b] < po[a]:
                        b = idom[b]
                new = a
            if new != idom[v]:
                idom[v] = new
                changed = True
    return idom


def import_savings(graph: ImportGraph, weights: dict[str, int]) -> list[ImportSaving]:
    """Every import edge with the bytes only it brings in, largest first (edges that save
    nothing are left out)."""
    names = list(graph.packages)
    index = {p: i for i, p in enumerate(names)}
    edges = list(graph.edges())
    n_pkg = len(names)
    succ: list[list[int]] = [[] for _ in range(n_pkg + len(edges))]
    for k, (a, b) in enumerate(edges):
        e = n_pkg + k
        succ[index[a]].append(e)
        succ[e].append(index[b])
    idom = _dominators(succ, index[graph.main])
    children: list[list[int]] = [[] for _ in succ]
    for v, d in enumerate(idom):
        if d >= 0 and d != v:
            children[d].append(v)
    # what each node dominates, children before parents, in one pass: its bytes, how many
    # packages with bytes, the TOP_PACKAGES largest (one walk per edge was quadratic)
    total = [0] * len(succ)
    count = [0] * len(succ)
    top: list[list[tuple[int, str]]] = [[] for _ in succ]
    order, stack = [], [index[graph.main]]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(children[v])
    for v in reversed(order):
        w = weights.get(names[v], 0) if v < n_pkg else 0
        own = [(-w, names[v])] if w > 0 else []
        kids = children[v]
        total[v] = max(w, 0) + sum(total[c] for c in kids)
        count[v] = len(own) + sum(count[c] for c in kids)
        merged = own + [x for c in kids for x in top[c]]
        merged.sort()
        top[v] = merged[:TOP_PACKAGES]
        for c in kids:
            if c < n_pkg:             # an edge's list is its saving's; a package's is done
                top[c] = []
    tree = ImportTree(graph)
    out = []
    for k, (a, b) in enumerate(edges):
        e = n_pkg + k
        if idom[e] == -1 or total[e] <= 0:
            continue
        out.append(ImportSaving(a, b, total[e], tuple(p for _w, p in top[e]),
                                Chain(tree, a, b), count[e]))
    out.sort(key=lambda s: (-s.saves, s.importer, s.imported))
    return out


def deepest(savings: list[ImportSaving], share: float = 0.95) -> list[ImportSaving]:
    """The savings without those a deeper import on the same chain explains: dropping
    main -> config saves what dropping types -> net/http saves, when config only reaches
    net/http through types; the deeper one is the import to cut.

    The chains are shortest ones from one breadth-first walk, so an import lies on another's
    chain exactly when its chain is a prefix of the other's, and each saving is compared
    with the largest one below it in the tree of chains (comparing every pair was
    quadratic: 6,000 packages took 48 s). Savings of :func:`import_savings` (their chains
    along one :class:`ImportTree`) are placed in that tree without a chain being made: the
    import a -> b is the tree's node b when b is first reached from a, else a leaf under a
    (nothing lies below it); other chains go into a trie of their names."""
    trees = {id(s.chain.tree) for s in savings if isinstance(s.chain, Chain)}
    if len(trees) != 1 or not all(isinstance(s.chain, Chain) for s in savings):
        return _deepest_trie(savings, share)
    tree = savings[0].chain.tree
    prev = tree.prev
    best: dict = {}                      # tree node or (a, b) leaf -> the largest saving there
    for s in savings:
        node = s.imported if prev.get(s.imported) == s.importer else (s.importer, s.imported)
        if best.get(node, -1) < s.saves:
            best[node] = s.saves
    below: dict[str, int] = {}           # package -> the largest saving strictly below it
    for node, saves in best.items():
        if type(node) is tuple and below.get(node[0], -1) < saves:
            below[node[0]] = saves
    for v in reversed(tree.order):        # deepest first: children before their parent
        up = max(best.get(v, -1), below.get(v, -1))
        p = prev[v]
        if up >= 0 and p is not None and below.get(p, -1) < up:
            below[p] = up
    return [s for s in savings
            if (below.get(s.imported, -1) if prev.get(s.imported) == s.importer else -1)
            < share * s.saves]


def _deepest_trie(savings: list[ImportSaving], share: float) -> list[ImportSaving]:
    """:func:`deepest` over chains given as names: a trie of them (linear in their length)."""
    node_of: list[int] = []
    kids: list[list[int]] = [[]]
    step: dict[tuple[int, str], int] = {}
    for s in savings:
        node = 0
        for name in s.chain:
            nxt = step.get((node, name))
            if nxt is None:
                nxt = step[(node, name)] = len(kids)
                kids.append([])
                kids[node].append(nxt)
            node = nxt
        node_of.append(node)
    best_at = [-1] * len(kids)               # the largest saving whose chain ends at a node
    for s, node in zip(savings, node_of):
        best_at[node] = max(best_at[node], s.saves)
    below = [-1] * len(kids)                 # the largest saving strictly below a node
    order, stack = [], [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(kids[v])
    for v in reversed(order):
        for c in kids[v]:
            below[v] = max(below[v], best_at[c], below[c])
    return [s for s, node in zip(savings, node_of) if below[node] < share * s.saves]


@dataclass(frozen=True, slots=True)
class ImportChain:
    package: str
    file: int                       # its bytes in the binary
    chain: tuple[str, ...]          # main -> ... -> package (a shortest one)


@dataclass(frozen=True, slots=True)
class WhyLinked:
    """Why a binary's packages are linked: the imports whose removal saves most (deepest on
    their chain first; those that bring in grown packages first, in a diff) and the chains
    to the heaviest (or the grown) packages."""
    main: str
    savings: tuple[ImportSaving, ...]
    chains: tuple[ImportChain, ...]
    notes: tuple[str, ...] = ()     # why the graph may not be the binary's (toolchain, ...)


def why_linked(graph: ImportGraph, savings: list[ImportSaving], weights: dict[str, int],
               grown: list[str] | None = None, limit: int = 10,
               notes: tuple[str, ...] = ()) -> WhyLinked:
    """The ``limit`` most useful savings and chains of a program (``weights``: bytes per
    package in the binary; ``grown``: packages that grew, in a diff). An import inside the
    standard library is no import a user can cut: those edges are left out, so what they
    bring in is counted on the user's import of the standard package that makes them."""
    std = {p for p, g in graph.packages.items() if g.standard}
    savings = deepest([s for s in savings if s.importer not in std])
    if grown:
        g = set(grown)
        savings = sorted(savings, key=lambda s: (not (set(s.packages) & g), -s.saves))
    heavy = [p for p, _w in sorted(weights.items(), key=lambda t: -t[1])
             if p in graph.packages and p != graph.main][:limit]
    tree = next((s.chain.tree for s in savings if isinstance(s.chain, Chain)), None) \
        or ImportTree(graph)
    return WhyLinked(graph.main, tuple(savings[:limit]),
                     tuple(ImportChain(p, weights[p], tree.path(p))
                           for p in (grown or heavy)[:limit] if p in graph.packages),
                     tuple(notes))


def graph_notes(graph: ImportGraph, weights: dict[str, int], *, binary_go: str | None,
                list_go: str | None) -> list[str]:
    """What makes the import graph (``go list`` with the ``list_go`` toolchain) differ from
    the binary's program (built by ``binary_go``): another toolchain, and the share of the
    binary's package bytes in packages the graph lacks."""
    out = []
    total = sum(w for p, w in weights.items() if not p.startswith("(") and w > 0)
    missing = sum(w for p, w in weights.items()
                  if not p.startswith("(") and w > 0 and p not in graph.packages)
    share = missing / total if total else 0.0
    if binary_go and list_go and binary_go != list_go:
        out.append(f"go list ran with {list_go}, the binary was built with {binary_go}: "
                   f"{share:.0%} of its package bytes are in packages that graph lacks, so "
                   f"the savings may be wrong (put a {binary_go} toolchain on PATH or in "
                   "BPFMEM_GO)")
    elif share > 0.05:
        out.append(f"{share:.0%} of the binary's package bytes are in packages go list's "
                   "graph lacks (other build tags, GOOS/GOARCH or source than the binary's)")
    return out
