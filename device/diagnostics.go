package device

import (
	"fmt"
	"runtime"
	"strings"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/cp"
	"vgpu/dma"
	"vgpu/irq"
	"vgpu/mes"
	"vgpu/ratelog"
)

// Diagnostics is the device's report for a driver developer: what the driver did that the
// device noticed. `vgpu serve` prints it on SIGUSR1 and at exit; `vgpu run` prints it after
// the guest suite; all three use String.
type Diagnostics struct {
	Resets, FLRs         uint64
	Disconnects          uint64
	Stragglers           uint64 // cut-offs after which an engine call-out was still in flight
	BARAccessWhileMemOff uint64 // trapped BAR accesses while COMMAND.Memory Space was off
	IRQWithoutBusMaster  uint64 // interrupts not sent because COMMAND.Bus Master was off
	Unclaimed            []bars.UnclaimedAccess
	MisshapenRegAccesses uint64         // register accesses that were not aligned 4- or 8-byte
	Spins                bars.SpinStats // registers the driver polled without a change (bars/spin.go)
	DoorbellRings        uint64
	SelftestDMAs         uint32
	IRQErrors            uint64          // interrupts refused (vector out of range)
	LogLines             []ratelog.Count // the device's rate-limited log lines, by kind
	Goroutines           int
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
		Disconnects:          d.stats.disconnects.Load(),
		Stragglers:           d.stats.stragglers.Load(),
		BARAccessWhileMemOff: d.stats.barAccessWhileMemOff.Load(),
		IRQWithoutBusMaster:  d.stats.irqWithoutBusMaster.Load(),
		Unclaimed:            un,
		MisshapenRegAccesses: bad,
		Spins:                d.spins(),
		DoorbellRings:        d.doorbells.Rings(),
		SelftestDMAs:         done,
		IRQErrors:            d.stats.irqErrors.Load(),
		LogLines:             d.rl.Counts(),
		Goroutines:           runtime.NumGoroutine(),
		GPU:                  d.gpu.diagnostics(),
		DMA:                  d.mem.Stats(),
		IRQ:                  d.irqs.Stats(),
	}
}

// report builds aligned "name: value" lines under section headings.
type report struct{ b strings.Builder }

func (r *report) section(name string) { fmt.Fprintf(&r.b, "%s\n", name) }

func (r *report) line(name, format string, args ...any) {
	fmt.Fprintf(&r.b, "  %-34s %s\n", name+":", fmt.Sprintf(format, args...))
}

func (r *report) sub(format string, args ...any) {
	fmt.Fprintf(&r.b, "    %s\n", fmt.Sprintf(format, args...))
}

// bytesIEC renders a byte count with a binary unit.
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// String renders the report for people: named fields with units, addresses in hex, states and
// errors by their abi names.
func (g Diagnostics) String() string {
	var r report
	r.section("function")
	r.line("resets", "%d (DEVICE_RESET %d, FLR %d), client disconnects %d", g.Resets+g.FLRs, g.Resets, g.FLRs, g.Disconnects)
	r.line("cut-offs with a straggler", "%d", g.Stragglers)
	r.line("BAR accesses, memory decoding off", "%d", g.BARAccessWhileMemOff)
	r.line("interrupts, Bus Master off", "%d not sent", g.IRQWithoutBusMaster)
	r.line("interrupts refused", "%d (vector the function does not have)", g.IRQErrors)
	r.line("misshapen register accesses", "%d (not an aligned 4- or 8-byte access)", g.MisshapenRegAccesses)
	r.line("unclaimed register offsets", "%d", len(g.Unclaimed))
	// A guest that sweeps the BAR touches thousands: list the first few, count the rest.
	const listed = 32
	for i, u := range g.Unclaimed {
		if i == listed {
			r.sub("... and %d more offsets", len(g.Unclaimed)-listed)
			break
		}
		name := abi.RegisterNames[u.Offset]
		if name == "" {
			name = "(no register)"
		}
		r.sub("%#07x %-28s %d accesses", u.Offset, name, u.Count)
	}
	writeSpins(&r, g.Spins)
	r.line("doorbell rings", "%d", g.DoorbellRings)
	r.line("self-test DMAs completed", "%d", g.SelftestDMAs)
	r.line("goroutines", "%d", g.Goroutines)

	r.section("dma (guest memory)")
	r.line("mappings", "%d (%d served by messages), %d backing files, %s mmapped",
		g.DMA.Mappings, g.DMA.MessageMappings, g.DMA.BackingFiles, bytesIEC(g.DMA.BackingBytes))
	r.line("moved", "%s through mmap, %s through DMA messages", bytesIEC(g.DMA.BytesViaMmap), bytesIEC(g.DMA.BytesViaMessages))
	r.line("faults", "%d (unmapped, not permitted, Bus Master off, cut off)", g.DMA.Faults)

	r.section("interrupts")
	var vecs []string
	for v, n := range g.IRQ.Delivered {
		if n != 0 {
			vecs = append(vecs, fmt.Sprintf("%d: %d", v, n))
		}
	}
	if len(vecs) == 0 {
		vecs = []string{"none"}
	}
	r.line("MSI-X delivered, by vector", "%s", strings.Join(vecs, ", "))
	r.line("MSI-X pending (masked)", "%d vectors", g.IRQ.Pending)
	r.line("INTx / ERR signals", "%d / %d", g.IRQ.INTxSignals, g.IRQ.ErrSignals)
	r.line("signals lost", "%d (eventfd write failed, or no ERR eventfd)", g.IRQ.Dropped)

	g.GPU.render(&r)

	var suppressed []string
	var total uint64
	for _, c := range g.LogLines {
		if c.Suppressed != 0 {
			suppressed = append(suppressed, fmt.Sprintf("%s %d", c.Key, c.Suppressed))
			total += c.Suppressed
		}
	}
	r.section("log")
	if total == 0 {
		r.line("lines suppressed by the rate limit", "0")
	} else {
		r.line("lines suppressed by the rate limit", "%d (%s)", total, strings.Join(suppressed, ", "))
	}
	return r.b.String()
}

