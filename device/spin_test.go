package device

import (
	"strings"
	"testing"

	"vgpu/abi"
	"vgpu/bars"
)

// TestSpinReported: a driver polling a register that never changes is named once in the
// diagnostics, by its abi name; a write re-arms it.
func TestSpinReported(t *testing.T) {
	r := newRig(t)
	r.enable(false)
	poll := func(n int) {
		for range n {
			r.reg(abi.REG_SCRATCH_0) // through the client: the device has one worker
		}
	}
	poll(bars.SpinThreshold - 1)
	if s := r.dev.Diagnostics().Spins; s.Warnings != 0 {
		t.Fatalf("%d spins before the threshold", s.Warnings)
	}
	poll(1)
	g := r.dev.Diagnostics()
	if g.Spins.Warnings != 1 || len(g.Spins.Active) != 1 || g.Spins.Active[0].Name != "REG_SCRATCH_0" {
		t.Fatalf("spins %+v", g.Spins)
	}
	if s := g.String(); !strings.Contains(s, "register spins:") || !strings.Contains(s, "REG_SCRATCH_0") {
		t.Fatalf("report lacks the spin:\n%s", s)
	}
	r.setReg(abi.REG_SCRATCH_0, 0)
	if s := r.dev.Diagnostics().Spins; len(s.Active) != 0 {
		t.Fatalf("still active after a write: %+v", s)
	}
	poll(bars.SpinThreshold)
	if s := r.dev.Diagnostics().Spins; s.Warnings != 2 {
		t.Fatalf("%d warnings after a re-armed spin, want 2", s.Warnings)
	}
}
