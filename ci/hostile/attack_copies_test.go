package hostile

import (
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// maxCount is DMA_DATA's largest byte count (26 bits); maxCount4 the largest multiple of 4.
const (
	maxCount  = abi.PM4_DMA_DATA_BYTE_COUNT_MASK
	maxCount4 = maxCount &^ 3
)

// attackMaxCopies runs the largest transfers a packet can ask for, all at once on their own
// queues: 64 MiB DMA_DATA copies and fills within VRAM (direct and through L2), from and into
// guest memory of which only 8 MiB are mapped, from message-served memory, with fixed source
// or destination, and built-in kernels of the most workgroups (256 MiB, past the end of VRAM).
// Register reads must be answered meanwhile; every job must end (complete or halt) within the
// liveness deadline after the others are done; only the sys area may change.
func attackMaxCopies(t *testing.T, e *env) {
	d := e.d
	e.mem.allowArea("sys")
	jobs := []struct {
		name    string
		packets [][]uint32
	}{
		{"VRAM to VRAM, 64 MiB, direct", [][]uint32{dmaDirect(fb(vBig), fb(vBig+64<<20), maxCount4)}},
		{"VRAM to VRAM, 64 MiB, through L2", [][]uint32{pm4.DMACopy(fb(vBig+128<<20), fb(vBig), maxCount4)}},
		{"fill of 2^26-1 bytes of VRAM through L2", [][]uint32{pm4.DMAFill(fb(vBig+64<<20), 0xF111F111, maxCount)}},
		{"64 MiB from guest memory (8 MiB mapped) into VRAM", [][]uint32{dmaDirect(fb(vBig), gart(gSys), maxCount4)}},
		{"64 MiB fill into guest memory (8 MiB mapped) through L2", [][]uint32{pm4.DMAFill(gart(gSys), 0x5EEDF111, maxCount4), writeBack()}},
		{"64 MiB from VRAM into guest memory (8 MiB mapped), direct", [][]uint32{dmaDirect(gart(gSys), fb(vBig), maxCount4)}},
		{"64 MiB from message-served memory into VRAM", [][]uint32{dmaDirect(fb(vBig+128<<20), gart(gNofd), maxCount4)}},
		{"fixed-source fill of 64 MiB from guest memory", [][]uint32{pm4.DMAData{Src: gart(gSys), Dst: fb(vBig), Count: maxCount4, SAIC: true}.Encode()}},
		{"fixed-destination copy of 64 MiB", [][]uint32{pm4.DMAData{Src: fb(vBig), Dst: fb(vScratch), Count: maxCount4, DAIC: true}.Encode()}},
		{"fill kernel of the most workgroups (past the end of VRAM)", [][]uint32{pm4.Kernel(abi.KERNEL_FILL, fb(vBig), 0, 0xC0FFEE),
			pm4.DispatchDirect(cpMaxDispatchGroups, 1, 1)}},
		{"copy kernel of the most workgroups (past the end of VRAM)", [][]uint32{pm4.Kernel(abi.KERNEL_COPY, fb(vBig+64<<20), fb(0), 0),
			pm4.DispatchDirect(cpMaxDispatchGroups, 1, 1)}},
		{"fill kernel into guest memory (8 MiB mapped)", [][]uint32{pm4.Kernel(abi.KERNEL_FILL, gart(gSys), 0, 0x6EED6EED),
			pm4.DispatchDirect(cpMaxDispatchGroups, 1, 1), writeBack()}},
	}
	type run struct {
		q     *queue
		name  string
		start time.Time
		took  time.Duration
		state string
	}
	var runs []*run
	for i, j := range jobs {
		slot := 1 + i
		d.setVRAM32(vMarker+64*uint64(slot), 0)
		q, err := d.startQueue(slot, queueOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.submit(append(j.packets, bypassWrite(fb(vMarker+64*uint64(slot)), 0x600D))...); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, &run{q: q, name: j.name, start: time.Now()})
	}
	lat := probeLatency(t, d, 300*time.Millisecond)
	// Wait for every job to end; the deadline is generous (a hang detector): these move
	// gigabytes on a shared machine, and a race-detector server takes 45-60 s for the
	// largest of them when all twelve run at once.
	limit := 60 * time.Second
	if raceServer() {
		limit *= 4
	}
	deadline := time.Now().Add(limit)
	for pending := len(runs); pending > 0 && time.Now().Before(deadline); {
		pending = 0
		for _, r := range runs {
			if r.state != "" {
				continue
			}
			state, code, err := d.status(r.q.slot)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case state == abi.HQD_STATE_HALTED:
				r.state = describeState(state, code)
			case d.vramU32(vMarker+64*uint64(r.q.slot)) == 0x600D:
				r.state = "completed"
			default:
				pending++
				continue
			}
			r.took = time.Since(r.start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, r := range runs {
		if r.state == "" {
			state, code, _ := d.status(r.q.slot)
			t.Errorf("%s: still %s after %v", r.name, describeState(state, code), limit)
			continue
		}
		t.Logf("%-60s %-22s %v", r.name, r.state, r.took.Round(time.Millisecond))
	}
	t.Logf("register reads during the first 300 ms: %v", lat)
}
