package gpuvm

import (
	"vgpu/engine"
	"vgpu/trace"
)

// The VM's timeline (package trace): a "VM fault" instant on the faulting queue's HQD track
// (the device track for an access of no queue), and a "TLB invalidate" instant on the device
// track for each invalidation with the VMIDs it dropped.

// SetTrace makes the VM record on r (nil: off).
func (v *VM) SetTrace(r *trace.Recorder) { v.trace = r }

func (v *VM) traceFault(a engine.Access, va uint64, write bool, st uint32, retry bool) {
	r := v.trace
	if r == nil {
		return
	}
	t := trace.HQD(a.Slot)
	if a.Slot < 0 || a.Slot >= trace.HQDSlots {
		t = trace.TrackDevice
	}
	name := "VM fault"
	if retry {
		name = "VM fault (retry)"
	}
	r.Instant(t, name, trace.U("va", va), trace.I("vmid", int64(a.VMID)), trace.S("access", accessName(a.Kind, write)),
		trace.S("status", StatusString(st)))
}

func (v *VM) traceInvalidate(vmids uint32, m invMask) {
	if r := v.trace; r != nil {
		r.Instant(trace.TrackDevice, "TLB invalidate", trace.U("vmids", uint64(vmids)), trace.U("what", uint64(m)))
	}
}
