package device

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/l2"
)

// The device's life-cycle contract (docs/design.md states it for every engine): a
// disconnect, DEVICE_RESET, FLR and Close each
//
//  1. cut the device off from guest memory: Bus Master off in dma.Space, which waits for
//     copies through mmap in flight and stops message accesses in flight (dma's revocations);
//  2. stop every engine without waiting for any goroutine: cp.Reset revokes every queue
//     activation (its goroutine can never call out again), the self-test forgets its transfer
//     (whose write is refused by the cut-off epoch it recorded), the IH drops its backlog and
//     ring setup, and the L2's maintenance pass forgets its request;
//  3. wait (bounded, one bound for all) until no engine work that began before the cut-off is
//     in flight: CP call-outs, a self-test transfer, an IH ring write. After step 1 each fails
//     or finishes within a memory copy, so this takes microseconds; one that does not finish
//     in time is counted (Diagnostics) and can still never act again;
//  4. return the state to its reset value under the register lock.
//
// The vfio-user worker never waits on the client in any of this: nothing in steps 1-4 sends a
// message or waits for a goroutine that might.
//
// What survives: VRAM contents (and the L2's VRAM data, written back on disconnect), across
// every event, as on hardware where a function reset does not clear memory. A disconnect is
// not a reset: configuration stays (registers such as the GART, scratch, CONFIG; config space)
// for the next client, but every engine stops and forgets its work (the CP's queues return to
// power-on, the IH drops its backlog and ring setup, the self-test forgets its transfer) and
// COMMAND.Bus Master is cleared, so DMA and MSIs stay off until the next client's guest
// enables them. The L2's lines of system memory cannot be written back once the client's
// mappings are gone: they are dropped and counted (L2_DISCARDED).

// quiesceTimeout bounds step 3. Exceeding it means an engine was stuck in something other than
// memory (a bug): the reset goes on, the straggler is fenced off by its generation.
const quiesceTimeout = 500 * time.Millisecond

// lifecycleEvent names a cut-off for logs and counters.
type lifecycleEvent string

const (
	eventDisconnect  lifecycleEvent = "disconnect"
	eventDeviceReset lifecycleEvent = "DEVICE_RESET"
	eventFLR         lifecycleEvent = "FLR"
	eventClose       lifecycleEvent = "close"
)

// stopEngines is steps 1-3.
func (d *Device) stopEngines(ev lifecycleEvent) {
	d.traceLifecycle(ev)
	d.mem.SetBusMaster(false)
	d.gpu.mes.Reset() // before the CP: a revoked scheduler maps nothing onto the freed slots
	d.gpu.cp.Reset()
	d.gpu.vm.DropRetryFaults() // their queues were just revoked: free the CAM for the next client
	d.selftest.reset()
	d.gpu.ih.Reset()
	d.gpu.cache.StopMaintenance()
	// Each engine is waited for in turn, all within one bound.
	deadline := time.Now().Add(quiesceTimeout)
	left := func() time.Duration { return max(time.Until(deadline), 0) }
	var stuck []string
	if !d.gpu.cp.Quiesce(left()) {
		stuck = append(stuck, "cp")
	}
	if !d.gpu.mes.Quiesce(left()) {
		stuck = append(stuck, "mes")
	}
	// The queues' dispatches were killed with them; whatever still runs (a queue revoked
	// before it saw its kill) is killed here, and waited for.
	if !d.gpu.cus.Reset(left()) {
		stuck = append(stuck, "compute")
	}
	if !d.selftest.wait(left()) {
		stuck = append(stuck, "selftest")
	}
	if !d.gpu.ih.Quiesce(left()) {
		stuck = append(stuck, "ih")
	}
	if len(stuck) > 0 {
		d.stats.stragglers.Add(1)
		d.rl.Warn("lifecycle-straggler", "an engine was still at work after the cut-off; it is fenced off (generation, cut-off epoch)",
			"event", string(ev), "engines", strings.Join(stuck, ","), "waited", quiesceTimeout)
	}
}

// resetState is step 4: everything but config space, DMA mappings and VRAM returns to its
// power-on state.
func (d *Device) resetState() {
	d.regMu.Lock()
	defer d.regMu.Unlock()
	d.gpu.reset()
	d.doorbells.Reset()
	d.scratch = [8]uint32{}
	d.resetMSIXTable()
	d.irqs.Reset()
}

// dropClientMemory keeps what the L2 holds of VRAM and drops what it holds of the departing
// client's memory (see the contract above). Cached translations go too, in every VMID, as a
// GMC_VM_INVALIDATE of all of them would drop them: a GART entry or page-table entry read from
// the departed client's memory describes memory that is gone, and the next client's IOVAs
// mean other pages; its driver may reprogram the contexts without invalidating first.
func (d *Device) dropClientMemory() {
	d.gpu.cache.WriteBack(&l2.Range{Domain: engine.DomainVRAM, Addr: 0, Size: d.cfg.VRAMSize})
	d.gpu.cache.DropLost(&l2.Range{Domain: engine.DomainSystem, Addr: 0, Size: math.MaxUint64})
	d.regMu.Lock()
	d.gpu.mmu.WriteReg(abi.REG_GMC_VM_INVALIDATE-abi.BLOCK_GMC_BASE, 1<<abi.VM_CONTEXTS-1)
	d.regMu.Unlock()
}

// engineGate lets Close unmap VRAM only once no engine goroutine is copying to or from it: an
// engine's VRAM access enters the gate, Close shuts it and waits for those inside. It costs
// two atomic adds per access, on one of gateStripes counters chosen by the VRAM address (each
// on its own cache line), so engines working on different parts of VRAM do not contend.
type engineGate struct {
	stripes [gateStripes]struct {
		inside atomic.Int64
		_      [56]byte
	}
	shut atomic.Bool
}

// gateStripes counters, by 1 MiB of VRAM address.
const (
	gateStripes     = 16
	gateStripeShift = 20
)

// enter admits an access to VRAM at addr, or refuses it (false) once the gate is shut; an
// admitted access calls exit with the stripe enter returned.
func (g *engineGate) enter(addr uint64) (int, bool) {
	i := int(addr >> gateStripeShift % gateStripes)
	in := &g.stripes[i].inside
	in.Add(1)
	if g.shut.Load() {
		in.Add(-1)
		return i, false
	}
	return i, true
}

func (g *engineGate) exit(stripe int) { g.stripes[stripe].inside.Add(-1) }

// empty reports whether no access is inside. After shut, an access that enters backs out at
// once, so a stripe read non-zero only transiently is caught by the next look.
func (g *engineGate) empty() bool {
	for i := range g.stripes {
		if g.stripes[i].inside.Load() != 0 {
			return false
		}
	}
	return true
}

// close shuts the gate and waits up to timeout for accesses inside it; false if some remain.
func (g *engineGate) close(timeout time.Duration) bool {
	g.shut.Store(true)
	deadline := time.Now().Add(timeout)
	for !g.empty() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}
