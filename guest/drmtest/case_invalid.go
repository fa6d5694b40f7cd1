package main

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"vgpu/guest/drmtest/drm"

	"golang.org/x/sys/unix"
)

// createCase is one CREATE input: a change to a valid input, and the errno it must give.
type createCase struct {
	name  string
	edit  func(in *drm.UserqIn, mqd *drm.MQDCompute)
	errno unix.Errno
}

// userqInvalid: every invalid CREATE input is refused with EINVAL (from a valid input that is
// shown to work first), with nothing left behind; FREE's checks; unmapping a BO a live queue
// uses is EBUSY; HIGH priority without CAP_SYS_NICE is EACCES.
func userqInvalid(t *T) {
	d := openDev(t)
	db, err := d.Doorbells()
	t.Check(err, "doorbell page")
	qb, err := d.NewQueueBuffers(16 << 10)
	t.Check(err, "queue buffers")
	idx, err := db.Get()
	t.Check(err, "doorbell")
	valid := qb.In(db, idx, 0)
	validMQD := drm.MQDCompute{Eop_va: qb.EOP.VA}

	// Two adjacent 4 KiB mappings: a ring across both lies in no one mapping.
	twoA, err := d.NewBuffer(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RWX, 8192, false)
	t.Check(err, "buffer")
	twoB, err := d.CreateBO(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0)
	t.Check(err, "buffer")
	t.Check(d.MapVA(twoB.Handle, twoA.VA+4096, 0, 4096, drm.RWX), "map the second half")
	unmapped, err := d.AllocVA(1<<20, 1<<20) // never mapped
	t.Check(err, "VA")
	eopSize := uint64(d.Info.Eop_size)

	// The valid input works (so the refusals below are about the one field changed).
	out, err := d.CreateQueue(valid, &validMQD)
	t.Check(err, "CREATE with the valid input")
	t.Check(d.FreeQueue(out.Queue_id), "FREE")
	// So do the first MQD layout (eop_va only) and one with a context save area.
	v1 := valid
	v1.Mqd_size = drm.VGPU_USERQ_MQD_COMPUTE_SIZE_V1
	out, err = d.CreateQueue(v1, &validMQD)
	t.Check(err, "CREATE with mqd_size %d (eop_va only)", v1.Mqd_size)
	t.Check(d.FreeQueue(out.Queue_id), "FREE")
	withCSA := validMQD
	withCSA.Csa_va, withCSA.Csa_size = twoA.VA, 4096
	out, err = d.CreateQueue(valid, &withCSA)
	t.Check(err, "CREATE with a context save area")
	t.Check(d.FreeQueue(out.Queue_id), "FREE")

	before, err := readDebugfs("vgpu_bos")
	t.Check(err, "debugfs")
	cases := []createCase{
		{"op 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Op = 0 }, unix.EINVAL},
		{"op 99", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Op = 99 }, unix.EINVAL},
		{"flags beyond the priority mask", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Flags = 1 << 2 }, unix.EINVAL},
		{"ip_type 7", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Ip_type = 7 }, unix.EINVAL},
		{"queue_va 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_va = 0 }, unix.EINVAL},
		{"queue_va not 256-byte aligned", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_va += 128; in.Queue_size = 4096 }, unix.EINVAL},
		{"queue_va unmapped", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_va = unmapped }, unix.EINVAL},
		{"queue_size 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_size = 0 }, unix.EINVAL},
		{"queue_size 2048", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_size = 2048 }, unix.EINVAL},
		{"queue_size not a power of two", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_size = 12288 }, unix.EINVAL},
		{"queue beyond its mapping", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_size *= 2 }, unix.EINVAL},
		{"queue across two mappings", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Queue_va, in.Queue_size = twoA.VA, 8192 }, unix.EINVAL},
		{"rptr_va 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Rptr_va = 0 }, unix.EINVAL},
		{"rptr_va not 8-byte aligned", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Rptr_va += 4 }, unix.EINVAL},
		{"rptr_va unmapped", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Rptr_va = unmapped }, unix.EINVAL},
		{"wptr_va 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Wptr_va = 0 }, unix.EINVAL},
		{"wptr_va not 8-byte aligned", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Wptr_va += 4 }, unix.EINVAL},
		{"wptr_va unmapped", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Wptr_va = unmapped + 8 }, unix.EINVAL},
		{"mqd_size 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Mqd_size = 0 }, unix.EINVAL},
		{"mqd_size 16", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Mqd_size = 16 }, unix.EINVAL},
		{"eop_va 0", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Eop_va = 0 }, unix.EINVAL},
		{"eop_va unmapped", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Eop_va = unmapped }, unix.EINVAL},
		{"csa_va without csa_size", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va = qb.EOP.VA }, unix.EINVAL},
		{"csa_size without csa_va", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_size = 4096 }, unix.EINVAL},
		{"csa_va not 4 KiB aligned", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va, m.Csa_size = twoA.VA+256, 4096 }, unix.EINVAL},
		{"csa_size not whole pages", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va, m.Csa_size = twoA.VA, 2048 }, unix.EINVAL},
		{"csa_size beyond VGPU_USERQ_CSA_MAX", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va, m.Csa_size = twoA.VA, drm.VGPU_USERQ_CSA_MAX+4096 }, unix.EINVAL},
		{"csa unmapped", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va, m.Csa_size = unmapped, 4096 }, unix.EINVAL},
		{"csa across two mappings", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Csa_va, m.Csa_size = twoA.VA, 8192 }, unix.EINVAL},
		{"doorbell_handle 0", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Doorbell_handle = 0 }, unix.EINVAL},
		{"doorbell_handle not a doorbell BO", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Doorbell_handle = qb.Ring.Handle }, unix.EINVAL},
		{"doorbell_handle unknown", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Doorbell_handle = 0xDEAD }, unix.EINVAL},
		{"doorbell_offset past the page", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Doorbell_offset = d.Info.Doorbell_page_size / 8 }, unix.EINVAL},
	}
	if d.Info.Userq_ip_mask&(1<<drm.VGPU_HW_IP_GFX) == 0 {
		cases = append(cases, createCase{"ip_type GFX (not in userq_ip_mask)", func(in *drm.UserqIn, _ *drm.MQDCompute) { in.Ip_type = drm.VGPU_HW_IP_GFX }, unix.EINVAL})
	}
	if align := uint64(d.Info.Eop_alignment); eopSize > align && align >= 8 && 4096%align == 0 {
		// Aligned, but running from the first of two adjacent mappings into the second.
		cases = append(cases, createCase{"eop across two mappings", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Eop_va = twoA.VA + 4096 - align }, unix.EINVAL})
	}
	if eopSize > 0 && d.Info.Eop_alignment > 8 {
		cases = append(cases, createCase{"eop_va misaligned", func(_ *drm.UserqIn, m *drm.MQDCompute) { m.Eop_va += 8 }, unix.EINVAL})
	}
	for _, c := range cases {
		in, mqd := valid, validMQD
		c.edit(&in, &mqd)
		out, err := d.CreateQueue(in, &mqd)
		if !errors.Is(err, c.errno) {
			t.Errorf("CREATE with %s: %v (queue %d), want %s", c.name, errOrOK(err), out.Queue_id, unix.ErrnoName(c.errno))
			if err == nil {
				d.FreeQueue(out.Queue_id)
			}
		}
	}
	if after, err := readDebugfs("vgpu_bos"); err != nil || after != before {
		t.Errorf("vgpu_bos changed across the refused CREATEs (%v):\nbefore:\n%s\nafter:\n%s", err, before, after)
	}

	// A doorbell another live queue uses.
	live, err := d.CreateQueue(valid, &validMQD)
	t.Check(err, "CREATE")
	qb2, err := d.NewQueueBuffers(16 << 10)
	t.Check(err, "second queue's buffers")
	in2 := qb2.In(db, idx, 0)
	if out, err := d.CreateQueue(in2, &drm.MQDCompute{Eop_va: qb2.EOP.VA}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CREATE on the doorbell of live queue %d: %v (queue %d), want EINVAL", live.Queue_id, errOrOK(err), out.Queue_id)
	}

	// FREE's own checks.
	if _, err := d.Userq(drm.UserqIn{Op: drm.VGPU_USERQ_OP_FREE, Queue_id: live.Queue_id, Flags: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("FREE with flags set: %v, want EINVAL", errOrOK(err))
	}
	if _, err := d.Userq(drm.UserqIn{Op: drm.VGPU_USERQ_OP_FREE, Queue_id: live.Queue_id, Queue_va: 4096}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("FREE with queue_va set: %v, want EINVAL", errOrOK(err))
	}
	if err := d.FreeQueue(live.Queue_id + 1000); !errors.Is(err, unix.ENOENT) {
		t.Errorf("FREE of unknown queue %d: %v, want ENOENT", live.Queue_id+1000, errOrOK(err))
	}

	// Unmapping what the live queue uses: EBUSY; after FREE it unmaps.
	for _, b := range []*drm.Buffer{qb.Ring, qb.Ptrs, qb.EOP} {
		if err := d.UnmapVA(b.Handle, b.VA, b.VASize); !errors.Is(err, unix.EBUSY) {
			t.Errorf("UNMAP of BO %d at %#x (used by live queue %d): %v, want EBUSY", b.Handle, b.VA, live.Queue_id, errOrOK(err))
		}
	}
	t.Check(d.FreeQueue(live.Queue_id), "FREE")
	for _, b := range []*drm.Buffer{qb.Ring, qb.Ptrs, qb.EOP} {
		if err := d.UnmapVA(b.Handle, b.VA, b.VASize); err != nil {
			t.Errorf("UNMAP of BO %d after FREE: %v", b.Handle, err)
		}
		b.VASize = 0
	}

	// GEM_VA's refusals (the contract's).
	for _, c := range []struct {
		name  string
		a     drm.GemVA
		errno unix.Errno
	}{
		{"MAP at VA 0", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_MAP, Flags: drm.RW, Va: 0, Size: 4096}, unix.EINVAL},
		{"MAP at an unaligned VA", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_MAP, Flags: drm.RW, Va: unmapped + 8, Size: 4096}, unix.EINVAL},
		{"MAP beyond the BO", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_MAP, Flags: drm.RW, Va: unmapped, Size: 8192}, unix.EINVAL},
		{"MAP over a mapping", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_MAP, Flags: drm.RW, Va: twoA.VA, Size: 4096}, unix.EINVAL},
		{"MAP at va_end", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_MAP, Flags: drm.RW, Va: d.Info.Va_end, Size: 4096}, unix.EINVAL},
		{"UNMAP of no mapping", drm.GemVA{Handle: twoB.Handle, Op: drm.VGPU_VA_OP_UNMAP, Va: unmapped, Size: 4096}, unix.ENOENT},
		{"op 3", drm.GemVA{Handle: twoB.Handle, Op: 3, Va: unmapped, Size: 4096}, unix.EINVAL},
	} {
		a := c.a
		if err := d.GemVA(&a); !errors.Is(err, c.errno) {
			t.Errorf("GEM_VA %s: %v, want %s", c.name, errOrOK(err), unix.ErrnoName(c.errno))
		}
	}

	// HIGH priority without CAP_SYS_NICE, in a child that drops it.
	c, err := startChild("nocap", nil)
	t.Check(err, "start the child without CAP_SYS_NICE")
	if _, err := c.expect("ok", jobTimeout); err != nil {
		t.Errorf("without CAP_SYS_NICE: %v", err)
	}
	if err := c.wait(jobTimeout); err != nil {
		t.Errorf("without CAP_SYS_NICE: %v", err)
	}
}

func errOrOK(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// capNice is CAP_SYS_NICE's bit.
const capNice = 23

// childNoCap drops CAP_SYS_NICE from its effective, permitted and inheritable sets, then
// checks HIGH priority → EACCES and NORMAL_HIGH → allowed.
func childNoCap(args []string) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective &^= 1 << capNice
	data[0].Permitted &^= 1 << capNice
	data[0].Inheritable &^= 1 << capNice
	// Capabilities belong to each thread: drop it in all of the runtime's threads at once.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	d, err := drm.Open(drm.RenderNode)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.NewQueue(drm.QueueConfig{Priority: drm.VGPU_USERQ_PRIORITY_HIGH}); !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("CREATE with HIGH priority without CAP_SYS_NICE: %v, want EACCES", errOrOK(err))
	}
	if _, err := d.NewQueue(drm.QueueConfig{Priority: drm.VGPU_USERQ_PRIORITY_NORMAL_HIGH}); err != nil {
		return fmt.Errorf("CREATE with NORMAL_HIGH priority without CAP_SYS_NICE: %v", err)
	}
	tell("ok")
	return nil
}
