package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// A Result is one measurement beside its baseline from the same run.
type Result struct {
	Name     string
	Value    float64 // in Unit
	Unit     string
	Baseline string  // what Value is compared with
	Base     float64 // baseline value in Unit
	Note     string
}

// Ratio is Value/Base (0 when the baseline measured 0, which only an idle-CPU figure can).
func (r Result) Ratio() float64 {
	if r.Base == 0 {
		return 0
	}
	return r.Value / r.Base
}

// Clock is the part of *testing.B an Op needs: it stops the clock around work that is not
// part of the measurement (checking results) and starts it again.
type Clock interface {
	StartTimer()
	StopTimer()
}

// An Op performs n iterations of one measured operation and checks every result; the first
// failure ends it. The clock is running when it is called.
type Op func(n int, c Clock) error

// A Pair is a scenario brought up: the device's Op and its baseline's, ready to run as often
// as asked, and Close to release both.
type Pair struct {
	Dev, Base Op
	Close     func()
}

// A Scenario measures one device path beside a baseline measured in the same run. A setup
// failure of either side is an error: a baseline that silently measured nothing would make any
// ratio look good.
type Scenario struct {
	Name     string
	Unit     string // "µs" (per op), or a rate ("packets/s", "MB/s")
	Baseline string
	Note     string
	PerOp    float64 // rates: Unit's quantity (packets, MB) per op; 0: a latency in µs per op
	Setup    func() (Pair, error)
	// EngineTime: the device's figure is from the time its Op reported through EngineTimer
	// (the device's own clock; engine_time.go); its wall-clock figure goes into the Note.
	EngineTime bool
}

// Value turns n ops in d into the scenario's unit.
func (s Scenario) Value(n int, d time.Duration) float64 {
	if s.PerOp == 0 {
		return float64(d.Nanoseconds()) / float64(n) / 1e3
	}
	return s.PerOp * float64(n) / d.Seconds()
}

// rounds is how many alternating rounds Run measures each side in.
const rounds = 5

// Run sets the scenario up, measures both sides and releases it. Each side is calibrated to a
// round of measureFor/rounds, then device and baseline rounds alternate, so a slow spell of a
// shared machine falls on both sides alike; each side's figure is its median round.
func (s Scenario) Run() (Result, error) {
	p, err := s.Setup()
	if err != nil {
		return Result{}, fmt.Errorf("%s: set-up: %w", s.Name, err)
	}
	defer p.Close()
	sides := []struct {
		what string
		op   Op
		n    int
		v    []float64
	}{{what: "", op: p.Dev}, {what: fmt.Sprintf("baseline (%s): ", s.Baseline), op: p.Base}}
	for i := range sides {
		r, err := measure(sides[i].op, measureFor/rounds)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %s%w", s.Name, sides[i].what, err)
		}
		sides[i].n = r.N
	}
	var wall []float64 // the device's wall-clock figures (EngineTime)
	for range rounds {
		for i := range sides {
			r, err := timeOp(sides[i].op, sides[i].n)
			if err != nil {
				return Result{}, fmt.Errorf("%s: %s%w", s.Name, sides[i].what, err)
			}
			t := r.T
			if i == 0 && s.EngineTime {
				wall, t = append(wall, s.Value(r.N, r.T)), r.E
			}
			sides[i].v = append(sides[i].v, s.Value(r.N, t))
		}
	}
	res := Result{Name: s.Name, Unit: s.Unit, Note: s.Note,
		Value: median(sides[0].v), Baseline: s.Baseline, Base: median(sides[1].v)}
	if s.EngineTime {
		res.Note = wallNote(res, median(wall))
	}
	return res, nil
}

// median is the middle value of v (which it sorts; len(v) odd).
func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// run is a timing of N iterations: T on the wall clock, E the engine time the Op reported
// (EngineTimer; 0 if none).
type run struct {
	N int
	T time.Duration
	E time.Duration
}

// now is the stopwatch's time source (tests replace it).
var now = time.Now

// stopwatch is a Clock for measurements outside the testing package.
type stopwatch struct {
	start   time.Time
	elapsed time.Duration
	running bool
	engine  time.Duration // EngineTimer
}

func (w *stopwatch) AddEngineTime(d time.Duration) { w.engine += d }

func (w *stopwatch) StartTimer() {
	if !w.running {
		w.start, w.running = now(), true
	}
}

func (w *stopwatch) StopTimer() {
	if w.running {
		w.elapsed += now().Sub(w.start)
		w.running = false
	}
}

// timeOp runs op for n iterations on a stopwatch.
func timeOp(op Op, n int) (run, error) {
	var w stopwatch
	w.StartTimer()
	err := op(n, &w)
	w.StopTimer()
	return run{n, w.elapsed, w.engine}, err
}

// measureFor is the target duration of one side's measurement in Run.
var measureFor = 300 * time.Millisecond

// measure runs op with growing n until one run lasts d, like testing.Benchmark (which cannot
// be used here: it deadlocks when called from inside a running benchmark).
func measure(op Op, d time.Duration) (run, error) {
	n := 1
	for {
		r, err := timeOp(op, n)
		if err != nil {
			return run{}, err
		}
		if r.T >= d || n >= 1<<30 {
			if r.T <= 0 {
				return run{}, errors.New("measured no time")
			}
			return r, nil
		}
		next := n * 100
		if r.T > 0 {
			next = int(float64(n) * 1.2 * float64(d) / float64(r.T))
		}
		n = max(min(next, 100*n), n+1)
	}
}

// quantile is the nearest-rank q-quantile (0 < q ≤ 1) of samples, which it sorts.
func quantile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	i := int(math.Ceil(q*float64(len(samples)))) - 1
	return samples[min(max(i, 0), len(samples)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
