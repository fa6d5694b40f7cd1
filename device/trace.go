package device

import "vgpu/trace"

// The device's timeline (package trace; docs/trace.md): Config.Trace reaches every engine
// here, and the device itself records on the device track its life-cycle events (disconnect,
// DEVICE_RESET, FLR, close) and on the IH ring's track each interrupt it signals.

// wireTrace hands the recorder to the engines (newGPU, after they are built).
func (d *Device) wireTrace() {
	r := d.cfg.Trace
	if r == nil {
		return
	}
	g := &d.gpu
	g.cache.SetTrace(r)
	g.vm.SetTrace(r)
	g.ih.SetTrace(r)
	g.cus.SetTrace(r)
	g.cp.SetTrace(r)
	g.mes.SetTrace(r)
}

// traceInterrupt records an interrupt the IH ring raises (before Bus Master and the MSI-X or
// INTx choice decide whether and how it is sent).
func (d *Device) traceInterrupt(vector int) {
	if r := d.cfg.Trace; r != nil {
		r.Instant(trace.TrackIH, "interrupt", trace.I("vector", int64(vector)),
			trace.U("bus master", b2u(d.busMaster.Load())), trace.U("msix", b2u(d.msixOn.Load())))
	}
}

// traceLifecycle records a cut-off: every engine stops and forgets its work.
func (d *Device) traceLifecycle(ev lifecycleEvent) {
	if r := d.cfg.Trace; r != nil {
		r.Instant(trace.TrackDevice, string(ev))
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