// render is the GPU core's part of the report.
func (g gpuDiagnostics) render(r *report) {
	c := g.CP
	r.section("cp (command processor)")
	r.line("packets", "%d since reset, %d IB starts", c.Packets, c.IBs)
	r.line("queue halts", "%d", c.Halts)
	r.line("doorbells", "%d (%d matched no queue)", c.Doorbells, c.DoorbellMisses)
	r.line("parked waits", "%d wake-ups, %d re-checks", c.Wakes, c.WaitChecks)
	r.line("HQD writes ignored", "%d (configuration while active)", c.IgnoredWrites)
	r.line("turns", "%d yields at the budget, %d waits for a turn", c.Yields, c.TurnWaits)
	r.line("engine resets", "%d completed, in progress: %s", c.EngineResets, engineNames(c.EngineResetBusy))
	r.line("stale call-outs refused", "%d (goroutines of a reset activation)", c.StaleCallouts)
	r.line("queue goroutines", "%d alive, %d revoked still returning, %d activations refused", c.Live, c.Draining, c.RefusedActivations)
	for slot, q := range c.Queues {
		if !q.Active && q.State == abi.HQD_STATE_IDLE && q.Error == 0 {
			continue
		}
		desc := fmt.Sprintf("queue %2d (%s): %s", slot, slotName(slot), abi.NameOf("HQD_STATE_", uint64(q.State)))
		if q.Error != 0 {
			desc += fmt.Sprintf(", %s at %#x, info %#x", abi.NameOf("CP_ERROR_", uint64(q.Error)), q.ErrorAddr, q.ErrorInfo)
		}
		desc += fmt.Sprintf(", rptr %d wptr %d (dwords), %d fences", q.Rptr, q.Wptr, q.Fences)
		if q.Idle {
			desc += ", idle"
		}
		r.sub("%s", desc)
	}

	m := g.MMU
	r.section("gpummu (GPU address translation)")
	r.line("translation faults", "%d", m.Faults)
	r.line("memory access errors", "%d", m.AccessErrors)
	r.line("TLB", "%d hits, %d misses, %d flushes, %d entries now", m.TLBHits, m.TLBMisses, m.TLBFlushes, m.TLBEntries)

	v := g.VM
	r.section("gpuvm (VMIDs 1-15)")
	r.line("TLB", "%d hits, %d walks (%d from a cached PDE), %d table reads, %d entries now",
		v.TLBHits, v.TLBMisses, v.PDECacheHits, v.TableReads, v.TLBEntries)
	r.line("no-retry faults", "%d (%d to the default page), %d PRT accesses", v.Faults, v.DefaultPage, v.PRT)
	r.line("retry faults", "%d IVs, %d waits (%d for a full CAM), %d acks of free entries",
		v.RetryIVs, v.RetryWaits, v.CAMFullWaits, v.BogusAcks)
	r.line("invalidations", "%d per VMID; strict: %d stale uses", v.Invalidations, v.StaleUses)

	l := g.L2
	r.section("l2 (GPU cache)")
	r.line("lines", "%d of %d resident, %d dirty", l.Lines, l.Capacity, l.DirtyLines)
	r.line("hits / misses", "%d / %d", l.Hits, l.Misses)
	r.line("evictions", "%d", l.Evictions)
	r.line("write-backs", "%d (%d failed: data lost)", l.WriteBacks, l.WriteBackErrors)
	r.line("dirty lines discarded", "%d by GL2_DISCARD, %d whose memory went away", l.Discards, l.Lost)
	r.line("fills that failed", "%d (served uncached)", l.FillErrors)
	r.line("message-served accesses", "%d (never cached)", l.SlowAccesses)
	r.line("strict mode", "%d stale reads, %d dirty fences, last: %s at %#x (queue %d)",
		l.StaleReads, l.DirtyFences, abi.NameOf("L2_EVENT_", uint64(l.LastEvent.Kind)), l.LastEvent.Addr, l.LastEvent.Slot)
	state := "idle"
	if l.Maintenance.Busy {
		state = "busy"
	}
	if l.Maintenance.Failed {
		state += ", last pass failed"
	}
	r.line("L2_CONTROL maintenance", "%s, %d passes completed", state, l.Maintenance.Completed)

	writeMES(r, &g.MES)

	h := g.IH
	r.section("ih (interrupt handler ring)")
	r.line("entries", "%d written, %d pending", h.Entries, h.Pending)
	r.line("entries dropped", "%d (%d ring write errors)", h.Dropped, h.WriteErrors)
	r.line("overflows", "%d", h.Overflows)
	r.line("wptr write-back errors", "%d", h.WritebackErrors)
	r.line("interrupts raised", "%d (%d pushes waited for room)", h.Raised, h.Stalls)
}

