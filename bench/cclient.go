package bench

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The C client (bench/cclient/cclient.c) measures the transport from outside Go: a Go client
// shares the runtime's scheduler and system call costs with the server it measures, and QEMU
// is not written in Go either. It is compiled with gcc at bench time, so the figure can be
// reproduced wherever the bench runs. cclient_measure.go places it and the server on one CPU.

//go:embed cclient/cclient.c
var cclientSource []byte

// CClient is the C client, built for this run.
type CClient struct {
	dir string
	bin string
}

// BuildCClient compiles the C client with gcc into a new temporary directory. It fails with
// the reason when gcc is missing or the build fails (gcc's output included).
func BuildCClient() (*CClient, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return nil, fmt.Errorf("bench: the C client needs gcc: %w", err)
	}
	dir, err := os.MkdirTemp("", "vgpu-cclient-")
	if err != nil {
		return nil, fmt.Errorf("bench: C client: %w", err)
	}
	c := &CClient{dir: dir, bin: filepath.Join(dir, "cclient")}
	src := filepath.Join(dir, "cclient.c")
	if err := os.WriteFile(src, cclientSource, 0o644); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: C client: %w", err)
	}
	out, err := exec.Command(gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", c.bin, src).CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: building the C client with %s: %w\n%s", gcc, err, bytes.TrimSpace(out))
	}
	return c, nil
}

// Close removes the build directory.
func (c *CClient) Close() error { return os.RemoveAll(c.dir) }

// CStats is one run of the C client: N timed round trips, and the CPU time each side spent per
// round trip (ServerCPU is the thread that served the connection; 0 when unknown).
type CStats struct {
	N                           int
	Min, Median, P99, Max, Mean time.Duration
	ClientCPU, ServerCPU        time.Duration
	// Context switches per 1000 round trips, voluntary and involuntary, of each side (server
	// ones 0 when unknown; older C clients report none). Taking turns costs each side one
	// voluntary switch per round trip; more shows a side woken without its message.
	ClientVCSW, ClientIVCSW, ServerVCSW, ServerIVCSW int
	Value                                            uint32 // the register value read (device runs only)
}

// SetupWrite is a REGION_WRITE the C client sends after VERSION, before timing.
type SetupWrite struct {
	Region uint32
	Offset uint64
	Size   int // 1, 2, 4 or 8
	Value  uint64
}

// cclientRun is one invocation of the C client.
type cclientRun struct {
	CPU, N, Warmup int
	// Device runs: the server's socket, the register and the setup writes; ServerStat is the
	// schedstat file of the thread serving the connection ("" if unknown).
	Socket     string
	Region     uint32
	Offset     uint64
	Setup      []SetupWrite
	ServerStat string
	echo       bool
}

func (r cclientRun) mode() string {
	if r.echo {
		return "echo"
	}
	return "device"
}

func (r cclientRun) args() []string {
	argv := []string{"-c", strconv.Itoa(r.CPU), "-n", strconv.Itoa(r.N), "-W", strconv.Itoa(r.Warmup)}
	if r.echo {
		return append(argv, "echo")
	}
	if r.ServerStat != "" {
		argv = append(argv, "-s", r.ServerStat)
	}
	for _, w := range r.Setup {
		argv = append(argv, "-w", fmt.Sprintf("%d:%#x:%d:%#x", w.Region, w.Offset, w.Size, w.Value))
	}
	return append(argv, "device", r.Socket, strconv.FormatUint(uint64(r.Region), 10), fmt.Sprintf("%#x", r.Offset))
}

// run runs the C client once and parses its line.
func (c *CClient) run(r cclientRun) (CStats, error) {
	cmd := exec.Command(c.bin, r.args()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return CStats{}, fmt.Errorf("bench: C client %s: %w: %s", r.mode(), err, bytes.TrimSpace(stderr.Bytes()))
	}
	st, err := parseCStats(out, r.mode())
	if err != nil {
		return CStats{}, fmt.Errorf("bench: C client %s: %w", r.mode(), err)
	}
	if st.N != r.N {
		return CStats{}, fmt.Errorf("bench: C client %s timed %d round trips, asked for %d", r.mode(), st.N, r.N)
	}
	return st, nil
}

// parseCStats reads "cclient mode=M n=N min_ns=... value=0x..." (see cclient.c). Fields it does
// not know are ignored; the server and context-switch figures and value are optional.
func parseCStats(out []byte, mode string) (CStats, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	var line string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "cclient ") {
			line = sc.Text()
		}
	}
	if line == "" {
		return CStats{}, fmt.Errorf("no result line in %q", out)
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return CStats{}, fmt.Errorf("bad field %q in %q", f, line)
		}
		kv[k] = v
	}
	if kv["mode"] != mode {
		return CStats{}, fmt.Errorf("result of mode %q, want %q", kv["mode"], mode)
	}
	var err error // the first field that failed to parse
	num := func(k string, optional bool) int64 {
		s, ok := kv[k]
		if err != nil || (!ok && optional) {
			return 0
		}
		v, perr := strconv.ParseInt(s, 0, 64)
		if perr != nil {
			err = fmt.Errorf("field %s in %q: %w", k, line, perr)
		}
		return v
	}
	ns := func(k string, optional bool) time.Duration { return time.Duration(num(k, optional)) }
	st := CStats{
		N:   int(num("n", false)),
		Min: ns("min_ns", false), Median: ns("median_ns", false), P99: ns("p99_ns", false),
		Max: ns("max_ns", false), Mean: ns("mean_ns", false),
		ClientCPU: ns("client_cpu_ns", false), ServerCPU: ns("server_cpu_ns", true),
		ClientVCSW: int(num("client_vcsw_k", true)), ClientIVCSW: int(num("client_ivcsw_k", true)),
		ServerVCSW: int(num("server_vcsw_k", true)), ServerIVCSW: int(num("server_ivcsw_k", true)),
		Value: uint32(num("value", mode != "device")),
	}
	return st, err
}

// medianStats takes the median of each statistic over runs (which have the same N).
func medianStats(runs []CStats) CStats {
	pick := func(f func(CStats) time.Duration) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	count := func(f func(CStats) int) int {
		return int(pick(func(s CStats) time.Duration { return time.Duration(f(s)) }))
	}
	return CStats{
		N:           runs[0].N,
		Min:         pick(func(s CStats) time.Duration { return s.Min }),
		Median:      pick(func(s CStats) time.Duration { return s.Median }),
		P99:         pick(func(s CStats) time.Duration { return s.P99 }),
		Max:         pick(func(s CStats) time.Duration { return s.Max }),
		Mean:        pick(func(s CStats) time.Duration { return s.Mean }),
		ClientCPU:   pick(func(s CStats) time.Duration { return s.ClientCPU }),
		ServerCPU:   pick(func(s CStats) time.Duration { return s.ServerCPU }),
		ClientVCSW:  count(func(s CStats) int { return s.ClientVCSW }),
		ClientIVCSW: count(func(s CStats) int { return s.ClientIVCSW }),
		ServerVCSW:  count(func(s CStats) int { return s.ServerVCSW }),
		ServerIVCSW: count(func(s CStats) int { return s.ServerIVCSW }),
		Value:       runs[0].Value,
	}
}
