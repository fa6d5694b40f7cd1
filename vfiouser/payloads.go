package vfiouser

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Fixed payload sizes (bytes after the header).
const (
	VersionHeadSize     = 4
	DMAMapSize          = 32
	DMAUnmapSize        = 24
	DeviceInfoSize      = 16
	RegionInfoSize      = 32
	IRQInfoSize         = 16
	IRQSetHeadSize      = 20
	RegionAccessSize    = 16
	DMAAccessSize       = 16
	WriteMultiHeadSize  = 8
	WriteMultiEntrySize = 24
)

// DMA_UNMAP flags.
const (
	DMAUnmapFlagGetDirtyBitmap = 1 << 0
	DMAUnmapFlagAll            = 1 << 1
)

// Region-info capability ids (VFIO_REGION_INFO_CAP_*).
const (
	RegionCapSparseMmap   = 1
	RegionCapType         = 2
	RegionCapMSIXMappable = 3

	capHeaderSize        = 8
	sparseMmapHeadSize   = capHeaderSize + 8 // header, nr_areas, reserved
	sparseAreaSize       = 16
	sparseMmapCapVersion = 1
)

// VersionMsg is the VERSION payload, the same in both directions.
type VersionMsg struct {
	Major, Minor uint16
	// JSON is the capabilities text without its terminating NUL; empty when absent.
	JSON []byte
}

// Append appends the encoded payload, NUL-terminating a non-empty JSON text (QEMU rejects a
// reply whose JSON is not terminated).
func (v VersionMsg) Append(b []byte) []byte {
	b = le.AppendUint16(b, v.Major)
	b = le.AppendUint16(b, v.Minor)
	if len(v.JSON) > 0 {
		b = append(b, v.JSON...)
		b = append(b, 0)
	}
	return b
}

// DecodeVersion decodes a VERSION payload. The JSON text ends at the first NUL; a missing NUL is
// tolerated. JSON longer than MaxVersionJSON is refused.
func DecodeVersion(p []byte) (VersionMsg, error) {
	if len(p) < VersionHeadSize {
		return VersionMsg{}, ErrShortPayload
	}
	text := p[VersionHeadSize:]
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	if len(text) > MaxVersionJSON {
		return VersionMsg{}, invalid("version JSON of %d bytes exceeds %d", len(text), MaxVersionJSON)
	}
	return VersionMsg{Major: le.Uint16(p[0:]), Minor: le.Uint16(p[2:]), JSON: text}, nil
}

// Capabilities is the "capabilities" object of the VERSION JSON. Zero means absent (the
// protocol default applies); unknown keys (migration, twin_socket) are ignored.
type Capabilities struct {
	MaxMsgFDs       uint64 `json:"max_msg_fds,omitempty"`
	MaxDataXferSize uint64 `json:"max_data_xfer_size,omitempty"`
	PgSizes         uint64 `json:"pgsizes,omitempty"`
	MaxDMAMaps      uint64 `json:"max_dma_maps,omitempty"`
	WriteMultiple   bool   `json:"write_multiple,omitempty"`
}

type versionJSON struct {
	Capabilities Capabilities `json:"capabilities"`
}

// MarshalCapabilities renders caps as the VERSION JSON text (without NUL).
func MarshalCapabilities(caps Capabilities) []byte {
	b, err := json.Marshal(versionJSON{Capabilities: caps})
	if err != nil { // only plain integers and a bool: cannot fail
		panic(err)
	}
	return b
}

// ParseCapabilities parses a VERSION JSON text. An empty text means "all defaults".
func ParseCapabilities(text []byte) (Capabilities, error) {
	if len(text) == 0 {
		return Capabilities{}, nil
	}
	if len(text) > MaxVersionJSON {
		return Capabilities{}, invalid("version JSON of %d bytes exceeds %d", len(text), MaxVersionJSON)
	}
	var v versionJSON
	if err := json.Unmarshal(text, &v); err != nil {
		return Capabilities{}, invalid("version JSON: %v", err)
	}
	return v.Capabilities, nil
}

// DMAMapMsg is the DMA_MAP request.
type DMAMapMsg struct {
	Argsz, Flags uint32
	Offset       uint64 // offset into the attached fd
	IOVA, Size   uint64
}

