package vfiouser_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// Region layout of testDevice.
const (
	regSparse  = 0 // memfd-backed, mmap-able through two sparse areas, trapped elsewhere
	regTrap    = 1 // plain trapped registers
	regAbsent  = 2 // size 0
	regROM     = 3 // read-only
	regWhole   = 4 // memfd-backed, mmap-able whole (no caps)
	regNoFile  = 5 // claims MMAP without a file (a device bug the server must survive)
	regConfig  = 7 // config-space sized trapped region
	numRegions = 8

	sparseSize       = 64 << 10
	sparseFileOffset = 64 << 10 // the region starts 64 KiB into its memfd
	wholeSize        = 8 << 10
	msixVectors      = 16
)

var testSparseAreas = []vfiouser.SparseArea{{Offset: 0x0000, Size: 0x4000}, {Offset: 0x8000, Size: 0x4000}}

// unmapCall records one DMAUnmap.
type unmapCall struct {
	IOVA, Size uint64
	All        bool
}

// testDevice implements vfiouser.Device with a few regions and records what the server asks.
type testDevice struct {
	mu sync.Mutex

	sparseFile, wholeFile *os.File
	sparseMem, wholeMem   []byte // mmaps of the memfds, so trapped access sees mmapped writes
	trap, rom, config     []byte

	calls        []string
	maps         []vfiouser.DMAMapping
	unmaps       []unmapCall
	irqSets      []vfiouser.SetIRQs // without Files
	vectors      map[uint32]map[uint32]*os.File
	resets       int
	connects     int
	disconnects  int
	peer         vfiouser.Peer
	failNext     error  // returned (once) by the next DMAMap, SetIRQs, RegionRead/Write or Reset
	unmapHook    func() // runs inside DMAUnmap, outside the lock (e.g. waits for an engine)
	connectedCh  chan vfiouser.Peer
	disconnectCh chan struct{}
	quiet        bool // benchmarks: do not record region writes
}

func newTestDevice(t testing.TB) *testDevice {
	t.Helper()
	d := &testDevice{
		trap:         make([]byte, 4096),
		rom:          make([]byte, 256),
		config:       make([]byte, 4096),
		vectors:      map[uint32]map[uint32]*os.File{},
		connectedCh:  make(chan vfiouser.Peer, 16),
		disconnectCh: make(chan struct{}, 16),
	}
	for i := range d.rom {
		d.rom[i] = byte(i)
	}
	d.sparseFile, d.sparseMem = memfd(t, "sparse", sparseFileOffset+sparseSize, sparseFileOffset)
	d.wholeFile, d.wholeMem = memfd(t, "whole", wholeSize, 0)
	t.Cleanup(func() {
		unix.Munmap(d.sparseMem)
		unix.Munmap(d.wholeMem)
		d.sparseFile.Close()
		d.wholeFile.Close()
		d.closeAll()
	})
	return d
}

// memfd makes a memfd of size bytes and maps it from off to the end.
func memfd(t testing.TB, name string, size, off int) (*os.File, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, int64(off), size-off, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), name), b
}

func (d *testDevice) record(format string, args ...any) {
	d.calls = append(d.calls, fmt.Sprintf(format, args...))
}

// takeFail returns the injected error, once.
func (d *testDevice) takeFail() error {
	err := d.failNext
	d.failNext = nil
	return err
}

func (d *testDevice) setFail(err error) {
	d.mu.Lock()
	d.failNext = err
	d.mu.Unlock()
}

func (d *testDevice) Info() vfiouser.DeviceInfo {
	rw := uint32(vfiouser.RegionFlagRead | vfiouser.RegionFlagWrite)
	regions := make([]vfiouser.RegionInfo, numRegions)
	regions[regSparse] = vfiouser.RegionInfo{
		Flags: rw | vfiouser.RegionFlagMmap, Size: sparseSize,
		File: d.sparseFile, FileOffset: sparseFileOffset, Sparse: testSparseAreas,
	}
	regions[regTrap] = vfiouser.RegionInfo{Flags: rw, Size: uint64(len(d.trap))}
	regions[regROM] = vfiouser.RegionInfo{Flags: vfiouser.RegionFlagRead, Size: uint64(len(d.rom))}
	regions[regWhole] = vfiouser.RegionInfo{Flags: rw | vfiouser.RegionFlagMmap, Size: wholeSize, File: d.wholeFile}
	regions[regNoFile] = vfiouser.RegionInfo{Flags: rw | vfiouser.RegionFlagMmap, Size: 4096}
	regions[regConfig] = vfiouser.RegionInfo{Flags: rw, Size: uint64(len(d.config))}
	return vfiouser.DeviceInfo{
		Flags:   vfiouser.DeviceFlagReset | vfiouser.DeviceFlagPCI,
		Regions: regions,
		IRQs: []vfiouser.IRQInfo{
			vfiouser.IRQIndexINTx: {Flags: 0x7, Count: 1},
			vfiouser.IRQIndexMSI:  {Flags: 0x9, Count: 0},
			vfiouser.IRQIndexMSIX: {Flags: 0x9, Count: msixVectors},
			vfiouser.IRQIndexErr:  {Flags: 0x1, Count: 1},
			vfiouser.IRQIndexReq:  {Flags: 0x1, Count: 1},
		},
	}
}

