// Prints the runtime's own view of the type descriptors reachable from a few roots: for each
// type, "address kind pkgpath name" (hexadecimal address of its descriptor, reflect's
// PkgPath, "-" when empty). The size tests compare it with what bpfmem finds in this
// program's stripped copy.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"unsafe"
)

type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func addr(t reflect.Type) uintptr {
	// a reflect.Type is an interface holding *rtype: its data word is the descriptor
	return uintptr((*eface)(unsafe.Pointer(&t)).data)
}

func main() {
	roots := []reflect.Type{
		reflect.TypeOf(http.Client{}), reflect.TypeOf(&http.Request{}),
		reflect.TypeOf(http.Header{}), reflect.TypeOf(json.Decoder{}),
		reflect.TypeOf(&http.Server{}), reflect.TypeOf(os.File{}),
	}
	seen := map[reflect.Type]bool{}
	w := bufio.NewWriter(os.Stdout)
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		pkg := t.PkgPath()
		if pkg == "" {
			pkg = "-"
		}
		fmt.Fprintf(w, "%x %s %s %s\n", addr(t), t.Kind(), pkg, t.String())
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				walk(t.Field(i).Type)
			}
		}
	}
	for _, t := range roots {
		walk(t)
	}
	w.Flush()
}
