package hostile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// Where client 1's three kinds of leftover work aim, inside sys.
const (
	isoLoop  = sysIOVA + 0x100000 // (a) the self-kicking WRITE_DATA loop: 52 bytes
	isoFill  = sysIOVA + 0x200000 // (b) the 4 MiB DMA_DATA fill
	isoDirty = sysIOVA + 0x700000 // (c) the finished job whose 256 KiB stay dirty in L2

	isoLoopBytes  = 13 * 4
	isoFillBytes  = 4 << 20
	isoDirtyBytes = 256 << 10

	isoObserve = time.Second // how long client 2 watches its memory before it resets
)

// attackDisconnectIsolation is issue 7's client-isolation scenario. Client 1 leaves three
// kinds of work behind when it disconnects: (a) a self-kicking WRITE_DATA loop through L2, (b)
// a 4 MiB DMA_DATA fill queued behind a WAIT_REG_MEM on VRAM, and (c) a finished job whose
// 256 KiB are still dirty in L2. Client 2 connects, DMA_MAPs zero-filled memory at the same
// IOVAs and watches it for isoObserve before it resets the device: it must stay all zero. The
// wait of (b) is satisfied 100 ms into that window by a write to VRAM through client 1's
// still-mapped BAR0 — it stands for anything that can wake a wait after the disconnect (a
// timer, another engine, a stale QEMU) and makes the scenario deterministic. A disconnect must
// stop every engine and drop the L2's lines for system memory (counted in L2_DISCARDED), so
// none of it can reach the next client's memory. The suite's checks then reset the device and
// run the ring test with client 2.
func attackDisconnectIsolation(t *testing.T, e *env) {
	d1 := e.d
	gate := uint64(vMarker + 2*64 + 32)
	d1.setVRAM32(gate, 0)

	// (c) A job that fills 256 KiB through L2 and fences without a write-back: it is done,
	// and its data is only in L2.
	job, err := d1.startQueue(3, queueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	d1.setVRAM32(vFence+3*64, 0)
	if err := job.submit(pm4.DMAFill(gartSys(isoDirty), 0xCCCCCCCC, isoDirtyBytes),
		pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data32, Addr: fb(vFence + 3*64), Data: 1}.Encode()); err != nil {
		t.Fatal(err)
	}
	if state, code, err := job.settle(livenessTimeout); err != nil || d1.vramU32(vFence+3*64) != 1 {
		t.Fatalf("setup: job (c) did not finish: %s (%v)", describeState(state, code), err)
	}
	dirty, err := d1.reg(abi.REG_L2_DIRTY_LINES)
	if err != nil {
		t.Fatal(err)
	}
	if dirty < isoDirtyBytes/abi.L2_LINE_BYTES {
		t.Fatalf("setup: L2_DIRTY_LINES %d after a 256 KiB fill through L2, want ≥ %d", dirty, isoDirtyBytes/abi.L2_LINE_BYTES)
	}

	// (a) The self-kicking loop: 13 dwords through L2 each pass (hits after the first, so it
	// does not need memory while nobody is connected), and the clock into VRAM to show it runs.
	loopData := make([]uint32, isoLoopBytes/4)
	for i := range loopData {
		loopData[i] = 0xAAAAAAAA
	}
	if _, err := d1.selfKicking(1, pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: gartSys(isoLoop), Data: loopData}.Encode(),
		clockTo(fb(vMarker+64))); err != nil {
		t.Fatal(err)
	}

	// (b) The fill, queued behind a wait on the gate; its fence writes L2 back.
	fill, err := d1.startQueue(2, queueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fill.submit(pm4.WaitMem(fb(gate), 1), pm4.DMAFill(gartSys(isoFill), 0xBBBBBBBB, isoFillBytes),
		pm4.Fence(fb(vFence+2*64), 1, 0, false)); err != nil {
		t.Fatal(err)
	}
	m0 := d1.vramU32(vMarker + 64)
	for deadline := time.Now().Add(livenessTimeout); d1.vramU32(vMarker+64) == m0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("setup: the self-kicking loop (a) did not run within %v", livenessTimeout)
		}
	}
	if state, code, _ := d1.awaitState(2, abi.HQD_STATE_WAITING, livenessTimeout); state != abi.HQD_STATE_WAITING {
		t.Fatalf("setup: queue (b) is %s, want WAITING on its gate", describeState(state, code))
	}
	discarded0, _ := d1.reg(abi.REG_L2_DISCARDED)

	// Client 1 goes away; its BAR0 mapping stays in this process.
	old := e.mem
	oldSnap := old.snapshot()
	d1.c.Close()
	e.more = append(e.more, func() { d1.bar.Close() })
	e.d = nil

	// Client 2: a new VM with zero-filled RAM at the same IOVAs.
	mem2, err := newGuestMem(defaultAreas(), true)
	if err != nil {
		t.Fatal(err)
	}
	e.more = append(e.more, mem2.close)
	d2, err := redial(e.srv.socket)
	if err != nil {
		t.Fatalf("client 2: %v", err)
	}
	e.d, e.mem = d2, mem2
	mem2.allow(ringTestIOVA, abi.PTE_PAGE_SIZE)
	if err := d2.attach(mem2); err != nil {
		t.Fatalf("client 2: %v", err)
	}
	mapped := time.Now()

	// Watch client 2's memory, opening (b)'s gate 100 ms in.
	firstSeen := map[string]time.Duration{}
	gateOpened := false
	for time.Since(mapped) < isoObserve {
		if !gateOpened && time.Since(mapped) >= 100*time.Millisecond {
			d1.setVRAM32(gate, 1)
			gateOpened = true
		}
		for _, r := range isoRegions(mem2) {
			if _, seen := firstSeen[r.name]; !seen && !isZero(mem2.b[r.off:r.off+r.n]) {
				firstSeen[r.name] = time.Since(mapped)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	discarded, err := d2.reg(abi.REG_L2_DISCARDED)
	if err != nil {
		t.Fatal(err)
	}
	if len(firstSeen) > 0 {
		var b strings.Builder
		for _, r := range isoRegions(mem2) {
			if at, ok := firstSeen[r.name]; ok {
				fmt.Fprintf(&b, "\n  %s: %d bytes non-zero, first seen %v after client 2's DMA_MAP", r.name, nonZero(mem2.b[r.off:r.off+r.n]), at.Round(time.Millisecond))
			}
		}
		t.Errorf("client 1's work wrote into client 2's memory before client 2 reset the device:%s", b.String())
	}
	for _, p := range mem2.check() {
		t.Errorf("client 2's memory: %s", p)
	}
	mem2.accept()
	mem2.allow(ringTestIOVA, abi.PTE_PAGE_SIZE)
	for _, p := range old.changedSince(oldSnap, "client 1's memory changed after it disconnected (the server kept its mappings)") {
		t.Error(p)
	}
	if discarded-discarded0 < isoDirtyBytes/abi.L2_LINE_BYTES {
		t.Errorf("L2_DISCARDED went from %d to %d across the disconnect; client 1 left ≥ %d dirty lines of system memory, which must be discarded and counted",
			discarded0, discarded, isoDirtyBytes/abi.L2_LINE_BYTES)
	}
	t.Logf("L2 dirty lines before the disconnect: %d; L2_DISCARDED %d → %d", dirty, discarded0, discarded)
}

type isoRegion struct {
	name   string
	off, n uint64
}

// isoRegions names the parts of client 2's memory by which of client 1's work aims there.
func isoRegions(m *guestMem) []isoRegion {
	sys := m.area("sys")
	at := func(iova, n uint64) (uint64, uint64) { return sys.off + (iova - sysIOVA), n }
	var out []isoRegion
	add := func(name string, iova, n uint64) {
		o, l := at(iova, n)
		out = append(out, isoRegion{name, o, l})
	}
	add("(a) the self-kicking WRITE_DATA loop's 52 bytes", isoLoop, isoLoopBytes)
	add("(b) the 4 MiB DMA_DATA fill", isoFill, isoFillBytes)
	add("(c) the 256 KiB of dirty L2 lines", isoDirty, isoDirtyBytes)
	for _, a := range m.areas {
		if a.name != "sys" {
			out = append(out, isoRegion{"area " + a.name, a.off, a.size})
		}
	}
	return out
}

func isZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

func nonZero(b []byte) int {
	n := 0
	for _, v := range b {
		if v != 0 {
			n++
		}
	}
	return n
}
