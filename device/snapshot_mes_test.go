package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// A scheduler with queues in a snapshot, through vfio-user: two processes (one page table,
// two PASIDs), four queues on one MES slot — one parked in the slot on a WAIT_REG_MEM, two
// unmapped with work waiting for it, one halted — saved, restored into a fresh device, and
// run on by a new client.

const (
	smProcA = 0x2F_0000 // process contexts
	smProcB = 0x2F_1000
	smGate  = 0x2F_2000 // the page the parked queue waits on
	smQueue = 0x30_0000 // per queue: MQD, gang context +0x1000, shadow +0x2000, ring +0x4000, data +0x6000
	smSpan  = 0x1_0000
	smDB    = 20 // queue i's 64-bit doorbell is smDB+i

	vaSMGate  = 0x0000_0060_0000_0000
	vaSMQueue = 0x0000_0061_0000_0000 // queue i: ring at +i<<20, data at +i<<20 + 0x10000
)

// smQ is one user queue as its driver keeps it.
type smQ struct {
	i    int
	wptr uint64
}

func (q *smQ) base() uint64   { return smQueue + uint64(q.i)*smSpan }
func (q *smQ) db() uint32     { return 2 * uint32(smDB+q.i) }
func (q *smQ) vaRing() uint64 { return vaSMQueue + uint64(q.i)<<20 }
func (q *smQ) vaData() uint64 { return q.vaRing() + 0x10000 }

// submit writes packets to the ring, the wptr shadow, then rings the doorbell (client r,
// VRAM mapping vram).
func (q *smQ) submit(t *testing.T, r *rig, vram []byte, pkts ...[]uint32) {
	for _, p := range pkts {
		for _, dw := range p {
			binary.LittleEndian.PutUint32(vram[q.base()+0x4000+4*(q.wptr%1024):], dw)
			q.wptr++
		}
	}
	binary.LittleEndian.PutUint64(vram[q.base()+0x2000:], q.wptr)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], q.wptr)
	if err := r.c.Write(abi.BAR_DOORBELL, 8*uint64(smDB+q.i), b[:]); err != nil {
		t.Fatal(err)
	}
}

func (q *smQ) data(vram []byte) uint32 { return binary.LittleEndian.Uint32(vram[q.base()+0x6000:]) }

func queryStatus(r *rig, db uint32) uint32 {
	r.setReg(abi.REG_MES_QUERY_DOORBELL, db)
	return r.reg(abi.REG_MES_QUERY_STATUS)
}

