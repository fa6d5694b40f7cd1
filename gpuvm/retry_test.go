package gpuvm

import (
	"errors"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

const retryCntl = abi.REG_VM_CONTEXT_CNTL__RETRY_PERMISSION_OR_INVALID_PAGE_FAULT_MASK

func retryOf(t *testing.T, err error) *RetryFault {
	t.Helper()
	var r *RetryFault
	if !errors.As(err, &r) {
		t.Fatalf("got %v, want a *RetryFault", err)
	}
	var tf engine.TranslationFaulter
	if errors.As(err, &tf) {
		t.Fatal("a retry fault must not be a TranslationFaulter")
	}
	return r
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The whole retry flow: fault, one IV per page, the driver maps, invalidates and acks, the
// replay completes.
func TestRetryFaultFlow(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(retryCntl))
	w.vm.WriteReg(regPASIDLUT0+4, 0x77)
	_, err := w.vm.Translate(acc(1), va1+0x20, true)
	r := retryOf(t, err)
	ivs := w.takeIVs()
	if len(ivs) != 1 {
		t.Fatalf("%d IVs", len(ivs))
	}
	iv := ivs[0]
	if iv.Data[1]&abi.VM_IV_DW5_RETRY_MASK == 0 || iv.Data[1]&abi.VM_IV_DW5_WRITE_MASK == 0 ||
		ivAddr(iv) != va1 || int(iv.Data[2]) != r.CAMIndex || iv.PASID != 0x77 || iv.VMID != 1 {
		t.Errorf("retry IV %+v (cam %d)", iv, r.CAMIndex)
	}
	if w.vm.ReadReg(regFaultStatus) != 0 {
		t.Error("a retry fault was latched as a no-retry fault")
	}
	// The same page again: waits on the same entry, no IV; another page of the same VMID: a
	// new entry.
	_, err = w.vm.Translate(acc(1), va1+0x800, false)
	if r2 := retryOf(t, err); r2.CAMIndex != r.CAMIndex || r2.RetryReady() != r.RetryReady() {
		t.Errorf("duplicate fault got cam %d", r2.CAMIndex)
	}
	_, err = w.vm.Translate(acc(1), va1+pageSize, false)
	other := retryOf(t, err)
	if len(w.takeIVs()) != 1 || other.CAMIndex == r.CAMIndex {
		t.Error("second page: want one new IV and entry")
	}
	if st := w.vm.ReadReg(regCAMStatus); st&abi.REG_VM_RETRY_CAM_STATUS__USED_MASK != 2 {
		t.Errorf("CAM_STATUS %#x", st)
	}
	if closed(r.RetryReady()) {
		t.Fatal("ready before the ack")
	}
	w.tab.set(0, va1, pg1|rw)
	w.flush(1)
	if closed(r.RetryReady()) {
		t.Fatal("an invalidation is not an ack")
	}
	w.vm.WriteReg(regCAMAck, uint32(iv.Data[2]))
	if !closed(r.RetryReady()) || closed(other.RetryReady()) {
		t.Fatal("ack released the wrong waiters")
	}
	if tr, err := w.vm.Translate(acc(1), va1+0x20, true); err != nil || tr.PA != vram(pg1+0x20) {
		t.Fatalf("replay: %+v %v", tr, err)
	}
	// A page that stays unmapped faults again after the ack, with a fresh IV.
	w.vm.WriteReg(regCAMAck, uint32(other.CAMIndex))
	_, err = w.vm.Translate(acc(1), va1+pageSize, false)
	retryOf(t, err)
	if len(w.takeIVs()) != 1 {
		t.Error("refault after the ack sent no IV")
	}
	// An ack of a free entry is counted, and changes nothing.
	w.vm.WriteReg(regCAMAck, CAMEntries+5)
	if w.vm.Stats().BogusAcks != 1 {
		t.Error("bogus ack not counted")
	}
	if w.vm.ReadReg(regRetryFaults) != 3 {
		t.Errorf("RETRY_FAULTS %d", w.vm.ReadReg(regRetryFaults))
	}
}

// When every CAM entry is used, further faults wait without an IV until one is freed.
func TestRetryCAMFull(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(retryCntl))
	var first *RetryFault
	for i := range CAMEntries {
		_, err := w.vm.Translate(acc(1), uint64(i)<<12, false)
		if r := retryOf(t, err); i == 0 {
			first = r
		}
	}
	if n := len(w.takeIVs()); n != CAMEntries {
		t.Fatalf("%d IVs for %d pages", n, CAMEntries)
	}
	_, err := w.vm.Translate(acc(1), 0x1000_0000, false)
	full := retryOf(t, err)
	if full.CAMIndex != -1 || len(w.takeIVs()) != 0 {
		t.Fatalf("fault with a full CAM: cam %d, and an IV was sent", full.CAMIndex)
	}
	if w.vm.ReadReg(regCAMStatus)&abi.REG_VM_RETRY_CAM_STATUS__WAITING_FULL_MASK == 0 {
		t.Error("WAITING_FULL not set")
	}
	w.vm.WriteReg(regCAMAck, uint32(first.CAMIndex))
	if !closed(full.RetryReady()) {
		t.Fatal("freeing an entry did not wake the waiter")
	}
	_, err = w.vm.Translate(acc(1), 0x1000_0000, false)
	if r := retryOf(t, err); r.CAMIndex != first.CAMIndex || len(w.takeIVs()) != 1 {
		t.Errorf("replay got cam %d", r.CAMIndex)
	}
}

