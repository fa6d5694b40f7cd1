//go:build ignore

// mkpost puts back the field names cgo -godefs shortens: it strips a prefix every underscored
// field of a struct shares (timeout_ns → Ns when the others have no underscore), as
// golang.org/x/sys/unix's mkpost also repairs. It reads the generated Go on stdin and writes
// it to stdout with the C names (first letter upper-case) of the fields listed below.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
)

// renames: struct → cgo's field name → the C field's name.
var renames = map[string]map[string]string{
	"GemWaitIdle": {"Ns": "Timeout_ns"},
	"GemVA":       {"In_bo": "Offset_in_bo"},
}

var (
	structRE = regexp.MustCompile(`^\t(\w+)\s+struct \{$`)
	fieldRE  = regexp.MustCompile(`^(\t\t)(\w+)(\s.*)$`)
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	var cur map[string]string
	done := 0
	for in.Scan() {
		line := in.Text()
		if m := structRE.FindStringSubmatch(line); m != nil {
			cur = renames[m[1]]
		} else if line == "\t}" {
			cur = nil
		} else if m := fieldRE.FindStringSubmatch(line); m != nil && cur != nil {
			if to, ok := cur[m[2]]; ok {
				line = m[1] + to + m[3]
				done++
			}
		}
		fmt.Fprintln(out, line)
	}
	out.Flush()
	want := 0
	for _, r := range renames {
		want += len(r)
	}
	if in.Err() != nil || done != want {
		fmt.Fprintf(os.Stderr, "mkpost: renamed %d of %d fields (%v)\n", done, want, in.Err())
		os.Exit(1)
	}
}
