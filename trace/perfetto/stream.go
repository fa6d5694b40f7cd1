package perfetto

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// packetField is Trace.packet's field number: a file is these fields one after another.
const packetField protowire.Number = 1

// MaxFileSize bounds what ReadTrace accepts: a trace larger than this is refused rather than
// read into memory (the recorder's own cap, trace.DefaultMaxBytes, is well below it).
const MaxFileSize = 1 << 30

// ErrTooLarge is ReadTrace's error for a file over MaxFileSize.
var ErrTooLarge = errors.New("perfetto: trace file larger than MaxFileSize")

// AppendPacket appends p to b encoded as one Trace.packet field, the unit a streaming writer
// writes: a file made of such records is a valid Trace.
func AppendPacket(b []byte, p *TracePacket) ([]byte, error) {
	b = protowire.AppendTag(b, packetField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(proto.Size(p)))
	// The size was computed just above: marshalling may use it instead of computing it again.
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, p)
	if err != nil {
		return b, fmt.Errorf("perfetto: marshal packet: %w", err)
	}
	return b, nil
}

// WritePacket writes p to w as one Trace.packet field.
func WritePacket(w io.Writer, p *TracePacket) error {
	b, err := AppendPacket(nil, p)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// ReadTrace reads a whole trace file (at most MaxFileSize bytes) and decodes it.
func ReadTrace(r io.Reader) (*Trace, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("perfetto: read trace: %w", err)
	}
	if len(b) > MaxFileSize {
		return nil, ErrTooLarge
	}
	t := new(Trace)
	if err := proto.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("perfetto: decode trace: %w", err)
	}
	return t, nil
}
