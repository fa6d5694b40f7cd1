package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// jobTimeout bounds the wait for one submission's fence.
const jobTimeout = time.Minute

// PacketRate is the CP's rate for 1-dword WRITE_DATA packets to VRAM through the whole device
// (GPU MMU, L2), in packets per second, beside the CP alone running the same packets over
// in-memory stand-ins (what the rest of the device adds). Packets are submitted in chunks of
// up to half the ring, each ending with an interrupting fence; the client writes the next
// chunk while the CP runs the last one, as a driver keeps a ring fed. Every packet is checked to have run: the
// CP's packet counter grows by exactly the packets submitted, and the destination holds the
// last packet's value.
func PacketRate() Scenario {
	return Scenario{
		Name: "CP WRITE_DATA (1 dword) via device", Unit: "packets/s", PerOp: 1,
		Baseline: "CP alone (in-memory stand-ins)", Note: "target ≥ 20 M/s for the CP alone",
		Setup: func() (Pair, error) {
			const ringDwords = 1 << 21 // 8 MiB ring
			rig, err := NewRig(RigConfig{RingDwords: ringDwords})
			if err != nil {
				return Pair{}, err
			}
			bare := newBareCP(ringDwords)
			target := packetTarget{emit: rig.Emit, kick: rig.Kick, waitFence: rig.WaitFence, packets: rig.packets,
				fence: FenceGPU(), dst: abi.GPU_FB_BASE + vramScratch,
				readDst: func() uint32 { return binary.LittleEndian.Uint32(rig.VRAM[vramScratch:]) }}
			dev, base := target.op(ringDwords), bare.target().op(ringDwords)
			// Warm up: a lap of the ring on each side, so its pages are mapped on both ends.
			if err := warmUp(dev, base, ringDwords/len(pm4.WriteMem(0, 0))); err != nil {
				bare.Close()
				rig.Close()
				return Pair{}, err
			}
			return Pair{Dev: dev, Base: base, Close: func() { bare.Close(); rig.Close() }}, nil
		},
	}
}

// packetTarget is a queue that takes packets: the device's through the rig, or the bare CP's.
type packetTarget struct {
	emit      func([]uint32)
	kick      func() error
	waitFence func(seq uint32, timeout time.Duration) error
	packets   func() (uint64, error)
	fence     uint64 // GPU address of the fence dword
	dst       uint64 // GPU address the packets write
	readDst   func() uint32
}

// op submits n WRITE_DATA packets in fenced chunks and checks that each one ran.
func (t packetTarget) op(ringDwords int) Op {
	pkt := pm4.WriteMem(t.dst, 0) // the data dword is last
	fenceDwords := len(pm4.Fence(t.fence, 0, 0, true))
	chunk := (ringDwords/2 - fenceDwords) / len(pkt)
	buf := make([]uint32, 0, ringDwords/2)
	seq, value := uint32(0), uint32(0)
	return func(n int, c Clock) error {
		c.StopTimer()
		before, err := t.packets()
		if err != nil {
			return err
		}
		c.StartTimer()
		first := seq + 1
		for left := n; left > 0; {
			k := min(left, chunk)
			buf = buf[:0]
			for range k {
				value++
				pkt[len(pkt)-1] = value
				buf = append(buf, pkt...)
			}
			seq++
			buf = append(buf, pm4.Fence(t.fence, seq, seq, true)...)
			// The chunk before last used the ring space this one is written to.
			if seq > first {
				if err := t.waitFence(seq-2, jobTimeout); err != nil {
					return err
				}
			}
			t.emit(buf)
			if err := t.kick(); err != nil {
				return err
			}
			left -= k
		}
		if err := t.waitFence(seq, jobTimeout); err != nil {
			return err
		}
		c.StopTimer()
		defer c.StartTimer()
		if err := checkPackets(t.packets, before, uint64(n)+uint64(seq-first+1)); err != nil {
			return err
		}
		if got := t.readDst(); got != value {
			return fmt.Errorf("destination holds %d after the last packet wrote %d", got, value)
		}
		return nil
	}
}

