package main

import (
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// kernelQueue: a SUBMIT on the driver's kernel queue (drm_sched) with an IB in the file's VM
// that writes memory; its out syncobj is waited, then the value checked. Then an empty job
// that waits on the first job's syncobj first (in_syncobj).
func kernelQueue(t *T) {
	d := openDev(t)
	ib, err := d.NewBuffer(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RWX, 4096, true)
	t.Check(err, "IB buffer")
	dst, err := d.NewBuffer(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RW, 4096, true)
	t.Check(err, "destination buffer")
	pkt := append(pm4.WriteMem(dst.VA+16, 0x600DF00D, 0x12345678), pm4.WriteMem(dst.VA+64, 42)...)
	for i, v := range pkt {
		*ib.U32(uint64(i) * 4) = v
	}
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	sub := drm.Submit{Ib_va: ib.VA, Ib_dwords: uint32(len(pkt)), Out_syncobj: s}
	t.Check(d.Submit(&sub), "SUBMIT of a %d-dword IB", len(pkt))
	t.Check(d.SyncobjWait([]uint32{s}, jobTimeout, 0), "wait for the job's out syncobj (seqno %d)", sub.Seqno)
	if got := *dst.U64(16); got != 0x12345678_600DF00D {
		t.Errorf("IB's WRITE_DATA left %#x, want 0x12345678600df00d", got)
	}
	if got := *dst.U32(64); got != 42 {
		t.Errorf("IB's second WRITE_DATA left %d, want 42", got)
	}
	s2, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	empty := drm.Submit{In_syncobj: s, Out_syncobj: s2}
	t.Check(d.Submit(&empty), "SUBMIT of an empty job after the first")
	t.Check(d.SyncobjWait([]uint32{s2}, jobTimeout, 0), "wait for the empty job")
	if empty.Seqno <= sub.Seqno {
		t.Errorf("seqnos %d then %d: want increasing", sub.Seqno, empty.Seqno)
	}
}
