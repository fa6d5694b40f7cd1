package hostile

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// attackRingGarbage runs rings and indirect buffers of random dwords and of random packets on
// every queue at once, four rounds: uniformly random rings; rings of random packets; a ring
// calling an IB of random dwords in VRAM; a ring calling an IB of random packets in guest
// memory (GART). Random packets aim at the edges of every aperture and mapping, and at the sys
// and nofd areas, which they may change; small and top are out of their reach and must not
// change. Every queue must stop on DEQUEUE_RESET within the liveness deadline.
func attackRingGarbage(t *testing.T, e *env) {
	d, r := e.d, e.rng
	e.mem.allowArea("sys")
	e.mem.allowArea("nofd")
	for round := 0; round < 4; round++ {
		qs := make([]*queue, numSlots)
		for slot := range qs {
			q, err := d.startQueue(slot, queueOpts{log2: 10})
			if err != nil {
				t.Fatalf("round %d slot %d: %v", round, slot, err)
			}
			qs[slot] = q
			switch round {
			case 0:
				q.emit(randDwords(r, int(q.size)))
			case 1:
				q.emit(randStream(r, int(q.size)))
			case 2:
				ib := vIB + uint64(slot)*ibStride
				words := randDwords(r, 4096)
				for i, w := range words {
					binary.LittleEndian.PutUint32(d.vram[ib+4*uint64(i):], w)
				}
				q.emit(pm4.IndirectBuffer{Addr: fb(ib), Size: 4096}.Encode())
			case 3:
				iova := uint64(sysIOVA + 0x100000 + slot*0x4000)
				words := randStream(r, 4096)
				b := make([]byte, 4*len(words))
				for i, w := range words {
					binary.LittleEndian.PutUint32(b[4*i:], w)
				}
				e.mem.set(iova, b)
				q.emit(pm4.IndirectBuffer{Addr: gartSys(iova), Size: 4096}.Encode(), pm4.Nop(int(q.size)-4))
			}
			if err := q.kick(); err != nil {
				t.Fatalf("round %d slot %d: doorbell: %v", round, slot, err)
			}
		}
		lat := probeLatency(t, d, 300*time.Millisecond)
		states := map[string]int{}
		for _, q := range qs {
			state, code, err := q.settle(200 * time.Millisecond)
			if err != nil {
				t.Fatalf("round %d slot %d: %v", round, q.slot, err)
			}
			states[describeState(state, code)]++
		}
		for _, q := range qs {
			if err := d.dequeue(q.slot, abi.HQD_DEQUEUE_RESET); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		t.Logf("round %d: queue states %s; register reads meanwhile: %v", round, histogram(states), lat)
	}
}

// latency summarises register round trips measured while an attack runs.
type latency struct {
	n             int
	median, worst time.Duration
}

func (l latency) String() string {
	return fmt.Sprintf("%d reads, median %v, worst %v", l.n, l.median.Round(time.Microsecond), l.worst.Round(time.Microsecond))
}

// probeLatency reads ID_MAGIC for about d, failing the test if a read errs (the client's
// timeout is the liveness deadline).
func probeLatency(t *testing.T, dr *driver, d time.Duration) latency {
	t.Helper()
	var all []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		lat, err := dr.alive()
		if err != nil {
			t.Fatalf("register read while the attack runs: %v (after %v)", err, lat)
		}
		all = append(all, lat)
		time.Sleep(200 * time.Microsecond)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return latency{}
	}
	return latency{n: len(all), median: all[len(all)/2], worst: all[len(all)-1]}
}

func histogram(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
