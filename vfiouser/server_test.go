package vfiouser_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

const wantServerJSON = `{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535,"write_multiple":true}}`

func TestVersionReply(t *testing.T) {
	dev, c := newPair(t, vfiousertest.SkipNegotiate())
	r, err := call(c, vfiouser.CmdVersion, vfiouser.VersionMsg{JSON: []byte(vfiousertest.QEMUVersionJSON)}.Append(nil))
	wantErrno(t, err, 0)
	want := append([]byte{0, 0, 0, 0}, wantServerJSON...)
	want = append(want, 0)
	if !bytes.Equal(r.Payload, want) {
		t.Fatalf("unexpected VERSION reply (-want +got):\n-%q\n+%q", want, r.Payload)
	}
	if r.Flags != vfiouser.FlagTypeReply || r.Cmd != vfiouser.CmdVersion {
		t.Fatalf("unexpected reply header %+v", r.Header)
	}
	waitPeer(t, dev)
}

func TestVersionErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    unix.Errno // 0: accepted
	}{
		{"no JSON", []byte{0, 0, 0, 0}, 0},
		{"JSON without NUL", append([]byte{0, 0, 0, 0}, `{"capabilities":{}}`...), 0},
		{"empty object", append([]byte{0, 0, 0, 0}, "{}\x00"...), 0},
		{"higher minor", append([]byte{0, 0, 5, 0}, "{}\x00"...), 0},
		{"short", []byte{0, 0}, unix.EINVAL},
		{"major 1", []byte{1, 0, 0, 0}, unix.EINVAL},
		{"bad JSON", append([]byte{0, 0, 0, 0}, "{capabilities\x00"...), unix.EINVAL},
		{"wrong type", append([]byte{0, 0, 0, 0}, `{"capabilities":{"max_data_xfer_size":"big"}}`+"\x00"...), unix.EINVAL},
		{"huge JSON", append([]byte{0, 0, 0, 0}, bytes.Repeat([]byte(" "), vfiouser.MaxVersionJSON+1)...), unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t, vfiousertest.SkipNegotiate())
			_, err := call(c, vfiouser.CmdVersion, tt.payload)
			wantErrno(t, err, tt.want)
			if tt.want == 0 {
				waitPeer(t, dev)
				if err := c.Sync(); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantDisconnect(t, c) // negotiation failures end the connection
			if n, _ := dev.counts(); n != 0 {
				t.Fatalf("Connected called %d times after a failed negotiation", n)
			}
		})
	}
}

func TestCommandBeforeVersion(t *testing.T) {
	dev, c := newPair(t, vfiousertest.SkipNegotiate())
	_, err := c.DeviceInfo()
	wantErrno(t, err, unix.EINVAL)
	wantDisconnect(t, c)
	if err, ok := c.WaitServer(waitLong); !ok || err == nil {
		t.Fatalf("ServeConn = %v, %v; want an error", err, ok)
	}
	if n, m := dev.counts(); n != 0 || m != 0 {
		t.Fatalf("Connected/Disconnected called %d/%d times", n, m)
	}
}

func TestSecondVersion(t *testing.T) {
	_, c := newPair(t)
	_, err := c.Negotiate()
	wantErrno(t, err, unix.EINVAL)
	if err := c.Sync(); err != nil {
		t.Fatalf("connection broken after a second VERSION: %v", err)
	}
}

func TestUnsupportedCommands(t *testing.T) {
	tests := []struct {
		cmd  vfiouser.Command
		want unix.Errno
	}{
		{vfiouser.CmdDeviceGetRegionIOFDs, unix.ENOSYS},
		{vfiouser.CmdDirtyPages, unix.ENOSYS},
		{vfiouser.CmdDeviceFeature, unix.ENOSYS},
		{vfiouser.CmdMigDataRead, unix.ENOSYS},
		{vfiouser.CmdMigDataWrite, unix.ENOSYS},
		{0, unix.ENOSYS},
		{19, unix.ENOSYS},
		{0xffff, unix.ENOSYS},
		{vfiouser.CmdDMARead, unix.EINVAL},
		{vfiouser.CmdDMAWrite, unix.EINVAL},
	}
	_, c := newPair(t)
	for _, tt := range tests {
		t.Run(tt.cmd.String(), func(t *testing.T) {
			r, err := call(c, tt.cmd, make([]byte, 16))
			wantErrno(t, err, tt.want)
			if r.Flags != vfiouser.FlagTypeReply|vfiouser.FlagError || r.Size != vfiouser.HeaderSize {
				t.Fatalf("error reply header %+v, want flags 0x21 and header only", r.Header)
			}
		})
	}
}

func TestBadMessageType(t *testing.T) {
	_, c := newPair(t)
	id := c.NextID()
	if err := c.Send(vfiouser.Header{ID: id, Cmd: vfiouser.CmdDeviceGetInfo, Flags: 2}, make([]byte, 16), nil); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv(waitLong)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || !m.IsError() || unix.Errno(m.Error) != unix.EINVAL {
		t.Fatalf("unexpected reply %+v", m.Header)
	}
}

