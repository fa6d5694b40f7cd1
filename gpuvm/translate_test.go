package gpuvm

import (
	"errors"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

const (
	va1 = 0x0000_1234_5678_9000 // an arbitrary 48-bit address (PDB2 index 36)
	pg1 = 0x0010_0000           // data pages are VRAM offsets below the tables
)

func statusOf(perm, walker uint32, mapping bool) uint32 {
	s := perm<<abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT | walker<<abi.REG_VM_FAULT_STATUS__WALKER_ERROR__SHIFT
	if mapping {
		s |= abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK
	}
	return s
}

const causeMask = abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK | abi.REG_VM_FAULT_STATUS__WALKER_ERROR_MASK |
	abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK | abi.REG_VM_FAULT_STATUS__PRT_MASK

func TestTranslate(t *testing.T) {
	type want struct {
		pa       engine.PhysAddr
		len      uint64
		readZero bool
		cause    uint32 // expected fault cause (0: translates)
	}
	huge2M := uint64(0x0000_0040_0000_0000) // 2 MiB aligned VA
	huge1G := uint64(0x0000_0080_0000_0000)
	cases := []struct {
		name  string
		setup func(w *world)
		va    uint64
		write bool
		kind  engine.Kind
		want  want
	}{
		{"page read", func(w *world) { w.tab.set(0, va1, pg1|rw) }, va1 + 0x10, false, engine.Data,
			want{pa: vram(pg1 + 0x10), len: pageSize - 0x10}},
		{"page write", func(w *world) { w.tab.set(0, va1, pg1|rw) }, va1, true, engine.Data,
			want{pa: vram(pg1), len: pageSize}},
		{"system page", func(w *world) { w.tab.set(0, va1, 0x7000_0000|rw|abi.PTE_SYSTEM_MASK) }, va1 + 8, false, engine.Data,
			want{pa: engine.PhysAddr{Domain: engine.DomainSystem, Addr: 0x7000_0008}, len: pageSize - 8}},
		{"write to read-only", func(w *world) { w.tab.set(0, va1, pg1|abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK) }, va1, true, engine.Data,
			want{cause: statusOf(abi.VM_PERM_WRITE, 0, false)}},
		{"read of unreadable", func(w *world) { w.tab.set(0, va1, pg1|abi.PTE_VALID_MASK|abi.PTE_WRITEABLE_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(abi.VM_PERM_READ, 0, false)}},
		{"fetch of non-executable", func(w *world) { w.tab.set(0, va1, pg1|rw) }, va1, false, engine.Fetch,
			want{cause: statusOf(abi.VM_PERM_EXECUTE, 0, false)}},
		{"fetch of executable", func(w *world) { w.tab.set(0, va1, pg1|abi.PTE_VALID_MASK|abi.PTE_EXECUTABLE_MASK) }, va1, false, engine.Fetch,
			want{pa: vram(pg1), len: pageSize}},
		{"invalid PTE", func(w *world) { w.tab.set(0, va1, pg1|abi.PTE_READABLE_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(abi.VM_PERM_VALID, 0, false)}},
		{"invalid PDE", func(w *world) { w.tab.set(1, va1, 0) }, va1, false, engine.Data,
			want{cause: statusOf(abi.VM_PERM_VALID, 0, false)}},
		{"no PDB2 entry at all", func(w *world) {}, va1, false, engine.Data,
			want{cause: statusOf(abi.VM_PERM_VALID, 0, false)}},
		{"PTE reserved bit", func(w *world) { w.tab.set(0, va1, pg1|rw|1<<60) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_RESERVED_BITS, false)}},
		{"PDE reserved bit", func(w *world) { w.tab.set(1, va1, uint64(w.tab.alloc())|abi.PDE_VALID_MASK|1<<4) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_RESERVED_BITS, false)}},
		{"huge page at PDB2", func(w *world) { w.tab.set(3, va1, rw|abi.PDE_PTE_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_BAD_HUGE_PAGE, false)}},
		{"TF in a PTE", func(w *world) { w.tab.set(0, va1, abi.PTE_EXECUTABLE_MASK|abi.PDE_PTE_MASK|abi.PTE_TF_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_NO_RETRY_MARKER, false)}},
		{"VALID with PRT", func(w *world) { w.tab.set(0, va1, abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK|abi.PTE_PRT_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_NO_RETRY_MARKER, false) | abi.REG_VM_FAULT_STATUS__PRT_MASK}},
		{"PRT page reads zero", func(w *world) {
			w.tab.set(0, va1, abi.PTE_PRT_MASK|abi.PTE_SNOOPED_MASK|abi.PTE_LOG_MASK|abi.PTE_SYSTEM_MASK)
		}, va1 + 4, true, engine.Data,
			want{pa: engine.PhysAddr{Domain: engine.DomainSystem, Addr: 4}, len: pageSize - 4, readZero: true}},
		{"2 MiB huge page", func(w *world) { w.tab.set(1, huge2M, 0x20_0000|rw|abi.PDE_PTE_MASK) }, huge2M + 0x12345, false, engine.Data,
			want{pa: vram(0x20_0000 + 0x12345), len: 2<<20 - 0x12345}},
		{"1 GiB huge page in system memory", func(w *world) {
			w.tab.set(2, huge1G, 0x40_0000_0000|rw|abi.PDE_PTE_MASK|abi.PTE_SYSTEM_MASK)
		}, huge1G + 0x3456_7890, true, engine.Data,
			want{pa: engine.PhysAddr{Domain: engine.DomainSystem, Addr: 0x40_0000_0000 + 0x3456_7890}, len: 1<<30 - 0x3456_7890}},
		{"64 KiB fragment", func(w *world) {
			for i := uint64(0); i < 16; i++ {
				w.tab.set(0, va1&^0xFFFF+i<<12, (pg1+i<<12)|rw|4<<abi.PTE_FRAGMENT__SHIFT)
			}
		}, va1 + 0x10, false, engine.Data,
			want{pa: vram(pg1 + va1&0xF000 + 0x10), len: 0x10000 - va1&0xFFFF - 0x10}},
		{"misaligned fragment claim falls back to a page", func(w *world) {
			w.tab.set(0, va1, (pg1+0x1000)|rw|4<<abi.PTE_FRAGMENT__SHIFT)
		}, va1, false, engine.Data,
			want{pa: vram(pg1 + 0x1000), len: pageSize}},
		{"PDB0 points past VRAM", func(w *world) { w.tab.set(1, va1, testVRAM|abi.PDE_VALID_MASK) }, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_READ_FAILED, false)}},
		{"PTB in unmapped system memory", func(w *world) {
			w.tab.set(1, va1, 0x5_0000_0000|abi.PDE_VALID_MASK|abi.PDE_SYSTEM_MASK)
		}, va1, false, engine.Data,
			want{cause: statusOf(0, abi.VM_WALKER_READ_FAILED, false)}},
		{"PTB in system memory", func(w *world) {
			w.tab.set(1, va1, 0x5_0000_0000|abi.PDE_VALID_MASK|abi.PDE_SYSTEM_MASK)
			w.m.put(engine.PhysAddr{Domain: engine.DomainSystem, Addr: 0x5_0000_0000 + idx(0, va1)*8}, pg1|rw)
		}, va1, false, engine.Data,
			want{pa: vram(pg1), len: pageSize}},
		{"non-canonical address", func(w *world) { w.tab.set(0, va1, pg1|rw) }, va1 | 1<<50, false, engine.Data,
			want{cause: statusOf(0, 0, true)}},
		{"sign-extended high address", func(w *world) {
			w.tab.set(0, 0x0000_FFFF_FFFF_F000, pg1|rw)
		}, 0xFFFF_FFFF_FFFF_F000, false, engine.Data,
			want{pa: vram(pg1), len: pageSize}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.enable(1, cntl(0))
			tc.setup(w)
			tr, err := w.vm.Translate(engine.Access{VMID: 1, Slot: 2, Kind: tc.kind, Client: abi.VM_CID_CPC}, tc.va, tc.write)
			if tc.want.cause != 0 {
				var f *Fault
				if !errors.As(err, &f) {
					t.Fatalf("Translate = %+v, %v; want a *Fault", tr, err)
				}
				if got := f.Status & causeMask; got != tc.want.cause {
					t.Errorf("status cause %#x, want %#x (%s)", got, tc.want.cause, StatusString(f.Status))
				}
				if st := w.vm.ReadReg(regFaultStatus); st != f.Status {
					t.Errorf("FAULT_STATUS %#x, fault says %#x", st, f.Status)
				}
				if got := f.Status & abi.REG_VM_FAULT_STATUS__CID_MASK >> abi.REG_VM_FAULT_STATUS__CID__SHIFT; got != abi.VM_CID_CPC {
					t.Errorf("CID %d", got)
				}
				if got := f.Status & abi.REG_VM_FAULT_STATUS__VMID_MASK >> abi.REG_VM_FAULT_STATUS__VMID__SHIFT; got != 1 {
					t.Errorf("VMID %d", got)
				}
				if (f.Status&abi.REG_VM_FAULT_STATUS__RW_MASK != 0) != tc.write {
					t.Errorf("RW bit wrong in %#x", f.Status)
				}
				if ivs := w.takeIVs(); len(ivs) != 1 {
					t.Errorf("%d IVs, want 1", len(ivs))
				}
				return
			}
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			if tr.PA != tc.want.pa || tr.Len != tc.want.len || tr.ReadZero != tc.want.readZero {
				t.Errorf("got PA %v len %#x readZero %v; want %v %#x %v", tr.PA, tr.Len, tr.ReadZero, tc.want.pa, tc.want.len, tc.want.readZero)
			}
			if w.m.bad.Load() != 0 {
				t.Errorf("%d misshapen or out-of-bounds table reads", w.m.bad.Load())
			}
		})
	}
}

