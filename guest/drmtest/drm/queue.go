package drm

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"vgpu/abi"
	"vgpu/pm4"
)

// QueueConfig says how NewQueue builds a compute user queue.
type QueueConfig struct {
	RingBytes uint64 // a power of two ≥ 4096 (default 64 KiB)
	Priority  uint32 // VGPU_USERQ_PRIORITY_*
	// CSABytes is the context save area's size (a multiple of 4096; 0: none), where a
	// preemption saves the queue's shader dispatches in flight.
	CSABytes uint64
}

// The layout of a queue's pointer page (a system BO, CPU- and GPU-mapped).
const (
	ptrRptr      = 0  // 64-bit rptr the device reports (dwords)
	ptrWptr      = 8  // 64-bit wptr userspace advances (dwords)
	ptrUserFence = 64 // 64-bit: the ring position after the last finished job (RELEASE_MEM)
	ptrScratch   = 128
)

// JobTailDwords is what Job appends to a payload: a RELEASE_MEM (GL2 write-back, then the
// job's end to the user fence), then PROTECTED_FENCE_SIGNAL (the driver's fence slot and EOP interrupt).
const JobTailDwords = 8 + abi.PM4_PROTECTED_FENCE_DWORDS

// Queue is a compute user queue driven from this process: packets go into its ring, the
// 64-bit wptr into memory, then into its doorbell. No ioctl per job.
type Queue struct {
	d        *Device
	ID       uint32
	FenceVA  uint64 // the driver's fence slot (read-only in the VM)
	Ring     *Buffer
	Ptrs     *Buffer // rptr, wptr, user fence, scratch
	EOP      *Buffer
	CSA      *Buffer // the context save area (nil: none)
	Doorbell uint32  // index in the file's doorbell page
	ring     []uint32
	wptr     uint64 // dwords, monotonic
}

// Doorbells returns the file's doorbell page, creating it on first use.
func (d *Device) Doorbells() (*Doorbells, error) {
	if d.doorbells == nil {
		db, err := d.NewDoorbells()
		if err != nil {
			return nil, err
		}
		d.doorbells = db
	}
	return d.doorbells, nil
}

// QueueBuffers are the BOs of a queue before CREATE: ring, pointer page, EOP buffer and the
// optional context save area.
type QueueBuffers struct {
	Ring, Ptrs, EOP, CSA *Buffer
}

// NewQueueBuffers allocates and maps a queue's buffers.
func (d *Device) NewQueueBuffers(ringBytes uint64) (*QueueBuffers, error) {
	if ringBytes == 0 {
		ringBytes = 64 << 10
	}
	qb := &QueueBuffers{}
	var err error
	if qb.Ring, err = d.NewBuffer(ringBytes, VGPU_GEM_DOMAIN_SYSTEM, 0, RWX, ringBytes, true); err != nil {
		return nil, err
	}
	if qb.Ptrs, err = d.NewBuffer(4096, VGPU_GEM_DOMAIN_SYSTEM, 0, RW, 4096, true); err != nil {
		qb.Free()
		return nil, err
	}
	eop := max(uint64(d.Info.Eop_size), 4096)
	if qb.EOP, err = d.NewBuffer(eop, VGPU_GEM_DOMAIN_SYSTEM, 0, RW, max(uint64(d.Info.Eop_alignment), 4096), false); err != nil {
		qb.Free()
		return nil, err
	}
	return qb, nil
}

