package device

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"vgpu/abi"
	"vgpu/pm4"
)

// findHQD returns slot's entry of a status.
func findHQD(t *testing.T, s Status, slot int) HQDStatus {
	t.Helper()
	for _, h := range s.HQDs {
		if h.Slot == slot {
			return h
		}
	}
	t.Fatalf("slot %d not in the status: %+v", slot, s.HQDs)
	return HQDStatus{}
}

// TestStatusWaitingQueue: a queue parked on a WAIT_REG_MEM shows that packet, by name and
// dwords; Status is read from other goroutines while the worker serves the driver (-race);
// the JSON form carries the same status.
func TestStatusWaitingQueue(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	d.startQueue()
	d.submit(pm4.WriteMem(abi.GPU_FB_BASE+ltFence, 7))
	wait := pm4.WaitMem(abi.GPU_FB_BASE+ltFence+64, 1) // never written
	d.submit(wait)
	eventually(t, "queue waiting", func() bool { return d.state() == abi.HQD_STATE_WAITING })

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_ = dev.Status()
			}
		}()
	}
	for range 50 {
		d.hqdRead(abi.REG_HQD_PQ_RPTR) // the worker at work meanwhile
	}
	wg.Wait()

	s := dev.Status()
	h := findHQD(t, s, ltSlot)
	if h.StateName != "HQD_STATE_WAITING" || h.Opcode != "PM4_IT_WAIT_REG_MEM" || !reflect.DeepEqual(h.Packet, wait) ||
		h.Rptr != uint64(len(pm4.WriteMem(0, 0))) || h.Wptr != d.wptr || h.RingBase != abi.GPU_FB_BASE+ltRing || h.RingBytes != 4096 {
		t.Fatalf("slot %+v", h)
	}
	text := s.Text(nil)
	for _, want := range []string{"stopped on PM4_IT_WAIT_REG_MEM", "HQD_STATE_WAITING", "mes (scheduler)", "register spins"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if got := s.Text(func([]uint32) string { return "WAIT_REG_MEM decoded" }); !strings.Contains(got, "          WAIT_REG_MEM decoded") {
		t.Errorf("decoder's text not shown:\n%s", got)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Text(nil) != text {
		t.Errorf("the status through JSON renders differently:\n%s\nvs\n%s", back.Text(nil), text)
	}
}

// TestStatusFaultAndUnmodelled: a halted queue names its error, the fault is among the recent
// ones, and unclaimed register offsets are ranked by count.
func TestStatusFaultAndUnmodelled(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	d.startQueue()
	d.submit(bypassWrite(0x0000_0200_0000_0000, 1)) // in no aperture
	d.halted(t, abi.CP_ERROR_TRANSLATION)
	for i, n := range map[uint32]int{0x3E000: 1, 0x3E004: 5, 0x3E008: 3} {
		for range n {
			d.r.reg(i)
		}
	}
	s := dev.Status()
	h := findHQD(t, s, ltSlot)
	if h.ErrorName != "CP_ERROR_TRANSLATION" || h.StateName != "HQD_STATE_HALTED" || len(h.Packet) == 0 {
		t.Errorf("halted slot %+v", h)
	}
	if len(s.Faults.Recent) != 1 || s.Faults.Recent[0].Addr != 0x200_0000_0000 || s.Faults.Recent[0].VMID != 0 {
		t.Errorf("recent faults %+v", s.Faults.Recent)
	}
	var order []uint32
	for _, u := range s.Unmodelled.Top {
		order = append(order, u.Offset)
	}
	if !reflect.DeepEqual(order, []uint32{0x3E004, 0x3E008, 0x3E000}) || s.Unmodelled.Top[0].Count != 5 {
		t.Errorf("unmodelled %+v", s.Unmodelled)
	}
	if text := s.Text(nil); !strings.Contains(text, "halted: CP_ERROR_TRANSLATION") || !strings.Contains(text, "VMID 0 page 0x20000000000") {
		t.Errorf("text:\n%s", text)
	}
}
