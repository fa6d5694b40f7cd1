package device

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// fuzzSnapConfig is the small device FuzzRestore restores into (1 MiB of VRAM: a fresh device
// per input stays cheap).
func fuzzSnapConfig() Config {
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow, cfg.MSIXVectors = 1<<20, 1<<20, 4
	return cfg
}

// FuzzRestore: a snapshot file is user input. Whatever it holds, RestoreSnapshot returns (no
// panic, no allocation beyond the device's own bounds), and a refused file leaves the device
// at power-on with VRAM zeroed; an accepted one leaves a device that closes cleanly.
func FuzzRestore(f *testing.F) {
	dev, err := New(fuzzSnapConfig())
	if err != nil {
		f.Fatal(err)
	}
	// State in most blocks, written as a driver would but without a client: registers, a
	// queue with work done, VRAM.
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
			f.Fatal("the seed's queue did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	var file bytes.Buffer
	if err := dev.SaveSnapshot(&file); err != nil {
		f.Fatal(err)
	}
	dev.Close()
	seed := file.Bytes()
	check, err := New(fuzzSnapConfig())
	if err != nil {
		f.Fatal(err)
	}
	if err := check.RestoreSnapshot(bytes.NewReader(seed)); err != nil {
		f.Fatalf("the seed does not restore: %v", err)
	}
	check.Close()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		dev, err := New(fuzzSnapConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		if err := dev.RestoreSnapshot(bytes.NewReader(data)); err != nil {
			if dev.scratch[0] != 0 {
				t.Fatalf("refused (%v) but scratch 0 = %#x", err, dev.scratch[0])
			}
			if i := slices.IndexFunc(dev.vram.Bytes(), func(b byte) bool { return b != 0 }); i >= 0 {
				t.Fatalf("refused (%v) but VRAM byte %#x is non-zero", err, i)
			}
		}
	})
}
