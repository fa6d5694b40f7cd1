package cp_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/engine"
	"vgpu/pm4"
)

// vmMemory is cptest's memory seen through VMIDs: every VMID maps it one to one, accesses are
// recorded, and a VMID-1 access to a "faulting" address returns a retry fault until the test
// resolves it.
type vmMemory struct {
	*cptest.Memory
	mu       sync.Mutex
	accesses []engine.Access
	vas      []uint64
	faultVA  uint64 // 0: none
	ready    chan struct{}
	faults   int
}

type retryErr struct{ ch chan struct{} }

func (e *retryErr) Error() string               { return "test: retry fault" }
func (e *retryErr) RetryReady() <-chan struct{} { return e.ch }
func (e *retryErr) TranslationFault() bool      { return true } // must not matter: Retrier wins
func (m *vmMemory) setFault(va uint64) {
	m.mu.Lock()
	m.faultVA, m.ready = va, make(chan struct{})
	m.mu.Unlock()
}
func (m *vmMemory) resolve()        { m.mu.Lock(); m.faultVA = 0; close(m.ready); m.mu.Unlock() }
func (m *vmMemory) faultCount() int { m.mu.Lock(); defer m.mu.Unlock(); return m.faults }
func (m *vmMemory) log(a engine.Access, va uint64) {
	m.accesses, m.vas = append(m.accesses, a), append(m.vas, va)
}

func (m *vmMemory) check(a engine.Access, va uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log(a, va)
	if a.VMID == 1 && m.faultVA != 0 && va == m.faultVA {
		m.faults++
		return &retryErr{m.ready}
	}
	return nil
}

func (m *vmMemory) Read(a engine.Access, va uint64, p []byte) error {
	if err := m.check(a, va); err != nil {
		return err
	}
	return m.Memory.Read(a, va, p)
}

func (m *vmMemory) Write(a engine.Access, va uint64, p []byte) error {
	if err := m.check(a, va); err != nil {
		return err
	}
	return m.Memory.Write(a, va, p)
}

// accessAt returns the first recorded access to va.
func (m *vmMemory) accessAt(va uint64) (engine.Access, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range m.vas {
		if v == va {
			return m.accesses[i], true
		}
	}
	return engine.Access{}, false
}

type fakeTLB struct {
	mu     sync.Mutex
	pasids []uint16
}

func (f *fakeTLB) InvalidatePASID(pasid uint16, allHub bool, flushType uint8) uint32 {
	f.mu.Lock()
	f.pasids = append(f.pasids, pasid)
	f.mu.Unlock()
	return 0
}

func vmRig(t *testing.T, cfg ...func(*cp.Config)) (*cptest.Rig, *vmMemory, *fakeTLB) {
	vm, tlb := &vmMemory{}, &fakeTLB{}
	r := cptest.NewRig(t, memSize, append([]func(*cp.Config){func(c *cp.Config) {
		vm.Memory = c.Memory.(*cptest.Memory)
		c.Memory, c.TLB = vm, tlb
	}}, cfg...)...)
	return r, vm, tlb
}

// An IB with a VMID on a kernel ring runs in that VMID: fetched as an instruction fetch by the
// CPF, its packet data accessed by the CPC; inside it, another IB's VMID field is ignored.
func TestIBVMIDOnKernelRing(t *testing.T) {
	r, vm, _ := vmRig(t)
	ring := r.StartQueue(1, queueConfig(1))
	ib2 := cptest.NewIB(r.Mem, ibBase+0x1000)
	ib2.WriteMem(dataBase+8, 2)
	ib := cptest.NewIB(r.Mem, ibBase)
	ib.WriteMem(dataBase, 1)
	ib.IndirectBuffer(pm4.IndirectBuffer{Addr: ib2.Base, Size: uint32(ib2.Size()), VMID: 5})
	ring.Submit(pm4.IndirectBuffer{Addr: ib.Base, Size: uint32(ib.Size()), VMID: 1}.Encode())
	ring.Submit(pm4.WriteMem(dataBase+16, 3))
	ring.WaitIdle(t)
	for _, c := range []struct {
		va   uint64
		want engine.Access
	}{
		{ibBase, engine.Access{VMID: 1, Slot: 1, Bypass: true, Kind: engine.Fetch, Client: abi.VM_CID_CPF}},
		{dataBase, engine.Access{VMID: 1, Slot: 1, Client: abi.VM_CID_CPC}},
		{ibBase + 0x1000, engine.Access{VMID: 1, Slot: 1, Bypass: true, Kind: engine.Fetch, Client: abi.VM_CID_CPF}},
		{dataBase + 8, engine.Access{VMID: 1, Slot: 1, Client: abi.VM_CID_CPC}},
		{dataBase + 16, engine.Access{VMID: 0, Slot: 1, Client: abi.VM_CID_CPC}},
		{ringBase + ringStride, engine.Access{VMID: 0, Slot: 1, Bypass: true, Client: abi.VM_CID_CPF}},
	} {
		if got, ok := vm.accessAt(c.va); !ok || got != c.want {
			t.Errorf("access at %#x: %+v, want %+v", c.va, got, c.want)
		}
	}
}

