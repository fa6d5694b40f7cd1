package vfiouser_test

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

func FuzzDecodeHeader(f *testing.F) {
	f.Add(vfiouser.Header{ID: 1, Cmd: vfiouser.CmdVersion, Size: 214}.Append(nil))
	f.Add(vfiouser.Header{ID: 0xffff, Cmd: 0xffff, Size: 1<<32 - 1, Flags: 0x21, Error: 22}.Append(nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := vfiouser.DecodeHeader(b)
		if err != nil {
			if len(b) >= vfiouser.HeaderSize {
				t.Fatalf("DecodeHeader(%x): %v", b, err)
			}
			return
		}
		enc := h.Append(nil)
		if !bytes.Equal(enc, b[:vfiouser.HeaderSize]) {
			t.Fatalf("re-encoded header %x, want %x", enc, b[:16])
		}
		if err := h.CheckFraming(); err == nil && (h.Size < 16 || h.Size > vfiouser.MaxMessageSize) {
			t.Fatalf("CheckFraming accepted size %d", h.Size)
		}
	})
}

// decoders lists every payload decoder with its encoder, for decode → encode → decode.
var decoders = []func(p []byte) (any, []byte, error){
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeVersion(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeDMAMap(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeDMAUnmap(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeDeviceInfo(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeRegionInfo(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeIRQInfo(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeIRQSet(p)
		return v, v.Append(nil), err
	},
	func(p []byte) (any, []byte, error) {
		v, data, err := vfiouser.DecodeRegionAccess(p)
		return struct {
			vfiouser.RegionAccess
			D string
		}{v, string(data)}, append(v.Append(nil), data...), err
	},
	func(p []byte) (any, []byte, error) {
		v, data, err := vfiouser.DecodeDMAAccess(p)
		return struct {
			vfiouser.DMAAccess
			D string
		}{v, string(data)}, append(v.Append(nil), data...), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.DecodeWriteMulti(p)
		return v, vfiouser.AppendWriteMulti(nil, v), err
	},
	func(p []byte) (any, []byte, error) {
		v, err := vfiouser.ParseCapabilities(p)
		return v, vfiouser.MarshalCapabilities(v), err
	},
	func(p []byte) (any, []byte, error) {
		// Region info with caps: re-encode info + sparse cap when there is one.
		info, err := vfiouser.DecodeRegionInfo(p)
		if err != nil {
			return nil, nil, err
		}
		areas, err := vfiouser.DecodeRegionCaps(p)
		if err != nil || len(areas) == 0 {
			return areas, p, err // nothing canonical to rebuild
		}
		info.CapOffset = vfiouser.RegionInfoSize
		info.Flags |= vfiouser.RegionFlagCaps
		return areas, vfiouser.AppendSparseMmapCap(info.Append(nil), 0, areas), nil
	},
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(byte(0), vfiouser.VersionMsg{JSON: []byte(vfiousertest.QEMUVersionJSON)}.Append(nil))
	f.Add(byte(1), dmaMapPayload(32, 3, 0, 0x1000, 0x1000))
	f.Add(byte(2), dmaUnmapPayload(24, 2, 0, 0))
	f.Add(byte(3), vfiouser.DeviceInfoMsg{Argsz: 16, Flags: 3, NumRegions: 9, NumIRQs: 5}.Append(nil))
	f.Add(byte(4), vfiouser.RegionInfoMsg{Argsz: 32, Index: 2}.Append(nil))
	f.Add(byte(5), vfiouser.IRQInfoMsg{Argsz: 16, Index: 2}.Append(nil))
	f.Add(byte(6), vfiouser.IRQSetMsg{Argsz: 23, Flags: 0x22, Index: 2, Count: 3, Data: []byte{1, 0, 1}}.Append(nil))
	f.Add(byte(7), append(regionAccess(0x10, 7, 4), 1, 2, 3, 4))
	f.Add(byte(8), append(vfiouser.DMAAccess{Address: 0x1000, Count: 2}.Append(nil), 9, 9))
	f.Add(byte(9), vfiouser.AppendWriteMulti(nil, []vfiouser.WriteMultiEntry{{Offset: 4, Region: 2, Count: 4}}))
	f.Add(byte(10), []byte(vfiousertest.QEMUVersionJSON))
	f.Add(byte(11), vfiouser.AppendSparseMmapCap(vfiouser.RegionInfoMsg{Argsz: 80, Flags: 0xf, CapOffset: 32}.Append(nil), 0, testSparseAreas))
	f.Fuzz(func(t *testing.T, kind byte, p []byte) {
		decode := decoders[int(kind)%len(decoders)]
		v1, enc, err := decode(p)
		if err != nil {
			return
		}
		v2, _, err := decode(enc)
		if err != nil {
			t.Fatalf("re-encoded payload %x does not decode: %v", enc, err)
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("round trip changed the value (-first +second):\n-%+v\n+%+v", v1, v2)
		}
	})
}

// FuzzServer feeds arbitrary bytes to a server over a socketpair: it must neither panic nor
// hang, and it must end once the input does. An odd first byte prefixes a valid VERSION so the
// input reaches the command handlers.
func FuzzServer(f *testing.F) {
	version := func() []byte {
		v := vfiouser.VersionMsg{JSON: []byte(vfiousertest.QEMUVersionJSON)}.Append(nil)
		return append(vfiouser.Header{ID: 0, Cmd: vfiouser.CmdVersion, Size: uint32(16 + len(v))}.Append(nil), v...)
	}
	msg := func(cmd vfiouser.Command, flags uint32, p []byte) []byte {
		return append(vfiouser.Header{ID: 7, Cmd: cmd, Size: uint32(16 + len(p)), Flags: flags}.Append(nil), p...)
	}
	f.Add(version())
	f.Add(append([]byte{1}, msg(vfiouser.CmdDeviceGetInfo, 0, vfiouser.DeviceInfoMsg{Argsz: 16}.Append(nil))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdRegionRead, 0, regionAccess(0, regTrap, 4))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdRegionWrite, 0x10, append(regionAccess(0, regTrap, 2), 1, 2))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdDeviceGetRegionInfo, 0, vfiouser.RegionInfoMsg{Argsz: 80}.Append(nil))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdDeviceSetIRQs, 0, vfiouser.IRQSetMsg{Argsz: 20, Flags: 0x21, Index: 2}.Append(nil))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdRegionWriteMulti, 0x10, vfiouser.AppendWriteMulti(nil, make([]vfiouser.WriteMultiEntry, 3)))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdDMAUnmap, 0, dmaUnmapPayload(24, 0, 0x1000, 1<<64-1))...))
	f.Add(append([]byte{1}, msg(vfiouser.CmdDMARead, 1, vfiouser.DMAAccess{Address: 1, Count: 1}.Append(nil))...))
	f.Add(append([]byte{1}, vfiouser.Header{Size: 3}.Append(nil)...))
	f.Add([]byte{0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 && in[0]&1 == 1 {
			in = append(version(), in[1:]...)
		}
		dev := newTestDevice(t)
		sc, cc, err := vfiousertest.Socketpair()
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- vfiouser.NewServer(dev, nil).ServeConn(ctx, sc) }()
		go io.Copy(io.Discard, cc) // drain replies so the server never blocks writing
		if _, err := cc.Write(in); err != nil {
			t.Logf("write: %v", err) // the server may hang up early: fine
		}
		cc.CloseWrite()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("server still running 5 s after the input ended (%d bytes)", len(in))
		}
	})
}
