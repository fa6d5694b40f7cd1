package perfetto

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// protocVersionLine is the generated file's "// \tprotoc vX" header line: it names the protoc
// that ran, which may differ between machines without changing the code.
var protocVersionLine = regexp.MustCompile(`(?m)^// \tprotoc +v.*$`)

// TestGeneratedIsCurrent regenerates perfetto.pb.go from perfetto.proto with protoc and the
// protoc-gen-go of go.mod's google.golang.org/protobuf, and compares it with the committed file.
func TestGeneratedIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if testing.Short() {
			t.Skip("protoc not installed (apt-get install protobuf-compiler); .ci/run installs it")
		}
		t.Fatal("protoc not installed (apt-get install protobuf-compiler): ", err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "protoc-gen-go")
	build := exec.Command("go", "build", "-o", plugin, "google.golang.org/protobuf/cmd/protoc-gen-go")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build protoc-gen-go: %v\n%s", err, out)
	}
	gen := exec.Command(protoc, "--plugin=protoc-gen-go="+plugin, "--go_out="+dir,
		"--go_opt=paths=source_relative", "perfetto.proto")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, "perfetto.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("perfetto.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(b []byte) []byte { return protocVersionLine.ReplaceAll(b, []byte("// \tprotoc")) }
	if !bytes.Equal(norm(got), norm(want)) {
		t.Fatal("perfetto.pb.go is not what perfetto.proto generates: run go generate ./trace/perfetto")
	}
}
