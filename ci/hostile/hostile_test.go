package hostile

import (
	"testing"
	"time"
)

// attacks is the suite, in the order it runs. Each entry's doc is on its function.
var attacks = []attack{
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
	if testing.Short() {
		t.Skip("attacks a real vgpu server for a minute or two; skipped with -short")
	}
	start := time.Now()
	s := newSuite(t)
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) { s.run(t, a) })
	}
	s.checkGrowth(t)
	t.Logf("suite: %d attacks in %v", len(attacks), time.Since(start).Round(time.Millisecond))
}
