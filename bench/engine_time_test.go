package bench

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// TestGPUStampsInterval: the engine time of a submission is taken only from two stamps that
// were written, in order, no further apart than the submission's wall time.
func TestGPUStampsInterval(t *testing.T) {
	const unwritten = stampUnwritten
	tests := []struct {
		name     string
		t0, t1   uint64
		wall     time.Duration
		want     time.Duration
		wantErr  string
		leaveArm bool
	}{
		{name: "ok", t0: 1000, t1: 4000, wall: 5 * time.Microsecond, want: 3 * time.Microsecond},
		{name: "equal to wall", t0: 10, t1: 5010, wall: 5 * time.Microsecond, want: 5 * time.Microsecond},
		{name: "start unwritten", t0: unwritten, t1: 4000, wall: time.Second, wantErr: "not written"},
		{name: "end unwritten", t0: 1000, t1: unwritten, wall: time.Second, wantErr: "not written"},
		{name: "out of order", t0: 4000, t1: 1000, wall: time.Second, wantErr: "out of order"},
		{name: "longer than wall", t0: 0, t1: 2e6, wall: time.Millisecond, wantErr: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vram := make([]byte, 64)
			g := newGPUStamps(vram, 16)
			g.arm()
			if a, b := binary.LittleEndian.Uint64(vram[16:]), binary.LittleEndian.Uint64(vram[24:]); a != unwritten || b != unwritten {
				t.Fatalf("arm left %#x, %#x", a, b)
			}
			binary.LittleEndian.PutUint64(vram[16:], tc.t0)
			binary.LittleEndian.PutUint64(vram[24:], tc.t1)
			got, err := g.interval(tc.wall)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Fatalf("interval %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEngineTimeRun: Run's stopwatch takes the engine time an Op reports; a Scenario with
// EngineTime rates the device by it and notes the wall-clock figure.
func TestEngineTimeRun(t *testing.T) {
	old := measureFor
	measureFor = 10 * time.Millisecond
	defer func() { measureFor = old }()
	dev := func(n int, c Clock) error {
		time.Sleep(time.Duration(n) * 20 * time.Microsecond) // wall: 20 µs per op
		addEngineTime(c, time.Duration(n)*10*time.Microsecond)
		return nil
	}
	base := func(n int, c Clock) error {
		time.Sleep(time.Duration(n) * 20 * time.Microsecond)
		return nil
	}
	s := Scenario{Name: "engine", Unit: "ops/s", PerOp: 1, Baseline: "sleep", Note: "n", EngineTime: true,
		Setup: func() (Pair, error) { return Pair{Dev: dev, Base: base, Close: func() {}}, nil }}
	r, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	// The device reported half its wall time as engine time: about twice the baseline's rate.
	if r.Ratio() < 1.2 {
		t.Errorf("ratio %.2f: the engine time was not used (%+v)", r.Ratio(), r)
	}
	if !strings.Contains(r.Note, "wall clock") {
		t.Errorf("note %q has no wall-clock figure", r.Note)
	}
}