// packets reads the CP's 64-bit packet counter.
func (r *Rig) packets() (uint64, error) {
	lo, err := r.Reg(abi.REG_CP_PACKETS_LO)
	if err != nil {
		return 0, err
	}
	hi, err := r.Reg(abi.REG_CP_PACKETS_HI)
	if err != nil {
		return 0, err
	}
	if lo2, err := r.Reg(abi.REG_CP_PACKETS_LO); err != nil {
		return 0, err
	} else if lo2 < lo { // the low half wrapped between the reads
		return r.packets()
	}
	return uint64(hi)<<32 | uint64(lo), nil
}

// maxCopyBatch is the most bytes of copies one submission queues (and the destination area).
const maxCopyBatch = 64 << 20

// Copy is DMA_DATA system memory → VRAM (uncached, through the GART) in copies of size bytes,
// in MB/s, beside Go's copy of the same bytes between the same mappings. Copies are queued the
// way a driver batches them — up to 64 MiB of copies per submission, each to its own
// destination, one interrupting fence at the end that the client sleeps on. Submissions
// alternate between two sources that differ in every byte, and after each one (outside the
// timed region) every copy's destination is compared with its source, so a copy that did not
// happen, or happened in part, is an error. The Go baseline copies in the same pattern and is
// checked the same way.
//
// The device's figure (and so the ratio) is its engine time, as GPU copy benchmarks time the
// engine: each submission's copies are bracketed by two RELEASE_MEM GPU-clock timestamps (the
// CP's clock counts nanoseconds), and the time between them is what counts. That leaves out
// the submission's two wake-ups — the CP's on the doorbell, the client's on the fence
// interrupt — which the doorbell scenarios measure, and which on a loaded host are the OS
// scheduler's (EngineTimer tells the numbers). The wall-clock figure, doorbell to interrupt,
// is kept in the note, from the same runs. Both sides copy the same bytes between the same
// memory, and each stamp is checked to have been written, in order, inside the submission's
// wall time.
//
// Consecutive submissions write two destination areas in turn (and the sources change every
// second submission, so each destination still changes every time it is written). The check
// reads a whole area on the goroutine that runs the baseline, which leaves that area in its
// core's caches: written again next, it would be a warm destination for the baseline's copy
// and a cold one, held by another core, for the device's, whose copies run on the CP's
// goroutine. With the areas alternating, either side writes an area that a whole other area's
// check has passed through the caches since it was last read.
func Copy(size int) Scenario {
	// A ring that holds a whole area's worth of 4 KiB copies (16 Ki packets of 8 dwords), so
	// a submission's two wake-ups (the doorbell's, the fence interrupt's), which a loaded host
	// can delay by milliseconds, are spread over as many copies as the areas allow.
	const ringDwords = 1 << 18
	dmaPackets := (size + 32<<20 - 1) / (32 << 20)                          // BYTE_COUNT has 26 bits
	batch := max(1, min(maxCopyBatch/size, (ringDwords-64)/(8*dmaPackets))) // 64: stamps and fence
	return Scenario{
		Name: fmt.Sprintf("DMA_DATA copy %s", sizeName(size)), Unit: "MB/s", PerOp: float64(size) / 1e6,
		Baseline: "Go copy", EngineTime: true,
		Note: fmt.Sprintf("engine time (GPU timestamps); %s per submission; target ≥ 0.5× at 4 KiB, ≥ 0.8× from 64 KiB up",
			plural(batch, "copy", "copies")),
		Setup: func() (Pair, error) {
			rig, err := NewRig(RigConfig{RingDwords: ringDwords, GuestBytes: max(2*size, 1<<16)})
			if err != nil {
				return Pair{}, err
			}
			var srcs [2][]byte
			for k := range srcs {
				srcs[k] = rig.Guest.Bytes()[k*size : (k+1)*size]
				for i := range srcs[k] {
					srcs[k][i] = byte(i*7+i>>12) ^ byte(k*0xff)
				}
			}
			dst := func(area, j int) []byte {
				at := vramCopyDst + area*maxCopyBatch + j*size
				return rig.VRAM[at : at+size]
			}
			check := func(what string, sub, copies int) error {
				for j := range copies {
					if !bytes.Equal(dst(sub%2, j), srcs[sub/2%2]) {
						return fmt.Errorf("%s of %d bytes to destination %d produced wrong data", what, size, j)
					}
				}
				return nil
			}
			// sub counts submissions of both sides, so each one's source differs from what
			// the destinations held before it.
			seq, sub := uint32(0), 0
			// The packets of a full submission from each source to each area, encoded once: a
			// driver's cost of writing them is not the copy engine's.
			var packets [4][]uint32 // [sub%4]: area sub%2, source sub/2%2
			for k := range packets {
				srcGPU := uint64(gartBase) + uint64(k/2%2*size)
				for j := range batch {
					dstGPU := uint64(abi.GPU_FB_BASE) + vramCopyDst + uint64(k%2*maxCopyBatch+j*size)
					for off := 0; off < size; off += 32 << 20 {
						packets[k] = append(packets[k], pm4.DMAData{
							SrcSel: abi.PM4_DMA_DATA_SEL_ADDR, DstSel: abi.PM4_DMA_DATA_SEL_ADDR,
							SrcPolicy: abi.PM4_CACHE_POLICY_BYPASS, DstPolicy: abi.PM4_CACHE_POLICY_BYPASS,
							Src: srcGPU + uint64(off), Dst: dstGPU + uint64(off), Count: uint32(min(size-off, 32<<20)), CPSync: true,
						}.Encode()...)
					}
				}
			}
			perCopy := len(packets[0]) / batch
			stamps := newGPUStamps(rig.VRAM, vramStamps)
			dev := func(n int, c Clock) error {
				for left := n; left > 0; sub++ {
					k := min(left, batch)
					start := time.Now()
					stamps.arm()
					rig.Emit(stamps.start)
					rig.Emit(packets[sub%4][:k*perCopy])
					rig.Emit(stamps.end)
					seq++
					rig.Emit(pm4.Fence(FenceGPU(), seq, seq, true))
					if err := rig.Kick(); err != nil {
						return err
					}
					if err := rig.WaitFence(seq, jobTimeout); err != nil {
						return err
					}
					c.StopTimer()
					engine, err := stamps.interval(time.Since(start))
					if err == nil {
						addEngineTime(c, engine)
						err = check("DMA_DATA copy", sub, k)
					}
					c.StartTimer()
					if err != nil {
						return err
					}
					left -= k
				}
				return nil
			}
			base := func(n int, c Clock) error {
				for left := n; left > 0; sub++ {
					k := min(left, batch)
					area, src := sub%2, srcs[sub/2%2]
					for j := range k {
						copy(dst(area, j), src)
					}
					c.StopTimer()
					err := check("Go copy", sub, k)
					c.StartTimer()
					if err != nil {
						return err
					}
					left -= k
				}
				return nil
			}
			// Warm up: the first copy to each page of a mapping takes a page fault (several µs
			// on these hosts), which is not the copy's cost.
			if err := warmUp(dev, base, batch); err != nil {
				rig.Close()
				return Pair{}, err
			}
			return Pair{Dev: dev, Base: base, Close: func() { rig.Close() }}, nil
		},
	}
}

// warmUp runs each side once for n iterations, untimed.
func warmUp(dev, base Op, n int) error {
	if _, err := timeOp(dev, n); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := timeOp(base, n); err != nil {
		return fmt.Errorf("warm-up of the baseline: %w", err)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// checkPackets waits (bounded) until the CP's packet counter, read by packets, has grown by
// want since before, and fails if it grew by anything else: every submitted packet ran, once.
// The CP publishes its count when a batch ends, just after the fence may be seen.
func checkPackets(packets func() (uint64, error), before, want uint64) error {
	var counted uint64
	for deadline := time.Now().Add(irqTimeout); ; time.Sleep(10 * time.Microsecond) {
		after, err := packets()
		if err != nil {
			return err
		}
		if counted = after - before; counted >= want || time.Now().After(deadline) {
			break
		}
	}
	if counted != want {
		return fmt.Errorf("CP counted %d packets, %d were submitted", counted, want)
	}
	return nil
}
