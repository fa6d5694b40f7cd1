package bars

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"vgpu/ratelog"
)

// spinOp is one step of a spin scenario: n reads of off (the register then holds value), or
// a write to off.
type spinOp struct {
	write bool
	off   uint32
	value uint32
	n     int
}

func TestSpinDetector(t *testing.T) {
	const th = 10
	for _, tc := range []struct {
		name     string
		ops      []spinOp
		warnings uint64
		active   []uint32 // offsets spun on at the end
	}{
		{"below the threshold", []spinOp{{off: 0x10, value: 1, n: th - 1}}, 0, nil},
		{"at the threshold", []spinOp{{off: 0x10, value: 1, n: th}}, 1, []uint32{0x10}},
		{"one warning however long", []spinOp{{off: 0x10, value: 1, n: 50 * th}}, 1, []uint32{0x10}},
		{"a change re-arms", []spinOp{{off: 0x10, value: 1, n: th}, {off: 0x10, value: 2, n: th}}, 2, []uint32{0x10}},
		{"changes never spin", []spinOp{{off: 0x10, value: 1, n: th - 1}, {off: 0x10, value: 2, n: th - 1}}, 0, nil},
		{"a write re-arms", []spinOp{{off: 0x10, value: 1, n: th}, {write: true, off: 0x10}, {off: 0x10, value: 1, n: th}}, 2, []uint32{0x10}},
		{"a write restarts the count", []spinOp{{off: 0x10, value: 1, n: th - 1}, {write: true, off: 0x10}, {off: 0x10, value: 1, n: th - 1}}, 0, nil},
		{"a write elsewhere does not", []spinOp{{off: 0x10, value: 1, n: th - 1}, {write: true, off: 0x14}, {off: 0x10, value: 1, n: 1}}, 1, []uint32{0x10}},
		{"two registers polled in turn", []spinOp{
			{off: 0x10, value: 1, n: 1}, {off: 0x14, value: 2, n: 1}, {off: 0x10, value: 1, n: 1}, {off: 0x14, value: 2, n: 1},
			{off: 0x10, value: 1, n: th - 2}, {off: 0x14, value: 2, n: th - 2}}, 2, []uint32{0x10, 0x14}},
		{"a read-only register re-armed by a write", []spinOp{{off: 0x80, value: 7, n: th}, {write: true, off: 0x80}, {off: 0x80, value: 7, n: th - 1}}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var regs [0x40]uint32
			var logBuf bytes.Buffer
			f, err := NewRegisterFile(0x1000,
				Claim{Name: "RW", Offset: 0, Size: 0x80,
					Read: func(off uint32) uint32 { return regs[off/4] }, Write: func(off, v uint32) {}},
				Claim{Name: "RO", Offset: 0x80, Size: 0x80, Read: func(off uint32) uint32 { return regs[(0x80+off)/4] }})
			if err != nil {
				t.Fatal(err)
			}
			f.SetSpinThreshold(th)
			f.SetLimiter(ratelog.New(slog.New(slog.NewTextHandler(&logBuf, nil)), time.Hour, 100))
			f.SetRegisterNames(func(off uint32) string {
				if off == 0x10 {
					return "REG_POLLED"
				}
				return ""
			})
			var p [4]byte
			for _, op := range tc.ops {
				if op.write {
					f.Write(uint64(op.off), p[:])
					continue
				}
				regs[op.off/4] = op.value
				for range op.n {
					f.Read(uint64(op.off), p[:])
				}
			}
			st := f.Spins()
			if st.Warnings != tc.warnings || st.Threshold != th {
				t.Errorf("%d warnings (threshold %d), want %d", st.Warnings, st.Threshold, tc.warnings)
			}
			var active []uint32
			for _, a := range st.Active {
				active = append(active, a.Offset)
			}
			if !slicesEqual(active, tc.active) {
				t.Errorf("active %v, want %v", active, tc.active)
			}
			if got := strings.Count(logBuf.String(), "register spin"); uint64(got) != tc.warnings {
				t.Errorf("%d log lines, want %d:\n%s", got, tc.warnings, logBuf.String())
			}
			if tc.warnings > 0 && len(tc.active) > 0 && tc.active[0] == 0x10 {
				want := "register spin: the driver polls REG_POLLED, last value 0x"
				if !strings.Contains(logBuf.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logBuf.String())
				}
			}
		})
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSpinNames: without a name, a spin names the claim and the offset in it; Recent keeps
// the last maxSpinReports warnings.
func TestSpinReport(t *testing.T) {
	f, err := NewRegisterFile(0x1000, Claim{Name: "BLK", Offset: 0x100, Size: 0x100, Read: func(off uint32) uint32 { return off }})
	if err != nil {
		t.Fatal(err)
	}
	f.SetSpinThreshold(3)
	var p [8]byte
	for i := range maxSpinReports + 2 {
		for range 3 {
			f.Read(uint64(0x100+8*i), p[:]) // a qword read: two registers each time
		}
	}
	st := f.Spins()
	if st.Warnings != 2*(maxSpinReports+2) || len(st.Recent) != maxSpinReports {
		t.Fatalf("%d warnings, %d recent", st.Warnings, len(st.Recent))
	}
	last := st.Recent[len(st.Recent)-1]
	if last.Offset != 0x100+8*(maxSpinReports+1)+4 || last.Name != "BLK+0x4c" || last.Value != binary.LittleEndian.Uint32(p[4:]) || last.Reads != 3 {
		t.Fatalf("last spin %+v", last)
	}
}
