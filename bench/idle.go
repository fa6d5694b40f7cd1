package bench

import (
	"runtime"
	"syscall"
	"time"

	"vgpu/bars"
)

// IdleCPU is the CPU time the whole process uses per second of wall time while a device sits
// idle for wall, in poll mode, beside the same device in trap mode (which has nothing to poll).
func IdleCPU(wall time.Duration) (Result, error) {
	poll, err := IdleCPUOf(bars.DoorbellPoll, wall)
	if err != nil {
		return Result{}, err
	}
	trap, err := IdleCPUOf(bars.DoorbellTrap, wall)
	return Result{Name: "idle device, poll mode", Value: poll, Unit: "%CPU", Baseline: "trap mode", Base: trap,
		Note: "whole process"}, err
}

// IdleCPUOf is the whole process's CPU use (% of one core) over wall with an idle device in
// the given doorbell mode.
func IdleCPUOf(mode bars.DoorbellMode, wall time.Duration) (float64, error) {
	dev, err := newDevice(mode, 0)
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	time.Sleep(100 * time.Millisecond) // let the poller back off
	runtime.GC()
	before := cpuTime()
	time.Sleep(wall)
	return (cpuTime() - before).Seconds() / wall.Seconds() * 100, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