// Append appends the encoded DMA_MAP request to b.
func (m DMAMapMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint64(b, m.Offset)
	b = le.AppendUint64(b, m.IOVA)
	return le.AppendUint64(b, m.Size)
}

// DecodeDMAMap decodes a DMA_MAP request.
func DecodeDMAMap(p []byte) (DMAMapMsg, error) {
	if len(p) < DMAMapSize {
		return DMAMapMsg{}, ErrShortPayload
	}
	return DMAMapMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]),
		Offset: le.Uint64(p[8:]), IOVA: le.Uint64(p[16:]), Size: le.Uint64(p[24:]),
	}, nil
}

// DMAUnmapMsg is the DMA_UNMAP request and (echoed) reply.
type DMAUnmapMsg struct {
	Argsz, Flags uint32
	IOVA, Size   uint64
}

// Append appends the encoded DMA_UNMAP payload to b.
func (m DMAUnmapMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint64(b, m.IOVA)
	return le.AppendUint64(b, m.Size)
}

// DecodeDMAUnmap decodes a DMA_UNMAP payload (the bitmap part, if any, is ignored).
func DecodeDMAUnmap(p []byte) (DMAUnmapMsg, error) {
	if len(p) < DMAUnmapSize {
		return DMAUnmapMsg{}, ErrShortPayload
	}
	return DMAUnmapMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]),
		IOVA: le.Uint64(p[8:]), Size: le.Uint64(p[16:]),
	}, nil
}

// DeviceInfoMsg is the DEVICE_GET_INFO request and reply.
type DeviceInfoMsg struct {
	Argsz, Flags, NumRegions, NumIRQs uint32
}

// Append appends the encoded DEVICE_GET_INFO payload to b.
func (m DeviceInfoMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.NumRegions)
	return le.AppendUint32(b, m.NumIRQs)
}

// DecodeDeviceInfo decodes a DEVICE_GET_INFO payload.
func DecodeDeviceInfo(p []byte) (DeviceInfoMsg, error) {
	if len(p) < DeviceInfoSize {
		return DeviceInfoMsg{}, ErrShortPayload
	}
	return DeviceInfoMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]),
		NumRegions: le.Uint32(p[8:]), NumIRQs: le.Uint32(p[12:]),
	}, nil
}

// RegionInfoMsg is the fixed part of the DEVICE_GET_REGION_INFO request and reply.
type RegionInfoMsg struct {
	Argsz, Flags, Index, CapOffset uint32
	Size                           uint64
	Offset                         uint64 // mmap offset of the region in the attached fd
}

// Append appends the encoded 32-byte region info to b.
func (m RegionInfoMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.Index)
	b = le.AppendUint32(b, m.CapOffset)
	b = le.AppendUint64(b, m.Size)
	return le.AppendUint64(b, m.Offset)
}

// DecodeRegionInfo decodes the fixed 32 bytes of a region-info payload.
func DecodeRegionInfo(p []byte) (RegionInfoMsg, error) {
	if len(p) < RegionInfoSize {
		return RegionInfoMsg{}, ErrShortPayload
	}
	return RegionInfoMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]),
		Index: le.Uint32(p[8:]), CapOffset: le.Uint32(p[12:]),
		Size: le.Uint64(p[16:]), Offset: le.Uint64(p[24:]),
	}, nil
}

// SparseMmapCapSize is the encoded size of a SPARSE_MMAP capability with n areas.
func SparseMmapCapSize(n int) int { return sparseMmapHeadSize + n*sparseAreaSize }

// AppendSparseMmapCap appends a SPARSE_MMAP capability; next is the payload offset of the
// following capability, 0 for the last.
func AppendSparseMmapCap(b []byte, next uint32, areas []SparseArea) []byte {
	b = le.AppendUint16(b, RegionCapSparseMmap)
	b = le.AppendUint16(b, sparseMmapCapVersion)
	b = le.AppendUint32(b, next)
	b = le.AppendUint32(b, uint32(len(areas)))
	b = le.AppendUint32(b, 0) // reserved
	for _, a := range areas {
		b = le.AppendUint64(b, a.Offset)
		b = le.AppendUint64(b, a.Size)
	}
	return b
}