func dmaMapPayload(argsz, flags uint32, off, iova, size uint64) []byte {
	return vfiouser.DMAMapMsg{Argsz: argsz, Flags: flags, Offset: off, IOVA: iova, Size: size}.Append(nil)
}

func TestDMAMap(t *testing.T) {
	const rw = vfiouser.DMAFlagRead | vfiouser.DMAFlagWrite
	tests := []struct {
		name    string
		payload []byte
		nfds    int
		fail    error
		want    unix.Errno
	}{
		{"fd", dmaMapPayload(32, rw, 0x1000, 0x100000, 0x2000), 1, nil, 0},
		{"no fd", dmaMapPayload(32, vfiouser.DMAFlagRead, 0, 0xfffc0000, 0x40000), 0, nil, 0},
		{"ends at 2^64", dmaMapPayload(32, rw, 0, 1<<64-0x1000, 0x1000), 0, nil, 0},
		{"short", dmaMapPayload(32, rw, 0, 0, 0x1000)[:31], 0, nil, unix.EINVAL},
		{"argsz", dmaMapPayload(16, rw, 0, 0, 0x1000), 0, nil, unix.EINVAL},
		{"flags", dmaMapPayload(32, 0x4|rw, 0, 0, 0x1000), 0, nil, unix.EINVAL},
		{"size 0", dmaMapPayload(32, rw, 0, 0, 0), 0, nil, unix.EINVAL},
		{"wraps", dmaMapPayload(32, rw, 0, 1<<64-0x1000, 0x2000), 0, nil, unix.EINVAL},
		{"offset wraps", dmaMapPayload(32, rw, 1<<64-0x1000, 0, 0x2000), 1, nil, unix.EINVAL},
		{"two fds", dmaMapPayload(32, rw, 0, 0, 0x1000), 2, nil, unix.EINVAL},
		{"device error", dmaMapPayload(32, rw, 0, 0, 0x1000), 1, unix.EBUSY, unix.EBUSY},
		{"device plain error", dmaMapPayload(32, rw, 0, 0, 0x1000), 1, errors.New("no"), unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			fds := newFDs(t, tt.nfds)
			dev.setFail(tt.fail)
			before := openFDs(t)
			_, err := call(c, vfiouser.CmdDMAMap, tt.payload, fds...)
			wantErrno(t, err, tt.want)
			maps, _, _, _ := dev.snapshot()
			if tt.want != 0 {
				if len(maps) != 0 {
					t.Fatalf("device got maps %+v after an error", maps)
				}
				waitFDs(t, before) // every received fd closed
				return
			}
			req, _ := vfiouser.DecodeDMAMap(tt.payload)
			if len(maps) != 1 || maps[0].IOVA != req.IOVA || maps[0].Size != req.Size ||
				maps[0].Offset != req.Offset || maps[0].Flags != req.Flags || (maps[0].File != nil) != (tt.nfds == 1) {
				t.Fatalf("unexpected maps %+v for %+v", maps, req)
			}
		})
	}
}

func dmaUnmapPayload(argsz, flags uint32, iova, size uint64) []byte {
	return vfiouser.DMAUnmapMsg{Argsz: argsz, Flags: flags, IOVA: iova, Size: size}.Append(nil)
}

func TestDMAUnmap(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    unix.Errno
		call    *unmapCall // what the device must see; nil: not called
	}{
		{"nothing mapped", dmaUnmapPayload(24, 0, 0x1000, 0x1000), 0, &unmapCall{0x1000, 0x1000, false}},
		{"all", dmaUnmapPayload(24, vfiouser.DMAUnmapFlagAll, 0, 0), 0, &unmapCall{0, 0, true}},
		{"reaches 2^64", dmaUnmapPayload(24, 0, 0xfef00000, 0xffffffff01100000), 0, &unmapCall{0xfef00000, 1<<64 - 0xfef00000, false}},
		{"beyond 2^64", dmaUnmapPayload(24, 0, 0x1000, 1<<64-1), 0, &unmapCall{0x1000, 1<<64 - 0x1000, false}},
		{"whole space", dmaUnmapPayload(24, 0, 0, 1<<64-1), 0, &unmapCall{0, 1<<64 - 1, false}},
		{"size 0", dmaUnmapPayload(24, 0, 0x1000, 0), 0, nil},
		{"bitmap argsz", append(dmaUnmapPayload(40, 0, 0x1000, 0x1000), make([]byte, 16)...), 0, &unmapCall{0x1000, 0x1000, false}},
		{"all with range", dmaUnmapPayload(24, vfiouser.DMAUnmapFlagAll, 0x1000, 0), unix.EINVAL, nil},
		{"dirty bitmap", dmaUnmapPayload(24, vfiouser.DMAUnmapFlagGetDirtyBitmap, 0, 0x1000), unix.ENOTSUP, nil},
		{"unknown flag", dmaUnmapPayload(24, 4, 0, 0x1000), unix.EINVAL, nil},
		{"argsz", dmaUnmapPayload(8, 0, 0, 0x1000), unix.EINVAL, nil},
		{"short", dmaUnmapPayload(24, 0, 0, 0x1000)[:20], unix.EINVAL, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			r, err := call(c, vfiouser.CmdDMAUnmap, tt.payload)
			wantErrno(t, err, tt.want)
			_, unmaps, _, _ := dev.snapshot()
			var want []unmapCall
			if tt.call != nil {
				want = []unmapCall{*tt.call}
			}
			if !slices.Equal(unmaps, want) {
				t.Fatalf("unexpected device unmaps (-want +got):\n-%+v\n+%+v", want, unmaps)
			}
			if tt.want == 0 {
				echo := append(u32(24), tt.payload[4:24]...)
				if !bytes.Equal(r.Payload, echo) {
					t.Fatalf("unexpected reply (-want +got):\n-%x\n+%x", echo, r.Payload)
				}
			}
		})
	}
}

