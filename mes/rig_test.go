package mes

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// The rig is a driver's view of a scheduler on a real CP: a flat memory (cptest.Memory, one
// address space for VMID 0 and the processes: the scheduler's policy does not depend on
// translation — device/'s tests run it over the real MMU and GPUVM), the MES registers, and
// helpers that build frames and MQDs as amdgpu does.

const (
	ringBase   = 0x10000 // MES API ring, ringDwords dwords
	ringDwords = 16384
	ringFence  = 0x0F000 // the ring fence (QUERY_SCHEDULER_STATUS after every frame)
	statusBase = 0x0F100 // per-frame api_status slots
	queueBase  = 0x100000
	queueSpan  = 0x4000 // per queue: MQD (a page: MES writes past its 2 KiB), shadow, contexts, ring, results
)

type rig struct {
	t    testing.TB
	mem  *cptest.Memory
	regs *cptest.Registers
	ivs  *cptest.Interrupts
	cp   *cp.CP
	mes  *MES
	vm   *vmRecorder
	seq  uint64
	wptr uint64
	n    int // frames sent (status slot index)
	// wrote, when set (wakeOnWrite), is signalled without blocking after every engine write
	// to memory: waitFor wakes on it, so a wait for a fence costs the scheduler's latency, not
	// a poll period.
	wrote chan struct{}
}

// vmRecorder records VMID programming (the device's AddressSpaces writes gpuvm registers).
type vmRecorder struct {
	mu    sync.Mutex
	bound map[int]VMContext
	binds int
}

func (v *vmRecorder) Bind(vmid int, c VMContext) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.bound[vmid] = c
	v.binds++
}

func (v *vmRecorder) Unbind(vmid int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.bound, vmid)
}

func (v *vmRecorder) InvalidateGART() {}

func newRig(t testing.TB, cfg ...func(*cp.Config)) *rig {
	t.Helper()
	return newRigSlots(t, nil, cfg...)
}

// newRigSlots is newRig with the scheduler's Slots wrapped by wrap (nil: the CP itself).
func newRigSlots(t testing.TB, wrap func(Slots) Slots, cfg ...func(*cp.Config)) *rig {
	t.Helper()
	r := buildRig(t, wrap, cfg...)
	t.Cleanup(r.close)
	r.startRing()
	return r
}

// close stops the scheduler and the CP (bounded waits).
func (r *rig) close() { r.mes.Close(); r.cp.Close() }

// startRing programs the API ring and starts the scheduler on it.
func (r *rig) startRing() {
	r.wreg(abi.REG_MES_RING_BASE_LO, ringBase)
	r.wreg(abi.REG_MES_RING_CONTROL, 13) // ringDwords
	r.wreg(abi.REG_MES_RING_DOORBELL, 4<<abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT|abi.REG_MES_RING_DOORBELL__EN_MASK)
	r.wreg(abi.REG_MES_RING_ACTIVE, 1)
}

// buildRig is newRigSlots without the cleanup and with the scheduler off (FuzzFrames keeps
// one rig for many inputs and closes it itself).
func buildRig(t testing.TB, wrap func(Slots) Slots, cfg ...func(*cp.Config)) *rig {
	r := &rig{t: t, mem: cptest.NewMemory(4 << 20), regs: cptest.NewRegisters(), ivs: cptest.NewInterrupts(),
		vm: &vmRecorder{bound: map[int]VMContext{}}}
	var m *MES
	c := cp.Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Notify: func(slot int) { m.Notify(slot) }}
	for _, f := range cfg {
		f(&c)
	}
	r.cp = cp.New(c)
	var slots Slots = r.cp
	if wrap != nil {
		slots = wrap(r.cp)
	}
	m = New(Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Slots: slots, VM: r.vm, Doorbells: 2048})
	r.mes = m
	r.mem.SetOnWrite(r.cp.Wake)
	return r
}

func (r *rig) wreg(reg, v uint32)     { r.mes.WriteReg(reg-abi.BLOCK_MES_BASE, v) }
func (r *rig) rreg(reg uint32) uint32 { return r.mes.ReadReg(reg - abi.BLOCK_MES_BASE) }

