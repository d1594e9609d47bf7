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
