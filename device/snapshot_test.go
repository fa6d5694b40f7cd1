package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/mes"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// Layout of the snapshot test's second queue (slot 2), beside the life-cycle layout (slot 1).
const (
	stSlot     = 2
	stRing     = 0x50000 // 64-dword ring
	stData     = 0x60000 // cached writes left dirty in the L2
	stDoorbell = 5
)

// snapRegs are the registers a restore must reproduce, read through the client.
func snapRegList() []uint32 {
	regs := []uint32{
		abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_START_LO, abi.REG_GMC_GART_START_HI, abi.REG_GMC_GART_END_LO,
		abi.REG_GMC_GART_END_HI, abi.REG_GMC_GART_TABLE_LO, abi.REG_GMC_GART_TABLE_HI,
		abi.REG_IH_RB_CNTL, abi.REG_IH_RB_BASE_LO, abi.REG_IH_RB_BASE_HI, abi.REG_IH_RB_RPTR, abi.REG_IH_RB_WPTR,
		abi.REG_IH_MSIX_VECTOR, abi.REG_IH_ENTRIES,
		abi.REG_L2_LINES, abi.REG_L2_DIRTY_LINES, abi.REG_CP_PACKETS_LO, abi.REG_CP_HALTS,
		abi.REG_MES_RING_ACTIVE,
	}
	for i := uint32(0); i < 8; i++ {
		regs = append(regs, abi.REG_SCRATCH_0+4*i)
	}
	for _, slot := range []uint32{ltSlot, stSlot} {
		for _, r := range []uint32{abi.REG_HQD_ACTIVE, abi.REG_HQD_VMID, abi.REG_HQD_PQ_BASE_LO, abi.REG_HQD_PQ_BASE_HI,
			abi.REG_HQD_PQ_CONTROL, abi.REG_HQD_PQ_RPTR, abi.REG_HQD_PQ_WPTR_LO, abi.REG_HQD_PQ_WPTR_HI,
			abi.REG_HQD_PQ_DOORBELL_CONTROL, abi.REG_HQD_STATUS, abi.REG_HQD_ERROR_ADDR_LO, abi.REG_HQD_ERROR_INFO,
			abi.REG_HQD_FENCES} {
			regs = append(regs, abi.BLOCK_HQD_BASE+slot*abi.BLOCK_HQD_STRIDE+r)
		}
	}
	for v := uint32(0); v < 4; v++ { // the MSI-X table's first entries (trapped copy)
		for dw := uint32(0); dw < 4; dw++ {
			regs = append(regs, abi.REGS_MSIX_TABLE_OFFSET+16*v+4*dw)
		}
	}
	return regs
}

func readAll(r *rig, regs []uint32) []uint32 {
	out := make([]uint32, len(regs))
	for i, reg := range regs {
		out[i] = r.reg(reg)
	}
	return out
}

