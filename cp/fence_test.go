package cp_test

import (
	"testing"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/engine"
	"vgpu/gpuvm"
	"vgpu/pm4"
)

// vmWorld is cptest's memory as VRAM behind a real gpuvm.VM: VMID 0 is the flat memory,
// VMIDs 1..15 translate through page tables built in that memory (one level: a 1024-entry
// PTB covering the 4 MiB), with gpuvm's permission checks and faults.
type vmWorld struct {
	*cptest.Memory
	vm *gpuvm.VM
}

const (
	ptbAddr     = 0x3F0000 // the PTB: 1024 entries, 8 KiB
	roPage      = 0x380000 // mapped READABLE only in VMID 1
	vmPages     = memSize / 4096
	vmPTEFlags  = abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK | abi.PTE_EXECUTABLE_MASK
	vmTestVMID  = 1
	fenceOffset = 0x40 // the protected fence's place in the read-only page
)

// ReadPTE is the gpuvm.TableReader: page-table entries live in the same memory.
func (w *vmWorld) ReadPTE(pa engine.PhysAddr, p []byte) error {
	return w.Memory.Read(engine.Access{Slot: -1}, pa.Addr, p)
}

func (w *vmWorld) access(a engine.Access, va uint64, p []byte, write bool) error {
	if a.VMID == 0 {
		if write {
			return w.Memory.Write(a, va, p)
		}
		return w.Memory.Read(a, va, p)
	}
	for len(p) > 0 {
		tr, err := w.vm.Translate(a, va, write)
		if err != nil {
			return err
		}
		n := min(uint64(len(p)), tr.Len)
		if write {
			err = w.Memory.Write(a, tr.PA.Addr, p[:n])
		} else {
			err = w.Memory.Read(a, tr.PA.Addr, p[:n])
		}
		if err != nil {
			return err
		}
		p, va = p[n:], va+n
	}
	return nil
}

func (w *vmWorld) Read(a engine.Access, va uint64, p []byte) error  { return w.access(a, va, p, false) }
func (w *vmWorld) Write(a engine.Access, va uint64, p []byte) error { return w.access(a, va, p, true) }

// fenceRig is a rig over a vmWorld with VMID 1 mapping every page one to one, roPage
// read-only.
func fenceRig(t *testing.T) (*cptest.Rig, *vmWorld) {
	w := &vmWorld{}
	r := cptest.NewRig(t, memSize, func(c *cp.Config) {
		w.Memory = c.Memory.(*cptest.Memory)
		w.vm = gpuvm.New(gpuvm.Config{Tables: w, VRAMSize: memSize})
		c.Memory = w
	})
	for pg := uint64(0); pg < vmPages; pg++ {
		pte := pg<<12 | vmPTEFlags
		if pg<<12 == roPage {
			pte = pg<<12 | abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK
		}
		r.Mem.Store64(ptbAddr+pg*8, pte)
	}
	w.vm.WriteContext(vmTestVMID, abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, ptbAddr|abi.PDE_VALID_MASK)
	w.vm.WriteContext(vmTestVMID, abi.REG_VM_CONTEXT_END_LO, vmPages-1)
	w.vm.WriteContext(vmTestVMID, abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK)
	return r, w
}

// PROTECTED_FENCE_SIGNAL writes the ring position after it (inside an IB: after the IB's
// packet) to the fence in the queue's VMID although the page is read-only there, raises the
// EOP IV with the doorbell offset, and is kept in the saved image; an ordinary write from the
// same queue to that page faults.
func TestProtectedFenceSignal(t *testing.T) {
	const fenceVA = roPage + fenceOffset
	pf := pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0)
	cases := []struct {
		name  string
		build func(r *cptest.Rig, ring *cptest.Ring)
		want  uint64
	}{
		{"in the ring", func(r *cptest.Rig, ring *cptest.Ring) { ring.Emit(pm4.WriteMem(dataBase, 1), pf) }, 5 + 2},
		{"in an IB", func(r *cptest.Rig, ring *cptest.Ring) {
			ib := cptest.NewIB(r.Mem, ibBase)
			ib.Emit(pm4.WriteMem(dataBase, 1), pf, pm4.WriteMem(dataBase+4, 2))
			ring.Emit(cptest.IBCall(ib))
		}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := fenceRig(t)
			ring := guestRing(r, 1)
			tc.build(r, ring)
			w := ring.Wptr()
			img := ringImage(1)
			img.VMID, img.FenceAddr, img.DoorbellOffset, img.Exec.Fence = vmTestVMID, fenceVA, 0x1234, 3
			mustMap(t, r, 2, img)
			r.CP.Kick(2, w)
			waitDone(t, r, 2, w)
			if got := r.Mem.Load64(fenceVA); got != tc.want {
				t.Errorf("fence %d, want %d", got, tc.want)
			}
			ivs := r.IVs.All()
			if len(ivs) != 1 {
				t.Fatalf("IVs %+v", ivs)
			}
			wantIV(t, ivs[0], engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP, RingID: cp.RingID(2),
				VMID: vmTestVMID, Data: [4]uint32{0x1234}})
			if r.ReadHQD(2, abi.REG_HQD_FENCES) != 1 {
				t.Errorf("HQD_FENCES %d", r.ReadHQD(2, abi.REG_HQD_FENCES))
			}
			r.CP.Preempt(2)
			saved, st := waitStopped(t, r, 2)
			if st != cp.Preempted || saved.Exec.Fence != tc.want {
				t.Errorf("saved %v with fence %d, want %d", st, saved.Exec.Fence, tc.want)
			}
		})
	}

	t.Run("ordinary write to the fence page faults", func(t *testing.T) {
		r, _ := fenceRig(t)
		ring := guestRing(r, 1)
		w := ring.Emit(pf, pm4.WriteMem(fenceVA, 0xBAD))
		img := ringImage(1)
		img.VMID, img.FenceAddr = vmTestVMID, fenceVA
		mustMap(t, r, 2, img)
		r.CP.Kick(2, w)
		saved, st := waitStopped(t, r, 2)
		if st != cp.Halted || saved.Error != abi.CP_ERROR_TRANSLATION || saved.ErrorAddr != fenceVA || saved.Rptr != 2 {
			t.Fatalf("stopped %v with error %d at %#x, rptr %d", st, saved.Error, saved.ErrorAddr, saved.Rptr)
		}
		if got := r.Mem.Load64(fenceVA); got != 2 {
			t.Errorf("fence %#x, want 2 (the faulting write must not land)", got)
		}
	})
}
