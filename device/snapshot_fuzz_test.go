package device

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// fuzzSnapConfig is the small device FuzzRestore restores into (1 MiB of VRAM).
func fuzzSnapConfig() Config {
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow, cfg.MSIXVectors = 1<<20, 1<<20, 4
	return cfg
}

// FuzzRestore: a snapshot file is user input. Whatever it holds, RestoreSnapshot returns (no
// panic, no allocation beyond the device's own bounds), and a refused file leaves the device
// at power-on with VRAM zeroed; an accepted one leaves a device that closes cleanly.
//
// One device serves every input of a fuzzing process: RestoreSnapshot's contract is that a
// refused file leaves the device at power-on, and after every refusal the test checks exactly
// that — VRAM holds no non-zero byte and every block a snapshot saves (config space, the
// register blocks, MSI-X, the MES, the CP, the doorbells, the L2) equals a device's just
// built — so the next input meets a device that a snapshot cannot tell from a fresh one. A
// device that accepted a file runs that file's state: it is closed (which must succeed) and
// the next input gets a new one. (Building a device per input, scanning its 1 MiB of VRAM and
// closing it cost ~3.6 ms per input uninstrumented: ~130 executions per second.)
func FuzzRestore(f *testing.F) {
	seed := restoreSeed(f)
	w := newRestoreWorld(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, data []byte) { w.restore(t, data) })
}

