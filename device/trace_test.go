package device

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/trace"
	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// VRAM offsets of the traced workload (beside the life-cycle tests' ring, fence and IH).
const (
	trIB   = 0x50000 // the IB
	trWait = 0x51000 // the dword WAIT_REG_MEM polls
)

// TestTraceWorkload records a known workload through the whole vfio-user path (an IB of
// WRITE_DATAs, a RELEASE_MEM with an interrupt, a WAIT_REG_MEM that parks until the test
// writes its dword), reads the file back with the same protos and checks the timeline.
func TestTraceWorkload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workload.pftrace")
	rec, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow, cfg.Trace = 16<<20, 16<<20, rec
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	r := &rig{t: t, dev: dev, c: vfiousertest.NewPair(t, dev, vfiousertest.ServerOptions(vfiouser.WithTrace(rec)))}
	m, err := r.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	d := &driver{t: t, r: r, vram: m.At(0, dev.cfg.VRAMWindow)}
	r.enable(true)
	r.enableMSIX()
	d.setupIH()
	r.setReg(abi.REG_IH_RB_CNTL, r.reg(abi.REG_IH_RB_CNTL)|abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK) // and signal IVs
	d.startQueue()

	fb := uint64(abi.GPU_FB_BASE)
	var ib []uint32
	for i := range 3 {
		ib = append(ib, pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: fb + ltFence + 0x100 + 4*uint64(i),
			Data: []uint32{uint32(i)}}.Encode()...)
	}
	for i, dw := range ib {
		binary.LittleEndian.PutUint32(d.vram[trIB+4*i:], dw)
	}
	binary.LittleEndian.PutUint32(d.vram[trWait:], 0)
	d.submit(pm4.IndirectBuffer{Addr: fb + trIB, Size: uint32(len(ib))}.Encode(),
		pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: abi.PM4_RELEASE_MEM_DATA_SEL_32, IntSel: abi.PM4_RELEASE_MEM_INT_SEL_IRQ,
			Addr: fb + ltFence, Data: 7}.Encode())
	eventually(t, "fence", func() bool { return d.fence() == 7 })
	d.submit(pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS,
		Addr: fb + trWait, Ref: 1, Mask: 0xFFFFFFFF, Interval: 10}.Encode(),
		pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: abi.PM4_RELEASE_MEM_DATA_SEL_32, Addr: fb + ltFence, Data: 8}.Encode())
	eventually(t, "queue parked", func() bool { return d.state() == abi.HQD_STATE_WAITING })
	binary.LittleEndian.PutUint32(d.vram[trWait:], 1)
	eventually(t, "second fence", func() bool { return d.fence() == 8 })
	eventually(t, "queue idle", func() bool { return dev.gpu.cp.Queue(ltSlot).Idle })
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() != 0 {
		t.Errorf("%d events dropped", rec.Dropped())
	}

	tl, err := trace.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	uuid := map[string]uint64{}
	for _, name := range []string{"device", "transport", "MES", "IH ring", "HQD 0", "HQD 1", "HQD 16"} {
		tk, ok := tl.Track(name)
		if !ok {
			t.Fatalf("no track %q", name)
		}
		uuid[name] = tk.UUID
	}
	if tl.Unmatched != 0 || tl.Unfinished != 0 {
		t.Errorf("unbalanced slices: %d ends without a begin, %d never ended", tl.Unmatched, tl.Unfinished)
	}
	checkNesting(t, tl)

	// The queue's slices: runs, the IB with its WRITE_DATAs inside, the packets, the wait.
	depth := map[string][]int{}
	for _, s := range tl.Slices {
		if s.Track == uuid["HQD 1"] {
			depth[s.Name] = append(depth[s.Name], s.Depth)
		}
	}
	for _, want := range []struct {
		name  string
		n     int
		depth int
	}{
		{"IB1", 1, 1}, {"WRITE_DATA", 3, 2}, {"RELEASE_MEM", 2, 1}, {"WAIT_REG_MEM", 1, 1}, {"wait", 1, 2},
	} {
		got := depth[want.name]
		if len(got) != want.n {
			t.Errorf("HQD 1 has %d %q slices, want %d (all: %v)", len(got), want.name, want.n, depth)
			continue
		}
		for _, dp := range got {
			if dp != want.depth {
				t.Errorf("%q at depth %d, want %d", want.name, dp, want.depth)
			}
		}
	}
	if len(depth["run"]) == 0 {
		t.Error("no run slice on HQD 1")
	}

	// doorbell → fence → its EOP IV.
	connected := 0
	for _, fl := range tl.Flows {
		if len(fl) == 3 && fl[0].Name == "doorbell" && fl[0].Track == uuid["HQD 1"] &&
			fl[1].Name == "fence" && fl[1].Track == uuid["HQD 1"] && fl[2].Name == "IV" && fl[2].Track == uuid["IH ring"] && fl[2].Last {
			connected++
		}
	}
	if connected != 1 {
		t.Errorf("%d doorbell→fence→IV flows, want 1: %+v", connected, tl.Flows)
	}
	count := map[[2]string]int{}
	for _, in := range tl.Instants {
		for name, id := range uuid {
			if in.Track == id {
				count[[2]string{name, in.Name}]++
			}
		}
	}
	for _, want := range [][2]string{{"HQD 1", "doorbell"}, {"HQD 1", "fence"}, {"IH ring", "IV"}, {"IH ring", "interrupt"}} {
		if count[want] == 0 {
			t.Errorf("no %q instant on %q (instants: %v)", want[1], want[0], count)
		}
	}
	transport := 0
	for _, s := range tl.Slices {
		if s.Track == uuid["transport"] && s.Name == "REGION_WRITE" {
			transport++
		}
	}
	if transport == 0 {
		t.Error("no REGION_WRITE slice on the transport track")
	}
}

// checkNesting: on every track, each slice lies inside the slice one level up that encloses
// it.
func checkNesting(t *testing.T, tl *trace.Timeline) {
	t.Helper()
	open := map[uint64][]trace.Slice{}
	for _, s := range tl.Slices { // by start, outer first
		st := open[s.Track]
		for len(st) > 0 && st[len(st)-1].End <= s.Start && st[len(st)-1].Depth >= s.Depth {
			st = st[:len(st)-1]
		}
		for len(st) > s.Depth {
			st = st[:len(st)-1]
		}
		if len(st) != s.Depth {
			t.Errorf("slice %q at depth %d has %d enclosing slices", s.Name, s.Depth, len(st))
		} else if s.Depth > 0 {
			p := st[len(st)-1]
			if s.Start < p.Start || s.End > p.End {
				t.Errorf("slice %q [%d,%d] is not inside %q [%d,%d]", s.Name, s.Start, s.End, p.Name, p.Start, p.End)
			}
		}
		open[s.Track] = append(st, s)
	}
}
