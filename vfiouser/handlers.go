package vfiouser

import (
	"fmt"
	"math/bits"
	"os"

	"golang.org/x/sys/unix"
)

// serverCapsJSON is what our VERSION reply advertises. Never twin_socket: QEMU does not ask for
// it and treats an unrequested one as an error.
var serverCapsJSON = MarshalCapabilities(Capabilities{
	MaxMsgFDs:       MaxMsgFDs,
	MaxDataXferSize: MaxDataXferSize,
	PgSizes:         4096,
	MaxDMAMaps:      MaxDMAMaps,
	WriteMultiple:   true,
})

// maxFDs is how many descriptors a command may carry; any more is EINVAL (and all are closed).
func maxFDs(cmd Command) int {
	switch cmd {
	case CmdDMAMap:
		return 1
	case CmdDeviceSetIRQs:
		return MaxMsgFDs
	}
	return 0
}

// dispatch validates the envelope of a command and runs its handler. It returns the reply
// payload (valid until the next dispatch) and descriptors to send with it (the caller closes
// them). Descriptors the handler does not take stay in m.FDs and are closed by the worker.
func (ss *session) dispatch(m *Message) ([]byte, []int, error) {
	if !m.IsCommand() {
		return nil, nil, invalid("message type %d", m.Flags&FlagTypeMask)
	}
	if !ss.negotiated && m.Cmd != CmdVersion {
		return nil, nil, fatal(invalid("%v before VERSION", m.Cmd))
	}
	if m.FDsTruncated {
		return nil, nil, invalid("more than %d fds", MaxMsgFDs)
	}
	if len(m.FDs) > maxFDs(m.Cmd) {
		return nil, nil, invalid("%d fds on %v (at most %d)", len(m.FDs), m.Cmd, maxFDs(m.Cmd))
	}
	var (
		out []byte
		fds []int
		err error
	)
	switch m.Cmd {
	case CmdVersion:
		out, err = ss.version(m)
	case CmdDMAMap:
		err = ss.dmaMap(m)
	case CmdDMAUnmap:
		out, err = ss.dmaUnmap(m)
	case CmdDeviceGetInfo:
		out, err = ss.deviceInfo(m)
	case CmdDeviceGetRegionInfo:
		out, fds, err = ss.regionInfo(m)
	case CmdDeviceGetIRQInfo:
		out, err = ss.irqInfo(m)
	case CmdDeviceSetIRQs:
		err = ss.setIRQs(m)
	case CmdRegionRead:
		out, err = ss.regionRead(m)
	case CmdRegionWrite:
		out, err = ss.regionWrite(m)
	case CmdRegionWriteMulti:
		out, err = ss.writeMulti(m)
	case CmdDeviceReset:
		err = ss.dev.Reset()
	case CmdDMARead, CmdDMAWrite:
		err = invalid("%v travels from server to client only", m.Cmd)
	default: // IO_FDS, DIRTY_PAGES, DEVICE_FEATURE, MIG_*, unknown
		err = fmt.Errorf("vfio-user: %v not supported: %w", m.Cmd, unix.ENOSYS)
	}
	if err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	return out, fds, nil
}

// version negotiates: any failure ends the connection, since nothing else may be sent before.
func (ss *session) version(m *Message) ([]byte, error) {
	if ss.negotiated {
		return nil, invalid("second VERSION")
	}
	v, err := DecodeVersion(m.Payload)
	if err != nil {
		return nil, fatal(err)
	}
	if v.Major != 0 {
		return nil, fatal(invalid("client major version %d, we speak 0", v.Major))
	}
	caps, err := ParseCapabilities(v.JSON)
	if err != nil {
		return nil, fatal(err)
	}
	ss.peer.setMaxXfer(caps.MaxDataXferSize)
	ss.info = ss.dev.Info()
	ss.negotiated = true
	return VersionMsg{Major: 0, Minor: 0, JSON: serverCapsJSON}.Append(ss.out[:0]), nil
}