func TestDMAUnmapRemovesMaps(t *testing.T) {
	dev, c := newPair(t)
	mem, err := vfiousertest.NewGuestMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, iova := range []uint64{0x100000, 0x200000, 0x300000} {
		if err := c.DMAMap(iova, mem, 0, 0x10000, vfiousertest.MapOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DMAUnmap(0x200000, 1<<64-0x200000); err != nil { // vIOMMU-style "to the end"
		t.Fatal(err)
	}
	maps, _, _, _ := dev.snapshot()
	if len(maps) != 1 || maps[0].IOVA != 0x100000 {
		t.Fatalf("unexpected maps after range unmap: %+v", maps)
	}
	if err := c.DMAUnmapAll(); err != nil {
		t.Fatal(err)
	}
	if maps, _, _, _ := dev.snapshot(); len(maps) != 0 {
		t.Fatalf("unexpected maps after unmap all: %+v", maps)
	}
}

func TestDeviceGetInfo(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    unix.Errno
	}{
		{"ok", vfiouser.DeviceInfoMsg{Argsz: 16}.Append(nil), 0},
		{"big argsz", vfiouser.DeviceInfoMsg{Argsz: 64}.Append(nil), 0},
		{"argsz", vfiouser.DeviceInfoMsg{Argsz: 8}.Append(nil), unix.EINVAL},
		{"short", vfiouser.DeviceInfoMsg{Argsz: 16}.Append(nil)[:12], unix.EINVAL},
	}
	_, c := newPair(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := call(c, vfiouser.CmdDeviceGetInfo, tt.payload)
			wantErrno(t, err, tt.want)
			if tt.want != 0 {
				return
			}
			want := vfiouser.DeviceInfoMsg{Argsz: 16, Flags: 3, NumRegions: numRegions, NumIRQs: 5}.Append(nil)
			if !bytes.Equal(r.Payload, want) {
				t.Fatalf("unexpected reply (-want +got):\n-%x\n+%x", want, r.Payload)
			}
		})
	}
}