func configSpace(t *testing.T, r *rig) []byte {
	b := make([]byte, configSize)
	if err := r.c.Read(regionConfig, 0, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// busyState drives a device into a state with something in every block: an IH ring with
// entries and MSI-X on, queue 1 idle after work (fences, an interrupt) with dirty L2 lines
// behind it, queue 2 halted on a bad packet, scratch registers, a masked MSI-X table entry.
func busyState(t *testing.T, dev *Device) (*driver, []int) {
	d := attach(t, dev, 0x5A, false)
	fds := d.r.enableMSIX()
	d.setupIH()
	d.r.setReg(abi.REG_IH_RB_CNTL, d.r.reg(abi.REG_IH_RB_CNTL)|abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK)
	d.r.setReg(abi.REG_IH_MSIX_VECTOR, 2)
	for i := uint32(0); i < 8; i++ {
		d.r.setReg(abi.REG_SCRATCH_0+4*i, 0x5CA70000+i)
	}
	d.startQueue()
	d.submit(pm4.WriteMem(abi.GPU_FB_BASE+stData-0x1000, 0xAB), pm4.Fence(abi.GPU_FB_BASE+ltFence, 1, 1, true))
	eventually(t, "fence 1", func() bool { return d.fence() == 1 })
	if n, err := vfiousertest.WaitIRQ(fds[2], 5*time.Second); err != nil || n != 1 {
		t.Fatalf("EOP interrupt before the snapshot: %d, %v", n, err)
	}
	// Cached writes without a fence: dirty L2 lines the snapshot must carry.
	d.submit(pm4.WriteMem(abi.GPU_FB_BASE+stData, line(0xD1D1D1D1)...), pm4.WriteMem(abi.GPU_FB_BASE+stData+0x80, 7))
	eventually(t, "queue 1 idle", func() bool {
		return uint64(d.hqdRead(abi.REG_HQD_PQ_RPTR)) == d.wptr && dev.gpu.cp.Queue(ltSlot).Idle
	})
	if d.r.reg(abi.REG_L2_DIRTY_LINES) == 0 {
		t.Fatal("no dirty L2 lines to save")
	}
	// Queue 2 halts on a type-0 packet.
	hq := func(reg, v uint32) { d.r.setReg(abi.BLOCK_HQD_BASE+stSlot*abi.BLOCK_HQD_STRIDE+reg, v) }
	clear(d.vram[stRing : stRing+256])
	binary.LittleEndian.PutUint32(d.vram[stRing:], 0x00000000)
	ring := uint64(abi.GPU_FB_BASE + stRing)
	hq(abi.REG_HQD_PQ_BASE_LO, uint32(ring))
	hq(abi.REG_HQD_PQ_BASE_HI, uint32(ring>>32))
	hq(abi.REG_HQD_PQ_CONTROL, 5) // 64 dwords
	hq(abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*stDoorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT|
		abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK)
	hq(abi.REG_HQD_ACTIVE, 1)
	hq(abi.REG_HQD_PQ_WPTR_LO, 4)
	eventually(t, "queue 2 halted", func() bool {
		return dev.gpu.cp.Queue(stSlot).State == abi.HQD_STATE_HALTED && dev.gpu.cp.Stats().Live == 1
	})
	// Vector 3 masked in the trapped table (the rest as the driver left them).
	d.r.setReg(abi.REGS_MSIX_TABLE_OFFSET+16*3+12, 1)
	return d, fds
}

// TestSnapshotRestoreContinues saves a device with work done, restores it into a new device,
// attaches a new client and checks that registers, config space, VRAM and the L2 read back
// the same, that the halted queue stays halted, and that the idle queue runs new packets to a
// fence and an interrupt.
func TestSnapshotRestoreContinues(t *testing.T) {
	dev := newSharedDevice(t)
	d, _ := busyState(t, dev)
	regs := snapRegList()
	before := readAll(d.r, regs)
	cfgBefore := configSpace(t, d.r)
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	linesBefore := dev.gpu.cache.SaveLines()
	vramBefore := slices.Clone(dev.vram.Bytes())
	t.Logf("snapshot: %d bytes, %d L2 lines", file.Len(), len(linesBefore))

	dev2 := newSharedDevice(t)
	if err := dev2.RestoreSnapshot(bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dev2.vram.Bytes(), vramBefore) {
		t.Error("VRAM differs after the restore")
	}
	if got := dev2.gpu.cache.SaveLines(); !slices.Equal(got, linesBefore) {
		t.Errorf("L2 lines differ: %d restored, %d saved", len(got), len(linesBefore))
	}
	// A new client: the guest's memory is its own (the GART still points at ltIOVA).
	r2 := &rig{t: t, dev: dev2, c: vfiousertest.NewPair(t, dev2)}
	m, err := r2.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	after := readAll(r2, regs)
	for i := range regs {
		if after[i] != before[i] {
			t.Errorf("%s = %#x after the restore, %#x before", abi.RegisterNames[regs[i]], after[i], before[i])
		}
	}
	if cfgAfter := configSpace(t, r2); !bytes.Equal(cfgAfter, cfgBefore) {
		t.Error("config space differs after the restore")
	}
	st := dev2.gpu.cp.Queue(stSlot)
	if st.State != abi.HQD_STATE_HALTED || st.Error != abi.CP_ERROR_BAD_OPCODE {
		t.Errorf("queue 2 after the restore: state %d error %s", st.State, abi.NameOf("CP_ERROR_", uint64(st.Error)))
	}
	// The idle queue continues: new packets, a fence, an interrupt on the restored vector.
	fds, err := r2.c.EnableMSIX(16)
	if err != nil {
		t.Fatal(err)
	}
	d2 := &driver{t: t, r: r2, vram: m.At(0, dev2.cfg.VRAMWindow), wptr: d.wptr}
	d2.submit(pm4.WriteMem(abi.GPU_FB_BASE+stData+0x100, 0x600D), pm4.Fence(abi.GPU_FB_BASE+ltFence, 2, 2, true))
	eventually(t, "fence 2 after the restore", func() bool { return d2.fence() == 2 })
	if n, err := vfiousertest.WaitIRQ(fds[2], 5*time.Second); err != nil || n != 1 {
		t.Fatalf("EOP interrupt after the restore: %d, %v", n, err)
	}
	// The fence's write-back carried the restored dirty lines to VRAM.
	if got := d2.u32(stData); got != 0xD1D1D1D1 {
		t.Errorf("restored dirty line written back as %#x", got)
	}
	if got := d2.u32(stData + 0x100); got != 0x600D {
		t.Errorf("new packet's write: %#x", got)
	}
	if got := r2.reg(abi.REG_IH_ENTRIES); got != before[slices.Index(regs, abi.REG_IH_ENTRIES)]+1 {
		t.Errorf("IH_ENTRIES %d after one more interrupt", got)
	}
	// The halted queue recovers as the driver would recover it: DEQUEUE_RESET, a new ring,
	// ACTIVE=1.
	hq := func(reg, v uint32) { r2.setReg(abi.BLOCK_HQD_BASE+stSlot*abi.BLOCK_HQD_STRIDE+reg, v) }
	hq(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
	eventually(t, "queue 2 dequeued", func() bool { return r2.reg(abi.BLOCK_HQD_BASE+stSlot*abi.BLOCK_HQD_STRIDE+abi.REG_HQD_ACTIVE) == 0 })
	n := d2.writeIB(stRing, pm4.Fence(abi.GPU_FB_BASE+ltFence+8, 5, 5, false))
	hq(abi.REG_HQD_ACTIVE, 1)
	hq(abi.REG_HQD_PQ_WPTR_LO, n)
	eventually(t, "queue 2's fence after its reset", func() bool { return d2.u32(ltFence+8) == 5 })

	// A restored device refuses a second restore, a used device any.
	if err := dev2.RestoreSnapshot(bytes.NewReader(file.Bytes())); !errors.Is(err, ErrSnapshotNotFresh) {
		t.Errorf("restore into an attached device: %v", err)
	}
}

// TestSnapshotRefusals: the file is validated field by field, and a busy or scheduled device
// is not saved.
func TestSnapshotRefusals(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, false)
	d.r.setReg(abi.REG_SCRATCH_1, 42)
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	flip := func(off int) []byte {
		b := slices.Clone(good)
		b[off] ^= 0x40
		return b
	}
	hdrSize := binary.Size(snapHeader{})
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		file   []byte
		want   error
	}{
		{"other VRAM size", func(c *Config) { c.VRAMSize = 32 << 20 }, good, ErrSnapshotConfig},
		{"other vector count", func(c *Config) { c.MSIXVectors = 8 }, good, ErrSnapshotConfig},
		{"other compute units", func(c *Config) { c.ComputeUnits = 2 }, good, ErrSnapshotConfig},
		{"not a snapshot", nil, []byte("hello, world, this is not a snapshot at all....................."), ErrSnapshotFormat},
		{"empty", nil, nil, ErrSnapshotFormat},
		{"format version", nil, flip(8), ErrSnapshotVersion},
		{"ABI version", nil, flip(12), ErrSnapshotABI},
		{"checksum", nil, flip(len(good) - 1), ErrSnapshotChecksum},
		{"payload bit", nil, flip(hdrSize + 12 + 6), ErrSnapshotChecksum},
		{"section length", nil, flip(hdrSize + 4 + 7), ErrSnapshotCorrupt},
		{"truncated", nil, good[:len(good)-100], ErrSnapshotCorrupt},
		{"trailing bytes", nil, append(slices.Clone(good), 0), ErrSnapshotCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			dev2, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer dev2.Close()
			if err := dev2.RestoreSnapshot(bytes.NewReader(tc.file)); !errors.Is(err, tc.want) {
				t.Fatalf("restore: %v, want %v", err, tc.want)
			}
			if got := dev2.scratch[1]; got != 0 {
				t.Errorf("a refused restore left scratch 1 = %d", got)
			}
			if nz := slices.IndexFunc(dev2.vram.Bytes(), func(b byte) bool { return b != 0 }); nz >= 0 {
				t.Errorf("a refused restore left VRAM byte %#x non-zero", nz)
			}
		})
	}

	// A queue parked inside an IB is not at a packet boundary.
	d.startQueue()
	ib := uint64(0x80000)
	n := d.writeIB(ib, pm4.WaitMem(abi.GPU_FB_BASE+0x81000, 1))
	d.vram[0x81000] = 0
	d.submit(pm4.IndirectBuffer{Addr: abi.GPU_FB_BASE + ib, Size: n}.Encode())
	eventually(t, "queue parked in the IB", func() bool { return d.state() == abi.HQD_STATE_WAITING })
	if err := dev.SaveSnapshot(&bytes.Buffer{}); !errors.Is(err, ErrSnapshotBusy) || !errors.Is(err, cp.ErrBusy) {
		t.Errorf("snapshot with a queue inside an IB: %v", err)
	}
	binary.LittleEndian.PutUint32(d.vram[0x81000:], 1)
	dev.gpu.cp.Wake()
	eventually(t, "queue idle", func() bool { return dev.gpu.cp.Queue(ltSlot).Idle })
	if err := dev.SaveSnapshot(&bytes.Buffer{}); err != nil {
		t.Errorf("snapshot of an idle device: %v", err)
	}
}

