package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// userqKill: a process with four queues busy (one held on a gate with a SIGNAL fence
// pending, three submitting as fast as they can) is killed with SIGKILL; afterwards debugfs
// shows no client, and the driver-wide BO counts are back where they were.
func userqKill(t *T) {
	if c, err := readDebugfs("vgpu_clients"); err != nil || !strings.Contains(c, "no clients") {
		t.Fatalf("vgpu_clients before the case does not say \"no clients\" (%v):\n%s", err, c)
	}
	before, err := readDebugfs("vgpu_bos")
	t.Check(err, "debugfs")
	c, err := startChild("kill", nil)
	t.Check(err, "start the child")
	words, err := c.expect("running", jobTimeout)
	t.Check(err, "child")
	clients, _ := readDebugfs("vgpu_clients")
	if !strings.Contains(clients, "pid "+words[0]+" ") {
		t.Errorf("vgpu_clients does not name the running child (pid %s):\n%s", words[0], clients)
	}
	time.Sleep(100 * time.Millisecond)
	t.Check(c.cmd.Process.Kill(), "SIGKILL")
	c.cmd.Wait()
	var last string
	deadline := time.Now().Add(jobTimeout)
	for time.Now().Before(deadline) {
		last, err = readDebugfs("vgpu_clients")
		if err == nil && strings.Contains(last, "no clients") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(last, "no clients") {
		t.Errorf("%v after the kill vgpu_clients still says:\n%s", jobTimeout, last)
	}
	var after string
	for time.Now().Before(deadline) { // BOs go once their fences signal
		if after, err = readDebugfs("vgpu_bos"); err == nil && after == before {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after != before {
		t.Errorf("vgpu_bos differs after the killed process is gone:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// childKill is the process userq_kill kills: it never returns by itself.
func childKill(args []string) error {
	d, err := drm.Open(drm.RenderNode)
	if err != nil {
		return err
	}
	var qs []*drm.Queue
	for i := 0; i < 4; i++ {
		q, err := d.NewQueue(drm.QueueConfig{})
		if err != nil {
			return err
		}
		qs = append(qs, q)
	}
	if _, err := qs[0].Job(pm4.WaitMem(qs[0].ScratchVA(0), 1)); err != nil {
		return err
	}
	s, err := d.SyncobjCreate(0)
	if err != nil {
		return err
	}
	if err := d.Signal(qs[0].ID, []uint32{s}, nil); err != nil {
		return err
	}
	for i := 0; ; i++ {
		for _, q := range qs[1:] {
			end, err := q.Job(pm4.WriteMem(q.ScratchVA(1), uint32(i)))
			if err != nil {
				return err
			}
			if i%64 == 63 {
				if err := q.WaitUserFence(end, jobTimeout); err != nil {
					return err
				}
			}
		}
		if i == 256 {
			tell("running %s", strconv.Itoa(os.Getpid()))
		}
	}
}
