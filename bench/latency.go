package bench

import (
	"errors"
	"fmt"

	"vgpu/abi"
	"vgpu/bars"
)

// RegionRead is a 4-byte register read round trip through the Go client (µs per read),
// beside a raw unix-socket ping-pong of the same message sizes.
func RegionRead() Scenario {
	return Scenario{
		Name: "REGION_READ round trip (Go client)", Unit: "µs", Baseline: "unix socket echo",
		Setup: func() (Pair, error) {
			rig, err := NewRig(RigConfig{RingDwords: 1024, NoQueue: true})
			if err != nil {
				return Pair{}, err
			}
			echo, err := newUnixEcho()
			if err != nil {
				return Pair{}, errors.Join(err, rig.Close())
			}
			dev := func(n int, _ Clock) error {
				for i := range n {
					v, err := rig.Reg(abi.REG_ID_MAGIC)
					if err != nil {
						return err
					}
					if v != abi.ID_MAGIC_VALUE {
						return fmt.Errorf("read %d: ID_MAGIC reads %#x", i, v)
					}
				}
				return nil
			}
			return Pair{Dev: dev, Base: echo.op, Close: func() { echo.Close(); rig.Close() }}, nil
		},
	}
}

// DoorbellIRQ is an empty job (a fence with an interrupt) from doorbell to the interrupt's
// eventfd wake-up (µs per job), beside the floor of the same sequence with a trivial stand-in
// for the device: a server that receives the trapped write, replies and signals the eventfd,
// or a poller that sees the polled doorbell and signals it.
func DoorbellIRQ(mode bars.DoorbellMode) Scenario {
	s := Scenario{Name: fmt.Sprintf("doorbell (%s) → fence → interrupt", mode), Unit: "µs"}
	if mode == bars.DoorbellTrap {
		s.Baseline = "floor: trivial server replies, signals eventfd"
	} else {
		s.Baseline = "floor: trivial poller signals eventfd"
	}
	s.Setup = func() (Pair, error) {
		rig, err := NewRig(RigConfig{Doorbells: mode, RingDwords: 1 << 16})
		if err != nil {
			return Pair{}, err
		}
		var base Op
		var closeBase func()
		if mode == bars.DoorbellTrap {
			f, err := newTrapFloor()
			if err != nil {
				return Pair{}, errors.Join(err, rig.Close())
			}
			base, closeBase = f.op, f.Close
		} else {
			f, err := newPollFloor()
			if err != nil {
				return Pair{}, errors.Join(err, rig.Close())
			}
			base, closeBase = f.op, f.Close
		}
		return Pair{Dev: irqJob(rig), Base: base, Close: func() { closeBase(); rig.Close() }}, nil
	}
	return s
}

// irqJob is one interrupting fence per op, checked.
func irqJob(rig *Rig) Op {
	seq := uint32(0)
	return func(n int, _ Clock) error {
		for range n {
			seq++
			rig.Emit(fence(seq, true))
			if err := rig.Kick(); err != nil {
				return err
			}
			if err := rig.WaitIRQ(irqTimeout); err != nil {
				return fmt.Errorf("job %d: %w", seq, err)
			}
			if f := rig.Fence(); f != seq {
				return fmt.Errorf("job %d: interrupt with the fence at %d", seq, f)
			}
		}
		return nil
	}
}
