package drm

import (
	"testing"

	"vgpu/pm4"
)

// TestJobTail: Job's end position counts exactly the packets it appends.
func TestJobTail(t *testing.T) {
	n := len(pm4.ReleaseMem{DataSel: pm4.Data64}.Encode()) + len(pm4.ProtectedFenceSignal())
	if n != JobTailDwords {
		t.Errorf("JobTailDwords %d, the tail packets are %d dwords", JobTailDwords, n)
	}
}

func TestDoorbellsAndVA(t *testing.T) {
	db := &Doorbells{used: make([]bool, 3)}
	for want := uint32(0); want < 3; want++ {
		if i, err := db.Get(); err != nil || i != want {
			t.Fatalf("Get = %d, %v; want %d", i, err, want)
		}
	}
	if _, err := db.Get(); err == nil {
		t.Errorf("Get on a full page: no error")
	}
	db.Put(1)
	if i, err := db.Get(); err != nil || i != 1 {
		t.Errorf("Get after Put(1) = %d, %v", i, err)
	}
	d := &Device{Info: Info{Va_start: 0x1000, Va_end: 1 << 40}}
	for _, c := range []struct{ size, align, want uint64 }{
		{4096, 4096, 1 << 16},
		{8192, 1 << 20, 1 << 20},
		{4096, 0, 1<<20 + 8192},
	} {
		if va, err := d.AllocVA(c.size, c.align); err != nil || va != c.want {
			t.Errorf("AllocVA(%#x, %#x) = %#x, %v; want %#x", c.size, c.align, va, err, c.want)
		}
	}
	if _, err := d.AllocVA(1<<41, 4096); err == nil {
		t.Errorf("AllocVA beyond the range: no error")
	}
}