// A process queue's packets reach no register and cannot run INVALIDATE_TLBS; a kernel
// queue's INVALIDATE_TLBS reaches the TLB with its PASID.
func TestProcessStreamPrivileges(t *testing.T) {
	r, _, tlb := vmRig(t)
	ring := r.StartQueue(1, queueConfig(1))
	ring.Submit(pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 1|0x1234<<abi.PM4_INVALIDATE_TLBS_PASID__SHIFT))
	ring.WaitIdle(t)
	if len(tlb.pasids) != 1 || tlb.pasids[0] != 0x1234 {
		t.Fatalf("InvalidatePASID calls %v", tlb.pasids)
	}
	for _, c := range []struct {
		name string
		pkt  []uint32
		code uint32
	}{
		{"register write", pm4.WriteReg(scratch(0), 1), abi.CP_ERROR_BAD_REGISTER},
		{"INVALIDATE_TLBS", pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 0x1234<<abi.PM4_INVALIDATE_TLBS_PASID__SHIFT), abi.CP_ERROR_BAD_PACKET},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _, _ := vmRig(t)
			qc := queueConfig(2)
			r.Program(2, qc)
			r.WriteHQD(2, abi.REG_HQD_VMID, 1)
			r.WriteHQD(2, abi.REG_HQD_ACTIVE, 1)
			ring := r.NewRing(2, qc)
			ring.Submit(c.pkt)
			if code := ring.WaitHalt(t); code != c.code {
				t.Errorf("halted with %d, want %d", code, c.code)
			}
		})
	}
	ring.Submit(pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 1<<21))
	if code := ring.WaitHalt(t); code != abi.CP_ERROR_RESERVED_BITS {
		t.Errorf("reserved DW1 bits: %d", code)
	}
}

// A retry fault parks the queue without its turn (with one turn for the whole CP, another
// queue runs meanwhile), then the access is replayed and the packet completes; a dequeue
// reset ends a wait that is never resolved.
func TestRetryFaultParksQueue(t *testing.T) {
	r, vm, _ := vmRig(t, func(c *cp.Config) { c.MaxRunning = 1 })
	a := r.StartQueue(1, queueConfig(1))
	b := r.StartQueue(2, queueConfig(2))
	vm.setFault(dataBase)
	ib := cptest.NewIB(r.Mem, ibBase)
	ib.WriteMem(dataBase, 0xAB)
	a.Submit(pm4.IndirectBuffer{Addr: ib.Base, Size: uint32(ib.Size()), VMID: 1}.Encode(), pm4.WriteMem(dataBase+4, 1))
	r.WaitState(t, 1, abi.HQD_STATE_WAITING)
	b.Submit(pm4.WriteMem(dataBase+0x100, 7))
	b.WaitIdle(t) // the only turn is free: A gave it back
	if r.Mem.Load32(dataBase) != 0 || r.Mem.Load32(dataBase+4) != 0 {
		t.Fatal("the faulting packet or the next one ran")
	}
	vm.resolve()
	a.WaitIdle(t)
	if r.Mem.Load32(dataBase) != 0xAB || r.Mem.Load32(dataBase+4) != 1 {
		t.Fatalf("after the replay: %#x %#x", r.Mem.Load32(dataBase), r.Mem.Load32(dataBase+4))
	}
	if got := r.CP.Stats().RetryWaits; got != 1 {
		t.Errorf("RetryWaits %d", got)
	}
	// Never resolved: a dequeue reset ends the wait.
	vm.setFault(dataBase + 0x200)
	ib2 := cptest.NewIB(r.Mem, ibBase+0x1000)
	ib2.WriteMem(dataBase+0x200, 1)
	a.Submit(pm4.IndirectBuffer{Addr: ib2.Base, Size: uint32(ib2.Size()), VMID: 1}.Encode())
	r.WaitState(t, 1, abi.HQD_STATE_WAITING)
	n := vm.faultCount()
	time.Sleep(20 * time.Millisecond)
	if vm.faultCount() != n {
		t.Error("a waiting queue kept replaying before the fault was resolved")
	}
	a.Dequeue(abi.HQD_DEQUEUE_RESET)
	r.WaitInactive(t, 1)
	if s, _ := r.Status(1); s != abi.HQD_STATE_IDLE {
		t.Errorf("state %d after the reset", s)
	}
	var rf engine.Retrier
	if !errors.As(error(&retryErr{}), &rf) {
		t.Fatal("test error is not a Retrier")
	}
}
