package hostile

import (
	"slices"
	"testing"
	"time"
)

// attacks is the suite, in the order it runs. Each entry's doc is on its function.
var attacks = []attack{
	{"doorbell-after-reset", attackDoorbellAfterReset},
	{"register-garbage", attackRegisterGarbage},
	{"config-garbage", attackConfigGarbage},
	{"ring-garbage", attackRingGarbage},
	{"address-edges", attackAddressEdges},
	{"self-reference", attackSelfReference},
	{"self-kicking-queues", attackSelfKicking},
	{"wait-doorbell-flood", attackWaitFlood},
	{"max-copies", attackMaxCopies},
	{"ih-overflow", attackIHOverflow},
	{"msix-setirqs-garbage", attackIRQGarbage},
	{"unmap-while-busy", attackUnmapBusy},
	{"flr-storm", attackFLRStorm},
	{"disconnect-isolation", attackDisconnectIsolation},
}

// TestHostile runs every attack against one `vgpu serve` (restarted if an attack kills or
// wedges it) and checks at the end that the server did not grow without bound.
func TestHostile(t *testing.T) {
	runSuite(t, attacks)
}

// pollAttacks are the attacks whose doorbells matter, run again against a server that polls
// a doorbell page shared with the client (--doorbell poll): the client rings by storing to it.
var pollAttacks = []string{"doorbell-after-reset", "wait-doorbell-flood", "self-kicking-queues", "flr-storm", "disconnect-isolation"}

func TestHostilePollDoorbells(t *testing.T) {
	var list []attack
	for _, a := range attacks {
		if slices.Contains(pollAttacks, a.name) {
			list = append(list, a)
		}
	}
	runSuite(t, list, "--doorbell", "poll")
}

func runSuite(t *testing.T, list []attack, flags ...string) {
	if testing.Short() {
		t.Skip("attacks a real vgpu server for a minute or two; skipped with -short")
	}
	start := time.Now()
	s := newSuite(t, flags...)
	for _, a := range list {
		t.Run(a.name, func(t *testing.T) { s.run(t, a) })
	}
	s.checkGrowth(t)
	t.Logf("suite: %d attacks in %v", len(list), time.Since(start).Round(time.Millisecond))
}

// attackDoorbellAfterReset runs the ring test, whose doorbell value is the same every time,
// then three times: waits until a polling server has backed off to its longest sleep, resets
// the device and at once runs the ring test again. A doorbell rung after a reset with the
// value it had before the reset must still be delivered (in poll mode the poller's last-seen
// values must not survive the reset).
func attackDoorbellAfterReset(t *testing.T, e *env) {
	if err := e.d.ringTest(e.rng); err != nil {
		t.Fatalf("ring test: %v", err)
	}
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		if err := e.d.c.Reset(); err != nil {
			t.Fatal(err)
		}
		if err := e.d.ringTest(e.rng); err != nil {
			t.Errorf("round %d: the same doorbell value as before DEVICE_RESET, rung right after it: %v", i, err)
		}
	}
}
