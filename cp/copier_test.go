package cp_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// copierMem adds engine.Copier to the test memory: Copy is Read+Write, recorded; failAt makes a
// Copy fail with an error that names that address.
type copierMem struct {
	*cptest.Memory
	mu     sync.Mutex
	calls  []string
	failAt uint64
}

type copyFault struct{ va uint64 }

func (e *copyFault) Error() string          { return fmt.Sprintf("copy fault at %#x", e.va) }
func (e *copyFault) TranslationFault() bool { return true }
func (e *copyFault) FaultAddress() uint64   { return e.va }

func (m *copierMem) Copy(a engine.Access, dst, src, n uint64) error {
	m.mu.Lock()
	m.calls = append(m.calls, fmt.Sprintf("%#x<-%#x+%#x bypass=%v", dst, src, n, a.Bypass))
	failAt := m.failAt
	m.mu.Unlock()
	if failAt != 0 && failAt >= dst && failAt < dst+n {
		return &copyFault{failAt}
	}
	buf := make([]byte, n)
	if err := m.Read(a, src, buf); err != nil {
		return err
	}
	return m.Write(a, dst, buf)
}

func withCopier(cm **copierMem) func(*cp.Config) {
	return func(c *cp.Config) {
		*cm = &copierMem{Memory: c.Memory.(*cptest.Memory)}
		c.Memory = *cm
	}
}

func TestDMADataCopier(t *testing.T) {
	const src, dst = 0x100000, 0x800000
	const n = 5 << 20
	addr := uint32(abi.PM4_DMA_DATA_SEL_ADDR)
	l2 := uint32(abi.PM4_DMA_DATA_SEL_ADDR_L2)
	bypass := uint32(abi.PM4_CACHE_POLICY_BYPASS)
	tests := []struct {
		name    string
		pkt     pm4.DMAData
		calls   int
		failAt  uint64
		wantErr uint32
	}{
		{name: "sel-addr", pkt: pm4.DMAData{SrcSel: addr, DstSel: addr, Src: src, Dst: dst, Count: n}, calls: 3},
		{name: "l2-both", pkt: pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: n}, calls: 3},
		{name: "bypass-both", pkt: pm4.DMAData{SrcSel: l2, DstSel: l2, SrcPolicy: bypass, DstPolicy: bypass, Src: src, Dst: dst, Count: n}, calls: 3},
		{name: "mixed-policy", pkt: pm4.DMAData{SrcSel: addr, DstSel: l2, Src: src, Dst: dst, Count: n}, calls: 0},
		{name: "saic", pkt: pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: 64, SAIC: true}, calls: 0},
		{name: "fault", pkt: pm4.DMAData{SrcSel: addr, DstSel: addr, Src: src, Dst: dst, Count: n}, failAt: dst + 3<<20, wantErr: abi.CP_ERROR_TRANSLATION},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cm *copierMem
			r := cptest.NewRig(t, 16<<20, withCopier(&cm))
			ring := r.StartQueue(1, queueConfig(1))
			cm.failAt = tc.failAt
			sb := make([]byte, n)
			for i := range sb {
				sb[i] = byte(i*7 + i>>12)
			}
			r.Mem.SetBytes(src, sb)
			ring.Emit(tc.pkt.Encode())
			ring.Kick()
			if tc.wantErr != 0 {
				if got := ring.WaitHalt(t); got != tc.wantErr {
					t.Fatalf("error %d, want %d", got, tc.wantErr)
				}
				return
			}
			ring.WaitIdle(t)
			if len(cm.calls) != tc.calls {
				t.Fatalf("Copy calls %q, want %d", cm.calls, tc.calls)
			}
			if tc.pkt.SAIC {
				return
			}
			if !bytes.Equal(r.Mem.Bytes(dst, n), sb) {
				t.Fatal("destination differs from source")
			}
		})
	}
}