// TestSnapshotWhileRunning takes snapshots while a client keeps submitting work: each one is
// taken (or refused as busy) without a race, and each restores into a queue that continues.
func TestSnapshotWhileRunning(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, false)
	d.startQueue()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for seq := uint32(1); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			// One batch at a time (each waits for its fence): the ring never fills.
			d.submit(pm4.WriteMem(abi.GPU_FB_BASE+stData, seq), pm4.Fence(abi.GPU_FB_BASE+ltFence, seq, seq, false))
			for deadline := time.Now().Add(10 * time.Second); d.fence() != seq; {
				if time.Now().After(deadline) {
					done <- errors.New("fence not reached")
					return
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	taken := 0
	for range 10 {
		var file bytes.Buffer
		err := dev.SaveSnapshot(&file)
		if errors.Is(err, ErrSnapshotBusy) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		taken++
		dev2 := newSharedDevice(t)
		if err := dev2.RestoreSnapshot(&file); err != nil {
			t.Fatal(err)
		}
		q := dev2.gpu.cp.Queue(ltSlot)
		if !q.Active || q.Rptr > q.Wptr {
			t.Errorf("restored queue %+v", q)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if taken == 0 {
		t.Error("no snapshot taken of a running device")
	}
	t.Logf("%d of 10 snapshots taken, %d fences", taken, d.fence())
}

// TestSnapshotKeepsVRAMSparse: saving a 1 GiB VRAM with two pages written allocates nothing
// more of the memfd (only its data extents are read) and saves just those pages.
func TestSnapshotKeepsVRAMSparse(t *testing.T) {
	cfg := DefaultConfig()
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	mem := dev.vram.Bytes()
	mem[5<<20] = 1
	mem[900<<20+4095] = 2
	blocks := func() int64 {
		var st unix.Stat_t
		if err := unix.Fstat(int(dev.vram.File().Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks
	}
	before := blocks()
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	if after := blocks(); after != before {
		t.Errorf("the snapshot grew VRAM from %d to %d blocks", before, after)
	}
	if file.Len() > 64<<10 {
		t.Errorf("a snapshot of two VRAM pages is %d bytes", file.Len())
	}
	dev2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dev2.Close()
	if err := dev2.RestoreSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	if m2 := dev2.vram.Bytes(); m2[5<<20] != 1 || m2[900<<20+4095] != 2 {
		t.Error("restored VRAM lacks the written bytes")
	}
}

// TestSnapshotMES: a running scheduler with no queues (after SET_HW_RESOURCES) is saved and
// continues after a restore (its next frame is taken from the restored ring position and
// its slots are still its own); one with a queue, or one halted, is refused.
func TestSnapshotMES(t *testing.T) {
	dev := newSharedDevice(t)
	m := &mesDriver{driver: attach(t, dev, 0, true)}
	clear(m.vram[mtRing : mtRing+4096])
	m.r.setReg(abi.REG_MES_RING_BASE_LO, lo(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_BASE_HI, hi(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_CONTROL, 9)
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 1)
	hw := map[uint64]uint32{abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB: 0xFF00, abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK + 1: 0x3}
	if !m.frame(abi.MES_SCH_API_SET_HW_RSRC, abi.MES_SET_HW_RSRC_DW_API_STATUS, hw) {
		t.Fatalf("SET_HW_RESOURCES failed: %#x", m.r.reg(abi.REG_MES_LAST_ERROR))
	}
	regs := []uint32{abi.REG_MES_RING_ACTIVE, abi.REG_MES_RING_RPTR, abi.REG_MES_RING_WPTR_LO, abi.REG_MES_STATUS,
		abi.REG_MES_FRAMES, abi.REG_MES_FRAME_ERRORS, abi.REG_MES_RING_BASE_LO, abi.REG_MES_RING_CONTROL}
	before := readAll(m.r, regs)
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		t.Fatal(err)
	}
	dev2 := newSharedDevice(t)
	if err := dev2.RestoreSnapshot(bytes.NewReader(file.Bytes())); err != nil {
		t.Fatal(err)
	}
	r2 := &rig{t: t, dev: dev2, c: vfiousertest.NewPair(t, dev2)}
	vm, err := r2.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Close() })
	after := readAll(r2, regs)
	for i := range regs {
		if after[i] != before[i] {
			t.Errorf("%s = %#x after the restore, %#x before", abi.RegisterNames[regs[i]], after[i], before[i])
		}
	}
	if got := dev2.gpu.mes.Owned(); got != dev.gpu.mes.Owned() || got == 0 {
		t.Errorf("restored scheduler owns slots %#x, the saved one %#x", got, dev.gpu.mes.Owned())
	}
	// The next frames run from the restored ring position.
	m2 := &mesDriver{driver: &driver{t: t, r: r2, vram: vm.At(0, dev2.cfg.VRAMWindow)}, wptr: m.wptr, seq: m.seq}
	if !m2.frame(abi.MES_SCH_API_SET_HW_RSRC, abi.MES_SET_HW_RSRC_DW_API_STATUS, hw) {
		t.Fatalf("a frame after the restore failed: %#x", r2.reg(abi.REG_MES_LAST_ERROR))
	}
	if got := r2.reg(abi.REG_MES_FRAMES); got != before[4]+2 {
		t.Errorf("MES_FRAMES %d after two more frames, %d before", got, before[4])
	}

	// A halted scheduler (a ring it cannot run) is refused at once.
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 0)
	m.r.setReg(abi.REG_MES_RING_CONTROL, 5)
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 1)
	eventually(t, "MES halted", func() bool {
		return m.r.reg(abi.REG_MES_STATUS)&abi.REG_MES_STATUS__STATE_MASK>>abi.REG_MES_STATUS__STATE__SHIFT == abi.MES_STATE_HALTED
	})
	if err := dev.SaveSnapshot(&bytes.Buffer{}); !errors.Is(err, ErrSnapshotBusy) || !errors.Is(err, mes.ErrActive) {
		t.Errorf("snapshot with MES halted: %v", err)
	}
}

// TestSnapshotWhileCPUWritesVRAM: the guest's CPU is not stopped by a snapshot, so a page may
// change while it is written; the file must still be whole (its checksum over the bytes it
// holds) and restore.
func TestSnapshotWhileCPUWritesVRAM(t *testing.T) {
	dev := newSharedDevice(t)
	mem := dev.vram.Bytes()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := uint64(1); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			for off := 0; off < vramPageSize; off += 8 {
				binary.LittleEndian.PutUint64(mem[3*vramPageSize+off:], v)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 20 {
		var file bytes.Buffer
		if err := dev.SaveSnapshot(&file); err != nil {
			t.Fatal(err)
		}
		if err := newSharedDevice(t).RestoreSnapshot(&file); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
	}
}
