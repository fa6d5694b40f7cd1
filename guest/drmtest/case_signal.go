package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"vgpu/abi"
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// waitFence is the wait a queue emits for a fence USERQ_WAIT returned. AMD's waiters use
// WAIT_REG_MEM64 (pm4.WaitFence64); vgpu's CP does not execute it, so this is the 32-bit
// WAIT_REG_MEM ≥ on the low dword, exact while the value fits in 32 bits (checked).
func waitFence(f drm.UserqFenceInfo) ([]uint32, error) {
	if f.Value>>32 != 0 {
		return nil, fmt.Errorf("fence value %#x does not fit the 32-bit wait", f.Value)
	}
	return pm4.WaitRegMem{Function: pm4.FuncGE, Space: pm4.SpaceMem, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS,
		Addr: f.Va, Ref: uint32(f.Value), Mask: 0xFFFFFFFF, Interval: 4}.Encode(), nil
}

// userqSignalWait: process B's queue runs a job held on a gate and SIGNALs a syncobj this
// process (A) created and passed to B as an fd; A's queue waits on that fence (USERQ_WAIT's
// address/value pair, a wait in A's own ring) before writing a marker. The marker must not
// appear before B's job finishes, and must appear after.
func userqSignalWait(t *T) {
	d := openDev(t)
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	fd, err := d.SyncobjExport(s)
	t.Check(err, "syncobj export")
	f := os.NewFile(uintptr(fd), "syncobj")
	b, err := startChild("signal", nil, f)
	f.Close()
	t.Check(err, "start process B")
	defer b.wait(jobTimeout)
	words, err := b.expect("signaled", jobTimeout)
	t.Check(err, "process B")
	bEnd, _ := strconv.ParseUint(words[0], 10, 64)

	q := newQueue(t, d, drm.QueueConfig{})
	fences, err := d.Wait(q.ID, []uint32{s})
	t.Check(err, "USERQ_WAIT on B's syncobj")
	if len(fences) != 1 {
		t.Fatalf("USERQ_WAIT returned %d fences for one pending user-queue fence: %+v", len(fences), fences)
	}
	if fences[0].Value != bEnd || fences[0].Va == 0 {
		t.Errorf("USERQ_WAIT gave {va %#x, value %d}; B's SIGNAL was at wptr %d", fences[0].Va, fences[0].Value, bEnd)
	}
	w, err := waitFence(fences[0])
	t.Check(err, "wait packet")
	end, err := q.Job(w, pm4.WriteMem(q.ScratchVA(0), 0xA11))
	t.Check(err, "submit the waiting job")
	time.Sleep(300 * time.Millisecond)
	if got := q.Scratch(0); got != 0 {
		t.Errorf("A's marker %#x is written while B's job is still held", got)
	}
	t.Check(b.say("go"), "tell B")
	_, err = b.expect("done", jobTimeout)
	t.Check(err, "process B")
	t.Check(q.WaitUserFence(end, jobTimeout), "A's job after B's fence")
	if got := q.Scratch(0); got != 0xA11 {
		t.Errorf("A's marker %#x after B's fence, want 0xa11", got)
	}
	t.Check(d.SyncobjWait([]uint32{s}, jobTimeout, 0), "wait on the shared syncobj")
	t.Check(b.wait(jobTimeout), "process B")
}

// childSignal is process B: fd 3 is A's syncobj. Its job waits for a gate word the CPU sets
// on "go"; SIGNAL puts the queue's fence into the syncobj.
func childSignal(args []string) error {
	d, err := drm.Open(drm.RenderNode)
	if err != nil {
		return err
	}
	defer d.Close()
	h, err := d.SyncobjImport(3)
	if err != nil {
		return err
	}
	q, err := d.NewQueue(drm.QueueConfig{})
	if err != nil {
		return err
	}
	end, err := q.Job(pm4.WaitMem(q.ScratchVA(0), 1))
	if err != nil {
		return err
	}
	if err := d.Signal(q.ID, []uint32{h}, nil); err != nil {
		return err
	}
	tell("signaled %d", end)
	if l := hear(); l != "go" {
		return fmt.Errorf("B heard %q, want go", l)
	}
	q.SetScratch(0, 1) // open the gate
	if err := q.WaitUserFence(end, jobTimeout); err != nil {
		return err
	}
	tell("done")
	hear() // A closes our stdin when it is finished with the fence
	return nil
}
