package bench

import (
	"encoding/binary"
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// EngineTimer is the part of an Op's Clock that takes time measured by the device's own clock
// (GPU timestamps). Run's stopwatch and the benchmarks' clock implement it; an Op of a
// Scenario with EngineTime reports its engine's time through it, beside the wall clock that
// keeps running as for any Op.
//
// Why a figure may rest on it: a copy benchmark on a real GPU times the engine with
// timestamps written by the GPU around the work (RELEASE_MEM's end-of-pipe GPU clock, a
// timestamp query), not the host's wall clock from doorbell to fence interrupt. Those two
// wake-ups (the CP's on the doorbell, the client's on the interrupt) are measured on their own
// (the doorbell scenarios), and on a loaded host they are the OS scheduler's latency: on this
// shared 2-core machine (load 2–8) the two of a submission took from 0.1 ms to over 50 ms
// together, against 2.2–4.5 ms for the whole 64 MiB of copies of a submission.
type EngineTimer interface {
	AddEngineTime(d time.Duration)
}

// addEngineTime reports d to c if c takes engine time.
func addEngineTime(c Clock, d time.Duration) {
	if e, ok := c.(EngineTimer); ok {
		e.AddEngineTime(d)
	}
}

// wallNote is r's note with the device's wall-clock figure (and its ratio) added.
func wallNote(r Result, wall float64) string {
	ratio := 0.0
	if r.Base != 0 {
		ratio = wall / r.Base
	}
	return fmt.Sprintf("%s; wall clock (doorbell to fence interrupt) %.3g %s, %.2f×", r.Note, wall, r.Unit, ratio)
}

// gpuStamps brackets a submission's work with two RELEASE_MEM GPU-clock timestamps, written
// (bypassing L2, no cache action, no interrupt) to VRAM at off and off+8. RELEASE_MEM is an
// end-of-pipe event: the second stamp is taken once everything before it has completed.
type gpuStamps struct {
	vram       []byte
	off        int
	start, end []uint32 // the two packets
}

// stampUnwritten is what the slots hold before a submission (no GPU clock reads it).
const stampUnwritten = ^uint64(0)

func newGPUStamps(vram []byte, off int) gpuStamps {
	at := func(o int) []uint32 {
		return pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.DataGPUClock,
			Addr: abi.GPU_FB_BASE + uint64(o)}.Encode()
	}
	return gpuStamps{vram: vram, off: off, start: at(off), end: at(off + 8)}
}

// arm marks both slots unwritten; call it before the submission is kicked.
func (g gpuStamps) arm() {
	binary.LittleEndian.PutUint64(g.vram[g.off:], stampUnwritten)
	binary.LittleEndian.PutUint64(g.vram[g.off+8:], stampUnwritten)
}

// interval reads the stamps after the submission's fence: the engine time between them. It
// fails unless both were written, in order, and span no more than wall (the host's time for
// the whole submission: a GPU clock that is not in nanoseconds would show there).
func (g gpuStamps) interval(wall time.Duration) (time.Duration, error) {
	t0 := binary.LittleEndian.Uint64(g.vram[g.off:])
	t1 := binary.LittleEndian.Uint64(g.vram[g.off+8:])
	switch {
	case t0 == stampUnwritten || t1 == stampUnwritten:
		return 0, fmt.Errorf("GPU timestamp not written (start %#x, end %#x)", t0, t1)
	case t1 < t0:
		return 0, fmt.Errorf("GPU timestamps out of order (start %d, end %d)", t0, t1)
	case time.Duration(t1-t0) > wall:
		return 0, fmt.Errorf("GPU timestamps %d ns apart, longer than the submission's %v", t1-t0, wall)
	}
	return time.Duration(t1 - t0), nil
}
