// memdemo: a Go program whose memory the pod tests know. It allocates, frees and holds on
// request, serves its runtime's figures as Prometheus text (written here by hand from
// runtime.ReadMemStats: the tests build it offline, with the standard library only), its
// own ReadMemStats as JSON, and net/http/pprof, all on 127.0.0.1.
//
//	memdemo -addr 127.0.0.1:0 -ready FILE   writes "host:port" to FILE once it listens
//	GET /step?do=hold     hold 32+16+8 MiB (three allocation sites), churn 32 MiB of garbage
//	GET /step?do=free     drop the 32 MiB (runtime.GC: freed, not yet returned to the OS;
//	                      the background scavenger returns it over time, slower the higher
//	                      GOGC, not at all with GOGC=off)
//	GET /step?do=return   debug.FreeOSMemory: return the free heap to the OS
//	GET /step?do=sparse   allocate 128 MiB in 64 KiB blocks, asking the kernel for transparent
//	                      huge pages under them (MADV_HUGEPAGE on the blocks' range before
//	                      they are first written: what THP "always" does for every mapping),
//	                      keep every other block, GC and return the free half
//	                      (debug.FreeOSMemory): with GODEBUG=madvdontneed=1 each 64 KiB gap
//	                      is MADV_DONTNEED'ed, which splits only the huge page's mapping
//	GET /step?do=garbage  allocate and drop 64 MiB (1 MiB blocks, written): garbage until the
//	                      next GC (with GOGC=off: until do=gc)
//	GET /step?do=gc       runtime.GC once
//	GET /memstats         runtime.ReadMemStats as JSON
//	GET /metrics          go_memstats_* in the Prometheus text format
//	-script hold:0.5,free:1.5,return:2.5   the same steps by itself, at seconds after start
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

var (
	mu                  sync.Mutex
	heldA, heldB, heldC [][]byte
	sink                []byte
	sparse              [][]byte
)

func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// Each holder allocates in its own loop: three allocation sites of 32, 16 and 8 MiB.

//go:noinline
func holdTables() [][]byte {
	out := make([][]byte, 0, 32)
	for i := 0; i < 32; i++ {
		out = append(out, make([]byte, 1<<20))
		touch(out[i])
	}
	return out
}

//go:noinline
func holdIndex() [][]byte {
	out := make([][]byte, 0, 16)
	for i := 0; i < 16; i++ {
		out = append(out, make([]byte, 1<<20))
		touch(out[i])
	}
	return out
}

//go:noinline
func holdCache() [][]byte {
	out := make([][]byte, 0, 8)
	for i := 0; i < 8; i++ {
		out = append(out, make([]byte, 1<<20))
		touch(out[i])
	}
	return out
}

//go:noinline
func churn() {
	for i := 0; i < 32; i++ {
		sink = make([]byte, 1<<20)
		touch(sink)
	}
	sink = nil
}

func do(what string) bool {
	mu.Lock()
	defer mu.Unlock()
	switch what {
	case "hold":
		heldA, heldB, heldC = holdTables(), holdIndex(), holdCache()
		churn()
	case "free":
		heldA = nil
		runtime.GC() // once: a second cycle lowers the goal the scavenger works towards
		return true
	case "return":
		debug.FreeOSMemory()
	case "garbage":
		for i := 0; i < 64; i++ {
			sink = make([]byte, 1<<20)
			touch(sink)
		}
		sink = nil
		return true
	case "gc":
		runtime.GC()
		return true
	case "sparse":
		all := make([][]byte, 0, 2048)
		lo, hi := ^uintptr(0), uintptr(0)
		for i := 0; i < 2048; i++ {
			b := make([]byte, 64<<10)
			p := uintptr(unsafe.Pointer(&b[0]))
			if p < lo {
				lo = p
			}
			if p+uintptr(len(b)) > hi {
				hi = p + uintptr(len(b))
			}
			all = append(all, b)
		}
		const huge = 2 << 20
		lo, hi = (lo+huge-1)&^(huge-1), hi&^(huge-1)
		if hi > lo {
			syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, 14) // MADV_HUGEPAGE
		}
		for _, b := range all {
			touch(b)
		}
		sparse = sparse[:0]
		for i := 0; i < len(all); i += 2 {
			sparse = append(sparse, all[i])
		}
		all = nil
		runtime.GC()
		debug.FreeOSMemory()
		return true
	default:
		return false
	}
	runtime.GC()
	runtime.GC() // the heap profile shows the state as of the last completed cycle
	return true
}

