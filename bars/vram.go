package bars

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// VRAM is the device's video memory: a memfd of the full VRAM size, mapped once into the
// server. The first Window bytes are BAR0, which QEMU maps into the guest from the same fd.
type VRAM struct {
	file   *os.File
	mem    []byte
	window uint64
}

// NewVRAM creates size bytes of VRAM (sparse: pages cost nothing until written) of which the
// first window bytes are CPU-visible through BAR0.
func NewVRAM(size, window uint64) (*VRAM, error) {
	if size == 0 || window == 0 || window > size {
		return nil, fmt.Errorf("bars: VRAM window %#x must be non-zero and at most the VRAM size %#x", window, size)
	}
	file, mem, err := sharedMemory("vgpu-vram", size)
	if err != nil {
		return nil, err
	}
	return &VRAM{file: file, mem: mem, window: window}, nil
}

// sharedSeals are the seals on every memfd the server hands to a client. The client gets the
// same file and could otherwise ftruncate it: the server's mapping would then SIGBUS on the
// next access to a page past the new end. Writes stay allowed (QEMU maps the file shared and
// the guest writes through it), and F_SEAL_SEAL keeps the client from adding a write seal.
const sharedSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// sharedMemory creates a sealed memfd of size bytes and maps it read-write, shared.
func sharedMemory(name string, size uint64) (*os.File, []byte, error) {
	if size > 1<<40 || size != uint64(int(size)) {
		return nil, nil, fmt.Errorf("bars: %s size %#x is too large", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("bars: memfd_create %s: %w", name, err)
	}
	file := os.NewFile(uintptr(fd), name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("bars: sizing %s to %#x bytes: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, sharedSeals); err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("bars: sealing %s: %w", name, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("bars: mapping %s: %w", name, err)
	}
	return file, mem, nil
}

// File is the memfd QEMU maps for BAR0.
func (v *VRAM) File() *os.File { return v.file }

// Window is the CPU-visible size (the BAR0 size).
func (v *VRAM) Window() uint64 { return v.window }

// Size is the whole VRAM size.
func (v *VRAM) Size() uint64 { return uint64(len(v.mem)) }

// Bytes is all of VRAM, for the device's engines.
func (v *VRAM) Bytes() []byte { return v.mem }

// Read serves a trapped BAR0 read (QEMU normally maps BAR0; it traps only in corner cases such
// as the INTx fallback path, and every region must still answer messages).
func (v *VRAM) Read(off uint64, p []byte) error {
	if err := v.checkWindow(off, len(p)); err != nil {
		return err
	}
	copy(p, v.mem[off:])
	return nil
}

// Write serves a trapped BAR0 write.
func (v *VRAM) Write(off uint64, p []byte) error {
	if err := v.checkWindow(off, len(p)); err != nil {
		return err
	}
	copy(v.mem[off:], p)
	return nil
}

func (v *VRAM) checkWindow(off uint64, n int) error {
	if off >= v.window || uint64(n) > v.window-off {
		return fmt.Errorf("bars: VRAM access [%#x+%d) outside the %#x-byte window: %w", off, n, v.window, syscall.EINVAL)
	}
	return nil
}

// Close unmaps and closes VRAM.
func (v *VRAM) Close() error {
	err := unix.Munmap(v.mem)
	if cerr := v.file.Close(); err == nil {
		err = cerr
	}
	return err
}
