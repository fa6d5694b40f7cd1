package device

import "vgpu/bars"

// writeSpins is the spin detector's part of the report: how many times the driver polled a
// register that never changed, and which ones it still polls.
func writeSpins(r *report, s bars.SpinStats) {
	r.line("register spins", "%d (%d unchanged reads without a write)", s.Warnings, s.Threshold)
	for _, sp := range s.Active {
		r.sub("%#07x %-28s still polled: value %#x, %d reads", sp.Offset, sp.Name, sp.Value, sp.Reads)
	}
}

// spins reads the spin detector under the register lock, which serialises it with the
// register accesses it watches.
func (d *Device) spins() bars.SpinStats {
	d.regMu.Lock()
	defer d.regMu.Unlock()
	return d.regs.Spins()
}
