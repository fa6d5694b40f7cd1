package vfiousertest

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// GuestMemory is a memfd mapped into the test process, standing in for guest RAM.
type GuestMemory struct {
	f *os.File
	b []byte
}

// NewGuestMemory makes size bytes of zeroed shared memory backed by a memfd.
func NewGuestMemory(size int) (*GuestMemory, error) {
	fd, err := unix.MemfdCreate("vfiousertest-guest", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "vfiousertest-guest")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &GuestMemory{f: f, b: b}, nil
}

// Bytes is the memory itself.
func (g *GuestMemory) Bytes() []byte { return g.b }

// File is the backing memfd.
func (g *GuestMemory) File() *os.File { return g.f }

// Close unmaps and closes the memory. Unmap it from the server first.
func (g *GuestMemory) Close() error {
	err := unix.Munmap(g.b)
	g.b = nil
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// MapOptions shape one DMA_MAP.
type MapOptions struct {
	ReadOnly bool // READ only: the server may not DMA_WRITE there
	NoFD     bool // send no fd, as QEMU does for non-shared RAM: the server must use DMA messages
}

// dmaMap is one mapping the client made, used to serve the server's DMA requests.
type dmaMap struct {
	iova, size uint64
	mem        []byte // the mapped window of the guest memory
	readOnly   bool
}

// DMAMap maps size bytes of mem, starting at off, at iova.
func (c *Client) DMAMap(iova uint64, mem *GuestMemory, off, size uint64, opt MapOptions) error {
	if off > uint64(len(mem.b)) || size > uint64(len(mem.b))-off || size == 0 {
		return fmt.Errorf("DMAMap: window %#x+%#x outside %d bytes of memory", off, size, len(mem.b))
	}
	req := vfiouser.DMAMapMsg{Argsz: vfiouser.DMAMapSize, Flags: vfiouser.DMAFlagRead, IOVA: iova, Size: size}
	if !opt.ReadOnly {
		req.Flags |= vfiouser.DMAFlagWrite
	}
	var fds []int
	if !opt.NoFD {
		req.Offset = off
		fds = []int{int(mem.f.Fd())}
	}
	if err := c.simple(vfiouser.CmdDMAMap, fds, req.Append(nil)); err != nil {
		return err
	}
	c.ensureBackground() // from now on the server may DMA at any time
	c.mapsMu.Lock()
	c.maps = append(c.maps, dmaMap{iova: iova, size: size, mem: mem.b[off : off+size], readOnly: opt.ReadOnly})
	c.mapsMu.Unlock()
	return nil
}

// DMAUnmap unmaps [iova, iova+size) (range semantics, as QEMU relies on).
func (c *Client) DMAUnmap(iova, size uint64) error {
	return c.unmap(vfiouser.DMAUnmapMsg{Argsz: vfiouser.DMAUnmapSize, IOVA: iova, Size: size})
}

// DMAUnmapAll drops every mapping (flag ALL).
func (c *Client) DMAUnmapAll() error {
	return c.unmap(vfiouser.DMAUnmapMsg{Argsz: vfiouser.DMAUnmapSize, Flags: vfiouser.DMAUnmapFlagAll})
}

func (c *Client) unmap(req vfiouser.DMAUnmapMsg) error {
	r, err := c.Call(vfiouser.CmdDMAUnmap, nil, req.Append(nil))
	if r != nil {
		c.releaseMsg(r)
	}
	if err != nil {
		return err
	}
	// Only now: until the reply the server may still legitimately touch the range.
	all := req.Flags&vfiouser.DMAUnmapFlagAll != 0
	c.mapsMu.Lock()
	kept := c.maps[:0]
	for _, m := range c.maps {
		if !all && !covers(req.IOVA, req.Size, m.iova, m.size) {
			kept = append(kept, m)
		}
	}
	c.maps = kept
	c.mapsMu.Unlock()
	return nil
}

// covers reports whether [iova, iova+size) contains the mapping [mIOVA, mIOVA+mSize), with
// a range end at or beyond 2^64 meaning "to the end".
func covers(iova, size, mIOVA, mSize uint64) bool {
	if size == 0 || mIOVA < iova {
		return false
	}
	if iova != 0 && size >= -iova { // reaches 2^64
		return true
	}
	mLast := mIOVA + mSize - 1
	return mLast >= mIOVA && mLast <= iova+size-1
}

// translate finds the guest bytes behind [iova, iova+n), which must lie in one mapping.
func (c *Client) translate(iova, n uint64, write bool) ([]byte, unix.Errno) {
	c.mapsMu.RLock()
	defer c.mapsMu.RUnlock()
	for _, m := range c.maps {
		if iova < m.iova || iova-m.iova >= m.size || n > m.size-(iova-m.iova) {
			continue
		}
		if write && m.readOnly {
			return nil, unix.EPERM
		}
		off := iova - m.iova
		return m.mem[off : off+n], 0
	}
	return nil, unix.ENODEV // what QEMU answers for an unmapped address
}

// serveRequest answers one server→client command, as QEMU's pci.c does: DMA_READ and
// DMA_WRITE against the mappings; anything else ENOSYS; fds are refused.
func (c *Client) serveRequest(m *vfiouser.Message) {
	payload, errno := c.dmaAccess(m)
	if errno == 0 && m.Cmd == vfiouser.CmdDMAWrite && m.NoReply() {
		return
	}
	h := vfiouser.Header{ID: m.ID, Cmd: m.Cmd, Flags: vfiouser.FlagTypeReply}
	if errno != 0 {
		h.Flags |= vfiouser.FlagError
		h.Error = uint32(errno)
		payload = nil
	}
	c.conn.WriteMessage(h, nil, payload...) // a failure shows up in the reader
}

func (c *Client) dmaAccess(m *vfiouser.Message) ([][]byte, unix.Errno) {
	if len(m.FDs) > 0 {
		return nil, unix.EINVAL
	}
	if m.Cmd != vfiouser.CmdDMARead && m.Cmd != vfiouser.CmdDMAWrite {
		return nil, unix.ENOSYS
	}
	acc, data, err := vfiouser.DecodeDMAAccess(m.Payload)
	if err != nil {
		return nil, unix.EINVAL
	}
	if acc.Count > c.ourMaxXfer {
		return nil, unix.E2BIG
	}
	head := acc.Append(make([]byte, 0, vfiouser.DMAAccessSize))
	if m.Cmd == vfiouser.CmdDMARead {
		if len(data) != 0 {
			return nil, unix.EINVAL
		}
		mem, errno := c.translate(acc.Address, acc.Count, false)
		if errno != 0 {
			return nil, errno
		}
		c.dmaReads.Add(1)
		return [][]byte{head, mem}, 0
	}
	if uint64(len(data)) != acc.Count {
		return nil, unix.EINVAL
	}
	mem, errno := c.translate(acc.Address, acc.Count, true)
	if errno != 0 {
		return nil, errno
	}
	copy(mem, data)
	c.dmaWrites.Add(1)
	return [][]byte{head}, 0
}