func TestRegionInfo(t *testing.T) {
	const rw = vfiouser.RegionFlagRead | vfiouser.RegionFlagWrite
	sparseFull := uint32(vfiouser.RegionInfoSize + vfiouser.SparseMmapCapSize(len(testSparseAreas)))
	tests := []struct {
		name      string
		payload   []byte
		want      unix.Errno
		info      vfiouser.RegionInfoMsg
		sparse    []vfiouser.SparseArea
		payloadSz int
		fds       int
	}{
		{
			// No CAPS flag without the chain: QEMU rejects CAPS whose cap_offset lies outside
			// the bytes it received; the bigger argsz alone makes it ask again.
			name:    "sparse, small argsz",
			payload: vfiouser.RegionInfoMsg{Argsz: 32, Index: regSparse}.Append(nil),
			info: vfiouser.RegionInfoMsg{Argsz: sparseFull, Flags: rw | vfiouser.RegionFlagMmap,
				Index: regSparse, Size: sparseSize, Offset: sparseFileOffset},
			payloadSz: 32, fds: 1,
		},
		{
			name:    "sparse, full argsz",
			payload: vfiouser.RegionInfoMsg{Argsz: sparseFull, Index: regSparse}.Append(nil),
			info: vfiouser.RegionInfoMsg{Argsz: sparseFull, Flags: rw | vfiouser.RegionFlagMmap | vfiouser.RegionFlagCaps,
				Index: regSparse, CapOffset: 32, Size: sparseSize, Offset: sparseFileOffset},
			sparse: testSparseAreas, payloadSz: int(sparseFull), fds: 1,
		},
		{
			name:    "sparse, huge argsz",
			payload: vfiouser.RegionInfoMsg{Argsz: 4096, Index: regSparse}.Append(nil),
			info: vfiouser.RegionInfoMsg{Argsz: sparseFull, Flags: rw | vfiouser.RegionFlagMmap | vfiouser.RegionFlagCaps,
				Index: regSparse, CapOffset: 32, Size: sparseSize, Offset: sparseFileOffset},
			sparse: testSparseAreas, payloadSz: int(sparseFull), fds: 1,
		},
		{
			name:      "whole mmap",
			payload:   vfiouser.RegionInfoMsg{Argsz: 32, Index: regWhole}.Append(nil),
			info:      vfiouser.RegionInfoMsg{Argsz: 32, Flags: rw | vfiouser.RegionFlagMmap, Index: regWhole, Size: wholeSize},
			payloadSz: 32, fds: 1,
		},
		{
			name:      "trapped",
			payload:   vfiouser.RegionInfoMsg{Argsz: 32, Index: regTrap}.Append(nil),
			info:      vfiouser.RegionInfoMsg{Argsz: 32, Flags: rw, Index: regTrap, Size: 4096},
			payloadSz: 32,
		},
		{
			name:      "absent",
			payload:   vfiouser.RegionInfoMsg{Argsz: 32, Index: regAbsent}.Append(nil),
			info:      vfiouser.RegionInfoMsg{Argsz: 32, Index: regAbsent},
			payloadSz: 32,
		},
		{
			name:      "mmap without file",
			payload:   vfiouser.RegionInfoMsg{Argsz: 32, Index: regNoFile}.Append(nil),
			info:      vfiouser.RegionInfoMsg{Argsz: 32, Flags: rw, Index: regNoFile, Size: 4096},
			payloadSz: 32,
		},
		{name: "index", payload: vfiouser.RegionInfoMsg{Argsz: 32, Index: numRegions}.Append(nil), want: unix.EINVAL},
		{name: "huge index", payload: vfiouser.RegionInfoMsg{Argsz: 32, Index: 1<<32 - 1}.Append(nil), want: unix.EINVAL},
		{name: "argsz", payload: vfiouser.RegionInfoMsg{Argsz: 16, Index: regTrap}.Append(nil), want: unix.EINVAL},
		{name: "short", payload: vfiouser.RegionInfoMsg{Argsz: 32, Index: regTrap}.Append(nil)[:24], want: unix.EINVAL},
	}
	_, c := newPair(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := call(c, vfiouser.CmdDeviceGetRegionInfo, tt.payload)
			if r != nil {
				defer r.CloseFDs()
			}
			wantErrno(t, err, tt.want)
			if tt.want != 0 {
				return
			}
			if len(r.Payload) != tt.payloadSz {
				t.Fatalf("unexpected payload size (-want +got): -%d +%d", tt.payloadSz, len(r.Payload))
			}
			info, err := vfiouser.DecodeRegionInfo(r.Payload)
			if err != nil || info != tt.info {
				t.Fatalf("unexpected info (-want +got):\n-%+v\n+%+v (%v)", tt.info, info, err)
			}
			sparse, err := vfiouser.DecodeRegionCaps(r.Payload)
			if err != nil || !slices.Equal(sparse, tt.sparse) {
				t.Fatalf("unexpected sparse areas (-want +got):\n-%+v\n+%+v (%v)", tt.sparse, sparse, err)
			}
			if len(r.FDs) != tt.fds {
				t.Fatalf("unexpected fd count (-want +got): -%d +%d", tt.fds, len(r.FDs))
			}
		})
	}
}

// TestRegionMmap checks that the fd sent with region info maps the same memory the trapped
// accesses reach, through both sparse areas and for a whole-region mmap.
func TestRegionMmap(t *testing.T) {
	_, c := newPair(t)
	for _, region := range []uint32{regSparse, regWhole} {
		m, err := c.MmapRegion(region)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range m.Areas {
			copy(a.Data, "mmapped!")
			got := make([]byte, 8)
			if err := c.Read(region, a.Offset, got); err != nil {
				t.Fatal(err)
			}
			if string(got) != "mmapped!" {
				t.Fatalf("region %d area %#x: trapped read %q, want the mmapped write", region, a.Offset, got)
			}
			if err := c.Write(region, a.Offset+8, []byte("trapped!")); err != nil {
				t.Fatal(err)
			}
			if string(m.At(a.Offset+8, 8)) != "trapped!" {
				t.Fatalf("region %d area %#x: mmap does not see the trapped write", region, a.Offset)
			}
		}
		if want := max(1, len(m.Info.Sparse)); len(m.Areas) != want {
			t.Fatalf("region %d: %d areas mapped, want %d", region, len(m.Areas), want)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIRQInfo(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    unix.Errno
		reply   vfiouser.IRQInfoMsg
	}{
		{"intx", vfiouser.IRQInfoMsg{Argsz: 16, Index: 0}.Append(nil), 0, vfiouser.IRQInfoMsg{Argsz: 16, Flags: 7, Index: 0, Count: 1}},
		{"msix", vfiouser.IRQInfoMsg{Argsz: 16, Index: 2}.Append(nil), 0, vfiouser.IRQInfoMsg{Argsz: 16, Flags: 9, Index: 2, Count: msixVectors}},
		{"err", vfiouser.IRQInfoMsg{Argsz: 16, Index: 3}.Append(nil), 0, vfiouser.IRQInfoMsg{Argsz: 16, Flags: 1, Index: 3, Count: 1}},
		{"index", vfiouser.IRQInfoMsg{Argsz: 16, Index: 5}.Append(nil), unix.EINVAL, vfiouser.IRQInfoMsg{}},
		{"argsz", vfiouser.IRQInfoMsg{Argsz: 8, Index: 0}.Append(nil), unix.EINVAL, vfiouser.IRQInfoMsg{}},
		{"short", vfiouser.IRQInfoMsg{Argsz: 16}.Append(nil)[:15], unix.EINVAL, vfiouser.IRQInfoMsg{}},
	}
	_, c := newPair(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := call(c, vfiouser.CmdDeviceGetIRQInfo, tt.payload)
			wantErrno(t, err, tt.want)
			if tt.want != 0 {
				return
			}
			if got, _ := vfiouser.DecodeIRQInfo(r.Payload); got != tt.reply {
				t.Fatalf("unexpected reply (-want +got):\n-%+v\n+%+v", tt.reply, got)
			}
		})
	}
}