func (ss *session) dmaMap(m *Message) error {
	req, err := DecodeDMAMap(m.Payload)
	if err != nil {
		return err
	}
	if req.Argsz < DMAMapSize {
		return invalid("DMA_MAP argsz %d", req.Argsz)
	}
	if req.Flags&^(DMAFlagRead|DMAFlagWrite) != 0 {
		return invalid("DMA_MAP flags %#x", req.Flags)
	}
	// The last byte must be addressable; a map may end exactly at 2^64.
	if req.Size == 0 || addOverflows(req.IOVA, req.Size-1) {
		return invalid("DMA_MAP iova %#x size %#x", req.IOVA, req.Size)
	}
	if len(m.FDs) == 1 && addOverflows(req.Offset, req.Size) {
		return invalid("DMA_MAP offset %#x size %#x", req.Offset, req.Size)
	}
	dm := DMAMapping{IOVA: req.IOVA, Size: req.Size, Offset: req.Offset, Flags: req.Flags}
	if len(m.FDs) == 1 {
		dm.File = os.NewFile(uintptr(m.FDs[0]), "vfio-user-dma")
		m.FDs = m.FDs[:0]
	}
	if err := ss.dev.DMAMap(dm); err != nil {
		closeFile(dm.File) // idempotent if the device closed it already
		return err
	}
	return nil
}

func (ss *session) dmaUnmap(m *Message) ([]byte, error) {
	req, err := DecodeDMAUnmap(m.Payload)
	if err != nil {
		return nil, err
	}
	if req.Argsz < DMAUnmapSize {
		return nil, invalid("DMA_UNMAP argsz %d", req.Argsz)
	}
	if req.Flags&DMAUnmapFlagGetDirtyBitmap != 0 {
		return nil, fmt.Errorf("vfio-user: DMA_UNMAP dirty bitmap: %w", unix.ENOTSUP)
	}
	if req.Flags&^DMAUnmapFlagAll != 0 {
		return nil, invalid("DMA_UNMAP flags %#x", req.Flags)
	}
	switch {
	case req.Flags&DMAUnmapFlagAll != 0:
		if req.IOVA != 0 || req.Size != 0 {
			return nil, invalid("DMA_UNMAP ALL with iova %#x size %#x", req.IOVA, req.Size)
		}
		err = ss.dev.DMAUnmap(0, 0, true)
	case req.Size != 0:
		// QEMU's vIOMMU teardown sends ranges whose end is 2^64 or beyond: clip to the end.
		size := req.Size
		if req.IOVA != 0 && size > -req.IOVA {
			size = -req.IOVA
		}
		err = ss.dev.DMAUnmap(req.IOVA, size, false)
	}
	if err != nil {
		return nil, err
	}
	req.Argsz = DMAUnmapSize
	return req.Append(ss.out[:0]), nil
}

func (ss *session) deviceInfo(m *Message) ([]byte, error) {
	req, err := DecodeDeviceInfo(m.Payload)
	if err != nil {
		return nil, err
	}
	if req.Argsz < DeviceInfoSize {
		return nil, invalid("DEVICE_GET_INFO argsz %d", req.Argsz)
	}
	ss.info = ss.dev.Info() // the client now (re)learns the layout
	return DeviceInfoMsg{
		Argsz:      DeviceInfoSize,
		Flags:      ss.info.Flags,
		NumRegions: uint32(len(ss.info.Regions)),
		NumIRQs:    uint32(len(ss.info.IRQs)),
	}.Append(ss.out[:0]), nil
}