func TestContextGating(t *testing.T) {
	w := newWorld(t)
	w.tab.set(0, va1, pg1|rw)
	a := acc(1)
	if _, err := w.vm.Translate(engine.Access{VMID: 0}, va1, false); !errors.Is(err, ErrNotProcessVMID) {
		t.Errorf("VMID 0: %v", err)
	}
	var f *Fault
	if _, err := w.vm.Translate(a, va1, false); !errors.As(err, &f) || f.Status&abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK == 0 {
		t.Errorf("disabled context: %v", err)
	}
	w.enable(1, cntl(0))
	w.vm.WriteReg(regFaultCntl, 1)
	start := va1>>12 + 1 // the range starts after va1
	w.vm.WriteContext(1, ctxStartLo, uint32(start))
	w.vm.WriteContext(1, ctxStartHi, uint32(start>>32))
	if _, err := w.vm.Translate(a, va1, false); !errors.As(err, &f) || f.Status&abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK == 0 {
		t.Errorf("below START: %v", err)
	}
	// START shifts the walk: va1+4K is now the range's page 0.
	w.tab.set(0, 0, 0x30_0000|rw)
	if tr, err := w.vm.Translate(a, va1+pageSize, false); err != nil || tr.PA != vram(0x30_0000) {
		t.Errorf("walk from START: %+v %v", tr, err)
	}
	if w.vm.ReadContext(0, ctxCntl) != 0 {
		t.Error("instance 0 is not reserved")
	}
	w.vm.WriteContext(0, ctxCntl, 1)
	if w.vm.ReadContext(0, ctxCntl) != 0 {
		t.Error("instance 0 took a write")
	}
}

