package cp_test

import (
	"sync/atomic"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// concurrency wraps a Memory and records the most calls in progress at once: with
// MaxRunning n, no more than n queue goroutines may be executing.
type concurrency struct {
	engine.Memory
	now, peak atomic.Int32
}

func (m *concurrency) enter() {
	n := m.now.Add(1)
	for p := m.peak.Load(); n > p && !m.peak.CompareAndSwap(p, n); p = m.peak.Load() {
	}
}

func (m *concurrency) Read(a engine.Access, va uint64, p []byte) error {
	m.enter()
	defer m.now.Add(-1)
	return m.Memory.Read(a, va, p)
}

func (m *concurrency) Write(a engine.Access, va uint64, p []byte) error {
	m.enter()
	defer m.now.Add(-1)
	return m.Memory.Write(a, va, p)
}

// TestBudgetFairness: 16 compute queues that always have work (self-kicking rings, half of
// them moving 128 KiB per lap with DMA_DATA) cannot starve an innocent graphics queue: every
// one of its fences completes, every self-kicker keeps making progress, they take turns
// (yields are counted), and no more than MaxRunning of them execute at once.
func TestBudgetFairness(t *testing.T) {
	for _, running := range []int{1, 2} {
		t.Run(map[int]string{1: "one-at-a-time", 2: "two-at-a-time"}[running], func(t *testing.T) {
			var mem *concurrency
			r := cptest.NewRig(t, memSize, func(c *cp.Config) {
				mem = &concurrency{Memory: c.Memory}
				c.Memory = mem
				c.MaxRunning = running
			})
			r.RouteCPBlocks()
			for slot := 1; slot <= 16; slot++ {
				ring := r.StartQueue(slot, queueConfig(slot))
				var extra [][]uint32
				if slot > 8 {
					src := uint64(dataBase + 0x100000)
					extra = append(extra, pm4.DMACopy(src+uint64(slot-8)*0x20000, src, 0x20000))
				}
				ring.SelfKick(dataBase+uint64(slot)*4, extra...)
				ring.Kick()
			}
			before := r.CP.Stats()
			innocent := r.StartQueue(0, queueConfig(0))
			const fences = 200
			if got := fenceLoop(t, r, innocent, dataBase+0x1000, fences); got != fences {
				t.Fatalf("innocent queue completed %d of %d fences", got, fences)
			}
			after := r.CP.Stats()
			for slot := 1; slot <= 16; slot++ {
				q := after.Queues[slot]
				if q.State == abi.HQD_STATE_HALTED || !q.Active {
					t.Fatalf("self-kicking slot %d stopped: %+v", slot, q)
				}
			}
			// Everyone keeps moving: each self-kicker finishes more laps.
			cptest.Eventually(t, "every self-kicker to run more laps", func() bool {
				s := r.CP.Stats()
				for slot := 1; slot <= 16; slot++ {
					if s.Queues[slot].Rptr <= after.Queues[slot].Rptr+2*uint64(ringSize()) {
						return false
					}
				}
				return true
			})
			if after.Yields == before.Yields {
				t.Error("no yields counted while 16 queues always had work")
			}
			if p := mem.peak.Load(); p > int32(running) {
				t.Errorf("%d queues executed at once, MaxRunning %d", p, running)
			}
			t.Logf("yields %d, turn waits %d, packets %d, peak concurrency %d", after.Yields, after.TurnWaits, after.Packets, mem.peak.Load())
		})
	}
}

func ringSize() int { return 1 << (ringQS + 1) }
