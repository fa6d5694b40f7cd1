package cp_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"vgpu/cp"
	"vgpu/pm4"
)

// TestHaltLogDecodesPacket: a halt's log line carries the offending packet decoded (package
// decode): the whole packet when it was fetched, its header when only that was.
func TestHaltLogDecodesPacket(t *testing.T) {
	badRelease := pm4.ReleaseMem{DataSel: 7, Addr: 0x2000}.Encode()
	cases := []struct {
		name   string
		pkt    []uint32
		fault  uint64 // a page that faults (0: none)
		packet string
	}{
		{"bad-field", badRelease, 0, "packet=RELEASE_MEM count=6 event_type=CACHE_FLUSH_AND_INV_TS_EVENT(20) event_index=5 gcr=0 cache_policy=LRU(0) execute=0 dst_sel=MEM(0) int_sel=NONE(0) data_sel=7? addr=0x2000 int_ctxid=0x0 "},
		{"unknown-opcode", pm4.Packet(0xEE, 1), 0, "packet=UNKNOWN_0xee count=0 error=\"unknown opcode 0xee\" raw=[0xc000ee00 0x1] "},
		{"memory-fault", pm4.WriteMem(0x30000, 5), 0x30000, "packet=WRITE_DATA count=3 dst_sel=MEM(5) wr_one_addr=0 wr_confirm=1 cache_policy=LRU(0) engine_sel=ME(0) addr=0x30000 data=[0x5] "},
		{"type0-header", []uint32{0x00010000, 0, 0}, 0, "packet=TYPE0 error=\"not a PM4 packet: type-0 header 0x00010000\" raw=[0x10000] "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &recordHandler{}
			r, ring := start(t, 1, func(cfg *cp.Config) { cfg.Log = slog.New(h) })
			if c.fault != 0 {
				r.Mem.SetFault(c.fault, 4096)
			}
			ring.Submit(c.pkt)
			ring.WaitHalt(t)
			// The line is logged just after the halt shows in the registers.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				h.mu.Lock()
				for _, rec := range h.records {
					if rec.Msg == "cp: queue halted" {
						if !strings.Contains(rec.attrs, c.packet) {
							t.Errorf("halt line %q\nlacks %q", rec.attrs, c.packet)
						}
						h.mu.Unlock()
						return
					}
				}
				recs := h.records
				h.mu.Unlock()
				if time.Now().After(deadline) {
					t.Fatalf("no halt line in %v", recs)
				}
			}
		})
	}
}
