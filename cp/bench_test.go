package cp_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// BenchmarkWriteData1 measures the packet rate of a stream of one-dword WRITE_DATA packets
// to memory (the cheapest real packet) through the in-memory Memory: b.N packets in all. The
// ring is filled once with a lap of packets ending in an interrupting fence and a NOP to the
// ring's end; each lap is resubmitted by moving wptr one ring further, and the lap's IV ends
// it; a last, partial lap makes the total exactly b.N. It checks the packet count, the IVs
// and what the writes left in memory.
func BenchmarkWriteData1(b *testing.B) {
	elapsed := benchWriteData(b, b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "packets/s") // ns/op is ns per packet
}

// benchWriteData runs total one-dword WRITE_DATA packets (BenchmarkWriteData1's stream),
// checks them and returns the time they took.
func benchWriteData(b *testing.B, total int) time.Duration {
	const (
		qs      = 16 // 2^17 dwords = 512 KiB
		ringVA  = 0x100000
		dataVA  = 0x10000
		fenceVA = 0x20000
		slots   = 1024 // WRITE_DATA i writes i to dataVA + (i%slots)*4
		wdDw    = 5    // dwords of a one-dword WRITE_DATA
	)
	r := cptest.NewRig(b, 4<<20)
	ring := r.StartQueue(1, cptest.QueueConfig{Base: ringVA, QueueSize: qs})
	perLap := 0
	for ring.Wptr()+wdDw+8+1 <= ring.Size {
		ring.WriteMem(dataVA+uint64(perLap%slots)*4, uint32(perLap))
		perLap++
	}
	ring.Fence(fenceVA, 1, 0, true)
	ring.Nop(int(ring.Size - ring.Wptr()))
	lap := perLap + 2 // packets per full lap
	full, rest := total/lap, total%lap
	ivs := full
	b.ResetTimer()
	start := time.Now()
	for l := 1; l <= full; l++ {
		ring.SetWptr(uint64(l) * ring.Size)
		ring.Kick()
		if !r.IVs.Wait(l, cptest.Timeout) {
			b.Fatal("lap did not finish")
		}
	}
	if rest > 0 {
		// A partial lap: the first rest packets (writes, then perhaps the fence); it is
		// done when the queue has consumed them.
		w := uint64(full)*ring.Size + uint64(min(rest, perLap)*wdDw)
		if rest > perLap {
			w += 8
			ivs++
		}
		ring.SetWptr(w)
		ring.Kick()
		ring.WaitIdle(b)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got := r.CP.Stats().Packets; got != uint64(total) {
		b.Fatalf("%d packets executed, want %d", got, total)
	}
	if n := r.IVs.Len(); n != ivs {
		b.Fatalf("%d IVs, want %d", n, ivs)
	}
	if ivs > 0 && r.Mem.Load32(fenceVA) != 1 {
		b.Fatal("fence not written")
	}
	written := rest
	if full > 0 {
		written = perLap
	}
	for j := 0; j < min(slots, written); j++ {
		if v := r.Mem.Load32(dataVA + uint64(j)*4); v%slots != uint32(j) {
			b.Fatalf("data slot %d holds %d", j, v)
		}
	}
	return elapsed
}

// BenchmarkDMADataCopy measures DMA_DATA copies (through the in-memory Memory, 64 KiB
// chunks) against a Go copy of the same size; "x-go-copy" is DMA time / copy time. Both
// copies are checked.
func BenchmarkDMADataCopy(b *testing.B) {
	const maxPacket = 32 << 20 // BYTE_COUNT is 26 bits: 64 MiB is two packets
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			src, dst := uint64(1<<20), uint64(1<<20+size)
			r := cptest.NewRig(b, 2<<20+2*size)
			ring := r.StartQueue(1, cptest.QueueConfig{Base: 0x10000, QueueSize: 10})
			goSrc, goDst := make([]byte, size), make([]byte, size)
			for i := range goSrc { // a pattern, so the checks below can fail
				goSrc[i] = byte(i*7 + i>>12)
			}
			r.Mem.SetBytes(src, goSrc)
			copyOnce := func(i int) {
				for off := 0; off < size; off += maxPacket {
					ring.Emit(pm4.DMACopy(dst+uint64(off), src+uint64(off), uint32(min(maxPacket, size-off))))
				}
				ring.Submit(pm4.Fence(0x8000, uint32(i), 0, true))
				if !r.IVs.Wait(i, cptest.Timeout) {
					b.Fatal("copy did not finish")
				}
			}
			// Warm both sides up (first touch of the destination pages is not what is measured).
			copyOnce(1)
			copy(goDst, goSrc)
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for i := 2; i <= b.N+1; i++ {
				copyOnce(i)
			}
			dma := time.Since(start)
			b.StopTimer()
			if !bytes.Equal(r.Mem.Bytes(dst, size), goSrc) {
				b.Fatal("DMA_DATA copy differs from its source")
			}
			start = time.Now()
			for i := 0; i < b.N; i++ {
				copy(goDst, goSrc)
			}
			goCopy := time.Since(start)
			if !bytes.Equal(goDst, goSrc) {
				b.Fatal("Go copy differs from its source")
			}
			b.ReportMetric(float64(dma)/float64(goCopy), "x-go-copy")
		})
	}
}