// mesWithQueues brings up the scheduler with the four queues (see above).
func mesWithQueues(t *testing.T, dev *Device) (*mesDriver, []*smQ) {
	m := &mesDriver{driver: attach(t, dev, 0, true)}
	vt := newVMTables(m.driver, vtTables)
	vt.mapPage(vaSMGate, smGate|pteRWX)
	clear(m.vram[smGate : smGate+0x1000])
	clear(m.vram[mtRing : mtRing+4096])
	qs := make([]*smQ, 4)
	for i := range qs {
		q := &smQ{i: i}
		qs[i] = q
		clear(m.vram[q.base() : q.base()+smSpan])
		vt.mapPage(q.vaRing(), (q.base()+0x4000)|pteRWX)
		vt.mapPage(q.vaData(), (q.base()+0x6000)|pteRWX)
		mqd := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(m.vram[q.base()+4*dw:], v) }
		mqd(abi.MES_MQD_DW_HEADER, abi.MES_MQD_HEADER)
		mqd(abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO, lo(q.vaRing()>>8))
		mqd(abi.MES_MQD_DW_CP_HQD_PQ_BASE_HI, hi(q.vaRing()>>8))
		mqd(abi.MES_MQD_DW_CP_HQD_PQ_CONTROL, 9)
	}
	m.r.setReg(abi.REG_MES_RING_BASE_LO, lo(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_BASE_HI, hi(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_CONTROL, 9)
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 1)
	if !m.frame(abi.MES_SCH_API_SET_HW_RSRC, abi.MES_SET_HW_RSRC_DW_API_STATUS, map[uint64]uint32{
		abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB: 0xFF00, abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK: 0x1, // slot 1 only
	}) {
		t.Fatalf("SET_HW_RESOURCES failed: %#x", m.r.reg(abi.REG_MES_LAST_ERROR))
	}
	root := vt.root | abi.PDE_VALID_MASK
	hour := uint64(time.Hour / 100)
	add := func(q *smQ) {
		t.Helper()
		proc, pasid := uint64(smProcA), uint32(vtPASID)
		if q.i%2 == 1 {
			proc, pasid = smProcB, vtPASID+1
		}
		f := map[uint64]uint32{
			abi.MES_ADD_QUEUE_DW_PROCESS_ID: pasid, abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR: lo(root),
			abi.MES_ADD_QUEUE_DW_PROCESS_VA_END: 0xFFFFFFFF, abi.MES_ADD_QUEUE_DW_PROCESS_VA_END + 1: 0xF,
			abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR: lo(m.fb(proc)), abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR + 1: hi(m.fb(proc)),
			abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR: lo(m.fb(q.base() + 0x1000)), abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR + 1: hi(m.fb(q.base() + 0x1000)),
			abi.MES_ADD_QUEUE_DW_GANG_QUANTUM: lo(hour), abi.MES_ADD_QUEUE_DW_GANG_QUANTUM + 1: hi(hour),
			abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL: abi.MES_PRIORITY_NORMAL,
			abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET:            q.db(),
			abi.MES_ADD_QUEUE_DW_MQD_ADDR:                   lo(m.fb(q.base())), abi.MES_ADD_QUEUE_DW_MQD_ADDR + 1: hi(m.fb(q.base())),
			abi.MES_ADD_QUEUE_DW_WPTR_ADDR: lo(m.fb(q.base() + 0x2000)), abi.MES_ADD_QUEUE_DW_WPTR_ADDR + 1: hi(m.fb(q.base() + 0x2000)),
			abi.MES_ADD_QUEUE_DW_QUEUE_TYPE:      abi.MES_QUEUE_TYPE_COMPUTE,
			abi.MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL: 3 << abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT,
		}
		if !m.frame(abi.MES_SCH_API_ADD_QUEUE, abi.MES_ADD_QUEUE_DW_API_STATUS, f) {
			t.Fatalf("ADD_QUEUE %d failed: %#x", q.i, m.r.reg(abi.REG_MES_LAST_ERROR))
		}
	}
	mapped := func(q *smQ) bool { return queryStatus(m.r, q.db())&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 }
	// Queue 3 halts on a type-0 packet and leaves the slot.
	add(qs[3])
	qs[3].submit(t, m.r, m.vram, []uint32{0})
	eventually(t, "queue 3 halted and saved", func() bool {
		return binary.LittleEndian.Uint32(m.vram[qs[3].base()+4*abi.MES_MQD_DW_CP_HQD_ERROR:]) != 0 && !mapped(qs[3])
	})
	// Queue 0 parks in the slot; 1 and 2 wait for it with work.
	add(qs[0])
	qs[0].submit(t, m.r, m.vram, pm4.WaitMem(vaSMGate, 1), pm4.Fence(qs[0].vaData(), 1, 0, false))
	eventually(t, "queue 0 mapped", func() bool { return mapped(qs[0]) })
	for _, q := range qs[1:3] {
		add(q)
		q.submit(t, m.r, m.vram, pm4.Fence(q.vaData(), 1, 0, false))
	}
	eventually(t, "queues 1 and 2 unmapped with work", func() bool {
		for _, q := range qs[1:3] {
			if st := queryStatus(m.r, q.db()); st&abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK == 0 || st&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
				return false
			}
		}
		return true
	})
	return m, qs
}

