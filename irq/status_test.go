package irq

import "testing"

// TestVectors: per vector, interrupts delivered to its eventfd, and one held pending while the
// vector cannot be sent (no eventfd, masked).
func TestVectors(t *testing.T) {
	e := newEnv(t, 4)
	for _, s := range []step{set(assignFds, IndexMSIX, 0, 1, "a"), trigger(0), trigger(0), trigger(2)} {
		s(e)
	}
	v := e.c.Vectors()
	want := []VectorStatus{
		{Vector: 0, Delivered: 2, Eventfd: true},
		{Vector: 1},
		{Vector: 2, Pending: true},
		{Vector: 3},
	}
	if len(v) != len(want) {
		t.Fatalf("%d vectors", len(v))
	}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("vector %d: %+v, want %+v", i, v[i], want[i])
		}
	}
}
