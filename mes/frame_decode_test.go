package mes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/decode"
)

// TestDecodeAgreesWithMES: package decode reads the frames this package's tests build (as
// amdgpu does) with the values this package's own decoder reads from them.
func TestDecodeAgreesWithMES(t *testing.T) {
	r := &rig{}
	q := r.queueAtNoMem(3)
	af := q.addFrame(abi.MES_PRIORITY_HIGH, 12345)
	af.set(abi.MES_ADD_QUEUE_DW_FLAGS, abi.MES_ADD_QUEUE_FLAG_IS_GANG_SUSPENDED_MASK).set64(abi.MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR, 0x5004).
		set64(abi.MES_ADD_QUEUE_DW_API_STATUS, 0xF108).set64(abi.MES_ADD_QUEUE_DW_API_STATUS+2, 77)
	f := frame(*af)
	aq := f.addQueue()
	d := decode.MESFrame(f[:])
	if d.Err != nil || d.Name != "ADD_QUEUE" {
		t.Fatalf("%v: %s", d.Err, d)
	}
	want := map[string]uint64{
		"process_id": uint64(aq.pasid), "page_table_base_addr": aq.ptBase, "process_va_start": aq.vaStart,
		"process_va_end": aq.vaEnd, "process_quantum": aq.procQuantum, "process_context_addr": aq.procCtx,
		"gang_quantum": aq.gangQuantum, "gang_context_addr": aq.gangCtx, "inprocess_gang_priority": uint64(aq.inprocPrio),
		"gang_global_priority_level": uint64(aq.globalPrio), "doorbell_offset": uint64(aq.doorbell), "mqd_addr": aq.mqd,
		"wptr_addr": aq.wptr, "queue_type": uint64(aq.queueType), "vm_context_cntl": uint64(aq.vmCntl),
		"flags": uint64(aq.flags), "unmap_flag_addr": aq.unmapFlag,
	}
	for name, v := range want {
		if got, ok := d.Field(name); !ok || got.Value != v {
			t.Errorf("%s: decode %v (%v), mes %#x", name, got, ok, v)
		}
	}
	if addr, val, ok := f.apiStatus(); !ok || !d.HasFence || d.FenceAddr != addr || d.FenceValue != val {
		t.Errorf("api_status: decode %#x/%#x, mes %#x/%#x", d.FenceAddr, d.FenceValue, addr, val)
	}

	hf := frame(*newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFF00).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, 0xF0).set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK+1, 0x3).
		set(abi.MES_SET_HW_RSRC_DW_GFX_HQD_MASK, 1).set(abi.MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS+2, 0x44).
		set(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, 50))
	h := hf.hwResources()
	dh := decode.MESFrame(hf[:])
	list := func(v []uint32) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmt.Sprintf("%#x", x)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	for name, text := range map[string]string{
		"vmid_mask_gfxhub": fmt.Sprintf("%#x", h.vmids), "compute_hqd_mask": list(h.compute[:]), "gfx_hqd_mask": list(h.gfx[:]),
		"aggregated_doorbells": list(h.aggregated[:]), "oversubscription_timer": fmt.Sprint(h.pollUS),
	} {
		if got, _ := dh.Field(name); got.Text != text {
			t.Errorf("%s: decode %q, mes %q", name, got.Text, text)
		}
	}
}

// queueAtNoMem is queueAt's addresses without writing an MQD (no memory needed).
func (r *rig) queueAtNoMem(i int) *testQueue {
	base := uint64(queueBase + i*queueSpan)
	return &testQueue{r: r, db: uint32(16 + 2*i), mqd: base, gang: base + 0xC00, proc: base + 0xA00, ring: base + 0x1000,
		shadow: base + 0x900, data: base + 0x2000}
}

// lineHandler records log lines as text.
type lineHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}
func (h *lineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineHandler) WithGroup(string) slog.Handler      { return h }

// TestFailedFrameLogDecoded: a failed frame's log line carries the frame decoded.
func TestFailedFrameLogDecoded(t *testing.T) {
	h := &lineHandler{}
	r := &rig{t: t, mem: cptest.NewMemory(4 << 20), regs: cptest.NewRegisters(), ivs: cptest.NewInterrupts(),
		vm: &vmRecorder{bound: map[int]VMContext{}}}
	var m *MES
	r.cp = cp.New(cp.Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Notify: func(slot int) { m.Notify(slot) }})
	m = New(Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Slots: r.cp, VM: r.vm, Doorbells: 2048, Log: slog.New(h)})
	r.mes = m
	r.mem.SetOnWrite(r.cp.Wake)
	t.Cleanup(func() { m.Close(); r.cp.Close() })
	r.wreg(abi.REG_MES_RING_BASE_LO, ringBase)
	r.wreg(abi.REG_MES_RING_CONTROL, 13)
	r.wreg(abi.REG_MES_RING_DOORBELL, 4<<abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT|abi.REG_MES_RING_DOORBELL__EN_MASK)
	r.wreg(abi.REG_MES_RING_ACTIVE, 1)

	r.fails(newFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, 0x30), abi.MES_REMOVE_QUEUE_DW_API_STATUS, abi.MES_ERR_NOT_INITIALIZED)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lines {
		if strings.HasPrefix(l, "mes: frame failed") {
			if want := " frame=REMOVE_QUEUE doorbell_offset=0x30 gang_context_addr=0x0 flags=0x0"; !strings.Contains(l, want) {
				t.Errorf("%s\nlacks %q", l, want)
			}
			if !strings.Contains(l, "fence_addr=0xf100 fence_value=0x1") {
				t.Errorf("%s\nlacks the api_status fence", l)
			}
			return
		}
	}
	t.Fatalf("no frame-failed line: %q", h.lines)
}
