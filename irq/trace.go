package irq

import (
	"vgpu/abi"
	"vgpu/engine"
	"vgpu/trace"
)

// The IH ring's timeline (package trace): an "IV" instant on the IH ring's track for each IV
// pushed (client, source, ring id, VMID), or "IV dropped" when the ring is disabled. A CP EOP
// IV ends the flow its fence continued (a doorbell's, cp/trace.go).

// SetTrace makes the IH record on r (nil: off). Call it before any IV is pushed.
func (h *IH) SetTrace(r *trace.Recorder) { h.trace = r }

// traceIV runs for every IV: it inlines to a nil check when recording is off.
func (h *IH) traceIV(iv *engine.IV, dropped bool) {
	if h.trace != nil {
		h.traceIVOn(iv, dropped)
	}
}

func (h *IH) traceIVOn(iv *engine.IV, dropped bool) {
	r := h.trace
	name := "IV"
	if dropped {
		name = "IV dropped (ring disabled)"
	}
	args := [...]trace.Arg{trace.U("client", uint64(iv.Client)), trace.U("source", uint64(iv.Source)),
		trace.U("ring", uint64(iv.RingID)), trace.U("vmid", uint64(iv.VMID))}
	if iv.Client == abi.IH_CLIENT_GRBM_CP && iv.Source == abi.IH_SRC_CP_EOP {
		if f := r.TakeRingFlow(iv.RingID); f != 0 {
			r.FlowEnd(trace.TrackIH, name, f, args[:]...)
			return
		}
	}
	r.Instant(trace.TrackIH, name, args[:]...)
}
