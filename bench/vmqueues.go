package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// The 16-VMID scaling scenario: the packet rate of every compute queue at once, each in its
// own address space — slot 1 in VMID 0 (the frame-buffer aperture), slots 2..16 in the
// process contexts 1..15, each over its own 4-level page table in VRAM that maps the same
// VAs (ring, a page for the rptr report and fence, a page for the destination) to that VMID's
// own VRAM —
// beside one of those queues alone doing as many packets. The ratio is what running the
// queues side by side gains (or loses) on this machine: the CP runs at most
// GOMAXPROCS-1 queue goroutines at a time, and the client that feeds the rings shares the
// cores.

const (
	vmQueues     = 16      // compute slots 1..16, in VMIDs 0..15
	vmFirstSlot  = 1       // queue i is slot vmFirstSlot+i in VMID i
	vmRingDwords = 1 << 18 // 1 MiB ring per queue
	vmRingBytes  = 4 * vmRingDwords
	vmDoorbellQW = 8 // queue i rings doorbell qword vmDoorbellQW+i

	// VRAM (above everything the other rigs use): queue i's ring, its pages, the page tables.
	vmRings      = 0x600_0000
	vmPages      = vmRings + vmQueues*vmRingBytes // queue i's 2 pages at vmPages + i*vmPageStride
	vmPageStride = 2 * abi.PTE_PAGE_SIZE
	vmTables     = vmPages + vmQueues*vmPageStride
	vmTablesEnd  = vmTables + 1<<20 // 4 tables per process VMID need 240 KiB

	// Inside a queue's pages, each on its own cache line: the first page holds the rptr
	// report and the fence, the second the destination.
	vmRptrOff  = 0x000
	vmFenceOff = 0x100
	vmDstOff   = abi.PTE_PAGE_SIZE

	// The VAs every process VMID maps (to its own VRAM): the ring, then the two pages.
	vmVARing = 0x0000_0040_0000_0000
	vmVAPage = vmVARing + vmRingBytes

	vmPASIDBase = 0x100 // VMID v's PASID is vmPASIDBase+v
	vmBaseVMID  = 1     // the baseline's queue
)

// vmQueue is one of the scenario's queues as the client drives it.
type vmQueue struct {
	slot, vmid int
	ring, page []byte // its ring and pages in the client's view of VRAM
	wptr       uint64 // dwords
	fenceVA    uint64 // in its VMID
	dstVA      uint64
	seq, value uint32 // the last fence and destination value submitted
}

func (q *vmQueue) emit(dws []uint32) {
	for _, dw := range dws {
		binary.LittleEndian.PutUint32(q.ring[4*(q.wptr%vmRingDwords):], dw)
		q.wptr++
	}
}

func (q *vmQueue) fence() uint32 { return binary.LittleEndian.Uint32(q.page[vmFenceOff:]) }
func (q *vmQueue) dst() uint32   { return binary.LittleEndian.Uint32(q.page[vmDstOff:]) }

// vmRig is a rig with the scenario's 16 queues active and idle.
type vmRig struct {
	*Rig
	qs      [vmQueues]*vmQueue
	tables  [vmQueues]*ptBuilder // of the process VMIDs
	timeout time.Duration        // for one fence
}

func newVMRig() (*vmRig, error) {
	rig, err := NewRig(RigConfig{NoQueue: true})
	if err != nil {
		return nil, err
	}
	v := &vmRig{Rig: rig, timeout: jobTimeout}
	clear(rig.VRAM[vmRings:vmTablesEnd])
	mem := &tableMemory{vram: rig.VRAM}
	next := uint64(vmTables)
	for i := range vmQueues {
		q := &vmQueue{slot: vmFirstSlot + i, vmid: i,
			ring: rig.VRAM[vmRings+i*vmRingBytes:][:vmRingBytes],
			page: rig.VRAM[vmPages+i*vmPageStride:][:vmPageStride]}
		ringPA, pagePA := uint64(vmRings+i*vmRingBytes), uint64(vmPages+i*vmPageStride)
		ringVA, pageVA := uint64(abi.GPU_FB_BASE)+ringPA, uint64(abi.GPU_FB_BASE)+pagePA
		if q.vmid != 0 {
			ringVA, pageVA = vmVARing, vmVAPage
			b := newPTBuilder(mem, next)
			for p := uint64(0); p < vmRingBytes/abi.PTE_PAGE_SIZE; p++ {
				// The ring is data to the CP (only an IB fetch needs PTE_EXECUTABLE).
				b.mapPage(ringVA+p*abi.PTE_PAGE_SIZE, ringPA+p*abi.PTE_PAGE_SIZE|abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK)
			}
			b.mapPage(pageVA, pagePA|trRW)
			b.mapPage(pageVA+abi.PTE_PAGE_SIZE, (pagePA+abi.PTE_PAGE_SIZE)|trRW)
			v.tables[i] = b
			if next = b.next; next > vmTablesEnd {
				return nil, errors.Join(fmt.Errorf("VMID %d's page tables end at %#x, beyond their area", q.vmid, next), rig.Close())
			}
			if err := v.enableContext(q.vmid, b.root); err != nil {
				return nil, errors.Join(err, rig.Close())
			}
		}
		q.fenceVA, q.dstVA = pageVA+vmFenceOff, pageVA+vmDstOff
		if err := v.startQueue(q, ringVA, pageVA+vmRptrOff); err != nil {
			return nil, errors.Join(fmt.Errorf("queue %d (VMID %d): %w", q.slot, q.vmid, err), rig.Close())
		}
		v.qs[i] = q
	}
	return v, nil
}