// header of a frame.
func header(op uint32) uint32 {
	return abi.MES_API_TYPE_SCHEDULER | op<<abi.MES_API_HEADER_OPCODE__SHIFT | abi.MES_API_FRAME_DWORDS<<abi.MES_API_HEADER_DWSIZE__SHIFT
}

type frameB [abi.MES_API_FRAME_DWORDS]uint32

func newFrame(op uint32) *frameB                  { f := &frameB{}; f[0] = header(op); return f }
func (f *frameB) set(dw uint64, v uint32) *frameB { f[dw] = v; return f }
func (f *frameB) set64(dw uint64, v uint64) *frameB {
	f[dw], f[dw+1] = uint32(v), uint32(v>>32)
	return f
}

// put writes a frame at the ring's wptr.
func (r *rig) put(f *frameB) {
	r.mem.StoreDwords(ringBase+r.wptr%ringDwords*4, f[:])
	r.wptr += abi.MES_API_FRAME_DWORDS
}

// submit sends f with its own status slot and a trailing QUERY_SCHEDULER_STATUS on the ring
// fence (amdgpu's mes_v11_0_submit_pkt_and_poll_completion), waits for the ring fence, and
// returns the frame's own status (0 = failed).
func (r *rig) submit(f *frameB, statusDW uint64) uint64 {
	r.t.Helper()
	slot := uint64(statusBase + 8*(r.n%256))
	r.n++
	r.mem.Store64(slot, 0)
	f.set64(statusDW, slot).set64(statusDW+2, 1)
	r.put(f)
	r.seq++
	q := newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, ringFence).set64(abi.MES_QUERY_DW_API_STATUS+2, r.seq)
	r.put(q)
	r.mes.Doorbell(4, r.wptr)
	r.waitFor("ring fence", 10*time.Second, func() bool { return r.mem.Load64(ringFence) >= r.seq })

	return r.mem.Load64(slot)
}

// ok submits and fails the test unless the frame succeeded.
func (r *rig) ok(f *frameB, statusDW uint64) {
	r.t.Helper()
	if r.submit(f, statusDW) == 0 {
		le := r.rreg(abi.REG_MES_LAST_ERROR)
		r.t.Fatalf("frame %s failed: %s", abi.NameOf("MES_SCH_API_", uint64(f[0]>>4&0xFF)),
			abi.NameOf("MES_ERR_", uint64(le&0xFF)))
	}
}

// fails submits and checks the frame failed with reason.
func (r *rig) fails(f *frameB, statusDW uint64, reason uint32) {
	r.t.Helper()
	if r.submit(f, statusDW) != 0 {
		r.t.Fatalf("frame %s succeeded; want %s", abi.NameOf("MES_SCH_API_", uint64(f[0]>>4&0xFF)), abi.NameOf("MES_ERR_", uint64(reason)))
	}
	if got := r.rreg(abi.REG_MES_LAST_ERROR) & 0xFF; got != reason {
		r.t.Fatalf("frame failed with %s; want %s", abi.NameOf("MES_ERR_", uint64(got)), abi.NameOf("MES_ERR_", uint64(reason)))
	}
}

// wakeOnWrite makes waitFor re-check after every engine write to memory. Off by default: a
// test that reads state the scheduler updates just after a fence must wait for that state
// (as TestStatus waits for the ring's rptr), which a 50 µs poll can hide and a wake on the
// fence's write does not.
func (r *rig) wakeOnWrite() {
	r.wrote = make(chan struct{}, 1)
	r.mem.SetOnWrite(func() {
		r.cp.Wake()
		select {
		case r.wrote <- struct{}{}:
		default:
		}
	})
}

// waitFor waits until cond holds, failing the test after d. It re-checks every 50 µs and,
// after wakeOnWrite, after every engine write to memory (fences, job results).
func (r *rig) waitFor(what string, d time.Duration, cond func() bool) {
	r.t.Helper()
	if cond() {
		return
	}
	deadline := time.Now().Add(d)
	var poll *time.Timer
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s (MES_STATUS %#x RPTR %d FRAMES %d ERRORS %d LAST_ERROR %#x MAPPED %d)", what,
				r.rreg(abi.REG_MES_STATUS), r.rreg(abi.REG_MES_RING_RPTR), r.rreg(abi.REG_MES_FRAMES),
				r.rreg(abi.REG_MES_FRAME_ERRORS), r.rreg(abi.REG_MES_LAST_ERROR), r.rreg(abi.REG_MES_MAPPED))
		}
		if poll == nil {
			poll = time.NewTimer(50 * time.Microsecond)
			defer poll.Stop()
		} else {
			poll.Reset(50 * time.Microsecond)
		}
		select {
		case <-r.wrote:
		case <-poll.C:
		}
	}
}

