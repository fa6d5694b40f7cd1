package main

import (
	"errors"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"

	"golang.org/x/sys/unix"
)

// vramBO: a CPU-visible VRAM BO is mapped write-combined and read and written by both CPU
// and GPU; a VRAM BO without CPU access is refused GEM_MMAP with EPERM, yet the GPU uses it.
// The GPU side runs on the kernel queue (SUBMIT), in the file's VM.
func vramBO(t *T) {
	d := openDev(t)
	if d.Info.Vram_size == 0 || d.Info.Vram_visible_size == 0 || d.Info.Vram_visible_size > d.Info.Vram_size {
		t.Fatalf("INFO: VRAM %d bytes, %d visible", d.Info.Vram_size, d.Info.Vram_visible_size)
	}
	t.Logf("VRAM %d MiB, %d MiB CPU-visible", d.Info.Vram_size>>20, d.Info.Vram_visible_size>>20)
	k := newKQ(t, d)
	out, err := d.NewBuffer(4096, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RW, 4096, true)
	t.Check(err, "system BO")
	const size = 64 << 10

	vis, err := d.NewBuffer(size, drm.VGPU_GEM_DOMAIN_VRAM, drm.VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, drm.RW, 4096, true)
	t.Check(err, "CPU-visible VRAM BO")
	for i := uint64(0); i < size; i += 8 {
		*vis.U64(i) = 0xA5A5_0000_0000_0000 | i
	}
	// GPU reads what the CPU wrote (copy the last word into scratch), and writes a word the
	// CPU reads back.
	k.run(t, pm4.DMACopy(out.VA, vis.VA+size-8, 8), pm4.WriteMem(vis.VA+8, 0x1111, 0x2222))
	if got, want := *out.U64(0), uint64(0xA5A5_0000_0000_0000|(size-8)); got != want {
		t.Errorf("GPU read %#x from visible VRAM, the CPU wrote %#x", got, want)
	}
	if got := *vis.U64(8); got != 0x2222_0000_1111 {
		t.Errorf("CPU reads %#x where the GPU wrote 0x222200001111", got)
	}

	inv, err := d.NewBuffer(size, drm.VGPU_GEM_DOMAIN_VRAM, drm.VGPU_GEM_CREATE_NO_CPU_ACCESS, drm.RW, 4096, false)
	t.Check(err, "VRAM BO without CPU access")
	if _, err := d.MmapOffset(inv.Handle); !errors.Is(err, unix.EPERM) {
		t.Errorf("GEM_MMAP of a NO_CPU_ACCESS VRAM BO: %v, want EPERM", err)
	}
	if err := inv.Mmap(); err == nil {
		t.Errorf("mmap of a NO_CPU_ACCESS VRAM BO succeeded")
	}
	// The GPU fills it and copies a word out.
	k.run(t, pm4.DMAFill(inv.VA, 0x5EED5EED, size), pm4.DMACopy(out.VA+8, inv.VA+size-8, 8))
	if got := *out.U64(8); got != 0x5EED5EED_5EED5EED {
		t.Errorf("GPU-only VRAM read back %#x after a fill with 0x5eed5eed", got)
	}

	// Fill the visible window beyond what is free so a NO_CPU_ACCESS BO lands past it: its
	// refusal must not depend on the flag alone.
	if d.Info.Vram_size > d.Info.Vram_visible_size {
		big, err := d.CreateBO(d.Info.Vram_size-d.Info.Vram_visible_size, drm.VGPU_GEM_DOMAIN_VRAM, drm.VGPU_GEM_CREATE_NO_CPU_ACCESS)
		if err != nil {
			t.Logf("a BO of the invisible size (%d MiB) could not be created (%v): the placement check is not run", (d.Info.Vram_size-d.Info.Vram_visible_size)>>20, err)
		} else {
			if _, err := d.MmapOffset(big.Handle); !errors.Is(err, unix.EPERM) {
				t.Errorf("GEM_MMAP of an invisible-VRAM-sized BO: %v, want EPERM", err)
			}
			t.Check(big.Close(), "close")
		}
	} else {
		t.Logf("all of VRAM is CPU-visible: no invisible part to place a BO in")
	}
	for _, b := range []*drm.Buffer{vis, inv} {
		t.Check(b.Free(), "free a VRAM BO")
	}
}
