// cilium_maps: what cilium/ebpf (the release installed under GOPATH, Debian's 0.9.1) makes of
// an eBPF object, and what the kernel then creates.
//
//	cilium_maps spec OBJ...     LoadCollectionSpec only (no root)
//	cilium_maps create OBJ...   also NewMap for every map (root): no programs, no pins
//	cilium_maps collection OBJ...  CollectionSpec.LoadAndAssign of every map (root): the
//	                               collection loader's own fix-ups (BPF_F_MMAPABLE on data
//	                               sections in current releases), still no programs
//
// JSON Lines on stdout, one "object" line per object, then one "map" line per map sorted by
// name; an object cilium/ebpf refuses gives one "error" line instead of its maps. Map lines:
//
//	{"kind":"map","object":PATH,"name":..,"spec":{..},"kernel":{..}|null,"error":MSG|null}
//
// spec is the MapSpec as LoadCollectionSpec returned it (type, key_size, value_size,
// max_entries, flags, pinning, inner); kernel is Map.Info() plus the fdinfo memlock of the map
// NewMap created. A map whose spec asks for pinning is created with Pinning reset to PinNone,
// as agents that handle pinning themselves do; its spec line keeps the value it had.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
)

type specView struct {
	Type       uint32    `json:"type"`
	KeySize    uint32    `json:"key_size"`
	ValueSize  uint32    `json:"value_size"`
	MaxEntries uint32    `json:"max_entries"`
	Flags      uint32    `json:"flags"`
	Pinning    int       `json:"pinning"`
	Inner      *specView `json:"inner"`
	InnerName  string    `json:"inner_name,omitempty"`
}

type kernelView struct {
	Name       string `json:"name"`
	Type       uint32 `json:"type"`
	KeySize    uint32 `json:"key_size"`
	ValueSize  uint32 `json:"value_size"`
	MaxEntries uint32 `json:"max_entries"`
	Flags      uint32 `json:"flags"`
	Memlock    *int64 `json:"memlock"`
}

func view(s *ebpf.MapSpec) *specView {
	if s == nil {
		return nil
	}
	v := &specView{uint32(s.Type), s.KeySize, s.ValueSize, s.MaxEntries, s.Flags,
		int(s.Pinning), view(s.InnerMap), ""}
	if s.InnerMap != nil {
		v.InnerName = s.InnerMap.Name
	}
	return v
}

func memlock(fd int) *int64 {
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == "memlock" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return &n
			}
		}
	}
	return nil
}

func emit(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func main() {
	mode := ""
	if len(os.Args) >= 3 {
		mode = os.Args[1]
	}
	if mode != "spec" && mode != "create" && mode != "collection" {
		fmt.Fprintln(os.Stderr, "usage: cilium_maps spec|create|collection OBJ...")
		os.Exit(2)
	}
	create := mode != "spec"
	if create {
		if err := rlimit.RemoveMemlock(); err != nil {
			fmt.Fprintln(os.Stderr, "cilium_maps: rlimit:", err)
		}
	}
	for _, path := range os.Args[2:] {
		spec, err := ebpf.LoadCollectionSpec(path)
		if err != nil {
			emit(map[string]interface{}{"kind": "error", "object": path, "stage": "spec",
				"message": err.Error()})
			continue
		}
		names := make([]string, 0, len(spec.Maps))
		for n := range spec.Maps {
			names = append(names, n)
		}
		sort.Strings(names)
		emit(map[string]interface{}{"kind": "object", "object": path, "nr_maps": len(names),
			"nr_progs": len(spec.Programs)})
		if mode == "collection" {
			collection(path, spec, names)
			continue
		}
		for _, n := range names {
			ms := spec.Maps[n]
			line := map[string]interface{}{"kind": "map", "object": path, "name": n,
				"spec_name": ms.Name, "spec": view(ms), "kernel": nil, "error": nil}
			if create {
				c := ms.Copy()
				c.Pinning = ebpf.PinNone
				if c.Type == ebpf.ProgramArray || c.Type == ebpf.ArrayOfMaps ||
					c.Type == ebpf.HashOfMaps {
					// initial slots name programs or maps: NewCollection fills them, not
					// NewMap; the memory of the map does not depend on them
					c.Contents = nil
				}
				m, err := ebpf.NewMap(c)
				if err != nil {
					line["error"] = err.Error()
				} else {
					info, err := m.Info()
					if err != nil {
						line["error"] = "info: " + err.Error()
					} else {
						line["kernel"] = kernelView{info.Name, uint32(info.Type), info.KeySize,
							info.ValueSize, info.MaxEntries, info.Flags, memlock(m.FD())}
					}
					m.Close()
				}
			}
			emit(line)
		}
	}
}

// collection loads each map alone through CollectionSpec.LoadAndAssign (a struct built at run
// time with one *ebpf.Map field tagged with the map's name), so the collection loader's
// fix-ups apply and one refused map does not hide the others.
func collection(path string, spec *ebpf.CollectionSpec, names []string) {
	for _, n := range names {
		ms := spec.Maps[n]
		line := map[string]interface{}{"kind": "map", "object": path, "name": n,
			"spec_name": ms.Name, "spec": view(ms), "kernel": nil, "error": nil}
		one := spec.Copy()
		for _, m := range one.Maps {
			m.Pinning = ebpf.PinNone
			if m.Type == ebpf.ProgramArray || m.Type == ebpf.ArrayOfMaps ||
				m.Type == ebpf.HashOfMaps {
				m.Contents = nil
			}
		}
		typ := reflect.StructOf([]reflect.StructField{{Name: "M",
			Type: reflect.TypeOf((*ebpf.Map)(nil)), Tag: reflect.StructTag(`ebpf:"` + n + `"`)}})
		dst := reflect.New(typ)
		if err := one.LoadAndAssign(dst.Interface(), nil); err != nil {
			line["error"] = err.Error()
		} else {
			m := dst.Elem().Field(0).Interface().(*ebpf.Map)
			info, err := m.Info()
			if err != nil {
				line["error"] = "info: " + err.Error()
			} else {
				line["kernel"] = kernelView{info.Name, uint32(info.Type), info.KeySize,
					info.ValueSize, info.MaxEntries, info.Flags, memlock(m.FD())}
			}
			m.Close()
		}
		emit(line)
	}
}