// regionInfo answers with the 32-byte info, plus the sparse-mmap capability when the client's
// argsz has room for it, plus exactly one fd for an mmap-able region (QEMU keeps the fd of its
// last ask and refuses a second fd).
func (ss *session) regionInfo(m *Message) ([]byte, []int, error) {
	req, err := DecodeRegionInfo(m.Payload)
	if err != nil {
		return nil, nil, err
	}
	if req.Argsz < RegionInfoSize {
		return nil, nil, invalid("GET_REGION_INFO argsz %d", req.Argsz)
	}
	if uint64(req.Index) >= uint64(len(ss.info.Regions)) {
		return nil, nil, invalid("region %d of %d", req.Index, len(ss.info.Regions))
	}
	r := ss.info.Regions[req.Index]
	if len(r.Sparse) > MaxSparseAreas {
		return nil, nil, invalid("region %d has %d sparse areas (at most %d)", req.Index, len(r.Sparse), MaxSparseAreas)
	}
	info := RegionInfoMsg{
		Argsz: RegionInfoSize, Flags: r.Flags &^ RegionFlagCaps, Index: req.Index,
		Size: r.Size, Offset: r.FileOffset,
	}
	mmap := r.Flags&RegionFlagMmap != 0 && r.File != nil
	if !mmap && r.Flags&RegionFlagMmap != 0 {
		ss.log.Error("vfio-user: region claims MMAP without a file; not offering mmap", "region", req.Index)
		info.Flags &^= RegionFlagMmap
	}
	withCaps := false
	if mmap && len(r.Sparse) > 0 {
		// The CAPS flag goes only on a reply that carries the chain: QEMU 11.1 rejects CAPS
		// with a cap_offset outside the bytes it received (EINVAL, realize fails). The short
		// reply's argsz alone tells it to ask again with room for the chain.
		full := RegionInfoSize + SparseMmapCapSize(len(r.Sparse))
		info.Argsz = uint32(full)
		if req.Argsz >= uint32(full) {
			info.Flags |= RegionFlagCaps
			info.CapOffset = RegionInfoSize
			withCaps = true
		}
	}
	out := info.Append(ss.out[:0])
	if withCaps {
		out = AppendSparseMmapCap(out, 0, r.Sparse)
	}
	if !mmap {
		return out, nil, nil
	}
	fd, err := dupFile(r.File)
	if err != nil {
		return nil, nil, err
	}
	return out, []int{fd}, nil
}

func (ss *session) irqInfo(m *Message) ([]byte, error) {
	req, err := DecodeIRQInfo(m.Payload)
	if err != nil {
		return nil, err
	}
	if req.Argsz < IRQInfoSize {
		return nil, invalid("GET_IRQ_INFO argsz %d", req.Argsz)
	}
	if uint64(req.Index) >= uint64(len(ss.info.IRQs)) {
		return nil, invalid("irq index %d of %d", req.Index, len(ss.info.IRQs))
	}
	irq := ss.info.IRQs[req.Index]
	return IRQInfoMsg{Argsz: IRQInfoSize, Flags: irq.Flags, Index: req.Index, Count: irq.Count}.Append(ss.out[:0]), nil
}

func (ss *session) setIRQs(m *Message) error {
	req, err := DecodeIRQSet(m.Payload)
	if err != nil {
		return err
	}
	if err := ss.checkIRQSet(req, len(m.FDs)); err != nil {
		return err
	}
	s := SetIRQs{Flags: req.Flags, Index: req.Index, Start: req.Start, Count: req.Count}
	if req.Flags&IRQSetDataBool != 0 {
		s.Bools = make([]bool, req.Count)
		for i := range s.Bools {
			s.Bools[i] = req.Data[i] != 0
		}
	}
	if len(m.FDs) > 0 {
		s.Files = make([]*os.File, len(m.FDs))
		for i, fd := range m.FDs {
			s.Files[i] = os.NewFile(uintptr(fd), "vfio-user-eventfd")
		}
		m.FDs = m.FDs[:0]
	}
	if err := ss.dev.SetIRQs(s); err != nil {
		for _, f := range s.Files {
			closeFile(f)
		}
		return err
	}
	return nil
}

// checkIRQSet validates the shape of a SET_IRQS request against the IRQ table.
func (ss *session) checkIRQSet(req IRQSetMsg, nfds int) error {
	if req.Argsz < IRQSetHeadSize {
		return invalid("SET_IRQS argsz %d", req.Argsz)
	}
	data, action := req.Flags&IRQSetDataTypeMask, req.Flags&IRQSetActionTypeMask
	if req.Flags&^(IRQSetDataTypeMask|IRQSetActionTypeMask) != 0 ||
		bits.OnesCount32(data) != 1 || bits.OnesCount32(action) != 1 {
		return invalid("SET_IRQS flags %#x", req.Flags)
	}
	if uint64(req.Index) >= uint64(len(ss.info.IRQs)) {
		return invalid("irq index %d of %d", req.Index, len(ss.info.IRQs))
	}
	if req.Count == 0 {
		// Only "DATA_NONE|TRIGGER, start 0, count 0" (disable the index) has no vectors.
		if data != IRQSetDataNone || action != IRQSetActionTrigger || req.Start != 0 {
			return invalid("SET_IRQS count 0 with flags %#x start %d", req.Flags, req.Start)
		}
	} else if uint64(req.Start)+uint64(req.Count) > uint64(ss.info.IRQs[req.Index].Count) {
		return invalid("SET_IRQS vectors %d+%d of %d", req.Start, req.Count, ss.info.IRQs[req.Index].Count)
	}
	switch data {
	case IRQSetDataBool:
		if uint64(len(req.Data)) < uint64(req.Count) {
			return invalid("SET_IRQS has %d bool bytes for %d vectors", len(req.Data), req.Count)
		}
	case IRQSetDataEventfd:
		if uint64(nfds) > uint64(req.Count) {
			return invalid("SET_IRQS has %d fds for %d vectors", nfds, req.Count)
		}
	}
	if data != IRQSetDataEventfd && nfds > 0 {
		return invalid("SET_IRQS fds without DATA_EVENTFD")
	}
	return nil
}

