package hostile

import (
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// busyOnSys starts engines that all use the sys area (and nofd) at once: a ring of 8 MiB
// fills, a self-kicking loop writing it, a wait parked on it, copy kernels from nofd into it,
// and self-test DMAs into it.
func busyOnSys(t *testing.T, d *driver) {
	t.Helper()
	q, err := d.startQueue(1, queueOpts{log2: 12})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		q.emit(dmaFillDirect(gart(gSys), 0xF1110000|uint32(i), sysSize))
	}
	if err := q.kick(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.selfKicking(2, clockTo(gartSys(sysIOVA+0x10000)), clockTo(gartSys(sysIOVA+0x7F0000))); err != nil {
		t.Fatal(err)
	}
	w, err := d.startQueue(3, queueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.submit(pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem, Addr: gartSys(sysIOVA + 0x20000),
		Ref: 0x1234_5678, Mask: ^uint32(0)}.Encode()); err != nil {
		t.Fatal(err)
	}
	k, err := d.startQueue(4, queueOpts{log2: 12})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		k.emit(pm4.Kernel(abi.KERNEL_COPY, gartSys(sysIOVA+0x400000), gart(gNofd), 0), pm4.DispatchDirect(nofdSize/256, 1, 1))
	}
	if err := k.kick(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := d.setRegs(append(set64(abi.REG_SELFTEST_DMA_ADDR_LO, sysIOVA+uint64(i)<<20),
			[2]uint32{abi.REG_SELFTEST_DMA_LEN, abi.SELFTEST_DMA_MAX_LEN}, [2]uint32{abi.REG_SELFTEST_DMA_PATTERN, uint32(i) << 24},
			[2]uint32{abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK})...); err != nil {
			t.Fatal(err)
		}
	}
}

// attackUnmapBusy DMA_UNMAPs guest memory while engines are using it: first the sys range,
// then everything (UNMAP_ALL). Once the unmap is answered the server must not touch that
// memory any more: it must stay unchanged (the client still has it) while the engines fault.
// The memory is mapped again afterwards for the suite's checks.
func attackUnmapBusy(t *testing.T, e *env) {
	d := e.d
	e.mem.allowArea("sys")
	for _, all := range []bool{false, true} {
		name := "DMA_UNMAP of sys"
		if all {
			name = "DMA_UNMAP_ALL"
		}
		t.Run(name, func(t *testing.T) {
			busyOnSys(t, d)
			time.Sleep(30 * time.Millisecond)
			start := time.Now()
			var err error
			if all {
				err = d.c.DMAUnmapAll()
			} else {
				err = d.c.DMAUnmap(sysIOVA, sysSize)
			}
			if err != nil {
				t.Fatalf("%s while engines use it: %v", name, err)
			}
			took := time.Since(start)
			snap := e.mem.snapshot()
			time.Sleep(200 * time.Millisecond)
			for _, p := range e.mem.changedSince(snap, "guest memory changed after "+name+" was answered (the server still writes unmapped memory)") {
				t.Error(p)
			}
			states := map[string]int{}
			for slot := 1; slot <= 4; slot++ {
				state, code, err := d.status(slot)
				if err != nil {
					t.Fatal(err)
				}
				states[describeState(state, code)]++
			}
			t.Logf("%s answered in %v; queues afterwards: %s", name, took.Round(time.Microsecond), histogram(states))
			// Stop what still runs (the self-kicking loop does not touch unmapped memory
			// forever: it faults), then map the memory again.
			for slot := 1; slot <= 4; slot++ {
				if err := d.dequeue(slot, abi.HQD_DEQUEUE_RESET); err != nil {
					t.Error(err)
				}
			}
			if all {
				err = e.mem.mapAll(d.c)
			} else {
				err = e.mem.mapArea(d.c, "sys")
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