// hwResources gives MES the compute slots in mask (bit q of pipe 0 = slot 1+q) and VMIDs.
func (r *rig) hwResources(pipe0, pipe1 uint32, vmids uint32) {
	r.t.Helper()
	f := newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, vmids).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, pipe0).set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK+1, pipe1).
		set(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, 50)
	r.ok(f, abi.MES_SET_HW_RSRC_DW_API_STATUS)
}

// testQueue is a user queue as the rig's driver built it.
type testQueue struct {
	r                                   *rig
	db                                  uint32
	mqd, gang, proc, ring, shadow, data uint64
	wptr                                uint64
}

const qRingDwords = 1024

func (r *rig) queueAt(i int, proc uint64) *testQueue {
	base := uint64(queueBase + i*queueSpan)
	q := &testQueue{r: r, db: uint32(16 + 2*i), mqd: base, gang: base + 0xC00, proc: proc, ring: base + 0x1000,
		shadow: base + 0x900, data: base + 0x2000}
	if q.proc == 0 {
		q.proc = base + 0xA00
	}
	m := make([]uint32, abi.MES_MQD_DWORDS)
	m[abi.MES_MQD_DW_HEADER] = abi.MES_MQD_HEADER
	m[abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO] = uint32(q.ring >> 8)
	m[abi.MES_MQD_DW_CP_HQD_PQ_CONTROL] = 9 // 1024 dwords
	r.mem.StoreDwords(q.mqd, m)
	return q
}

// add sends ADD_QUEUE for q at level, with a gang quantum in 100 ns units.
func (q *testQueue) addFrame(level uint32, quantum uint64) *frameB {
	return newFrame(abi.MES_SCH_API_ADD_QUEUE).set(abi.MES_ADD_QUEUE_DW_PROCESS_ID, uint32(q.proc>>12)&0xFFFF).
		set64(abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, 0x1000|1).set64(abi.MES_ADD_QUEUE_DW_PROCESS_VA_END, 1<<30).
		set64(abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, q.proc).set64(abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, q.gang).
		set64(abi.MES_ADD_QUEUE_DW_GANG_QUANTUM, quantum).set(abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL, level).
		set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, q.db).set64(abi.MES_ADD_QUEUE_DW_MQD_ADDR, q.mqd).
		set64(abi.MES_ADD_QUEUE_DW_WPTR_ADDR, q.shadow).set(abi.MES_ADD_QUEUE_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_COMPUTE)
}

func (q *testQueue) add(level uint32, quantum uint64) {
	q.r.t.Helper()
	q.r.ok(q.addFrame(level, quantum), abi.MES_ADD_QUEUE_DW_API_STATUS)
}

func (q *testQueue) remove() uint64 {
	q.r.t.Helper()
	return q.r.submit(newFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, q.db),
		abi.MES_REMOVE_QUEUE_DW_API_STATUS)
}

// submit writes packets, the wptr shadow and the doorbell, as a user-mode driver does.
func (q *testQueue) submit(dws ...uint32) {
	for _, d := range dws {
		q.r.mem.Store32(q.ring+q.wptr%qRingDwords*4, d)
		q.wptr++
	}
	q.r.mem.Store64(q.shadow, q.wptr)
	q.r.mes.Doorbell(q.db, q.wptr)
	q.r.cp.Doorbell(q.db, q.wptr)
}

// job appends one job: write seq at data+4*seq (order is checked from the contents).
func (q *testQueue) job(seq uint32) { q.submit(pm4.WriteMem(q.data+4*uint64(seq%1024), seq+1)...) }

func (q *testQueue) done(seq uint32) bool { return q.r.mem.Load32(q.data+4*uint64(seq%1024)) == seq+1 }

func (q *testQueue) status() uint32 {
	q.r.wreg(abi.REG_MES_QUERY_DOORBELL, q.db)
	return q.r.rreg(abi.REG_MES_QUERY_STATUS)
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
