package vfiouser_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// TestFullQueueLosesNoCommand is the interleaving that stalled the hostile suite's doorbell
// flood for 5 s: the executor is busy, a helper reads (a DMA reply is awaited), the client
// floods posted writes until the command queue is full and the helper waits for room; the
// executor then drains the whole queue and leaves before the helper runs again. The helper
// must then execute its command itself: appending it to the queue with no executor left would
// leave it unanswered until the next command arrived, which would then overtake it. The last
// posted write must land before the register read that follows it.
func TestFullQueueLosesNoCommand(t *testing.T) {
	waiting := make(chan struct{})
	var once sync.Once
	restore := vfiouser.SetQueueWaitHook(
		func() { once.Do(func() { close(waiting) }) },
		func(executing func() bool) {
			deadline := time.Now().Add(waitLong)
			for executing() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		})
	defer restore()

	dev, c := newPair(t, vfiousertest.ClientOptions(vfiousertest.WithoutDMAService()))
	peer := waitPeer(t, dev)
	release := make(chan struct{})
	dev.mu.Lock()
	dev.unmapHook = func() { <-release } // the executor is busy until the test says
	dev.mu.Unlock()
	dmaErr := make(chan error, 1)
	go func() { dmaErr <- peer.DMARead(0x3000, make([]byte, 8)) }()
	req, err := c.Recv(waitLong)
	if err != nil || req.Cmd != vfiouser.CmdDMARead {
		t.Fatalf("want the DMA_READ request, got %v (%v)", req, err)
	}

	unmapID := c.NextID()
	if err := c.Send(vfiouser.Header{ID: unmapID, Cmd: vfiouser.CmdDMAUnmap}, dmaUnmapPayload(24, 0, 0x3000, 0x1000), nil); err != nil {
		t.Fatal(err)
	}
	writes := vfiouser.CommandQueueDepth + 1 // the last one finds the queue full
	for i := 1; i <= writes; i++ {
		if err := c.PostWrite(regTrap, 0, u32(uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-waiting:
	case <-time.After(waitLong):
		t.Fatal("the reader never waited for room in the command queue")
	}
	close(release)

	got := make([]byte, 4)
	if err := c.Read(regTrap, 0, got); err != nil {
		t.Fatalf("register read after a full queue: %v", err)
	}
	if v := binary.LittleEndian.Uint32(got); v != uint32(writes) {
		t.Fatalf("register reads %d after %d posted writes, want %d: a queued command was overtaken (or lost)", v, writes, writes)
	}
	if m, err := c.Recv(waitLong); err != nil || m.ID != unmapID || m.IsError() {
		t.Fatalf("DMA_UNMAP reply: %v (%v)", m, err)
	}
	reply := append(le64(le64(nil, 0x3000), 8), make([]byte, 8)...)
	if err := c.Reply(req, 0, reply); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, <-dmaErr, 0)
}