// BenchmarkWakeLatency measures how late a goroutine that sleeps 100 µs in a loop wakes up
// (the stand-in for the transport answering a trapped register read) while 16 queues are
// active: "idle16" with empty rings, "selfkick16" with rings that re-kick themselves forever
// (see cptest.Ring.SelfKick). It reports the median and p99 lateness in µs and the CP's
// packet rate meanwhile. (An idle Go process wakes a sub-millisecond sleeper about 1 ms
// late: the poller sleeps in whole milliseconds; busy Ps check timers more often.)
func BenchmarkWakeLatency(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := map[bool]string{false: "idle16", true: "selfkick16"}[busy]
		b.Run(name, func(b *testing.B) {
			r := cptest.NewRig(b, memSize)
			r.RouteCPBlocks()
			for slot := 1; slot <= 16; slot++ {
				ring := r.StartQueue(slot, queueConfig(slot))
				if busy {
					ring.SelfKick(dataBase + uint64(slot)*4)
					ring.Kick()
				}
			}
			start := r.CP.Stats()
			const nap = 100 * time.Microsecond
			late := make([]time.Duration, b.N)
			b.ResetTimer()
			t0 := time.Now()
			for i := range late {
				t := time.Now()
				time.Sleep(nap)
				late[i] = time.Since(t) - nap
			}
			b.StopTimer()
			window := time.Since(t0)
			s := r.CP.Stats()
			for slot := 1; slot <= 16; slot++ {
				if q := s.Queues[slot]; !q.Active || q.State == abi.HQD_STATE_HALTED {
					b.Fatalf("slot %d stopped: %+v", slot, q)
				}
			}
			if busy {
				// Every self-kicking queue keeps running laps (they take turns).
				cptest.Eventually(b, "every self-kicker to progress", func() bool {
					now := r.CP.Stats()
					for slot := 1; slot <= 16; slot++ {
						if now.Queues[slot].Rptr <= start.Queues[slot].Rptr {
							return false
						}
					}
					return true
				})
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2].Nanoseconds())/1e3, "p50-late-µs")
			b.ReportMetric(float64(late[len(late)*99/100].Nanoseconds())/1e3, "p99-late-µs")
			b.ReportMetric(float64(s.Packets-start.Packets)/window.Seconds(), "cp-packets/s")
		})
	}
}

