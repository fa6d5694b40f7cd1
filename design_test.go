package vgpu

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDesignImportTable keeps docs/design.md's import table true: every package of the module
// has a row, and the row lists exactly the module's packages it imports (non-test code).
func TestDesignImportTable(t *testing.T) {
	table := readImportTable(t, "docs/design.md")
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, "vgpu/")
		if p.ImportPath == "vgpu" || strings.Contains(name, "/internal/") {
			continue // the module root (embedded guest sources) and generator internals
		}
		var ours []string
		for _, imp := range p.Imports {
			if imp == "vgpu" || strings.HasPrefix(imp, "vgpu/") {
				ours = append(ours, strings.TrimPrefix(imp, "vgpu/"))
			}
		}
		slices.Sort(ours)
		want, ok := table[name]
		if !ok {
			t.Errorf("docs/design.md has no import-table row for %s (it imports %v)", name, ours)
			continue
		}
		if !slices.Equal(ours, want) {
			t.Errorf("docs/design.md says %s imports %v; it imports %v", name, want, ours)
		}
		delete(table, name)
	}
	for name := range table {
		t.Errorf("docs/design.md has a row for %s, which is not a package", name)
	}
}

// readImportTable parses the "| package | may import (ours) |" table: a cell of
// comma-separated names, a parenthetical remark, or "—" for none.
func readImportTable(t *testing.T, path string) map[string][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := map[string][]string{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "| package | may import") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		name := strings.TrimSpace(cells[0])
		deps := cells[1]
		if i := strings.Index(deps, "("); i >= 0 {
			deps = deps[:i]
		}
		var list []string
		for _, d := range strings.Split(deps, ",") {
			if d = strings.TrimSpace(d); d != "" && d != "—" {
				list = append(list, d)
			}
		}
		slices.Sort(list)
		table[name] = list
	}
	if len(table) == 0 {
		t.Fatalf("%s: no import table found", path)
	}
	return table
}
