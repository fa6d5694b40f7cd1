package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		bad  bool
	}{
		{"4096", 4096, false},
		{"256M", 256 << 20, false},
		{"1G", 1 << 30, false},
		{"1GiB", 1 << 30, false},
		{"2g", 2 << 30, false},
		{"0x1000", 0x1000, false},
		{"1T", 1 << 40, false},
		{"", 0, true},
		{"12Q", 0, true},
		{"99999999999T", 0, true},
	} {
		got, err := parseSize(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestListenReplacesStaleSocketOnly(t *testing.T) {
	dir := t.TempDir()

	// A stale socket (its server is gone) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := listen(stale)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}

	// A live one is not stolen from its server.
	if _, err := listen(stale); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("listen on a live socket = %v, want an in-use error", err)
	}
	l2.Close()

	// Anything that is not a socket is refused and left alone.
	file := filepath.Join(dir, "precious.txt")
	os.WriteFile(file, []byte("data"), 0o644)
	if _, err := listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("listen on a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "data" {
		t.Error("the regular file was touched")
	}
}
