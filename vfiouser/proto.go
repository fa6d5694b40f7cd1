package vfiouser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// Command is a vfio-user command number, the header's "command" field.
type Command uint16

// Command numbers. 6, 14 and 16-18 are never sent by QEMU 11.1 and are answered with ENOSYS;
// 11 and 12 travel from the server to the client only.
const (
	CmdVersion              Command = 1
	CmdDMAMap               Command = 2
	CmdDMAUnmap             Command = 3
	CmdDeviceGetInfo        Command = 4
	CmdDeviceGetRegionInfo  Command = 5
	CmdDeviceGetRegionIOFDs Command = 6
	CmdDeviceGetIRQInfo     Command = 7
	CmdDeviceSetIRQs        Command = 8
	CmdRegionRead           Command = 9
	CmdRegionWrite          Command = 10
	CmdDMARead              Command = 11
	CmdDMAWrite             Command = 12
	CmdDeviceReset          Command = 13
	CmdDirtyPages           Command = 14 // obsolete; kept so logs name it
	CmdRegionWriteMulti     Command = 15
	CmdDeviceFeature        Command = 16
	CmdMigDataRead          Command = 17
	CmdMigDataWrite         Command = 18
)

var commandNames = [...]string{
	CmdVersion:              "VERSION",
	CmdDMAMap:               "DMA_MAP",
	CmdDMAUnmap:             "DMA_UNMAP",
	CmdDeviceGetInfo:        "DEVICE_GET_INFO",
	CmdDeviceGetRegionInfo:  "DEVICE_GET_REGION_INFO",
	CmdDeviceGetRegionIOFDs: "DEVICE_GET_REGION_IO_FDS",
	CmdDeviceGetIRQInfo:     "DEVICE_GET_IRQ_INFO",
	CmdDeviceSetIRQs:        "DEVICE_SET_IRQS",
	CmdRegionRead:           "REGION_READ",
	CmdRegionWrite:          "REGION_WRITE",
	CmdDMARead:              "DMA_READ",
	CmdDMAWrite:             "DMA_WRITE",
	CmdDeviceReset:          "DEVICE_RESET",
	CmdDirtyPages:           "DIRTY_PAGES",
	CmdRegionWriteMulti:     "REGION_WRITE_MULTI",
	CmdDeviceFeature:        "DEVICE_FEATURE",
	CmdMigDataRead:          "MIG_DATA_READ",
	CmdMigDataWrite:         "MIG_DATA_WRITE",
}

// String returns the protocol name of the command (VERSION, DMA_MAP, ...).
func (c Command) String() string {
	if int(c) < len(commandNames) && commandNames[c] != "" {
		return commandNames[c]
	}
	return "CMD_" + strconv.Itoa(int(c))
}

// Header flags. The low four bits are the message type; NO_REPLY asks the receiver to stay silent
// on success; ERROR marks a reply whose Error field holds a positive errno.
const (
	FlagTypeMask    = 0x0f
	FlagTypeCommand = 0x00
	FlagTypeReply   = 0x01
	FlagNoReply     = 0x10
	FlagError       = 0x20
)

// HeaderSize is the size of the header that starts every message.
const HeaderSize = 16

// Bounds on what the peer may send. Each one keeps a hostile or buggy client from making the
// server allocate or loop without limit.
const (
	// MaxDataXferSize is the largest data count of one REGION_READ/WRITE or DMA_READ/WRITE that
	// we accept, and what we advertise as max_data_xfer_size. QEMU reads the whole 4 KiB config
	// space in one message, so it must be at least that.
	MaxDataXferSize = 1 << 20
	// MaxMessageSize bounds a whole incoming message: the largest data transfer plus room for
	// any command head. A header announcing more is treated as a lost framing.
	MaxMessageSize = MaxDataXferSize + 4096
	// MaxMsgFDs is the number of fds we accept in one message and advertise as max_msg_fds
	// (QEMU caps the value at 16 and splits SET_IRQS accordingly).
	MaxMsgFDs = 16
	// MaxDMAMaps is advertised as max_dma_maps (QEMU's own default).
	MaxDMAMaps = 65535
	// MaxVersionJSON bounds the capabilities JSON of a VERSION message (QEMU sends ~200 bytes).
	MaxVersionJSON = 4096
	// MaxWriteMultiEntries bounds one REGION_WRITE_MULTI (QEMU sends at most 200).
	MaxWriteMultiEntries = 1024
	// WriteMultiDataSize is the data room of one REGION_WRITE_MULTI entry.
	WriteMultiDataSize = 8
	// maxCapChain bounds how many capabilities a region-info decoder walks.
	maxCapChain = 16
	// MaxSparseAreas bounds the sparse-mmap areas of one region (both what a Device may report
	// and what the decoder accepts).
	MaxSparseAreas = 64
)