// Free releases whichever buffers exist.
func (qb *QueueBuffers) Free() error {
	var first error
	for _, b := range []*Buffer{qb.Ring, qb.Ptrs, qb.EOP, qb.CSA} {
		if b != nil {
			if err := b.Free(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// In is the CREATE input for these buffers and a doorbell (the MQD pointer is set by
// CreateQueue).
func (qb *QueueBuffers) In(db *Doorbells, index uint32, flags uint32) UserqIn {
	return UserqIn{
		Op: VGPU_USERQ_OP_CREATE, Ip_type: VGPU_HW_IP_COMPUTE,
		Doorbell_handle: db.Handle, Doorbell_offset: index, Flags: flags,
		Queue_va: qb.Ring.VA, Queue_size: qb.Ring.Size,
		Rptr_va: qb.Ptrs.VA + ptrRptr, Wptr_va: qb.Ptrs.VA + ptrWptr,
		Mqd_size: uint64(unsafe.Sizeof(MQDCompute{})),
	}
}

// CreateQueue runs USERQ CREATE with in and the compute MQD mqd (its address goes into
// in.Mqd; in.Mqd_size is sent as given).
func (d *Device) CreateQueue(in UserqIn, mqd *MQDCompute) (UserqOut, error) {
	var pn runtime.Pinner
	defer pn.Unpin()
	if mqd != nil {
		in.Mqd = userPtr(&pn, mqd)
	}
	return d.Userq(in)
}

// NewQueue builds a compute user queue: its buffers, a doorbell, CREATE.
func (d *Device) NewQueue(cfg QueueConfig) (*Queue, error) {
	db, err := d.Doorbells()
	if err != nil {
		return nil, err
	}
	qb, err := d.NewQueueBuffers(cfg.RingBytes)
	if err != nil {
		return nil, err
	}
	idx, err := db.Get()
	if err != nil {
		qb.Free()
		return nil, err
	}
	mqd := MQDCompute{Eop_va: qb.EOP.VA}
	if cfg.CSABytes != 0 {
		if qb.CSA, err = d.NewBuffer(cfg.CSABytes, VGPU_GEM_DOMAIN_SYSTEM, 0, RW, 4096, false); err != nil {
			db.Put(idx)
			qb.Free()
			return nil, err
		}
		mqd.Csa_va, mqd.Csa_size = qb.CSA.VA, qb.CSA.Size
	}
	flags := cfg.Priority << VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_SHIFT
	out, err := d.CreateQueue(qb.In(db, idx, flags), &mqd)
	if err != nil {
		db.Put(idx)
		qb.Free()
		return nil, err
	}
	q := &Queue{d: d, ID: out.Queue_id, FenceVA: out.Fence_va, Ring: qb.Ring, Ptrs: qb.Ptrs, EOP: qb.EOP, CSA: qb.CSA, Doorbell: idx}
	q.ring = unsafe.Slice((*uint32)(unsafe.Pointer(&qb.Ring.Mem[0])), qb.Ring.Size/4)
	return q, nil
}

// Free is USERQ FREE, then the buffers and the doorbell.
func (q *Queue) Free() error {
	err := q.d.FreeQueue(q.ID)
	if err != nil {
		return err
	}
	q.d.doorbells.Put(q.Doorbell)
	return (&QueueBuffers{q.Ring, q.Ptrs, q.EOP, q.CSA}).Free()
}

// Wptr is the position after the last packet written (dwords).
func (q *Queue) Wptr() uint64 { return q.wptr }

// Rptr is the rptr the device reported.
func (q *Queue) Rptr() uint64 { return atomic.LoadUint64(q.Ptrs.U64(ptrRptr)) }

// UserFence is the end of the last job whose RELEASE_MEM ran.
func (q *Queue) UserFence() uint64 { return atomic.LoadUint64(q.Ptrs.U64(ptrUserFence)) }

// ScratchVA is the GPU address of a 64-bit scratch word i of the pointer page (i < 480).
func (q *Queue) ScratchVA(i int) uint64 { return q.Ptrs.VA + ptrScratch + uint64(i)*8 }

// Scratch reads scratch word i.
func (q *Queue) Scratch(i int) uint64 {
	return atomic.LoadUint64(q.Ptrs.U64(ptrScratch + uint64(i)*8))
}

// Emit writes packets into the ring at wptr (wrapping), without telling the device. It
// fails when the ring has no room: the device has not consumed enough yet.
func (q *Queue) Emit(pkts ...[]uint32) error {
	n := 0
	for _, p := range pkts {
		n += len(p)
	}
	size := uint64(len(q.ring))
	if done := max(q.UserFence(), q.Rptr()); q.wptr+uint64(n)-done > size {
		return fmt.Errorf("queue %d: ring full (wptr %d, rptr %d, user fence %d, %d dwords to add, ring %d)",
			q.ID, q.wptr, q.Rptr(), q.UserFence(), n, size)
	}
	for _, p := range pkts {
		for _, v := range p {
			q.ring[q.wptr%size] = v
			q.wptr++
		}
	}
	return nil
}

// Kick publishes wptr: the 64-bit wptr in memory first, then the doorbell (x86 keeps the two
// stores, and the ring writes before them, in order).
func (q *Queue) Kick() {
	atomic.StoreUint64(q.Ptrs.U64(ptrWptr), q.wptr)
	q.d.doorbells.Ring(q.Doorbell, q.wptr)
}

// Job writes payload, a RELEASE_MEM of the job's end position to the user fence, and
// PROTECTED_FENCE_SIGNAL, then kicks the queue. It returns the job's end: the wptr after it,
// which is both the user fence's and the driver's fence slot's value once the job is done.
func (q *Queue) Job(payload ...[]uint32) (uint64, error) {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	end := q.wptr + uint64(n) + JobTailDwords
	// The GL2 write-back makes the job's writes (WRITE_DATA goes through the L2) visible to
	// the CPU before the user fence says the job is done.
	tail := pm4.ReleaseMem{GCR: pm4.FenceGCR, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data64,
		Addr: q.Ptrs.VA + ptrUserFence, Data: end}.Encode()
	if err := q.Emit(append(payload, tail, pm4.ProtectedFenceSignal())...); err != nil {
		return 0, err
	}
	q.Kick()
	return end, nil
}

// WaitUserFence polls the user fence until it reaches end (spinning first, then sleeping
// briefly), or fails after timeout naming what the queue's pointers say.
func (q *Queue) WaitUserFence(end uint64, timeout time.Duration) error {
	start := time.Now()
	for i := 0; ; i++ {
		if q.UserFence() >= end {
			return nil
		}
		if i < 2000 {
			runtime.Gosched()
			continue
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("queue %d: job ending at %d not done after %v (user fence %d, rptr %d, wptr %d)",
				q.ID, end, timeout, q.UserFence(), q.Rptr(), q.wptr)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// SetScratch stores v in scratch word i from the CPU.
func (q *Queue) SetScratch(i int, v uint64) {
	atomic.StoreUint64(q.Ptrs.U64(ptrScratch+uint64(i)*8), v)
}
