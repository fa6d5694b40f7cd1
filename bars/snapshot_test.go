package bars

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"
)

// TestDoorbellRestore: restored values read back and ring nothing in either mode; in poll
// mode the next guest write (even of another value to a restored doorbell) rings.
func TestDoorbellRestore(t *testing.T) {
	for _, mode := range []DoorbellMode{DoorbellTrap, DoorbellPoll} {
		t.Run(mode.String(), func(t *testing.T) {
			var log ringLog
			d, err := NewDoorbells(mode, 0x4000, log.ring)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			v := make([]uint64, d.Count())
			v[3], v[100] = 0x40, 0x1_0000_0007
			if err := d.RestoreValues(v[:5]); err == nil {
				t.Error("a short value list was accepted")
			}
			if err := d.RestoreValues(v); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Values(), v) {
				t.Error("values differ after the restore")
			}
			if mode == DoorbellPoll {
				for n := d.scans.Load(); d.scans.Load() < n+3; {
					time.Sleep(time.Millisecond) // several scans of the restored page
				}
			}
			if got := log.snapshot(); len(got) != 0 {
				t.Fatalf("the restore rang %x", got)
			}
			if mode == DoorbellPoll {
				m := mapDoorbells(t, d)
				binary.LittleEndian.PutUint64(m[3*8:], 0x41)
				deadline := time.Now().Add(5 * time.Second)
				for len(log.snapshot()) == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if got := log.snapshot(); !equalRings(got, [][2]uint64{{3, 0x41}}) {
					t.Errorf("rings after a guest write = %x", got)
				}
			}
		})
	}
}
