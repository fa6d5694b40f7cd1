package control

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeRequest: any line decodes to a request or a bad-request error, never a panic; a
// decoded request has a bounded non-empty name and re-encodes to a line that decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"cmd":"status"}`, `{"cmd":"status","args":{"ring":3}}`, `{}`, `[]`, `{"cmd":1}`,
		`{"cmd":"a"} x`, `{"cmd":"a","args":null}`, "\x00", `{"cmd":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := decodeRequest(line)
		if err != nil {
			if err.Code != CodeBadRequest {
				t.Fatalf("code %s", err.Code)
			}
			return
		}
		if r.Cmd == "" || len(r.Cmd) > MaxCommandName {
			t.Fatalf("accepted command name %q", r.Cmd)
		}
		b, merr := json.Marshal(r)
		if merr != nil {
			t.Fatal(merr)
		}
		r2, err := decodeRequest(b)
		if err != nil || r2.Cmd != r.Cmd {
			t.Fatalf("round trip: %q → %s → %+v %v", line, b, r2, err)
		}
	})
}