// Header is the 16-byte header of every message. Size counts the header itself.
type Header struct {
	ID    uint16
	Cmd   Command
	Size  uint32
	Flags uint32
	Error uint32
}

// IsReply reports whether the message is a reply (type 1).
func (h Header) IsReply() bool { return h.Flags&FlagTypeMask == FlagTypeReply }

// IsCommand reports whether the message is a command (type 0).
func (h Header) IsCommand() bool { return h.Flags&FlagTypeMask == FlagTypeCommand }

// NoReply reports whether the sender asked for no reply on success.
func (h Header) NoReply() bool { return h.Flags&FlagNoReply != 0 }

// IsError reports whether the message is an error reply.
func (h Header) IsError() bool { return h.Flags&FlagError != 0 }

// Put encodes h into b, which must hold HeaderSize bytes.
func (h Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	le.PutUint16(b[0:], h.ID)
	le.PutUint16(b[2:], uint16(h.Cmd))
	le.PutUint32(b[4:], h.Size)
	le.PutUint32(b[8:], h.Flags)
	le.PutUint32(b[12:], h.Error)
}

// Append appends the encoded header to b.
func (h Header) Append(b []byte) []byte {
	var buf [HeaderSize]byte
	h.Put(buf[:])
	return append(b, buf[:]...)
}

// DecodeHeader decodes the first HeaderSize bytes of b. It checks only that they are there;
// CheckFraming judges the size.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header needs %d bytes, have %d", ErrShortPayload, HeaderSize, len(b))
	}
	return Header{
		ID:    le.Uint16(b[0:]),
		Cmd:   Command(le.Uint16(b[2:])),
		Size:  le.Uint32(b[4:]),
		Flags: le.Uint32(b[8:]),
		Error: le.Uint32(b[12:]),
	}, nil
}

// CheckFraming reports whether the header's size can be trusted to find the next message.
// A failure means the stream can no longer be parsed and the connection must be dropped.
func (h Header) CheckFraming() error {
	if h.Size < HeaderSize {
		return fmt.Errorf("%w: size %d below header size", ErrFraming, h.Size)
	}
	if h.Size > MaxMessageSize {
		return fmt.Errorf("%w: size %d above limit %d", ErrFraming, h.Size, MaxMessageSize)
	}
	return nil
}

// le is the byte order of every integer on the wire: host order, and vfio-user only runs on
// little-endian hosts in practice (QEMU and the server share the machine).
var le = binary.LittleEndian

// Errors. Decoding and validation errors wrap EINVAL so the server replies with that errno;
// ErrFraming ends the connection.
var (
	// ErrFraming means a header announced an impossible size: the stream is lost.
	ErrFraming = errors.New("vfio-user: broken framing")
	// ErrShortPayload means a payload is shorter than its command's fixed part.
	ErrShortPayload = fmt.Errorf("vfio-user: payload too short: %w", unix.EINVAL)
	// ErrDisconnected is returned by Peer methods once the client is gone.
	ErrDisconnected = errors.New("vfio-user: client disconnected")
	// ErrTimeout is returned by Peer methods when the client did not answer in time.
	ErrTimeout = errors.New("vfio-user: request timed out")
	// ErrBusy is returned by ServeConn when another client is being served.
	ErrBusy = errors.New("vfio-user: another client is connected")
)

// invalid builds a validation error that maps to EINVAL in the error reply.
func invalid(format string, args ...any) error {
	return fmt.Errorf("vfio-user: "+format+": %w", append(args, unix.EINVAL)...)
}

// errnoFor picks the errno an error reply carries: the errno the error wraps, else EINVAL.
func errnoFor(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return unix.EINVAL
}

// addOverflows reports whether a+b does not fit in 64 bits.
func addOverflows(a, b uint64) bool { return a+b < a }

// inRange reports whether [off, off+n) lies inside [0, size) without overflowing.
func inRange(off, n, size uint64) bool {
	return off <= size && n <= size-off
}
