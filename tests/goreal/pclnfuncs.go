// Lists every function of a Go binary's pclntab as Go's own debug/gosym reads it:
// "entry end name" per line, hexadecimal addresses. The table: its section .gopclntab, else
// where runtime.firstmoduledata points, else the first header in .data.rel.ro or .rodata
// that debug/gosym reads into functions that lie in .text.
package main

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"fmt"
	"os"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fail(err)
	}
	var pcln []byte
	if s := f.Section(".gopclntab"); s != nil {
		if pcln, err = s.Data(); err != nil {
			fail(err)
		}
	} else {
		// externally linked: the runtime's moduledata starts with a pointer to the table
		syms, _ := f.DynamicSymbols()
		more, _ := f.Symbols()
		syms = append(syms, more...)
		var md uint64
		for _, s := range syms {
			if s.Name == "runtime.firstmoduledata" {
				md = s.Value
			}
		}
		if md != 0 {
			addr := binary.LittleEndian.Uint64(read(f, md, 8))
			for _, p := range f.Progs {
				if p.Type == elf.PT_LOAD && p.Vaddr <= addr && addr < p.Vaddr+p.Filesz {
					pcln = read(f, addr, int(p.Vaddr+p.Filesz-addr))
				}
			}
		}
	}
	text := f.Section(".text")
	if text == nil {
		fail(fmt.Errorf("no .text"))
	}
	var tab *gosym.Table
	if pcln != nil {
		if tab, err = gosym.NewTable(nil, gosym.NewLineTable(pcln, text.Addr)); err != nil {
			fail(err)
		}
	} else {
		tab = scan(f, text)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, fn := range tab.Funcs {
		fmt.Fprintf(w, "%x %x %s\n", fn.Entry, fn.End, fn.Name)
	}
	w.Flush()
}

func scan(f *elf.File, text *elf.Section) *gosym.Table {
	for _, name := range []string{".data.rel.ro", ".rodata"} {
		s := f.Section(name)
		if s == nil {
			continue
		}
		data, err := s.Data()
		if err != nil {
			fail(err)
		}
		for pos := 0; pos+8 <= len(data); pos += 4 {
			if data[pos+1] != 0xff || data[pos+2] != 0xff || data[pos+3] != 0xff ||
				data[pos+4] != 0 || data[pos+5] != 0 || data[pos+7] != 8 {
				continue
			}
			if tab := try(data[pos:], text); tab != nil {
				return tab
			}
		}
	}
	fail(fmt.Errorf("no pclntab found"))
	return nil
}

func try(data []byte, text *elf.Section) (tab *gosym.Table) {
	defer func() {
		if recover() != nil {
			tab = nil
		}
	}()
	t, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil || len(t.Funcs) == 0 {
		return nil
	}
	for _, fn := range []gosym.Func{t.Funcs[0], t.Funcs[len(t.Funcs)-1]} {
		if fn.Entry < text.Addr || fn.End > text.Addr+text.Size || fn.End < fn.Entry {
			return nil
		}
	}
	return t
}

func read(f *elf.File, addr uint64, n int) []byte {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= addr && addr+uint64(n) <= p.Vaddr+p.Filesz {
			b := make([]byte, n)
			if _, err := p.ReadAt(b, int64(addr-p.Vaddr)); err != nil {
				fail(err)
			}
			return b
		}
	}
	fail(fmt.Errorf("address %#x not in the file", addr))
	return nil
}
