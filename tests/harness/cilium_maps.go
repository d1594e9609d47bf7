// cilium_maps: what cilium/ebpf (the release installed under GOPATH, Debian's 0.9.1) makes of
// an eBPF object, and what the kernel then creates.
//
//	cilium_maps spec OBJ...     LoadCollectionSpec only (no root)
//	cilium_maps create OBJ...   also NewMap for every map (root): no programs, no pins
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
	if len(os.Args) < 3 || (os.Args[1] != "spec" && os.Args[1] != "create") {
		fmt.Fprintln(os.Stderr, "usage: cilium_maps spec|create OBJ...")
		os.Exit(2)
	}
	create := os.Args[1] == "create"
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