// restoreSeed is a snapshot with state in most blocks, written as a driver would but without
// a client: registers, a queue with work done, VRAM.
func restoreSeed(tb testing.TB) []byte {
	dev, err := New(fuzzSnapConfig())
	if err != nil {
		tb.Fatal(err)
	}
	defer dev.Close()
	ring := uint64(0x10000)
	pkts := slices.Concat(pm4.WriteMem(abi.GPU_FB_BASE+0x20000, 1, 2, 3), pm4.Fence(abi.GPU_FB_BASE+0x30000, 9, 9, false))
	for i, dw := range pkts {
		binary.LittleEndian.PutUint32(dev.vram.Bytes()[ring+4*uint64(i):], dw)
	}
	reg := func(off, v uint32) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		dev.regMu.Lock()
		_ = dev.regs.Write(uint64(off), b[:])
		dev.regMu.Unlock()
	}
	hqd := func(r, v uint32) { reg(abi.BLOCK_HQD_BASE+1*abi.BLOCK_HQD_STRIDE+r, v) }
	reg(abi.REG_SCRATCH_0, 0xF00D)
	hqd(abi.REG_HQD_PQ_BASE_LO, uint32(abi.GPU_FB_BASE+ring))
	hqd(abi.REG_HQD_PQ_BASE_HI, uint32((abi.GPU_FB_BASE+ring)>>32))
	hqd(abi.REG_HQD_PQ_CONTROL, 5)
	hqd(abi.REG_HQD_ACTIVE, 1)
	hqd(abi.REG_HQD_PQ_WPTR_LO, uint32(len(pkts)))
	for deadline := time.Now().Add(10 * time.Second); dev.gpu.cp.Queue(1).Fences == 0 || !dev.gpu.cp.Queue(1).Idle; {
		if time.Now().After(deadline) {
			tb.Fatal("the seed's queue did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		tb.Fatal(err)
	}
	check, err := New(fuzzSnapConfig())
	if err != nil {
		tb.Fatal(err)
	}
	if err := check.RestoreSnapshot(bytes.NewReader(file.Bytes())); err != nil {
		tb.Fatalf("the seed does not restore: %v", err)
	}
	if err := check.Close(); err != nil {
		tb.Fatalf("closing the device the seed was restored into: %v", err)
	}
	return file.Bytes()
}

// restoreWorld is the device inputs are restored into and what a fresh one looks like.
type restoreWorld struct {
	dev   *Device
	power *snapshot // a device just built: the power-on state (all but VRAM, which is zero)
	// Reused between inputs: RestoreSnapshot takes a *bufio.Reader of its buffer size as it
	// is, instead of allocating (and clearing) 1 MiB per input.
	in    bytes.Reader
	br    *bufio.Reader
	zeros []byte // a zero VRAM page
}

func newRestoreWorld(tb testing.TB) *restoreWorld {
	w := &restoreWorld{br: bufio.NewReaderSize(nil, 1<<20), zeros: make([]byte, vramPageSize)}
	w.renew(tb)
	w.power = w.state(tb)
	tb.Cleanup(func() {
		if w.dev != nil {
			w.dev.Close()
		}
	})
	return w
}

// renew replaces the device by a new one.
func (w *restoreWorld) renew(tb testing.TB) {
	dev, err := New(fuzzSnapConfig())
	if err != nil {
		tb.Fatal(err)
	}
	w.dev = dev
}

// state is what SaveSnapshot would write but VRAM: the engines paused at a packet boundary and
// every block captured. (Comparing it field by field, rather than encoding it, keeps the check
// cheap: the file is a fixed encoding of exactly these fields.)
func (w *restoreWorld) state(tb testing.TB) *snapshot {
	d := w.dev
	if err := d.gpu.cp.Pause(pauseTimeout); err != nil {
		tb.Fatalf("pausing the CP: %v", err)
	}
	defer d.gpu.cp.Unpause()
	resume, err := d.gpu.mes.Pause(pauseTimeout)
	if err != nil {
		tb.Fatalf("pausing the scheduler: %v", err)
	}
	defer resume()
	s, err := d.capture()
	if err != nil {
		tb.Fatalf("capturing the device's state: %v", err)
	}
	return s
}

func (w *restoreWorld) restore(t *testing.T, data []byte) {
	// After a failed check the device is in an unknown state: the next input (the fuzzer
	// minimising this one runs many) gets a new device, so it fails for its own reasons only.
	defer func() {
		if t.Failed() {
			if w.dev != nil {
				w.dev.Close()
			}
			w.renew(t)
		}
	}()
	dev := w.dev
	w.in.Reset(data)
	w.br.Reset(&w.in)
	err := dev.RestoreSnapshot(w.br)
	if err == nil {
		// Accepted: the device runs the file's state. It must close cleanly; the next input
		// needs a fresh device.
		w.dev = nil
		if err := dev.Close(); err != nil {
			t.Fatalf("closing a device a snapshot was restored into: %v", err)
		}
		w.renew(t)
		return
	}
	if dev.scratch[0] != 0 {
		t.Fatalf("refused (%v) but scratch 0 = %#x", err, dev.scratch[0])
	}
	w.checkVRAMZero(t, err)
	if field := snapshotDiff(w.state(t), w.power); field != "" {
		t.Fatalf("refused (%v) but the device is not at power-on: %s differs from a new device's", err, field)
	}
}

// checkVRAMZero fails unless every VRAM byte reads zero. Only the memfd's data extents can
// hold a non-zero byte (a hole reads as zeros); they are scanned page by page, then punched
// out, so the next input's check again has nothing to scan but what that input wrote.
func (w *restoreWorld) checkVRAMZero(t *testing.T, refusal error) {
	v := w.dev.vram
	mem := v.Bytes()
	ext := v.DataExtents()
	for _, e := range ext {
		for off := e[0]; off < e[1]; off += vramPageSize {
			end := min(off+vramPageSize, e[1])
			if p := mem[off:end]; !bytes.Equal(p, w.zeros[:len(p)]) {
				i := off + uint64(slices.IndexFunc(p, func(b byte) bool { return b != 0 }))
				t.Fatalf("refused (%v) but VRAM byte %#x is non-zero", refusal, i)
			}
		}
	}
	if len(ext) > 0 {
		v.Zero(0, v.Size())
	}
}

// snapshotDiff names the first block in which two captured states differ ("" if none): the
// same blocks, compared the way the file encodes them.
func snapshotDiff(a, b *snapshot) string {
	mesA, errA := a.mes.MarshalBinary()
	mesB, errB := b.mes.MarshalBinary()
	for _, f := range []struct {
		name string
		same bool
	}{
		{"config space", a.config == b.config},
		{"the device registers", a.regs == b.regs},
		{"the MSI-X table", bytes.Equal(a.msixTable, b.msixTable)},
		{"the MSI-X pending bits", slices.Equal(a.pending, b.pending)},
		{"the GMC", a.gmc == b.gmc},
		{"the VM block", a.vm == b.vm},
		{"the IH", a.ih == b.ih},
		{"the MES", errA == nil && errB == nil && bytes.Equal(mesA, mesB)},
		{"the CP", a.cp == b.cp},
		{"the doorbells", slices.Equal(a.doorbells, b.doorbells)},
		{"the L2's strict mode", a.strict == b.strict},
		{"the L2's lines", slices.Equal(a.lines, b.lines)},
	} {
		if !f.same {
			return f.name
		}
	}
	return ""
}