// Reprogramming the context or resetting the hub releases waiters (they replay and fault
// against the new state); only RETRY_OTHER_FAULT makes range faults retry.
func TestRetryRelease(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(retryCntl))
	w.enable(2, cntl(retryCntl))
	_, err := w.vm.Translate(acc(1), va1, false)
	r1 := retryOf(t, err)
	_, err = w.vm.Translate(acc(2), va1, false)
	r2 := retryOf(t, err)
	w.vm.WriteContext(1, ctxCntl, cntl(retryCntl)|abi.REG_VM_CONTEXT_CNTL__RETRY_OTHER_FAULT_MASK) // policy only
	if closed(r1.RetryReady()) {
		t.Error("a policy-only CNTL write released waiters")
	}
	w.vm.WriteContext(1, ctxCntl, 0)
	if !closed(r1.RetryReady()) || closed(r2.RetryReady()) {
		t.Error("disabling vmid 1 released the wrong waiters")
	}
	var f *Fault
	if _, err := w.vm.Translate(acc(1), va1, false); !errors.As(err, &f) {
		t.Errorf("disabled context never retries: %v", err)
	}
	w.vm.Reset()
	if !closed(r2.RetryReady()) {
		t.Error("Reset did not release")
	}
	w.enable(1, cntl(retryCntl))
	if _, err := w.vm.Translate(acc(1), 1<<50, false); !errors.As(err, &f) {
		t.Errorf("range fault without RETRY_OTHER_FAULT: %v", err)
	}
	w.enable(1, cntl(retryCntl|abi.REG_VM_CONTEXT_CNTL__RETRY_OTHER_FAULT_MASK))
	_, err = w.vm.Translate(acc(1), 1<<50, false)
	retryOf(t, err)
	// The no-retry marker never retries.
	w.tab.set(0, va1, abi.PTE_EXECUTABLE_MASK|abi.PDE_PTE_MASK|abi.PTE_TF_MASK)
	if _, err := w.vm.Translate(acc(1), va1, false); !errors.As(err, &f) {
		t.Errorf("no-retry marker: %v", err)
	}
}

func TestDropRetryFaults(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(retryCntl))
	_, err := w.vm.Translate(acc(1), va1, false)
	r := retryOf(t, err)
	w.vm.DropRetryFaults()
	if !closed(r.RetryReady()) || w.vm.ReadReg(regCAMStatus)&abi.REG_VM_RETRY_CAM_STATUS__USED_MASK != 0 {
		t.Fatal("the CAM survived DropRetryFaults")
	}
	if w.vm.ReadContext(1, ctxCntl) != cntl(retryCntl) {
		t.Error("DropRetryFaults changed the configuration")
	}
}
