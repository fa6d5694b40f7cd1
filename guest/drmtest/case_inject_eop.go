package main

import (
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// The rules of inject_eop_lost: the boot's first end-of-pipe IV never reaches the IH ring.
const injectEOPLostRules = "iv.drop:src=CP_EOP,n=1"

// injectEOPLost: a kernel-queue job (SUBMIT, drm_sched) whose EOP interrupt is lost (the rule
// drops the boot's first EOP IV, which is this job's: the case runs alone in its boot). Its
// RELEASE_MEM still wrote the fence, so the driver's fallback timer finds it in memory and
// signals it: the job completes without error, well within the job timeout, with no queue
// reset, and the driver counts the lost interrupt. The next job is signalled by its interrupt.
func injectEOPLost(t *T) {
	needInjection(t, injectEOPLostRules)
	d := openDev(t)
	const fallback, timeouts = "kernel queue fallback:", "timeouts"
	lost0 := debugfsCount(t, "vgpu_mes", fallback)
	to0 := debugfsCount(t, "vgpu_mes", timeouts)
	k := newKQ(t, d)
	dst, err := d.NewBuffer(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RW, 4096, true)
	t.Check(err, "destination buffer")

	start := time.Now()
	k.run(t, pm4.WriteMem(dst.VA, 0xE0F1))
	took := time.Since(start).Round(time.Millisecond)
	if got := *dst.U32(0); got != 0xE0F1 {
		t.Errorf("the job wrote %#x, want 0xe0f1", got)
	}
	lost := debugfsCount(t, "vgpu_mes", fallback)
	t.Logf("the job with its EOP interrupt dropped completed after %v; fences signalled from memory %d -> %d", took, lost0, lost)
	if lost != lost0+1 {
		t.Errorf("fences the fallback signalled: %d -> %d, want +1: the EOP IV came, so the device does not run with %s", lost0, lost, injectEOPLostRules)
	}
	if n := debugfsCount(t, "vgpu_mes", timeouts); n != to0 {
		t.Errorf("kernel-queue job timeouts %d -> %d: the lost interrupt was taken for a hang", to0, n)
	}

	// The next job: its interrupt comes (the rule is spent), the fallback has nothing to do.
	k.run(t, pm4.WriteMem(dst.VA+8, 0xE0F2))
	if got := *dst.U32(8); got != 0xE0F2 {
		t.Errorf("the second job wrote %#x, want 0xe0f2", got)
	}
	if n := debugfsCount(t, "vgpu_mes", fallback); n != lost {
		t.Errorf("the second job needed the fallback too (%d -> %d): its interrupt did not come", lost, n)
	}
}