func TestSetIRQs(t *testing.T) {
	const (
		none    = vfiouser.IRQSetDataNone
		boolean = vfiouser.IRQSetDataBool
		efd     = vfiouser.IRQSetDataEventfd
		mask    = vfiouser.IRQSetActionMask
		unmask  = vfiouser.IRQSetActionUnmask
		trigger = vfiouser.IRQSetActionTrigger
		msix    = vfiouser.IRQIndexMSIX
	)
	tests := []struct {
		name  string
		req   vfiouser.IRQSetMsg
		nfds  int
		trunc int // cut the payload to this many bytes
		fail  error
		want  unix.Errno
	}{
		{name: "eventfds", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Count: 4}, nfds: 4},
		{name: "fewer fds", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Start: 2, Count: 4}, nfds: 1},
		{name: "de-assign", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Count: 4}},
		{name: "last vector", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Start: 15, Count: 1}, nfds: 1},
		{name: "disable", req: vfiouser.IRQSetMsg{Flags: none | trigger, Index: msix}},
		{name: "intx mask", req: vfiouser.IRQSetMsg{Flags: none | mask, Index: 0, Count: 1}},
		{name: "intx unmask fd", req: vfiouser.IRQSetMsg{Flags: efd | unmask, Index: 0, Count: 1}, nfds: 1},
		{name: "bools", req: vfiouser.IRQSetMsg{Flags: boolean | trigger, Index: msix, Start: 1, Count: 3, Data: []byte{1, 0, 1}}},
		{name: "too many fds", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Count: 4}, nfds: 5, want: unix.EINVAL},
		{name: "disable with start", req: vfiouser.IRQSetMsg{Flags: none | trigger, Index: msix, Start: 1}, want: unix.EINVAL},
		{name: "count 0 eventfd", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix}, want: unix.EINVAL},
		{name: "count 0 mask", req: vfiouser.IRQSetMsg{Flags: none | mask, Index: 0}, want: unix.EINVAL},
		{name: "two data", req: vfiouser.IRQSetMsg{Flags: efd | none | trigger, Index: msix, Count: 1}, want: unix.EINVAL},
		{name: "no data", req: vfiouser.IRQSetMsg{Flags: trigger, Index: msix, Count: 1}, want: unix.EINVAL},
		{name: "no action", req: vfiouser.IRQSetMsg{Flags: efd, Index: msix, Count: 1}, want: unix.EINVAL},
		{name: "two actions", req: vfiouser.IRQSetMsg{Flags: efd | mask | trigger, Index: msix, Count: 1}, want: unix.EINVAL},
		{name: "unknown flag", req: vfiouser.IRQSetMsg{Flags: 0x40 | none | trigger, Index: msix}, want: unix.EINVAL},
		{name: "index", req: vfiouser.IRQSetMsg{Flags: none | trigger, Index: 5}, want: unix.EINVAL},
		{name: "past count", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Start: 15, Count: 2}, want: unix.EINVAL},
		{name: "start wraps", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Start: 1<<32 - 1, Count: 2}, want: unix.EINVAL},
		{name: "msi has none", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: vfiouser.IRQIndexMSI, Count: 1}, nfds: 1, want: unix.EINVAL},
		{name: "short bools", req: vfiouser.IRQSetMsg{Flags: boolean | trigger, Index: msix, Count: 3, Data: []byte{1}}, want: unix.EINVAL},
		{name: "fds without eventfd", req: vfiouser.IRQSetMsg{Flags: none | trigger, Index: msix, Count: 1}, nfds: 1, want: unix.EINVAL},
		{name: "argsz", req: vfiouser.IRQSetMsg{Argsz: 12, Flags: none | trigger, Index: msix}, want: unix.EINVAL},
		{name: "short", req: vfiouser.IRQSetMsg{Flags: none | trigger, Index: msix}, trunc: 16, want: unix.EINVAL},
		{name: "device error", req: vfiouser.IRQSetMsg{Flags: efd | trigger, Index: msix, Count: 2}, nfds: 2, fail: unix.EIO, want: unix.EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			fds := newFDs(t, tt.nfds)
			dev.setFail(tt.fail)
			if tt.req.Argsz == 0 {
				tt.req.Argsz = uint32(vfiouser.IRQSetHeadSize + len(tt.req.Data))
			}
			payload := tt.req.Append(nil)
			if tt.trunc > 0 {
				payload = payload[:tt.trunc]
			}
			before := openFDs(t)
			_, err := call(c, vfiouser.CmdDeviceSetIRQs, payload, fds...)
			wantErrno(t, err, tt.want)
			_, _, sets, _ := dev.snapshot()
			if tt.want != 0 {
				if len(sets) != 0 {
					t.Fatalf("device got %+v after an error", sets)
				}
				waitFDs(t, before)
				return
			}
			want := vfiouser.SetIRQs{Flags: tt.req.Flags, Index: tt.req.Index, Start: tt.req.Start, Count: tt.req.Count}
			if len(tt.req.Data) > 0 {
				for _, b := range tt.req.Data {
					want.Bools = append(want.Bools, b != 0)
				}
			}
			if len(sets) != 1 || sets[0].Flags != want.Flags || sets[0].Index != want.Index ||
				sets[0].Start != want.Start || sets[0].Count != want.Count || !slices.Equal(sets[0].Bools, want.Bools) {
				t.Fatalf("unexpected SetIRQs (-want +got):\n-%+v\n+%+v", want, sets)
			}
		})
	}
}

