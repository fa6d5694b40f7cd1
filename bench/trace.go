package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"vgpu/abi"
	"vgpu/trace"
)

// The cost of recording a timeline (package trace, docs/trace.md): the same job on two rigs
// of the same run, one whose device and server record to a trace and one that does not. The
// trace goes to io.Discard, so the figure is the device's cost of producing and encoding the
// events, not a disk's; the note says how many bytes an event took and how many the bounded
// queue dropped because the writer fell behind (the recorder drops rather than slow the
// device or grow).

// TracePacketRate is PacketRate's job (1-dword WRITE_DATAs in fenced chunks) with recording
// on, beside recording off: the densest events the device produces (two per packet).
func TracePacketRate() (Result, error) {
	var rec *trace.Recorder
	return traceCost(tracePacketScenario(&rec), &rec)
}

// TraceDoorbellIRQ is DoorbellIRQ's job (an interrupting fence, doorbell to eventfd) with
// recording on, beside recording off.
func TraceDoorbellIRQ() (Result, error) {
	var rec *trace.Recorder
	return traceCost(traceIRQScenario(&rec), &rec)
}

func tracePacketScenario(rec **trace.Recorder) Scenario {
	const ringDwords = 1 << 21
	return tracedScenario(Scenario{Name: "CP WRITE_DATA (1 dword) via device, trace on", Unit: "packets/s", PerOp: 1},
		RigConfig{RingDwords: ringDwords}, rec, func(rig *Rig) Op {
			return packetTarget{emit: rig.Emit, kick: rig.Kick, waitFence: rig.WaitFence, packets: rig.packets,
				fence: FenceGPU(), dst: abi.GPU_FB_BASE + vramScratch,
				readDst: func() uint32 { return binary.LittleEndian.Uint32(rig.VRAM[vramScratch:]) }}.op(ringDwords)
		}, ringDwords/4)
}

func traceIRQScenario(rec **trace.Recorder) Scenario {
	return tracedScenario(Scenario{Name: "doorbell (trap) → fence → interrupt, trace on", Unit: "µs"},
		RigConfig{RingDwords: 1 << 16}, rec, irqJob, 100)
}

// tracedScenario sets s up as job on a recording rig (Dev) beside job on a plain one (Base),
// each warmed up with warm ops; *rec is the recorder, closed with the pair.
func tracedScenario(s Scenario, rc RigConfig, rec **trace.Recorder, job func(*Rig) Op, warm int) Scenario {
	s.Baseline = "the same, trace off"
	s.Setup = func() (Pair, error) {
		*rec = trace.New(io.Discard, trace.Options{MaxBytes: 1 << 62})
		on := rc
		on.Trace = *rec
		traced, err := NewRig(on)
		if err != nil {
			return Pair{}, errors.Join(err, (*rec).Close())
		}
		plain, err := NewRig(rc)
		if err != nil {
			return Pair{}, errors.Join(err, traced.Close(), (*rec).Close())
		}
		closeAll := func() { traced.Close(); plain.Close(); (*rec).Close() }
		dev, base := job(traced), job(plain)
		if err := warmUp(dev, base, warm); err != nil {
			closeAll()
			return Pair{}, err
		}
		return Pair{Dev: dev, Base: base, Close: closeAll}, nil
	}
	return s
}

// traceCost runs s and notes what the recorder wrote and dropped.
func traceCost(s Scenario, rec **trace.Recorder) (Result, error) {
	res, err := s.Run()
	if err != nil {
		return res, err
	}
	res.Note = traceNote(*rec)
	return res, nil
}

func traceNote(rec *trace.Recorder) string {
	events, bytes := rec.Written()
	dropped := rec.Dropped()
	if events == 0 {
		return "nothing recorded"
	}
	return fmt.Sprintf("%.0f B/event; %d events written, %.1f%% dropped (writer behind)",
		float64(bytes)/float64(events), events, 100*float64(dropped)/float64(events+dropped))
}