// enableContext points context vmid at the root table (4 levels, the whole 48-bit range,
// every fault halting the queue) and gives it a PASID.
func (v *vmRig) enableContext(vmid int, root uint64) error {
	base := abi.BLOCK_VM_CONTEXT_BASE + uint32(vmid)*abi.BLOCK_VM_CONTEXT_STRIDE
	for _, w := range [][2]uint32{
		{base + abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(root | abi.PDE_VALID_MASK)},
		{base + abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_HI, uint32(root >> 32)},
		{base + abi.REG_VM_CONTEXT_START_LO, 0}, {base + abi.REG_VM_CONTEXT_START_HI, 0},
		{base + abi.REG_VM_CONTEXT_END_LO, 0xFFFFFFFF}, {base + abi.REG_VM_CONTEXT_END_HI, 0xF},
		{base + abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK | 3<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT},
		{abi.REG_VM_PASID_LUT_0 + 4*uint32(vmid), vmPASIDBase + uint32(vmid)},
	} {
		if err := v.SetReg(w[0], w[1]); err != nil {
			return err
		}
	}
	return nil
}

func (v *vmRig) startQueue(q *vmQueue, ringVA, rptrVA uint64) error {
	log2 := uint32(0)
	for 1<<log2 < vmRingDwords {
		log2++
	}
	for _, w := range [][2]uint32{
		{abi.REG_HQD_VMID, uint32(q.vmid)},
		{abi.REG_HQD_PQ_BASE_LO, uint32(ringVA)}, {abi.REG_HQD_PQ_BASE_HI, uint32(ringVA >> 32)},
		{abi.REG_HQD_PQ_CONTROL, log2 - 1},
		{abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(rptrVA)}, {abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(rptrVA >> 32)},
		{abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*uint32(vmDoorbellQW+q.vmid)<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT&
			abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK | abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK},
		{abi.REG_HQD_ACTIVE, 1},
	} {
		if err := v.SetReg(hqdReg(q.slot, w[0]), w[1]); err != nil {
			return err
		}
	}
	return nil
}

// kick rings q's doorbell (a trapped write) with its wptr.
func (v *vmRig) kick(q *vmQueue) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], q.wptr)
	return v.C.Write(abi.BAR_DOORBELL, 8*uint64(vmDoorbellQW+q.vmid), b[:])
}

// waitFences waits until each queue's fence has reached want[i] (fences count up), sleeping on
// the fence interrupt: it checks before every wait, so an interrupt is never missed.
func (v *vmRig) waitFences(qs []*vmQueue, want []uint32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(qs); {
		q := qs[i]
		if int32(q.fence()-want[i]) >= 0 {
			i++
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			st, _ := v.Reg(hqdReg(q.slot, abi.REG_HQD_STATUS))
			return fmt.Errorf("queue %d (VMID %d): fence %d not written after %v (fence %d, HQD_STATUS %#x)",
				q.slot, q.vmid, want[i], timeout, q.fence(), st)
		}
		if err := v.WaitIRQ(left); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
			return err
		}
	}
	return nil
}