// Depth and block size follow the CNTL fields: a 2-level table with 1024-entry PTBs.
func TestDepthAndBlockSize(t *testing.T) {
	w := newWorld(t)
	root, ptb := w.tab.alloc(), w.tab.alloc()
	w.tab.alloc() // a 1024-entry PTB takes 8 KiB
	va := uint64(5)<<22 | 1000<<12
	w.m.put(vram(root+5*8), ptb|abi.PDE_VALID_MASK) // root index: va >> 22
	w.m.put(vram(ptb+1000*8), pg1|rw)
	w.setRoot(1, root|abi.PDE_VALID_MASK)
	w.vm.WriteContext(1, ctxEndLo, 0xFFFFFFFF)
	w.vm.WriteContext(1, ctxCntl, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK|1<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT|
		1<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE__SHIFT)
	tr, err := w.vm.Translate(acc(1), va+8, false)
	if err != nil || tr.PA != vram(pg1+8) {
		t.Fatalf("%+v %v", tr, err)
	}
	if r := w.m.reads.Load(); r != 2 {
		t.Errorf("%d table reads for a 2-level walk", r)
	}
}

func TestFaultLatchAndIV(t *testing.T) {
	w := newWorld(t)
	w.enable(2, cntl(0))
	w.vm.WriteReg(regPASIDLUT0+2*4, 0xF_8765) // PASID is 16 bits
	va := uint64(0x0000_ABCD_E000_0000)
	if _, err := w.vm.Translate(acc(2), va+0x123, true); err == nil {
		t.Fatal("unmapped page translated")
	}
	ivs := w.takeIVs()
	if len(ivs) != 1 {
		t.Fatalf("%d IVs", len(ivs))
	}
	iv := ivs[0]
	if iv.Client != abi.IH_CLIENT_GFX || iv.Source != abi.IH_SRC_VM_FAULT || iv.VMID != 2 || iv.PASID != 0x8765 {
		t.Errorf("IV header %+v", iv)
	}
	if ivAddr(iv) != va || iv.Data[1]&abi.VM_IV_DW5_WRITE_MASK == 0 || iv.Data[1]&abi.VM_IV_DW5_RETRY_MASK != 0 {
		t.Errorf("IV data %#x decodes to %#x", iv.Data, ivAddr(iv))
	}
	st := w.vm.ReadReg(regFaultStatus)
	page := uint64(w.vm.ReadReg(regFaultAddrHi))<<32 | uint64(w.vm.ReadReg(regFaultAddrLo))
	if page != va>>12 || st&abi.REG_VM_FAULT_STATUS__MORE_FAULTS_MASK != 0 || iv.Data[3] != st {
		t.Errorf("latch %#x page %#x", st, page)
	}
	// A second fault sets MORE_FAULTS and keeps the first address.
	if _, err := w.vm.Translate(acc(2), 0x1000, false); err == nil {
		t.Fatal("unmapped page translated")
	}
	if st2 := w.vm.ReadReg(regFaultStatus); st2 != st|abi.REG_VM_FAULT_STATUS__MORE_FAULTS_MASK {
		t.Errorf("second fault: status %#x", st2)
	}
	if got := w.vm.ReadReg(regFaultAddrLo); got != uint32(va>>12) {
		t.Errorf("address moved to %#x", got)
	}
	w.vm.WriteReg(regFaultCntl, abi.REG_VM_FAULT_CNTL__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK)
	if w.vm.ReadReg(regFaultStatus) != 0 || w.vm.ReadReg(regFaultAddrLo) != 0 {
		t.Error("clear did not clear")
	}
	if _, err := w.vm.Translate(acc(2), 0x2000, false); err == nil {
		t.Fatal("unmapped page translated")
	}
	if w.vm.ReadReg(regFaultAddrLo) != 2 {
		t.Error("latch not re-armed")
	}
	if got := w.vm.ReadReg(regFaults); got != 3 {
		t.Errorf("FAULTS %d", got)
	}
	// Without ENABLE_INTERRUPT no IV is sent (the latch still works).
	w.takeIVs()
	w.vm.WriteContext(2, ctxCntl, cntl(0)&^allInterrupts)
	if _, err := w.vm.Translate(acc(2), 0x3000, false); err == nil {
		t.Fatal("unmapped page translated")
	}
	if ivs := w.takeIVs(); len(ivs) != 0 {
		t.Errorf("IV without ENABLE_INTERRUPT: %+v", ivs)
	}
}

