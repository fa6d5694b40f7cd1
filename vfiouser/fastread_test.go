package vfiouser_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// debugHandler enables debug logging (which sends every command through the general path)
// and drops the lines.
type debugHandler struct{ slog.Handler }

func (debugHandler) Enabled(context.Context, slog.Level) bool { return true }

// TestFastReadMatchesGeneralPath sends the same register reads to a server whose reads take
// the fast path and to one with debug logging on, where every command takes the general path:
// the replies must be the same bytes, errors included, and the device must see the same calls.
func TestFastReadMatchesGeneralPath(t *testing.T) {
	tests := []struct {
		name    string
		flags   uint32
		payload []byte
		fail    error
		want    unix.Errno // of the reply
		noReply bool       // no reply may come
	}{
		{"4 bytes", 0, regionAccess(0x40, regTrap, 4), nil, 0, false},
		{"8 bytes", 0, regionAccess(0x48, regTrap, 8), nil, 0, false},
		{"unaligned 4 bytes", 0, regionAccess(0x41, regTrap, 4), nil, 0, false}, // the device decides
		{"last dword", 0, regionAccess(4092, regTrap, 4), nil, 0, false},
		{"2 bytes (general path)", 0, regionAccess(0x40, regTrap, 2), nil, 0, false},
		{"16 bytes (general path)", 0, regionAccess(0x40, regTrap, 16), nil, 0, false},
		{"past the end", 0, regionAccess(4093, regTrap, 4), nil, unix.EINVAL, false},
		{"offset wraps", 0, regionAccess(1<<64-4, regTrap, 8), nil, unix.EINVAL, false},
		{"no such region", 0, regionAccess(0, numRegions, 4), nil, unix.EINVAL, false},
		{"read-only region", 0, regionAccess(0, regROM, 4), nil, 0, false},
		{"trailing data", 0, append(regionAccess(0x40, regTrap, 4), 0), nil, unix.EINVAL, false},
		{"device errno", 0, regionAccess(0x40, regTrap, 4), unix.EIO, unix.EIO, false},
		{"no reply asked", vfiouser.FlagNoReply, regionAccess(0x40, regTrap, 4), nil, 0, true},
		{"no reply asked, failing", vfiouser.FlagNoReply, regionAccess(0x40, regTrap, 4), unix.EIO, unix.EIO, false},
		{"a reply's type", vfiouser.FlagTypeReply, regionAccess(0x40, regTrap, 4), nil, 0, true}, // a stray reply: dropped
	}
	type side struct {
		dev *testDevice
		c   *vfiousertest.Client
	}
	fastDev, fastC := newPair(t)
	genDev := newTestDevice(t)
	genC := vfiousertest.NewPair(t, genDev, vfiousertest.ServerOptions(),
		vfiousertest.WithLogger(slog.New(debugHandler{slog.DiscardHandler})))
	sides := []side{{fastDev, fastC}, {genDev, genC}}
	for _, s := range sides {
		for i := range s.dev.trap {
			s.dev.trap[i] = byte(i*5 + 1)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var replies [2]*vfiouser.Message
			for i, s := range sides {
				s.dev.setFail(tt.fail)
				err := s.c.Send(vfiouser.Header{ID: 0x7001, Cmd: vfiouser.CmdRegionRead, Flags: tt.flags}, tt.payload, nil)
				if err != nil {
					t.Fatal(err)
				}
				m, err := s.c.Recv(200 * time.Millisecond)
				s.dev.setFail(nil)
				if tt.noReply {
					if err == nil {
						t.Fatalf("side %d: unexpected reply %+v", i, m.Header)
					}
					if err := s.c.Sync(); err != nil {
						t.Fatalf("side %d: connection broken: %v", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("side %d: no reply: %v", i, err)
				}
				replies[i] = m
			}
			if tt.noReply {
				return
			}
			f, g := replies[0], replies[1]
			if f.Header != g.Header || !bytes.Equal(f.Payload, g.Payload) {
				t.Fatalf("fast and general paths differ (-general +fast):\n-%+v %x\n+%+v %x", g.Header, g.Payload, f.Header, f.Payload)
			}
			want := uint32(vfiouser.FlagTypeReply)
			if tt.want != 0 {
				want |= vfiouser.FlagError
			}
			if f.Flags != want || f.Error != uint32(tt.want) || f.ID != 0x7001 || f.Cmd != vfiouser.CmdRegionRead {
				t.Fatalf("unexpected reply %+v, want flags %#x errno %d", f.Header, want, tt.want)
			}
		})
	}
}