// backing returns the bytes behind a region (the server has checked the range).
func (d *testDevice) backing(region uint32) []byte {
	switch region {
	case regSparse:
		return d.sparseMem
	case regTrap:
		return d.trap
	case regROM:
		return d.rom
	case regWhole:
		return d.wholeMem
	case regConfig:
		return d.config
	}
	return nil
}

func (d *testDevice) RegionRead(region uint32, off uint64, p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.takeFail(); err != nil {
		return err
	}
	b := d.backing(region)
	if b == nil || off+uint64(len(p)) > uint64(len(b)) {
		return fmt.Errorf("testDevice: read region %d %#x+%d: %w", region, off, len(p), unix.EFAULT)
	}
	copy(p, b[off:])
	return nil
}

func (d *testDevice) RegionWrite(region uint32, off uint64, p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.takeFail(); err != nil {
		return err
	}
	b := d.backing(region)
	if b == nil || off+uint64(len(p)) > uint64(len(b)) {
		return fmt.Errorf("testDevice: write region %d %#x+%d: %w", region, off, len(p), unix.EFAULT)
	}
	copy(b[off:], p)
	if !d.quiet {
		d.record("write %d %#x %d", region, off, len(p))
	}
	return nil
}

func (d *testDevice) DMAMap(m vfiouser.DMAMapping) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.takeFail(); err != nil {
		return err // the server closes m.File
	}
	d.maps = append(d.maps, m)
	d.record("map %#x %#x fd=%t", m.IOVA, m.Size, m.File != nil)
	return nil
}

func (d *testDevice) DMAUnmap(iova, size uint64, all bool) error {
	d.mu.Lock()
	hook := d.unmapHook
	d.mu.Unlock()
	if hook != nil {
		hook()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unmaps = append(d.unmaps, unmapCall{iova, size, all})
	kept := d.maps[:0]
	for _, m := range d.maps {
		if all || (m.IOVA >= iova && m.IOVA-iova < size && m.Size <= size-(m.IOVA-iova)) {
			if m.File != nil {
				m.File.Close()
			}
			continue
		}
		kept = append(kept, m)
	}
	d.maps = kept
	return nil
}

func (d *testDevice) SetIRQs(req vfiouser.SetIRQs) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.takeFail(); err != nil {
		return err // the server closes req.Files
	}
	files := req.Files
	req.Files = nil
	d.irqSets = append(d.irqSets, req)
	vec := d.vectors[req.Index]
	if vec == nil {
		vec = map[uint32]*os.File{}
		d.vectors[req.Index] = vec
	}
	switch {
	case req.Flags&vfiouser.IRQSetDataNone != 0 && req.Count == 0:
		for v, f := range vec {
			f.Close()
			delete(vec, v)
		}
	case req.Flags&vfiouser.IRQSetDataEventfd != 0:
		for i := uint32(0); i < req.Count; i++ {
			if old := vec[req.Start+i]; old != nil {
				old.Close()
				delete(vec, req.Start+i)
			}
			if int(i) < len(files) {
				vec[req.Start+i] = files[i]
			}
		}
	}
	return nil
}

// trigger signals the eventfd of a vector, as an MSI-X Trigger would.
func (d *testDevice) trigger(index, vector uint32) error {
	d.mu.Lock()
	f := d.vectors[index][vector]
	d.mu.Unlock()
	if f == nil {
		return fmt.Errorf("no eventfd for %d/%d", index, vector)
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := f.Write(one[:])
	return err
}

func (d *testDevice) Reset() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.takeFail(); err != nil {
		return err
	}
	d.resets++
	return nil
}

func (d *testDevice) Connected(p vfiouser.Peer) {
	d.mu.Lock()
	d.peer = p
	d.connects++
	d.mu.Unlock()
	d.connectedCh <- p
}

func (d *testDevice) Disconnected() {
	d.mu.Lock()
	d.peer = nil
	d.disconnects++
	d.mu.Unlock()
	d.closeAll()
	d.disconnectCh <- struct{}{}
}

// closeAll drops every DMA map file and eventfd, as a device does on disconnect.
func (d *testDevice) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.maps {
		if m.File != nil {
			m.File.Close()
		}
	}
	d.maps = nil
	for _, vec := range d.vectors {
		for v, f := range vec {
			f.Close()
			delete(vec, v)
		}
	}
}

// snapshot returns copies of the recorded state under the lock.
func (d *testDevice) snapshot() (maps []vfiouser.DMAMapping, unmaps []unmapCall, sets []vfiouser.SetIRQs, resets int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]vfiouser.DMAMapping(nil), d.maps...), append([]unmapCall(nil), d.unmaps...),
		append([]vfiouser.SetIRQs(nil), d.irqSets...), d.resets
}

func (d *testDevice) counts() (connects, disconnects int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.connects, d.disconnects
}

func (d *testDevice) currentPeer() vfiouser.Peer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peer
}
