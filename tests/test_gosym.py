"""The Go symbol grammar (parse/gosym.py) on the forms each toolchain names symbols with; the
forms come from real binaries (tests/test_size_go_real.py holds every row of those to a real
package)."""

import pytest

from bpfmem.parse.gosym import C_CODE, FUNC_DATA, RUNTIME_DATA, TYPES, UNNAMED, package_of


@pytest.mark.parametrize("name,pkg", [
    ("net/http.(*Client).Do", "net/http"),
    # wrappers of unexported methods promoted from another package's embedded type
    ("text/template.Template.text/template/parse.add", "text/template"),
    ("text/template.(*Template).text/template/parse.add", "text/template"),
    ("github.com/docker/swarmkit/manager/state/raft/storage.(*wrappedWAL)."
     "github.com/docker/swarmkit/vendor/github.com/coreos/etcd/wal.x",
     "github.com/docker/swarmkit/manager/state/raft/storage"),
    ("main.t.net/http.m", "main"),
    ("a/b.t.x/y.m", "a/b"),
    # generics
    ("pkg.F[go.shape.int]", "pkg"),
    ("example.com/m/p.(*T[go.shape.struct { a/b.X }]).M", "example.com/m/p"),
    # dots in paths: escaped last element, middle elements, hosts, vendored hosts
    ("gopkg.in/yaml%2ev2.Marshal", "gopkg.in/yaml.v2"),
    ("gopkg.in/square/go-jose.v2/jwt.Parse", "gopkg.in/square/go-jose.v2/jwt"),
    ("go.uber.org/zap.New", "go.uber.org/zap"),
    ("go.etcd.io/bbolt.(*DB).Close", "go.etcd.io/bbolt"),
    ("github.com/docker/cli/vendor/k8s.io/api/core/v1.(*Pod).Marshal",
     "github.com/docker/cli/vendor/k8s.io/api/core/v1"),
    ("github.com/docker/swarmkit/vendor/code.cloudfoundry.org/clock.(*realClock).Now",
     "github.com/docker/swarmkit/vendor/code.cloudfoundry.org/clock"),
    ("vendor/golang.org/x/net/http2/hpack.(*Decoder).Write",
     "vendor/golang.org/x/net/http2/hpack"),
    # linker data of Go 1.19 (go.) and 1.20+ (go:)
    ("go.itab.*net/http.Header,io.Writer", "net/http"),
    ("go:itab.*net/http.Header,io.Writer", "net/http"),
    ("go.itab.go.uber.org/zap.x,io.Writer", "go.uber.org/zap"),
    ("go.itab.*struct { a int },io.Writer", TYPES),
    ("go.importpath.net/http.", "net/http"),
    ('go.string."x"', RUNTIME_DATA),
    ("go:string.*", RUNTIME_DATA),
    ("go.func.*", RUNTIME_DATA),
    ("go:struct { a int }.M", UNNAMED),
    ("gclocals\u00b7abc", FUNC_DATA),
    ("$f64.3ff0000000000000", RUNTIME_DATA),
    ("_.goready.func1", RUNTIME_DATA),
    # types
    ("type..eq.net/http.Cookie", "net/http"),
    ("type:.eq.[2]net/http.x", "net/http"),
    ("type:.eq.go.shape.struct { a int }", TYPES),
    ("type:net/http.Client", "net/http"),
    ("type.*net/http.Client", "net/http"),
    ("type:[]*[4]chan<- gopkg.in/yaml%2ev2.Node", "gopkg.in/yaml.v2"),
    ("type:map[string]int", TYPES),
    ("type:func(int) error", TYPES),
    ("type:*struct { a int }", TYPES),
    ("type:.namedata.*Foo.", TYPES),
    ("type..importpath.net/http.", TYPES),
    ("type:int", TYPES),
    ("type:unsafe.Pointer", TYPES),
    ("type:*", TYPES),
    ("runtime.gcWriteBarrier", "runtime"),
    ("main..inittask", "main"),
    ("x_cgo_init", C_CODE),
])
def test_package_of(name, pkg):
    assert package_of(name) == pkg


def test_packages_of_is_package_of_name_by_name():
    """The batch reader (patterns for the usual forms, a package carried from one name to
    the next) gives what package_of gives, on the forms above and on names built at random
    from the grammar's pieces, in order and shuffled."""
    import random
    from bpfmem.parse.gosym import packages_of
    rnd = random.Random(29)
    parts = ["a", "Foo", "b.c", "go-jose.v2", "github.com", "cloud.google.com", "vendor",
             "main", "type", "go", "_", "x%2ey", "k8s.io", "a+b", "", "(*T)",
             "[go.shape.int]", "T", "F", "*", "[2]", "eq", "hash", "itab", "struct {", ",",
             " ", "func(", "map[", "\u00b7", ".", "/"]
    names = set()
    for _ in range(20000):
        n = "".join(rnd.choice(parts) + rnd.choice(["/", ".", "", ".", "/", ",", "["])
                    for _ in range(rnd.randint(1, 7)))
        names.update({n, "type..eq." + n, "go.itab.*" + n, "go:itab." + n, "type." + n})
    # the forms of the table above, and a package's functions one after another
    names = sorted(names) + [
        "net/http.(*Client).Do", "net/http.(*Client).Get", "net/http.x/y.z",
        "net/http.T[a/b.c]", "github.com/a/b.F", "github.com/a/b.G.func1",
        "github.com/a/b.c/d.e", "gopkg.in/yaml%2ev2.Marshal", "type.r+29J2dQ", "type..eq.a.b",
        "type..eq.*[2]github.com/a/b.T", "go.itab.*github.com/a/b.T,io.Writer"]
    for order in (names, rnd.sample(names, len(names))):
        assert packages_of(order) == [package_of(n) for n in order]
