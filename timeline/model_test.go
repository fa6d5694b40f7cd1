package timeline

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"vgpu/trace/perfetto"
)

func trackNames(m *Model) []string {
	var out []string
	for _, t := range m.Tracks {
		out = append(out, strings.Repeat(">", t.Level)+t.Name+":"+string(t.Kind))
	}
	return out
}

func track(t *testing.T, m *Model, name string) *Track {
	t.Helper()
	for _, tr := range m.Tracks {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no track %q in %v", name, trackNames(m))
	return nil
}

func TestParseSample(t *testing.T) {
	m, err := Parse(sampleTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vgpu:other", ">transport:transport", ">MES:mes", ">IH ring:ih", ">HQD 1:hqd", ">HQD 2:hqd", ">CU 0:cu"}
	if got := trackNames(m); !slices.Equal(got, want) {
		t.Errorf("tracks %v, want %v", got, want)
	}
	if m.Start != 1000 || m.End != 40_000 || m.Events != 22 || m.Unbalanced != 1 {
		t.Errorf("start %d end %d events %d unbalanced %d, want 1000 40000 22 1", m.Start, m.End, m.Events, m.Unbalanced)
	}
	mes := track(t, m, "MES")
	wantMES := []Slice{{Start: 1000, End: 3000, Name: "map queue"}, {Start: 3500, End: 5000, Name: "map queue"},
		{Start: 30_000, End: 40_000, Name: "unmap queue", Open: true}}
	if !slices.EqualFunc(mes.Slices, wantMES, sliceEqual) {
		t.Errorf("MES slices %+v, want %+v", mes.Slices, wantMES)
	}
	if busy, frac := m.Busy(mes); busy != 13_500 || frac != 13_500.0/39_000 {
		t.Errorf("MES busy %d (%v), want 13500", busy, frac)
	}
	hqd := track(t, m, "HQD 1")
	wantHQD := []Slice{{Start: 10_500, End: 16_000, Name: "INDIRECT_BUFFER", Args: []string{"ib=4096"}},
		{Start: 10_800, End: 15_000, Name: "DISPATCH_DIRECT", Depth: 1}}
	if !slices.EqualFunc(hqd.Slices, wantHQD, sliceEqual) || hqd.MaxDepth != 1 {
		t.Errorf("HQD 1 slices %+v (max depth %d), want %+v", hqd.Slices, hqd.MaxDepth, wantHQD)
	}
	if busy, _ := m.Busy(hqd); busy != 5500 {
		t.Errorf("HQD 1 busy %d, want 5500 (nested slices once)", busy)
	}
	if len(m.Flows) != 2 {
		t.Fatalf("%d flows, want 2", len(m.Flows))
	}
	var pts []string
	for _, p := range m.Flows[0].Points {
		pts = append(pts, m.Tracks[p.Track].Name+"/"+p.Name)
	}
	if want := []string{"transport/doorbell", "HQD 1/fence", "IH ring/interrupt"}; !slices.Equal(pts, want) {
		t.Errorf("flow 0 %v, want %v", pts, want)
	}
	lat := m.Latencies()
	wantLat := []Latency{
		{From: "doorbell", To: "fence", Count: 2, Median: 6500, P90: 6500, Max: 6500},
		{From: "doorbell", To: "interrupt", Whole: true, Count: 2, Median: 7500, P90: 8500, Max: 8500},
		{From: "fence", To: "interrupt", Count: 2, Median: 1000, P90: 2000, Max: 2000},
	}
	if !slices.Equal(lat, wantLat) {
		t.Errorf("latencies %+v, want %+v", lat, wantLat)
	}
	if got := TopNames(mes, 5); !slices.Equal(got, []NameCount{{"map queue", 2}, {"unmap queue", 1}}) {
		t.Errorf("MES names %v", got)
	}
}

func sliceEqual(a, b Slice) bool {
	return a.Start == b.Start && a.End == b.End && a.Name == b.Name && a.Depth == b.Depth &&
		a.Open == b.Open && a.NoBegin == b.NoBegin && slices.Equal(a.Args, b.Args)
}

func TestBuildMatching(t *testing.T) {
	for _, tc := range []struct {
		name       string
		events     []Event
		want       []Slice
		unbalanced int
	}{
		{"nested", []Event{{T: 0, Track: 1, Type: Begin, Name: "a"}, {T: 1, Track: 1, Type: Begin, Name: "b"},
			{T: 2, Track: 1, Type: End}, {T: 3, Track: 1, Type: End}},
			[]Slice{{Start: 0, End: 3, Name: "a"}, {Start: 1, End: 2, Name: "b", Depth: 1}}, 0},
		{"end annotations join the slice's", []Event{{T: 0, Track: 1, Type: Begin, Name: "a", Args: []string{"x=1"}},
			{T: 2, Track: 1, Type: End, Args: []string{"status=done"}}},
			[]Slice{{Start: 0, End: 2, Name: "a", Args: []string{"x=1", "status=done"}}}, 0},
		{"end without begin", []Event{{T: 5, Track: 1, Type: Instant, Name: "x"}, {T: 7, Track: 1, Type: End, Name: "late"}},
			[]Slice{{Start: 5, End: 7, Name: "late", NoBegin: true}}, 1},
		{"begin without end", []Event{{T: 5, Track: 1, Type: Begin, Name: "a"}, {T: 6, Track: 1, Type: Begin, Name: "b"}, {T: 9, Track: 1, Type: Instant}},
			[]Slice{{Start: 5, End: 9, Name: "a", Open: true}, {Start: 6, End: 9, Name: "b", Depth: 1, Open: true}}, 2},
		{"unnamed end without begin", []Event{{T: 1, Track: 1, Type: End}},
			[]Slice{{Start: 1, End: 1, Name: "(an end without a begin)", NoBegin: true}}, 1},
		{"out of order in the file", []Event{{T: 4, Track: 1, Type: End}, {T: 2, Track: 1, Type: Begin, Name: "a"}},
			[]Slice{{Start: 2, End: 4, Name: "a"}}, 0},
		{"equal times keep file order", []Event{{T: 1, Track: 1, Type: Begin, Name: "a"}, {T: 3, Track: 1, Type: End},
			{T: 3, Track: 1, Type: Begin, Name: "b"}, {T: 5, Track: 1, Type: End}},
			[]Slice{{Start: 1, End: 3, Name: "a"}, {Start: 3, End: 5, Name: "b"}}, 0},
		{"per track stacks", []Event{{T: 1, Track: 1, Type: Begin, Name: "a"}, {T: 2, Track: 2, Type: Begin, Name: "other"},
			{T: 3, Track: 1, Type: End}, {T: 4, Track: 2, Type: End}},
			[]Slice{{Start: 1, End: 3, Name: "a"}}, 0},
		{"unknown type ignored", []Event{{T: 1, Track: 1, Type: 99, Name: "?"}}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Build([]TrackInfo{{UUID: 1, Name: "HQD 0"}}, tc.events)
			got := m.Tracks[0].Slices
			if !slices.EqualFunc(got, tc.want, sliceEqual) || m.Unbalanced != tc.unbalanced {
				t.Errorf("slices %+v unbalanced %d, want %+v %d", got, m.Unbalanced, tc.want, tc.unbalanced)
			}
		})
	}
}

func TestBuildTracks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		infos  []TrackInfo
		events []Event
		want   []string
	}{
		{"parent after child", []TrackInfo{{UUID: 2, Parent: 1, Name: "HQD 0"}, {UUID: 1, Name: "vgpu"}}, nil,
			[]string{"vgpu:other", ">HQD 0:hqd"}},
		{"missing parent is a root", []TrackInfo{{UUID: 2, Parent: 9, Name: "MES"}}, nil, []string{"MES:mes"}},
		{"self parent", []TrackInfo{{UUID: 2, Parent: 2, Name: "IH ring"}}, nil, []string{"IH ring:ih"}},
		{"cycle", []TrackInfo{{UUID: 1, Parent: 2, Name: "a"}, {UUID: 2, Parent: 1, Name: "b"}, {UUID: 3, Parent: 2, Name: "CU 3"}}, nil,
			[]string{"a:other", "b:other", ">CU 3:cu"}},
		{"duplicate uuid keeps the first", []TrackInfo{{UUID: 1, Name: "transport"}, {UUID: 1, Name: "MES"}}, nil, []string{"transport:transport"}},
		{"undeclared track", nil, []Event{{T: 1, Track: 0x42, Type: Instant}}, []string{"track 0x42:other"}},
		{"explicit order", []TrackInfo{{UUID: 1, Name: "vgpu", ExplicitChildren: true}, {UUID: 3, Parent: 1, Name: "CU 0", Rank: 9},
			{UUID: 2, Parent: 1, Name: "HQD 0", Rank: 4}}, nil, []string{"vgpu:other", ">HQD 0:hqd", ">CU 0:cu"}},
		{"declaration order", []TrackInfo{{UUID: 1, Name: "vgpu"}, {UUID: 3, Parent: 1, Name: "CU 0", Rank: 9},
			{UUID: 2, Parent: 1, Name: "HQD 0", Rank: 4}}, nil, []string{"vgpu:other", ">CU 0:cu", ">HQD 0:hqd"}},
		{"control characters and bad UTF-8", []TrackInfo{{UUID: 1, Name: "a\x00b\xffc\n"}}, nil, []string{"a b\uFFFDc :other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trackNames(Build(tc.infos, tc.events)); !slices.Equal(got, tc.want) {
				t.Errorf("tracks %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		"HQD 3": KindHQD, "MES": KindMES, "CU 12": KindCU, "IH ring": KindIH, "transport": KindTransport,
		"device": KindOther, "vgpu": KindOther, "cumulative": KindOther, "mesh": KindOther,
	} {
		if got := kindOf(name); got != want {
			t.Errorf("kindOf(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestCleanNameBounds(t *testing.T) {
	long := strings.Repeat("é", 1000)
	got := cleanName(long)
	if len(got) > maxNameBytes+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("cleanName of 2000 bytes gave %d bytes %q…", len(got), got[:10])
	}
}

func TestParseErrors(t *testing.T) {
	good := sampleTrace(t)
	for _, tc := range []struct {
		name string
		in   []byte
		want error // nil: any error
	}{
		{"garbage", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), ErrNotATrace},
		{"truncated packet", good[:len(good)-3], nil},
		{"packet length beyond the end", protowire.AppendVarint([]byte{0x0a}, 1<<40), ErrNotATrace},
		{"bad packet contents", append([]byte{0x0a, 0x02}, 0x5a, 0xff), nil},
		{"group end at top level", []byte{0x0c}, ErrNotATrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("no error (model with %d events)", m.Events)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	// A top-level field other than packets is skipped, as a proto reader would.
	extra := protowire.AppendTag(nil, 7, protowire.VarintType)
	extra = protowire.AppendVarint(extra, 3)
	if m, err := Parse(append(extra, good...)); err != nil || m.Events != 22 {
		t.Errorf("unknown top-level field: %v", err)
	}
	counter := &traceBuilder{t: t}
	counter.event(ev{t: 5, track: uMES, typ: perfetto.TrackEvent_TYPE_COUNTER})
	if m, err := Parse(append(slices.Clone(good), counter.b...)); err != nil || m.Skipped != 1 || m.Events != 22 {
		t.Errorf("a counter value: skipped %d, events %d, %v; want 1, 22", m.Skipped, m.Events, err)
	}
	if m, err := Parse(nil); err != nil || len(m.Tracks) != 0 {
		t.Errorf("empty trace: %v", err)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.pftrace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxTraceBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFile(path); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile of %d bytes: %v, want ErrTooLarge", MaxTraceBytes+1, err)
	}
	if _, err := Read(strings.NewReader(strings.Repeat("\x00", 10))); err == nil {
		t.Errorf("Read of zeros: no error")
	}
}

func TestPercentile(t *testing.T) {
	ds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[int]int64{0: 1, 50: 5, 90: 9, 91: 10, 100: 10} {
		if got := percentile(ds, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if got := percentile([]int64{7}, 90); got != 7 {
		t.Errorf("p90 of one = %d", got)
	}
}
