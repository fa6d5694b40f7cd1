package main

import (
	"regexp"
	"strconv"
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"

	"golang.org/x/sys/unix"
)

// injected is --inject-rules: the device runs with the inject cases' rules. vgpu run passes it
// only to the boot it starts with a case's rules (cmd/vgpu/inject_suite.go), so without it an
// inject case skips, and with it but without its rules it fails: none passes vacuously.
var injected bool

// injectCaseRules are the inject cases and their rules (cmd/vgpu's drmInjectCases names the
// same; a test there keeps the two equal).
var injectCaseRules = map[string]string{
	"inject_mes_hang": injectMESHangRules,
	"inject_eop_lost": injectEOPLostRules,
}

// needInjection skips the case unless the boot gives the device its rules.
func needInjection(t *T, rules string) {
	if !injected {
		t.Skipf("needs injection: the device must run with --inject '%s' (vgpu run boots it so)", rules)
	}
}

// debugfsCount reads the number after prefix in one of the driver's debugfs files.
func debugfsCount(t *T, file, prefix string) int {
	s, err := readDebugfs(file)
	t.Check(err, "read %s", file)
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + ` (\d+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s has no %q line:\n%s", file, prefix, s)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// The rules of inject_mes_hang: the boot's second ADD_QUEUE frame never completes.
const injectMESHangRules = "mes.hang:op=ADD_QUEUE,n=2"

// injectMESHang: "MES failed to respond". A queue is created, runs a job and is given one
// that never finishes; the next CREATE's ADD_QUEUE frame is never answered (the rule): the
// ioctl fails with ETIMEDOUT after the driver's MES timeout, and the driver resets the
// scheduler and adds the first queue again with its pending work discarded (QUERY_STATUS:
// RESET; its next job runs). A new queue can be created and runs a job.
func injectMESHang(t *T) {
	needInjection(t, injectMESHangRules)
	d := openDev(t)
	resets := debugfsCount(t, "vgpu_mes", "scheduler resets:")
	old := newQueue(t, d, drm.QueueConfig{})
	run(t, old, pm4.WriteMem(old.ScratchVA(0), 0x01D))
	// Work that can never finish (no SIGNAL: no hang timer): the reset must discard it.
	endless, err := old.Job(pm4.WaitMem(old.ScratchVA(2), 0xDEAD))
	t.Check(err, "submit an endless job to the first queue")
	if f := old.UserFence(); f >= endless {
		t.Fatalf("the endless job's fence %d reached its end %d", f, endless)
	}

	bos, err := readDebugfs("vgpu_bos")
	t.Check(err, "read vgpu_bos")
	start := time.Now()
	lost, err := d.NewQueue(drm.QueueConfig{})
	took := time.Since(start).Round(time.Millisecond)
	if err == nil {
		lost.Free()
		t.Fatalf("CREATE succeeded in %v: its ADD_QUEUE was answered, so the device does not run with %s", took, injectMESHangRules)
	}
	if drm.Errno(err) != unix.ETIMEDOUT {
		t.Fatalf("CREATE with its ADD_QUEUE unanswered: %v after %v, want ETIMEDOUT", err, took)
	}
	t.Logf("CREATE with its ADD_QUEUE unanswered: %v after %v", err, took)
	// The frame went with the old ring: the failed CREATE freed its MQD, gang context and GART
	// window rather than leaking them for a scheduler that might still run it.
	if after, err := readDebugfs("vgpu_bos"); err != nil || after != bos {
		t.Errorf("vgpu_bos before the failed CREATE:\n%s\nafter it (%v):\n%s", bos, err, after)
	}
	if n := debugfsCount(t, "vgpu_mes", "scheduler resets:"); n != resets+1 {
		t.Errorf("vgpu_mes: %d scheduler resets, want %d", n, resets+1)
	}

	// The first queue: added again by the driver's recovery work, with RESET.
	var st uint32
	for deadline := time.Now().Add(hangWait); ; time.Sleep(20 * time.Millisecond) {
		st, err = d.QueryStatus(old.ID)
		t.Check(err, "QUERY_STATUS of the queue created before the reset")
		if st&drm.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET != 0 || time.Now().After(deadline) {
			break
		}
	}
	if st != drm.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET {
		t.Errorf("QUERY_STATUS of the queue created before the reset: flags %#x, want RESET (%#x) only", st, drm.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET)
	}
	// Its endless job was discarded with the old scheduler: the next job runs.
	run(t, old, pm4.WriteMem(old.ScratchVA(1), 0x01D2))
	if got := old.Scratch(1); got != 0x01D2 {
		t.Errorf("the first queue's job after the reset wrote %#x, want 0x1d2", got)
	}
	if f := old.UserFence(); f <= endless {
		t.Errorf("the first queue's fence %d after its job, want beyond the discarded job's end %d", f, endless)
	}

	// A new queue works: the scheduler answers again.
	q := newQueue(t, d, drm.QueueConfig{})
	run(t, q, pm4.WriteMem(q.ScratchVA(0), 0x600D))
	if got := q.Scratch(0); got != 0x600D {
		t.Errorf("the new queue's job wrote %#x, want 0x600d", got)
	}
	if st, err := d.QueryStatus(q.ID); err != nil || st != 0 {
		t.Errorf("QUERY_STATUS of the new queue: %#x, %v; want 0", st, err)
	}
	if n := debugfsCount(t, "vgpu_mes", "queues added again:"); n < 1 {
		t.Errorf("vgpu_mes: %d queues added again after the reset, want at least 1", n)
	}
	t.Check(q.Free(), "FREE of the new queue")
	t.Check(old.Free(), "FREE of the first queue")
}