// TestSnapshotMESQueues: the scheduler's tables and its mapped slot survive the snapshot;
// after the restore the status is the same and the queues run on to their fences.
func TestSnapshotMESQueues(t *testing.T) {
	dev := newSharedDevice(t)
	_, qs := mesWithQueues(t, dev)
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	before := dev.Status().MES
	if len(before.QueueList) != 4 || before.Processes != 2 {
		t.Fatalf("saved scheduler: %d queues, %d processes", len(before.QueueList), before.Processes)
	}

	dev2 := newSharedDevice(t)
	if err := dev2.RestoreSnapshot(bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	after := dev2.Status().MES
	if !reflect.DeepEqual(after.QueueList, before.QueueList) || after.Owned != before.Owned || after.Processes != before.Processes ||
		after.Maps != before.Maps || after.Unmaps != before.Unmaps {
		t.Errorf("restored scheduler\n%+v\nsaved\n%+v", after, before)
	}
	r2 := &rig{t: t, dev: dev2, c: vfiousertest.NewPair(t, dev2)}
	vm, err := r2.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Close() })
	vram := vm.At(0, dev2.cfg.VRAMWindow)
	if got := r2.reg(abi.REG_MES_QUEUES); got != 4 {
		t.Errorf("MES_QUEUES %d after the restore", got)
	}
	// Open the gate: the parked queue reaches its fence, gives the slot up, and the waiting
	// queues run theirs.
	binary.LittleEndian.PutUint32(vram[smGate:], 1)
	dev2.gpu.cp.Wake()
	for _, q := range qs[:3] {
		eventually(t, fmt.Sprintf("queue %d's fence", q.i), func() bool { return q.data(vram) == 1 })
	}
	// A new job through a doorbell on the restored device.
	qs[1].submit(t, r2, vram, pm4.Fence(qs[1].vaData(), 2, 0, false))
	eventually(t, "queue 1's next fence", func() bool { return qs[1].data(vram) == 2 })
	if st := queryStatus(r2, qs[3].db()); st&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 || qs[3].data(vram) != 0 {
		t.Errorf("the halted queue ran after the restore: status %#x", st)
	}
}

// TestSnapshotMESRefusesMismatch: a file whose CP section and MES tables disagree about a
// slot is refused before anything is applied.
func TestSnapshotMESRefusesMismatch(t *testing.T) {
	dev := newSharedDevice(t)
	mesWithQueues(t, dev)
	if err := dev.gpu.cp.Pause(time.Second); err != nil {
		t.Fatal(err)
	}
	resume, err := dev.gpu.mes.Pause(time.Second)
	if err != nil {
		dev.gpu.cp.Unpause()
		t.Fatal(err)
	}
	s, err := dev.capture()
	resume()
	dev.gpu.cp.Unpause()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*snapshot)
	}{
		{"the mapped slot empty in the CP", func(s *snapshot) { s.cp.Slots[1].Mapped = false }},
		{"a mapped slot the tables do not name", func(s *snapshot) { s.cp.Slots[2] = s.cp.Slots[1] }},
		{"another doorbell in the slot", func(s *snapshot) {
			s.cp.Slots[1].MapDoorbellControl ^= 2 << abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT
		}},
		{"another VMID in the slot", func(s *snapshot) { s.cp.Slots[1].MapVMID ^= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *s
			c.mes.Tables.Queues = append(c.mes.Tables.Queues[:0:0], s.mes.Tables.Queues...)
			tc.edit(&c)
			var file bytes.Buffer
			if err := dev.write(&file, &c); err != nil {
				t.Fatal(err)
			}
			dev2 := newSharedDevice(t)
			if err := dev2.RestoreSnapshot(&file); !errors.Is(err, ErrSnapshotCorrupt) {
				t.Fatalf("%v, want ErrSnapshotCorrupt", err)
			}
			if dev2.gpu.mes.Owned() != 0 || dev2.gpu.cp.Queue(1).Active {
				t.Error("a refused restore started the scheduler or a queue")
			}
		})
	}
}

// TestSnapshotVersion1Refused: a file of format 1 (before the scheduler's tables) is refused
// by name, whatever follows its header.
func TestSnapshotVersion1Refused(t *testing.T) {
	dev := newSharedDevice(t)
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	b := file.Bytes()
	if got := binary.LittleEndian.Uint32(b[8:]); got != 2 {
		t.Fatalf("format version %d written, want 2", got)
	}
	binary.LittleEndian.PutUint32(b[8:], 1)
	if err := newSharedDevice(t).RestoreSnapshot(bytes.NewReader(b)); !errors.Is(err, ErrSnapshotVersion) {
		t.Errorf("a version 1 file: %v, want ErrSnapshotVersion", err)
	}
}
