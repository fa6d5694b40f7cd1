package trace

import (
	"bytes"
	"testing"
)

// FuzzLoad: any bytes either fail to load with an error or give a Timeline; never a panic.
func FuzzLoad(f *testing.F) {
	var buf bytes.Buffer
	r := New(&buf, Options{})
	r.Begin(HQD(1), "run")
	r.FlowStep(HQD(1), "doorbell", r.NewFlow(), U("wptr", 4))
	r.End(HQD(1))
	r.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{0x0a, 0x02, 0x5a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := Load(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, s := range tl.Slices {
			if s.End < s.Start {
				t.Fatalf("slice %q ends before it starts", s.Name)
			}
		}
	})
}