// op submits n 1-dword WRITE_DATA packets spread evenly over qs, in fenced chunks of up to
// half a ring (each queue's next chunk is written while it runs its last), and checks that
// every packet ran: the CP's packet counter grew by exactly the packets submitted and each
// queue's destination holds the last value it was sent.
func (v *vmRig) op(qs []*vmQueue) Op {
	fenceDwords := len(pm4.Fence(0, 0, 0, true))
	pktDwords := len(pm4.WriteMem(0, 0))
	chunk := (vmRingDwords/2 - fenceDwords) / pktDwords
	buf := make([]uint32, 0, vmRingDwords/2)
	left := make([]int, len(qs))
	first := make([]uint32, len(qs))
	one := make([]uint32, 1)
	return func(n int, c Clock) error {
		c.StopTimer()
		before, err := v.packets()
		if err != nil {
			return err
		}
		for i, q := range qs {
			left[i] = n / len(qs)
			if i < n%len(qs) {
				left[i]++
			}
			first[i] = q.seq + 1
		}
		c.StartTimer()
		chunks := 0
		for busy := true; busy; {
			busy = false
			for i, q := range qs {
				if left[i] == 0 {
					continue
				}
				busy = true
				k := min(left[i], chunk)
				pkt := pm4.WriteMem(q.dstVA, 0) // the data dword is last
				buf = buf[:0]
				for range k {
					q.value++
					pkt[len(pkt)-1] = q.value
					buf = append(buf, pkt...)
				}
				q.seq++
				buf = append(buf, pm4.Fence(q.fenceVA, q.seq, q.seq, true)...)
				// The chunk before last used the ring space this one is written to.
				if q.seq > first[i] {
					one[0] = q.seq - 2
					if err := v.waitFences(qs[i:i+1], one, v.timeout); err != nil {
						return err
					}
				}
				q.emit(buf)
				if err := v.kick(q); err != nil {
					return err
				}
				left[i] -= k
				chunks++
			}
		}
		want := make([]uint32, len(qs))
		for i, q := range qs {
			want[i] = q.seq
		}
		if err := v.waitFences(qs, want, v.timeout); err != nil {
			return err
		}
		c.StopTimer()
		defer c.StartTimer()
		if err := checkPackets(v.packets, before, uint64(n)+uint64(chunks)); err != nil {
			return err
		}
		for _, q := range qs {
			if got := q.dst(); got != q.value {
				return fmt.Errorf("queue %d (VMID %d): destination holds %d after the last packet wrote %d", q.slot, q.vmid, got, q.value)
			}
		}
		return nil
	}
}

// PacketRateVMIDs is the aggregate rate of 1-dword WRITE_DATA packets of 16 compute queues in
// 16 VMIDs (0 and the process contexts 1..15, each with its own page tables), beside one of
// those queues (VMID 1) alone running as many packets, in the same rig.
func PacketRateVMIDs() Scenario {
	return Scenario{
		Name: fmt.Sprintf("CP WRITE_DATA (1 dword), %d queues in %d VMIDs", vmQueues, vmQueues), Unit: "packets/s", PerOp: 1,
		Baseline: fmt.Sprintf("one queue (VMID %d) alone", vmBaseVMID),
		Note:     fmt.Sprintf("aggregate; the ratio is the scaling on %d CPUs (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0)),
		Setup: func() (Pair, error) {
			return vmPair(func(v *vmRig) (dev, base []*vmQueue) { return v.qs[:], v.qs[vmBaseVMID : vmBaseVMID+1] })
		},
	}
}

// PacketRateProcessVMID is one queue's packet rate in a process address space (VMID 1: every
// ring fetch, packet write, fence and rptr report translated through its page tables) beside
// the same rig's VMID-0 queue (the frame-buffer aperture) running as many packets: what a
// process VMID costs the packet path.
func PacketRateProcessVMID() Scenario {
	return Scenario{
		Name: fmt.Sprintf("CP WRITE_DATA (1 dword), one queue in VMID %d", vmBaseVMID), Unit: "packets/s", PerOp: 1,
		Baseline: "the VMID-0 queue alone (same rig)",
		Note:     "ring fetch, packets, fence and rptr report through VMID 1's TLB",
		Setup: func() (Pair, error) {
			return vmPair(func(v *vmRig) (dev, base []*vmQueue) { return v.qs[vmBaseVMID : vmBaseVMID+1], v.qs[:1] })
		},
	}
}

// vmPair brings a vmRig up and returns the ops over the queues pick chooses, warmed up: a lap
// of each of their rings, so its pages are mapped on both ends.
func vmPair(pick func(*vmRig) (dev, base []*vmQueue)) (Pair, error) {
	v, err := newVMRig()
	if err != nil {
		return Pair{}, err
	}
	devQs, baseQs := pick(v)
	dev, base := v.op(devQs), v.op(baseQs)
	lap := vmRingDwords / len(pm4.WriteMem(0, 0))
	if _, err := timeOp(dev, len(devQs)*lap); err != nil {
		v.Close()
		return Pair{}, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := timeOp(base, len(baseQs)*lap); err != nil {
		v.Close()
		return Pair{}, fmt.Errorf("warm-up of the baseline: %w", err)
	}
	return Pair{Dev: dev, Base: base, Close: func() { v.Close() }}, nil
}
