package device

import (
	"fmt"
	"strings"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/dma"
	"vgpu/irq"
)

// Diagnostics is the device's report for a driver developer: what the driver did that the
// device noticed. `vgpu serve` prints it on SIGUSR1 and at exit; `vgpu run` prints it after
// the guest suite.
type Diagnostics struct {
	Resets, FLRs         uint64
	BARAccessWhileMemOff uint64 // trapped BAR accesses while COMMAND.Memory Space was off
	IRQWithoutBusMaster  uint64 // interrupts not sent because COMMAND.Bus Master was off
	Unclaimed            []bars.UnclaimedAccess
	MisshapenRegAccesses uint64 // register accesses that were not aligned 4- or 8-byte
	DoorbellRings        uint64
	SelftestDMAs         uint32
	IRQErrors            uint64 // interrupts refused (vector out of range)
	DMA                  dma.Stats
	IRQ                  irq.Stats
	GPU                  gpuDiagnostics
}

// Diagnostics returns the current counters.
func (d *Device) Diagnostics() Diagnostics {
	un, bad := d.regs.Diagnostics()
	d.selftest.mu.Lock()
	done := d.selftest.completed
	d.selftest.mu.Unlock()
	return Diagnostics{
		Resets:               d.stats.resets.Load(),
		FLRs:                 d.stats.flrs.Load(),
		BARAccessWhileMemOff: d.stats.barAccessWhileMemOff.Load(),
		IRQWithoutBusMaster:  d.stats.irqWithoutBusMaster.Load(),
		Unclaimed:            un,
		MisshapenRegAccesses: bad,
		DoorbellRings:        d.doorbells.Rings(),
		SelftestDMAs:         done,
		IRQErrors:            d.stats.irqErrors.Load(),
		GPU:                  d.gpu.diagnostics(),
		DMA:                  d.mem.Stats(),
		IRQ:                  d.irqs.Stats(),
	}
}

// String renders the report as indented text.
func (g Diagnostics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "resets: %d (FLR: %d)\n", g.Resets, g.FLRs)
	fmt.Fprintf(&b, "BAR accesses with memory decoding off: %d\n", g.BARAccessWhileMemOff)
	fmt.Fprintf(&b, "interrupts suppressed with bus mastering off: %d\n", g.IRQWithoutBusMaster)
	fmt.Fprintf(&b, "misshapen register accesses: %d\n", g.MisshapenRegAccesses)
	fmt.Fprintf(&b, "unclaimed register offsets: %d\n", len(g.Unclaimed))
	for _, u := range g.Unclaimed {
		name := abi.RegisterNames[u.Offset]
		if name == "" {
			name = "(no register)"
		}
		fmt.Fprintf(&b, "  %#06x %-24s %d accesses\n", u.Offset, name, u.Count)
	}
	fmt.Fprintf(&b, "doorbell rings: %d\n", g.DoorbellRings)
	fmt.Fprintf(&b, "self-test DMAs completed: %d\n", g.SelftestDMAs)
	fmt.Fprintf(&b, "dma: %+v\n", g.DMA)
	fmt.Fprintf(&b, "irq: %+v (refused: %d)\n", g.IRQ, g.IRQErrors)
	b.WriteString(g.GPU.String())
	return b.String()
}