// BenchmarkSwitch measures one switch of a slot between two mapped queues as the scheduler
// makes it — Preempt, wait for the stop (Notify), Saved, Release, Map of the other queue,
// wait until it is running (idle, Notify) — beside the same run's cost of 20 one-dword
// WRITE_DATA packets (BenchmarkWriteData1's stream), the bound for a switch. Each
// queue carries execution state (user data, a fence value) that must survive every switch.
func BenchmarkSwitch(b *testing.B) {
	b.Run("switch", func(b *testing.B) {
		woke := make(chan struct{}, 1)
		r := cptest.NewRig(b, 4<<20, func(c *cp.Config) {
			c.Notify = func(int) {
				select {
				case woke <- struct{}{}:
				default:
				}
			}
		})
		const slot = 1
		imgs := [2]cp.Image{}
		for k := range imgs {
			base := uint64(0x10000 + k*0x8000)
			imgs[k] = cp.Image{Base: base, Control: 10 << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT, Rptr: 100, Wptr: 100}
			imgs[k].Exec.UserData[3], imgs[k].Exec.Fence = uint32(k+1), uint64(k+7)
		}
		// One watchdog for the whole run: a timer per wait would cost more than the switch.
		stuck := time.NewTimer(time.Minute)
		defer stuck.Stop()
		wait := func(done func() bool) {
			for !done() {
				select {
				case <-woke:
				case <-stuck.C:
					b.Fatal("the slot did not switch")
				}
			}
		}
		if err := r.CP.Map(slot, imgs[0]); err != nil {
			b.Fatal(err)
		}
		wait(func() bool { return r.CP.Queue(slot).Idle })
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cur := i & 1
			r.CP.Preempt(slot)
			var st cp.StopState
			wait(func() bool { imgs[cur], st = r.CP.Saved(slot); return st != cp.Running })
			if st != cp.Preempted {
				b.Fatalf("stopped as %v", st)
			}
			r.CP.Release(slot)
			if err := r.CP.Map(slot, imgs[1-cur]); err != nil {
				b.Fatal(err)
			}
			wait(func() bool { return r.CP.Queue(slot).Idle })
		}
		b.StopTimer()
		for k, img := range imgs {
			if img.Exec.UserData[3] != uint32(k+1) || img.Exec.Fence != uint64(k+7) || img.Rptr != 100 {
				b.Fatalf("queue %d lost its state: %+v", k, img)
			}
		}
	})
	b.Run("switch-busy", func(b *testing.B) {
		// Each queue runs one WRITE_DATA between switches: the switch then includes waking
		// the slot's goroutine for the queue mapped in (and the packet: ~1/20 of the bound).
		woke := make(chan struct{}, 1)
		r := cptest.NewRig(b, 4<<20, func(c *cp.Config) {
			c.Notify = func(int) {
				select {
				case woke <- struct{}{}:
				default:
				}
			}
		})
		const slot, step = 1, 8 // WRITE_DATA (5 dwords) + NOP (3): 256 steps a 2048-dword ring
		imgs := [2]cp.Image{}
		for k := range imgs {
			qc := cptest.QueueConfig{Base: uint64(0x10000 + k*0x8000), QueueSize: 10}
			ring := r.NewRing(slot, qc)
			for ring.Wptr() < ring.Size {
				ring.Emit(pm4.WriteMem(0x100000+uint64(k)*4, uint32(k+1)), pm4.Nop(3))
			}
			imgs[k] = cp.Image{Base: qc.Base, Control: 10 << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT}
		}
		stuck := time.NewTimer(time.Minute)
		defer stuck.Stop()
		wait := func(done func() bool) {
			for !done() {
				select {
				case <-woke:
				case <-stuck.C:
					b.Fatal("the slot did not switch")
				}
			}
		}
		if err := r.CP.Map(slot, imgs[0]); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cur := i & 1
			w := imgs[cur].Wptr + step
			r.CP.Kick(slot, w)
			wait(func() bool { q := r.CP.Queue(slot); return q.Idle && q.Rptr == w })
			r.CP.Preempt(slot)
			var st cp.StopState
			wait(func() bool { imgs[cur], st = r.CP.Saved(slot); return st != cp.Running })
			if st != cp.Preempted || imgs[cur].Rptr != w {
				b.Fatalf("stopped as %v at %d, want preempted at %d", st, imgs[cur].Rptr, w)
			}
			r.CP.Release(slot)
			if err := r.CP.Map(slot, imgs[1-cur]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if r.Mem.Load32(0x100000) != 1 || b.N > 1 && r.Mem.Load32(0x100004) != 2 {
			b.Fatal("the queues' packets did not run")
		}
	})
	b.Run("writedata20", func(b *testing.B) {
		benchWriteData(b, 20*b.N) // ns/op: 20 packets
	})
}