// checkAccess validates a trapped region access: region index, direction, size and range.
func (ss *session) checkAccess(a RegionAccess, need uint32) error {
	if uint64(a.Region) >= uint64(len(ss.info.Regions)) {
		return invalid("region %d of %d", a.Region, len(ss.info.Regions))
	}
	r := &ss.info.Regions[a.Region]
	if r.Flags&need == 0 {
		return invalid("region %d flags %#x lack %#x", a.Region, r.Flags, need)
	}
	if a.Count > MaxDataXferSize {
		return invalid("%v exceeds %d bytes", a, MaxDataXferSize)
	}
	if !inRange(a.Offset, uint64(a.Count), r.Size) {
		return invalid("%v outside region size %#x", a, r.Size)
	}
	return nil
}

// regionRead is the hot path: the device reads straight into the reply buffer.
func (ss *session) regionRead(m *Message) ([]byte, error) {
	a, rest, err := DecodeRegionAccess(m.Payload)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, invalid("REGION_READ with %d trailing bytes", len(rest))
	}
	if err := ss.checkAccess(a, RegionFlagRead); err != nil {
		return nil, err
	}
	out := grow(ss.out, RegionAccessSize+int(a.Count))
	ss.out = out[:0]
	a.put(out)
	if a.Count > 0 {
		if err := ss.dev.RegionRead(a.Region, a.Offset, out[RegionAccessSize:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ss *session) regionWrite(m *Message) ([]byte, error) {
	a, data, err := DecodeRegionAccess(m.Payload)
	if err != nil {
		return nil, err
	}
	if uint64(len(data)) != uint64(a.Count) {
		return nil, invalid("REGION_WRITE count %d with %d data bytes", a.Count, len(data))
	}
	if err := ss.checkAccess(a, RegionFlagWrite); err != nil {
		return nil, err
	}
	if a.Count > 0 {
		if err := ss.dev.RegionWrite(a.Region, a.Offset, data); err != nil {
			return nil, err
		}
	}
	return a.Append(ss.out[:0]), nil
}

// writeMulti checks every entry before applying any, so a bad entry does not leave half a
// batch applied.
func (ss *session) writeMulti(m *Message) ([]byte, error) {
	entries, err := DecodeWriteMulti(m.Payload)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		e := &entries[i]
		if err := ss.checkAccess(RegionAccess{Offset: e.Offset, Region: e.Region, Count: e.Count}, RegionFlagWrite); err != nil {
			return nil, fmt.Errorf("write-multi entry %d: %w", i, err)
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Count == 0 {
			continue
		}
		if err := ss.dev.RegionWrite(e.Region, e.Offset, e.Data[:e.Count]); err != nil {
			return nil, fmt.Errorf("write-multi entry %d: %w", i, err)
		}
	}
	return le.AppendUint64(ss.out[:0], uint64(len(entries))), nil
}

// dupFile duplicates f's descriptor (close-on-exec) without touching f's blocking mode, which
// File.Fd would do.
func dupFile(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("vfio-user: region file: %w", err)
	}
	nfd, derr := -1, error(nil)
	if err := sc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("vfio-user: region file: %w", err)
	}
	if derr != nil {
		return -1, fmt.Errorf("vfio-user: dup region file: %w", derr)
	}
	return nfd, nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}