// TestInterruptDelivery checks that eventfds passed by SET_IRQS reach the device and that
// signalling them is seen by the client.
func TestInterruptDelivery(t *testing.T) {
	dev, c := newPair(t)
	fds, err := c.EnableMSIX(msixVectors) // two messages: the server advertises 16 fds
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{0, 7, 15} {
		if err := dev.trigger(vfiouser.IRQIndexMSIX, v); err != nil {
			t.Fatal(err)
		}
		n, err := vfiousertest.WaitIRQ(fds[v], waitLong)
		if err != nil || n != 1 {
			t.Fatalf("vector %d: WaitIRQ = %d, %v", v, n, err)
		}
	}
	if err := c.DisableIRQs(vfiouser.IRQIndexMSIX); err != nil {
		t.Fatal(err)
	}
	if err := dev.trigger(vfiouser.IRQIndexMSIX, 0); err == nil {
		t.Fatal("vector 0 still has an eventfd after disable")
	}
}

func regionAccess(off uint64, region, count uint32) []byte {
	return vfiouser.RegionAccess{Offset: off, Region: region, Count: count}.Append(nil)
}

func TestRegionAccess(t *testing.T) {
	tests := []struct {
		name    string
		cmd     vfiouser.Command
		payload []byte
		fail    error
		want    unix.Errno
	}{
		{"read", vfiouser.CmdRegionRead, regionAccess(0, regTrap, 4), nil, 0},
		{"read whole", vfiouser.CmdRegionRead, regionAccess(0, regSparse, sparseSize), nil, 0},
		{"read zero", vfiouser.CmdRegionRead, regionAccess(4096, regTrap, 0), nil, 0},
		{"read rom", vfiouser.CmdRegionRead, regionAccess(252, regROM, 4), nil, 0},
		{"write", vfiouser.CmdRegionWrite, append(regionAccess(8, regTrap, 4), 1, 2, 3, 4), nil, 0},
		{"read past end", vfiouser.CmdRegionRead, regionAccess(4094, regTrap, 4), nil, unix.EINVAL},
		{"write past end", vfiouser.CmdRegionWrite, append(regionAccess(4094, regTrap, 4), 1, 2, 3, 4), nil, unix.EINVAL},
		{"offset wraps", vfiouser.CmdRegionRead, regionAccess(1<<64-2, regTrap, 4), nil, unix.EINVAL},
		{"region index", vfiouser.CmdRegionRead, regionAccess(0, numRegions, 4), nil, unix.EINVAL},
		{"huge region index", vfiouser.CmdRegionRead, regionAccess(0, 1<<32-1, 4), nil, unix.EINVAL},
		{"count too big", vfiouser.CmdRegionRead, regionAccess(0, regSparse, vfiouser.MaxDataXferSize+1), nil, unix.EINVAL},
		{"absent region", vfiouser.CmdRegionRead, regionAccess(0, regAbsent, 0), nil, unix.EINVAL},
		{"write rom", vfiouser.CmdRegionWrite, append(regionAccess(0, regROM, 1), 1), nil, unix.EINVAL},
		{"write short data", vfiouser.CmdRegionWrite, append(regionAccess(0, regTrap, 4), 1, 2), nil, unix.EINVAL},
		{"write long data", vfiouser.CmdRegionWrite, append(regionAccess(0, regTrap, 1), 1, 2), nil, unix.EINVAL},
		{"read with data", vfiouser.CmdRegionRead, append(regionAccess(0, regTrap, 1), 1), nil, unix.EINVAL},
		{"short head", vfiouser.CmdRegionRead, regionAccess(0, regTrap, 4)[:12], nil, unix.EINVAL},
		{"device errno", vfiouser.CmdRegionRead, regionAccess(0, regTrap, 4), unix.EIO, unix.EIO},
		{"device plain error", vfiouser.CmdRegionWrite, append(regionAccess(0, regTrap, 1), 1), errors.New("no"), unix.EINVAL},
	}
	dev, c := newPair(t)
	for i := range dev.trap {
		dev.trap[i] = byte(i * 7)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev.setFail(tt.fail)
			defer dev.setFail(nil)
			r, err := call(c, tt.cmd, tt.payload)
			wantErrno(t, err, tt.want)
			if tt.want != 0 {
				return
			}
			acc, data, _ := vfiouser.DecodeRegionAccess(tt.payload)
			head := acc.Append(nil)
			if !bytes.Equal(r.Payload[:vfiouser.RegionAccessSize], head) {
				t.Fatalf("reply head %x, want the request's %x", r.Payload[:16], head)
			}
			if tt.cmd == vfiouser.CmdRegionWrite {
				if len(r.Payload) != vfiouser.RegionAccessSize {
					t.Fatalf("write reply of %d bytes, want 16", len(r.Payload))
				}
				dev.mu.Lock()
				got := slices.Clone(dev.backing(acc.Region)[acc.Offset : acc.Offset+uint64(acc.Count)])
				dev.mu.Unlock()
				if !bytes.Equal(got, data) {
					t.Fatalf("device holds %x, want %x", got, data)
				}
				return
			}
			dev.mu.Lock()
			want := slices.Clone(dev.backing(acc.Region)[acc.Offset : acc.Offset+uint64(acc.Count)])
			dev.mu.Unlock()
			if !bytes.Equal(r.Payload[vfiouser.RegionAccessSize:], want) {
				t.Fatalf("unexpected data (-want +got):\n-%x\n+%x", want, r.Payload[16:])
			}
		})
	}
}