// DecodeRegionCaps walks the capability chain of a region-info reply payload p (info at offset
// 0) and returns the sparse areas it lists. Unknown capabilities are skipped. It returns nil
// when the reply carries no chain (no CAPS flag, or cap_offset 0 because the caps did not fit).
func DecodeRegionCaps(p []byte) ([]SparseArea, error) {
	info, err := DecodeRegionInfo(p)
	if err != nil {
		return nil, err
	}
	if info.Flags&RegionFlagCaps == 0 || info.CapOffset == 0 {
		return nil, nil
	}
	var areas []SparseArea
	off := uint64(info.CapOffset)
	for i := 0; off != 0; i++ {
		if i == maxCapChain {
			return nil, invalid("capability chain longer than %d", maxCapChain)
		}
		if off < RegionInfoSize || !inRange(off, capHeaderSize, uint64(len(p))) {
			return nil, invalid("capability at %d outside payload of %d", off, len(p))
		}
		id, next := le.Uint16(p[off:]), uint64(le.Uint32(p[off+4:]))
		if next != 0 && next <= off {
			return nil, invalid("capability chain goes backwards (%d -> %d)", off, next)
		}
		if id == RegionCapSparseMmap {
			a, err := decodeSparseAreas(p[off:])
			if err != nil {
				return nil, err
			}
			areas = append(areas, a...)
		}
		off = next
	}
	return areas, nil
}

func decodeSparseAreas(c []byte) ([]SparseArea, error) {
	if len(c) < sparseMmapHeadSize {
		return nil, ErrShortPayload
	}
	n := le.Uint32(c[8:])
	if n > MaxSparseAreas {
		return nil, invalid("%d sparse areas exceed %d", n, MaxSparseAreas)
	}
	if len(c) < SparseMmapCapSize(int(n)) {
		return nil, ErrShortPayload
	}
	areas := make([]SparseArea, n)
	for i := range areas {
		a := c[sparseMmapHeadSize+i*sparseAreaSize:]
		areas[i] = SparseArea{Offset: le.Uint64(a[0:]), Size: le.Uint64(a[8:])}
	}
	return areas, nil
}

// IRQInfoMsg is the DEVICE_GET_IRQ_INFO request and reply.
type IRQInfoMsg struct {
	Argsz, Flags, Index, Count uint32
}

// Append appends the encoded DEVICE_GET_IRQ_INFO payload to b.
func (m IRQInfoMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.Index)
	return le.AppendUint32(b, m.Count)
}

// DecodeIRQInfo decodes a DEVICE_GET_IRQ_INFO payload.
func DecodeIRQInfo(p []byte) (IRQInfoMsg, error) {
	if len(p) < IRQInfoSize {
		return IRQInfoMsg{}, ErrShortPayload
	}
	return IRQInfoMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]),
		Index: le.Uint32(p[8:]), Count: le.Uint32(p[12:]),
	}, nil
}

// IRQSetMsg is the DEVICE_SET_IRQS request. Data holds one byte per vector for DATA_BOOL and
// is empty otherwise (eventfds travel as SCM_RIGHTS).
type IRQSetMsg struct {
	Argsz, Flags, Index, Start, Count uint32
	Data                              []byte
}

// Append appends the encoded SET_IRQS request, data included to b.
func (m IRQSetMsg) Append(b []byte) []byte {
	b = le.AppendUint32(b, m.Argsz)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, m.Index)
	b = le.AppendUint32(b, m.Start)
	b = le.AppendUint32(b, m.Count)
	return append(b, m.Data...)
}

// DecodeIRQSet decodes a SET_IRQS request; Data aliases p.
func DecodeIRQSet(p []byte) (IRQSetMsg, error) {
	if len(p) < IRQSetHeadSize {
		return IRQSetMsg{}, ErrShortPayload
	}
	return IRQSetMsg{
		Argsz: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]), Index: le.Uint32(p[8:]),
		Start: le.Uint32(p[12:]), Count: le.Uint32(p[16:]),
		Data: p[IRQSetHeadSize:],
	}, nil
}