func TestDefaultPagePolicy(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(allDefaults))
	tr, err := w.vm.Translate(acc(1), va1+0x40, true)
	if err != nil || !tr.Default || !tr.DropWrites || !tr.ReadZero {
		t.Fatalf("unprogrammed default page: %+v %v", tr, err)
	}
	w.vm.WriteReg(regDefaultLo, 0x1234_5678)
	w.vm.WriteReg(regDefaultHi, 0xF3)
	tr, err = w.vm.Translate(acc(1), va1+0x40, false)
	want := engine.PhysAddr{Domain: engine.DomainSystem, Addr: 0x3_1234_5678<<12 + 0x40}
	if err != nil || !tr.Default || tr.ReadZero || tr.PA != want || tr.Len != pageSize-0x40 {
		t.Fatalf("default page: %+v %v (want PA %v)", tr, err, want)
	}
	if w.vm.ReadReg(regFaultStatus) == 0 || len(w.takeIVs()) != 2 {
		t.Error("a default-page fault is still latched and interrupts")
	}
	// CRASH_ON_NO_RETRY_FAULT overrides the default-page policy.
	w.vm.WriteReg(regFaultCntl, abi.REG_VM_FAULT_CNTL__CRASH_ON_NO_RETRY_FAULT_MASK)
	var f *Fault
	if _, err := w.vm.Translate(acc(1), va1, false); !errors.As(err, &f) {
		t.Fatalf("crash on no-retry: %v", err)
	}
	if w.vm.ReadReg(regFaultCntl) != abi.REG_VM_FAULT_CNTL__CRASH_ON_NO_RETRY_FAULT_MASK {
		t.Error("FAULT_CNTL does not read back")
	}
}