func TestPostedWrites(t *testing.T) {
	dev, c := newPair(t)
	if err := c.PostWrite(regTrap, 0x10, []byte{0xde, 0xad, 0xbe, 0xef}); err != nil {
		t.Fatal(err)
	}
	wantNoReply(t, c)
	got := make([]byte, 4)
	if err := c.Read(regTrap, 0x10, got); err != nil || !bytes.Equal(got, []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Fatalf("read after posted write = %x, %v", got, err)
	}

	// A failing posted write still gets a (header-only) error reply, as QEMU does.
	if err := c.PostWrite(regROM, 0, []byte{1}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv(waitLong)
	if err != nil {
		t.Fatal(err)
	}
	if !m.IsError() || unix.Errno(m.Error) != unix.EINVAL || m.Cmd != vfiouser.CmdRegionWrite || m.Size != 16 {
		t.Fatalf("unexpected reply to a failed posted write: %+v", m.Header)
	}
	_ = dev
}

func TestWriteMulti(t *testing.T) {
	entry := func(region uint32, off uint64, data ...byte) vfiouser.WriteMultiEntry {
		e := vfiouser.WriteMultiEntry{Offset: off, Region: region, Count: uint32(len(data))}
		copy(e.Data[:], data)
		return e
	}
	good := []vfiouser.WriteMultiEntry{entry(regTrap, 0, 1), entry(regTrap, 8, 1, 2, 3, 4, 5, 6, 7, 8), entry(regConfig, 4, 9, 9)}
	badCount := entry(regTrap, 0, 1)
	badCount.Count = 9
	tests := []struct {
		name    string
		payload []byte
		want    unix.Errno
		applied bool
	}{
		{"three", vfiouser.AppendWriteMulti(nil, good), 0, true},
		{"none", vfiouser.AppendWriteMulti(nil, nil), 0, false},
		{"count 9", vfiouser.AppendWriteMulti(nil, []vfiouser.WriteMultiEntry{badCount}), unix.EINVAL, false},
		{"wr_cnt mismatch", append(vfiouser.AppendWriteMulti(nil, good), 0), unix.EINVAL, false},
		{"wr_cnt too big", vfiouser.AppendWriteMulti(nil, make([]vfiouser.WriteMultiEntry, vfiouser.MaxWriteMultiEntries+1)), unix.EINVAL, false},
		{"short", []byte{1, 0, 0}, unix.EINVAL, false},
		{"bad entry, none applied", vfiouser.AppendWriteMulti(nil, append(slices.Clone(good), entry(regROM, 0, 1))), unix.EINVAL, false},
		{"past end", vfiouser.AppendWriteMulti(nil, []vfiouser.WriteMultiEntry{entry(regTrap, 4095, 1, 2)}), unix.EINVAL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			r, err := call(c, vfiouser.CmdRegionWriteMulti, tt.payload)
			wantErrno(t, err, tt.want)
			if tt.want == 0 {
				n := uint64(len(tt.payload)-8) / 24
				if !bytes.Equal(r.Payload, le64(nil, n)) {
					t.Fatalf("reply %x, want wr_cnt %d", r.Payload, n)
				}
			}
			dev.mu.Lock()
			applied := dev.trap[0] == 1 && dev.trap[15] == 8 && dev.config[5] == 9
			dev.mu.Unlock()
			if applied != tt.applied {
				t.Fatalf("writes applied = %t, want %t", applied, tt.applied)
			}
		})
	}
}

func TestWriteMultiPosted(t *testing.T) {
	dev, c := newPair(t)
	e := vfiouser.WriteMultiEntry{Offset: 0x20, Region: regTrap, Count: 2, Data: [8]byte{0xaa, 0xbb}}
	if err := c.WriteMulti([]vfiouser.WriteMultiEntry{e, e}, true); err != nil {
		t.Fatal(err)
	}
	wantNoReply(t, c)
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.trap[0x20] != 0xaa || dev.trap[0x21] != 0xbb {
		t.Fatalf("posted write-multi not applied: %x", dev.trap[0x20:0x22])
	}
}