// RegionAccess is the 16-byte head of REGION_READ/WRITE requests and replies.
type RegionAccess struct {
	Offset        uint64
	Region, Count uint32
}

// Append appends the encoded 16-byte head to b.
func (m RegionAccess) Append(b []byte) []byte {
	b = le.AppendUint64(b, m.Offset)
	b = le.AppendUint32(b, m.Region)
	return le.AppendUint32(b, m.Count)
}

func (m RegionAccess) put(b []byte) {
	le.PutUint64(b[0:], m.Offset)
	le.PutUint32(b[8:], m.Region)
	le.PutUint32(b[12:], m.Count)
}

// DecodeRegionAccess decodes the head and returns the bytes after it (aliasing p).
func DecodeRegionAccess(p []byte) (RegionAccess, []byte, error) {
	if len(p) < RegionAccessSize {
		return RegionAccess{}, nil, ErrShortPayload
	}
	return RegionAccess{
		Offset: le.Uint64(p[0:]), Region: le.Uint32(p[8:]), Count: le.Uint32(p[12:]),
	}, p[RegionAccessSize:], nil
}

// DMAAccess is the 16-byte head of DMA_READ/WRITE requests and replies.
type DMAAccess struct {
	Address, Count uint64
}

// Append appends the encoded 16-byte head to b.
func (m DMAAccess) Append(b []byte) []byte {
	b = le.AppendUint64(b, m.Address)
	return le.AppendUint64(b, m.Count)
}

// DecodeDMAAccess decodes the head and returns the bytes after it (aliasing p).
func DecodeDMAAccess(p []byte) (DMAAccess, []byte, error) {
	if len(p) < DMAAccessSize {
		return DMAAccess{}, nil, ErrShortPayload
	}
	return DMAAccess{Address: le.Uint64(p[0:]), Count: le.Uint64(p[8:])}, p[DMAAccessSize:], nil
}

// WriteMultiEntry is one write of a REGION_WRITE_MULTI: Count (≤ 8) bytes of Data.
type WriteMultiEntry struct {
	Offset        uint64
	Region, Count uint32
	Data          [WriteMultiDataSize]byte
}

// AppendWriteMulti appends a REGION_WRITE_MULTI payload (wr_cnt, then the entries).
func AppendWriteMulti(b []byte, entries []WriteMultiEntry) []byte {
	b = le.AppendUint64(b, uint64(len(entries)))
	for _, e := range entries {
		b = le.AppendUint64(b, e.Offset)
		b = le.AppendUint32(b, e.Region)
		b = le.AppendUint32(b, e.Count)
		b = append(b, e.Data[:]...)
	}
	return b
}

// DecodeWriteMulti decodes a REGION_WRITE_MULTI payload. wr_cnt must be at most
// MaxWriteMultiEntries and agree exactly with the payload size; every count must be ≤ 8.
func DecodeWriteMulti(p []byte) ([]WriteMultiEntry, error) {
	if len(p) < WriteMultiHeadSize {
		return nil, ErrShortPayload
	}
	n := le.Uint64(p)
	if n > MaxWriteMultiEntries {
		return nil, invalid("write-multi count %d exceeds %d", n, MaxWriteMultiEntries)
	}
	if uint64(len(p)-WriteMultiHeadSize) != n*WriteMultiEntrySize {
		return nil, invalid("write-multi count %d does not match payload of %d bytes", n, len(p))
	}
	entries := make([]WriteMultiEntry, n)
	for i := range entries {
		e := p[WriteMultiHeadSize+i*WriteMultiEntrySize:]
		entries[i] = WriteMultiEntry{Offset: le.Uint64(e[0:]), Region: le.Uint32(e[8:]), Count: le.Uint32(e[12:])}
		if entries[i].Count > WriteMultiDataSize {
			return nil, invalid("write-multi entry %d count %d exceeds %d", i, entries[i].Count, WriteMultiDataSize)
		}
		copy(entries[i].Data[:], e[16:24])
	}
	return entries, nil
}

// String makes error-reply logs readable.
func (m RegionAccess) String() string {
	return fmt.Sprintf("region %d offset %#x count %d", m.Region, m.Offset, m.Count)
}
