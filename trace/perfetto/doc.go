// Package perfetto holds the Go types of the subset of Perfetto's trace format vgpu writes
// (perfetto.proto; message names and field numbers are Perfetto's, so the Perfetto UI and
// trace_processor read the files). A trace file is a Trace: a sequence of TracePacket, each
// encoded as field 1 of Trace, so AppendPacket can stream packets one by one and
// proto.Unmarshal of the whole file into a Trace reads it back.
package perfetto

// The protoc-gen-go that generates perfetto.pb.go is the one of go.mod's protobuf module.
//go:generate go build -o /tmp/vgpu-protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
//go:generate protoc --plugin=protoc-gen-go=/tmp/vgpu-protoc-gen-go --go_out=. --go_opt=paths=source_relative perfetto.proto