// writeMES is the scheduler's part: its state, its last failed frame, and every queue it
// knows — so "my queue's work never completes" has an answer from the host side.
func writeMES(r *report, s *mes.Stats) {
	r.section("mes (scheduler)")
	r.line("state", "%s, owns slots %#x", abi.NameOf("MES_STATE_", uint64(s.State)), s.Owned)
	r.line("frames", "%d completed, %d failed (last: %s in %s)", s.Frames, s.FrameErrors,
		abi.NameOf("MES_ERR_", uint64(s.LastError&abi.REG_MES_LAST_ERROR__REASON_MASK)),
		abi.NameOf("MES_SCH_API_", uint64(s.LastError&abi.REG_MES_LAST_ERROR__OPCODE_MASK>>abi.REG_MES_LAST_ERROR__OPCODE__SHIFT)))
	r.line("placement", "%d maps, %d unmaps, %d doorbells of unmapped queues; %d processes",
		s.Maps, s.Unmaps, s.UnmappedDoorbells, s.Processes)
	for i, q := range s.Queues {
		if i == 32 {
			r.sub("... %d more queues", len(s.Queues)-i)
			break
		}
		st := q.Status
		where := "unmapped"
		if st&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
			where = fmt.Sprintf("slot %d", st&abi.REG_MES_QUERY_STATUS__SLOT_MASK>>abi.REG_MES_QUERY_STATUS__SLOT__SHIFT)
		}
		for _, f := range []struct {
			bit  uint32
			name string
		}{{abi.REG_MES_QUERY_STATUS__HUNG_MASK, "HUNG"}, {abi.REG_MES_QUERY_STATUS__SUSPENDED_MASK, "suspended"},
			{abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK, "has work"}} {
			if st&f.bit != 0 {
				where += ", " + f.name
			}
		}
		r.sub("doorbell %#x: %s, %s, VMID %d, %d maps, %d preemptions, rptr %d", q.Doorbell, where,
			abi.NameOf("MES_PRIORITY_", uint64(st&abi.REG_MES_QUERY_STATUS__PRIORITY_MASK>>abi.REG_MES_QUERY_STATUS__PRIORITY__SHIFT)),
			st&abi.REG_MES_QUERY_STATUS__VMID_MASK>>abi.REG_MES_QUERY_STATUS__VMID__SHIFT, q.Maps, q.Preempts, q.Rptr)
	}
}

// engineNames renders a CP_ENGINE_RESET mask.
func engineNames(mask uint32) string {
	var n []string
	if mask&abi.REG_CP_ENGINE_RESET__GFX_MASK != 0 {
		n = append(n, "GFX")
	}
	if mask&abi.REG_CP_ENGINE_RESET__COMPUTE_MASK != 0 {
		n = append(n, "COMPUTE")
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// slotName says what a queue slot is: the graphics queue or a compute pipe/queue.
func slotName(slot int) string {
	if slot == 0 {
		return "gfx"
	}
	return fmt.Sprintf("compute pipe %d queue %d", (slot-1)/cp.QueuesPerPipe, (slot-1)%cp.QueuesPerPipe)
}