func TestReset(t *testing.T) {
	dev, c := newPair(t)
	for range 2 { // QEMU resets twice per system_reset
		if err := c.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	dev.setFail(unix.EAGAIN)
	wantErrno(t, c.Reset(), unix.EAGAIN)
	if _, _, _, resets := dev.snapshot(); resets != 2 {
		t.Fatalf("unexpected reset count (-want +got): -2 +%d", resets)
	}
}

// TestUnexpectedFDs sends descriptors on commands that take none, or more than any command
// may carry (the kernel truncates them): the command fails and every fd that arrived is closed.
func TestUnexpectedFDs(t *testing.T) {
	tests := []struct {
		name    string
		cmd     vfiouser.Command
		payload []byte
		nfds    int
	}{
		{"region read", vfiouser.CmdRegionRead, regionAccess(0, regTrap, 4), 1},
		{"unmap", vfiouser.CmdDMAUnmap, dmaUnmapPayload(24, 0, 0, 0x1000), 2},
		{"get info", vfiouser.CmdDeviceGetInfo, vfiouser.DeviceInfoMsg{Argsz: 16}.Append(nil), 16},
		{"unknown", 99, nil, 3},
		{"dma map, 20 fds", vfiouser.CmdDMAMap, dmaMapPayload(32, 3, 0, 0, 0x1000), 20},
		{"set irqs, 17 fds", vfiouser.CmdDeviceSetIRQs,
			vfiouser.IRQSetMsg{Argsz: 20, Flags: vfiouser.IRQSetDataEventfd | vfiouser.IRQSetActionTrigger,
				Index: vfiouser.IRQIndexMSIX, Count: 16}.Append(nil), 17},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			fds := newFDs(t, tt.nfds)
			before := openFDs(t)
			_, err := call(c, tt.cmd, tt.payload, fds...)
			if err == nil {
				t.Fatal("command with unexpected fds succeeded")
			}
			waitFDs(t, before)
			if maps, _, sets, _ := dev.snapshot(); len(maps)+len(sets) != 0 {
				t.Fatalf("device was called: %+v %+v", maps, sets)
			}
			if err := c.Sync(); err != nil {
				t.Fatalf("connection broken: %v", err)
			}
		})
	}
}

// TestFraming covers the only inputs that end a connection: a header whose size cannot be
// trusted, or a stream that ends inside a message.
func TestFraming(t *testing.T) {
	hdr := func(size uint32) []byte {
		return vfiouser.Header{ID: 1, Cmd: vfiouser.CmdDeviceGetInfo, Size: size}.Append(nil)
	}
	tests := []struct {
		name      string
		raw       []byte
		closeSend bool // close the client afterwards (stream ends mid-message)
		wantErr   error
	}{
		{"size below header", hdr(8), false, vfiouser.ErrFraming},
		{"size zero", hdr(0), false, vfiouser.ErrFraming},
		{"size above bound", hdr(vfiouser.MaxMessageSize + 1), false, vfiouser.ErrFraming},
		{"size max u32", hdr(1<<32 - 1), false, vfiouser.ErrFraming},
		{"short header", hdr(32)[:10], true, nil},
		{"short body", append(hdr(100), make([]byte, 50)...), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t)
			waitPeer(t, dev)
			if err := c.SendRaw(tt.raw, nil); err != nil {
				t.Fatal(err)
			}
			if tt.closeSend {
				c.Close()
			} else {
				wantDisconnect(t, c)
				if m, err := c.Recv(10 * time.Millisecond); err == nil {
					t.Fatalf("unexpected reply %+v to a broken frame", m.Header)
				}
			}
			err, ok := c.WaitServer(waitLong)
			if !ok {
				t.Fatal("server did not stop")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("ServeConn = %v, want %v", err, tt.wantErr)
			}
			if _, n := dev.counts(); n != 1 {
				t.Fatalf("Disconnected called %d times, want 1", n)
			}
		})
	}
}

// TestLargeMessages moves payloads bigger than the read buffer in both directions.
func TestLargeMessages(t *testing.T) {
	dev, c := newPair(t)
	want := make([]byte, sparseSize)
	for i := range want {
		want[i] = byte(i * 13)
	}
	if err := c.Write(regSparse, 0, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, sparseSize)
	if err := c.Read(regSparse, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("64 KiB round trip through a trapped region differs")
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if !bytes.Equal(dev.sparseMem, want) {
		t.Fatal("device memory differs from the 64 KiB write")
	}
}

// TestPipelined sends many commands back to back without waiting, like QEMU's DMA_MAP bursts,
// and checks every reply comes back in order with its own id.
func TestPipelined(t *testing.T) {
	_, c := newPair(t)
	const n = 200
	ids := make([]uint16, n)
	for i := range ids {
		ids[i] = c.NextID()
		p := regionAccess(uint64(i%1024)*4, regTrap, 4)
		if err := c.Send(vfiouser.Header{ID: ids[i], Cmd: vfiouser.CmdRegionRead}, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ids {
		m, err := c.Recv(waitLong)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != ids[i] || m.IsError() || len(m.Payload) != 20 {
			t.Fatalf("reply %d: %+v (%d bytes), want id %d", i, m.Header, len(m.Payload), ids[i])
		}
	}
}
