package hostile

import (
	"fmt"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// startWorkloads brings the device up and starts queues of every kind of work: a self-kicking
// loop writing guest memory, a ring of 8 MiB fills of guest memory, a parked wait, the
// endless kernel, 64 MiB VRAM copies, and a self-test DMA.
func startWorkloads(d *driver) error {
	if err := d.bringUp(); err != nil {
		return err
	}
	if _, err := d.selfKicking(1, clockTo(gartSys(sysIOVA+0x10000)), clockTo(fb(vMarker+64))); err != nil {
		return err
	}
	q, err := d.startQueue(2, queueOpts{log2: 10})
	if err != nil {
		return err
	}
	for i := 0; i < 140; i++ {
		q.emit(dmaFillDirect(gart(gSys), 0xF1F10000|uint32(i), sysSize))
	}
	if err := q.kick(); err != nil {
		return err
	}
	w, err := d.startQueue(3, queueOpts{})
	if err != nil {
		return err
	}
	if err := w.submit(pm4.WaitMem(fb(vMarker+3*64+32), 0xDEAD_BEEF)); err != nil {
		return err
	}
	k, err := d.startQueue(4, queueOpts{})
	if err != nil {
		return err
	}
	if err := k.submit(pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0), pm4.DispatchDirect(1, 1, 1)); err != nil {
		return err
	}
	c, err := d.startQueue(5, queueOpts{log2: 10})
	if err != nil {
		return err
	}
	for i := 0; i < 140; i++ {
		c.emit(dmaDirect(fb(vBig), fb(vBig+64<<20), maxCount4))
	}
	if err := c.kick(); err != nil {
		return err
	}
	return d.setRegs(append(set64(abi.REG_SELFTEST_DMA_ADDR_LO, sysIOVA+0x100000),
		[2]uint32{abi.REG_SELFTEST_DMA_LEN, abi.SELFTEST_DMA_MAX_LEN}, [2]uint32{abi.REG_SELFTEST_DMA_PATTERN, 0x5E1F0000},
		[2]uint32{abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK})...)
}

// afterFLR checks what an FLR promises once its config write is answered: engines stopped
// (guest memory and the loop's VRAM marker stay still), queues inactive, the GMC and COMMAND
// at power-on values.
func afterFLR(d *driver, mem *guestMem) error {
	snap, marker := mem.snapshot(), d.vramU32(vMarker+64)
	if v, err := d.cfgRead(0x04, 2); err != nil || v&0x6 != 0 {
		return fmt.Errorf("COMMAND %#x (%v) after FLR, want Memory Space and Bus Master off", v, err)
	}
	// The register reads below need Memory Space; Bus Master stays off.
	if err := d.cfgWrite(0x04, 2, 0x0002); err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond)
	if p := mem.changedSince(snap, "guest memory changed after the FLR was answered"); p != nil {
		return fmt.Errorf("%s", p[0])
	}
	if m := d.vramU32(vMarker + 64); m != marker {
		return fmt.Errorf("the self-kicking loop still writes VRAM after the FLR was answered (%#x → %#x)", marker, m)
	}
	for slot := 1; slot <= 5; slot++ {
		if v, err := d.reg(hqd(slot, abi.REG_HQD_ACTIVE)); err != nil || v != 0 {
			return fmt.Errorf("slot %d: HQD_ACTIVE %d (%v) after FLR, want 0", slot, v, err)
		}
	}
	if v, err := d.reg(abi.REG_GMC_GART_CNTL); err != nil || v != 0 {
		return fmt.Errorf("GMC_GART_CNTL %#x (%v) after FLR, want 0", v, err)
	}
	return nil
}

// attackFLRStorm resets the function with FLR over and over while every kind of work runs,
// and checks each time that the reset is real by the time its config write is answered; then
// a burst of posted FLRs back to back while the work runs.
func attackFLRStorm(t *testing.T, e *env) {
	d := e.d
	e.mem.allowArea("sys")
	var worst, total time.Duration
	const rounds = 25
	for i := 0; i < rounds; i++ {
		if err := startWorkloads(d); err != nil {
			t.Fatalf("round %d: starting the work: %v", i, err)
		}
		time.Sleep(time.Duration(1+i%5) * time.Millisecond)
		start := time.Now()
		if err := d.flr(); err != nil {
			t.Fatalf("round %d: FLR: %v", i, err)
		}
		took := time.Since(start)
		worst, total = max(worst, took), total+took
		if err := afterFLR(d, e.mem); err != nil {
			t.Errorf("round %d: %v", i, err)
		}
	}
	t.Logf("%d FLRs with work running: config write answered in %v on average, worst %v", rounds, (total / rounds).Round(time.Microsecond), worst.Round(time.Microsecond))
	// Bursts: ten posted FLRs back to back, five times, with the work running.
	ctl, err := d.cfgRead(d.caps[0x10]+8, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := startWorkloads(d); err != nil {
			t.Fatalf("burst %d: %v", i, err)
		}
		for j := 0; j < 10; j++ {
			if err := d.c.PostWrite(regionConfig, d.caps[0x10]+8, le(ctl | 1<<15)[:2]); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.c.Sync(); err != nil {
			t.Fatalf("burst %d: %v", i, err)
		}
		if err := afterFLR(d, e.mem); err != nil {
			t.Errorf("burst %d: %v", i, err)
		}
	}
}