func step(w http.ResponseWriter, r *http.Request) {
	if !do(r.URL.Query().Get("do")) {
		http.Error(w, "do=hold|free|return", http.StatusBadRequest)
		return
	}
	fmt.Fprintln(w, "ok")
}

func run(script string, start time.Time) {
	for _, item := range strings.Split(script, ",") {
		what, at, _ := strings.Cut(item, ":")
		sec, err := strconv.ParseFloat(at, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad -script item", item)
			os.Exit(2)
		}
		time.Sleep(time.Until(start.Add(time.Duration(sec * float64(time.Second)))))
		do(what)
	}
}

func memstats(w http.ResponseWriter, _ *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(&m)
}

func metrics(w http.ResponseWriter, _ *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	g := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	g("go_memstats_alloc_bytes", "Bytes of allocated heap objects.", m.Alloc)
	g("go_memstats_sys_bytes", "Bytes obtained from the OS.", m.Sys)
	g("go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects.", m.HeapAlloc)
	g("go_memstats_heap_sys_bytes", "Bytes of heap memory obtained from the OS.", m.HeapSys)
	g("go_memstats_heap_idle_bytes", "Bytes in idle (unused) spans.", m.HeapIdle)
	g("go_memstats_heap_inuse_bytes", "Bytes in in-use spans.", m.HeapInuse)
	g("go_memstats_heap_released_bytes", "Bytes of physical memory returned to the OS.", m.HeapReleased)
	g("go_memstats_heap_objects", "Number of allocated heap objects.", m.HeapObjects)
	g("go_memstats_stack_inuse_bytes", "Bytes in stack spans.", m.StackInuse)
	g("go_memstats_stack_sys_bytes", "Bytes of stack memory obtained from the OS.", m.StackSys)
	g("go_memstats_mspan_inuse_bytes", "Bytes of allocated mspan structures.", m.MSpanInuse)
	g("go_memstats_mspan_sys_bytes", "Bytes of memory obtained from the OS for mspan structures.", m.MSpanSys)
	g("go_memstats_mcache_inuse_bytes", "Bytes of allocated mcache structures.", m.MCacheInuse)
	g("go_memstats_mcache_sys_bytes", "Bytes of memory obtained from the OS for mcache structures.", m.MCacheSys)
	g("go_memstats_buck_hash_sys_bytes", "Bytes of memory in profiling bucket hash tables.", m.BuckHashSys)
	g("go_memstats_gc_sys_bytes", "Bytes of memory in garbage collection metadata.", m.GCSys)
	g("go_memstats_other_sys_bytes", "Bytes of memory in miscellaneous off-heap runtime allocations.", m.OtherSys)
	g("go_memstats_next_gc_bytes", "Target heap size of the next GC cycle.", m.NextGC)
	fmt.Fprintf(w, "# HELP go_gc_duration_seconds A summary of the pause duration of garbage collection cycles.\n# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_sum %g\ngo_gc_duration_seconds_count %d\n", float64(m.PauseTotalNs)/1e9, m.NumGC)
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(w, "# HELP go_info Go version.\n# TYPE go_info gauge\ngo_info{version=%q} 1\n", runtime.Version())
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	ready := flag.String("ready", "", "file to write the listening address to")
	script := flag.String("script", "", "steps to take by itself: what:seconds,...")
	flag.Parse()
	start := time.Now()
	http.HandleFunc("/step", step)
	http.HandleFunc("/memstats", memstats)
	http.HandleFunc("/metrics", metrics)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *ready != "" {
		os.WriteFile(*ready+".tmp", []byte(ln.Addr().String()), 0o644)
		os.Rename(*ready+".tmp", *ready)
	}
	if *script != "" {
		go run(*script, start)
	}
	http.Serve(ln, nil)
}
