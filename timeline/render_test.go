package timeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func render(t *testing.T, m *Model, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, m, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenderSample(t *testing.T) {
	m, err := Parse(sampleTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, m, Options{Source: "sample.pftrace"})
	for _, want := range []string{
		`data-track="HQD 1" data-kind="hqd" data-slices="2"`,
		`data-track="MES" data-kind="mes" data-slices="3" data-instants="0"`,
		`data-track="IH ring" data-kind="ih"`,
		`data-track="CU 0" data-kind="cu"`,
		`data-track="transport" data-kind="transport"`,
		"<title>INDIRECT_BUFFER\nat +9.50 µs, lasts 5.50 µs\nib=4096</title>",
		"unmap queue\nat +29.0 µs, lasts 10.0 µs\nno end in the trace",
		`<td>doorbell</td><td>fence</td><td>2</td><td>6.50 µs</td><td>6.50 µs</td><td>6.50 µs</td>`,
		`<td>doorbell (whole flow)</td><td>interrupt</td><td>2</td><td>7.50 µs</td><td>8.50 µs</td><td>8.50 µs</td>`,
		"1 slices were unbalanced",
		`class="f"`, "flow 0x10: doorbell → fence, 6.50 µs",
		">0 µs</text>", ">10 µs</text>", ">35 µs</text>",
		"sample.pftrace",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	sum := sha256.Sum256([]byte(pageJS))
	csp := `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-` +
		base64.StdEncoding.EncodeToString(sum[:]) + `'">`
	if !strings.Contains(page, csp) || !strings.Contains(page, "<script>"+pageJS+"</script>") {
		t.Errorf("page lacks its policy %s or the script it names", csp)
	}
	// Self-contained: nothing is fetched.
	for _, bad := range []string{"src=", "href=", "@import", "url(http", "//cdn", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("page refers to an external resource: %q", bad)
		}
	}
}

func TestRenderEscapes(t *testing.T) {
	hostile := `<script>alert(1)</script>"'&</svg>`
	m := Build([]TrackInfo{{UUID: 1, Name: "HQD 0 " + hostile}}, []Event{
		{T: 0, Track: 1, Type: Begin, Name: hostile, Args: []string{hostile}},
		{T: 10, Track: 1, Type: End},
		{T: 5, Track: 1, Type: Instant, Name: hostile, Flows: []uint64{1}},
		{T: 8, Track: 1, Type: Instant, Name: hostile, Terminating: []uint64{1}},
	})
	page := render(t, m, Options{Title: hostile, Source: hostile})
	if strings.Contains(page, "<script>alert") || strings.Contains(page, `"'&</svg>`) {
		t.Errorf("a name reached the page unescaped")
	}
	if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;&lt;/svg&gt;"); n < 6 {
		t.Errorf("escaped name appears %d times, want it in title, heading, track, slice, args, instants, flows, tables", n)
	}
	if strings.Count(page, "<script>") != 1 {
		t.Errorf("page has %d <script> elements, want the one of the page", strings.Count(page, "<script>"))
	}
}

// TestRenderBigTraceMerges: a million tiny slices and instants make a page that stays small,
// within the element cap, and says what it merged.
func TestRenderBigTraceMerges(t *testing.T) {
	var evs []Event
	const n = 200_000
	for i := range n {
		tr := uint64(1 + i%4)
		evs = append(evs, Event{T: int64(i) * 100, Track: tr, Type: Begin, Name: "packet"},
			Event{T: int64(i)*100 + 50, Track: tr, Type: End},
			Event{T: int64(i)*100 + 60, Track: 5, Type: Instant, Name: "doorbell", Flows: []uint64{uint64(i)}},
			Event{T: int64(i)*100 + 90, Track: tr, Type: Instant, Name: "fence", Terminating: []uint64{uint64(i)}})
	}
	infos := []TrackInfo{{UUID: 1, Name: "HQD 0"}, {UUID: 2, Name: "HQD 1"}, {UUID: 3, Name: "HQD 2"}, {UUID: 4, Name: "HQD 3"}, {UUID: 5, Name: "transport"}}
	m := Build(infos, evs)
	o := Options{}.withDefaults()
	page := render(t, m, o)
	elems := strings.Count(page, `<rect class="s`) + strings.Count(page, `<path class="i`)
	if elems == 0 || elems > o.MaxElements {
		t.Errorf("%d bars and marks drawn, want 1..%d", elems, o.MaxElements)
	}
	if flows := strings.Count(page, `<path class="f"`); flows == 0 || flows > 2000 {
		t.Errorf("%d flow lines drawn, want 1..2000", flows)
	}
	if !regexp.MustCompile(`200000 slices drawn as \d+ bars; \d+ slices and instants closer than 1 px`).MatchString(page) {
		t.Errorf("page does not say what it merged: %s", regexp.MustCompile(`<ul class="notes">.*?</ul>`).FindString(page))
	}
	if !strings.Contains(page, "slices merged (packet)") {
		t.Errorf("no merged bar names its slices")
	}
	if len(page) > 2<<20 {
		t.Errorf("page of a %d-event trace is %d bytes, want at most 2 MiB", len(evs), len(page))
	}
	// A tighter cap merges over more pixels.
	page = render(t, m, Options{MaxElements: 100})
	if elems := strings.Count(page, `<rect class="s`) + strings.Count(page, `<path class="i`); elems > 100 {
		t.Errorf("%d elements over a cap of 100", elems)
	}
	if regexp.MustCompile(`closer than 1 px`).MatchString(page) {
		t.Errorf("a cap of 100 still merged at 1 px")
	}
}

func TestRenderTrackCap(t *testing.T) {
	var infos []TrackInfo
	var evs []Event
	for i := range 50 {
		infos = append(infos, TrackInfo{UUID: uint64(i + 1), Name: "CU"})
		evs = append(evs, Event{T: int64(i), Track: uint64(i + 1), Type: Instant, Name: "x"})
	}
	page := render(t, Build(infos, evs), Options{MaxTracks: 10, MaxRows: 1})
	if got := strings.Count(page, `<g class="track`); got != 10 {
		t.Errorf("%d tracks drawn, want 10", got)
	}
	if !strings.Contains(page, "40 tracks beyond the first 10 are not drawn") {
		t.Errorf("page does not say tracks were left out")
	}
}

func TestRenderEmpty(t *testing.T) {
	page := render(t, Build(nil, nil), Options{})
	if !strings.Contains(page, "no flows in this trace") || !strings.Contains(page, "</html>") {
		t.Errorf("empty trace page incomplete")
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "run.pftrace")
	if err := os.WriteFile(tr, sampleTrace(t), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.html")
	if err := WriteFile(tr, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte(`data-kind="mes"`)) {
		t.Fatalf("page: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the folder, want the trace and the page (no temporary left)", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "missing"), out); err == nil {
		t.Errorf("a missing trace gave no error")
	}
}

func TestAxis(t *testing.T) {
	for _, tc := range []struct {
		span int64
		step int64
		unit string
	}{
		{39_000, 5000, "µs"}, {100, 10, "ns"}, {1, 1, "ns"}, {0, 1, "ns"}, {3_000_000_000, 500_000_000, "s"}, {2_000_000, 200_000, "ms"}, {20e9, 2e9, "s"},
	} {
		step := tickStep(tc.span, 10)
		if step != tc.step || axisUnit(step).name != tc.unit {
			t.Errorf("span %d: step %d %s, want %d %s", tc.span, step, axisUnit(step).name, tc.step, tc.unit)
		}
	}
	for _, tc := range []struct {
		t, step int64
		want    string
	}{
		{15_000, 5000, "15 µs"}, {2_500_000, 500_000, "2.5 ms"}, {0, 200, "0.0 µs"}, {40, 10, "40 ns"}, {1_200_000_000, 200_000_000, "1.2 s"},
	} {
		if got := formatTick(tc.t, tc.step, axisUnit(tc.step)); got != tc.want {
			t.Errorf("formatTick(%d, %d) = %q, want %q", tc.t, tc.step, got, tc.want)
		}
	}
	for d, want := range map[int64]string{850: "850 ns", 12_400: "12.4 µs", 3_050_000: "3.05 ms", 1_200_000_000: "1.20 s", -1500: "-1.50 µs", 0: "0 ns"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", d, got, want)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sampleTrace(f))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Render(&out, m, Options{MaxElements: 500}); err != nil {
			t.Fatal(err)
		}
		if bytes.Count(out.Bytes(), []byte("<script>")) != 1 {
			t.Fatalf("trace text opened a script element")
		}
	})
}

func TestLayoutMerge(t *testing.T) {
	// 1000 ns over 1000 px: a nanosecond is a pixel.
	sc := linearScale(0, 1000, 1000)
	for _, tc := range []struct {
		name   string
		slices []Slice
		want   []int // slices per bar, in order
	}{
		{"tiny run merges", []Slice{{Start: 0, End: 0}, {Start: 0, End: 0}, {Start: 0, End: 0}}, []int{3}},
		{"wide keeps its own bar", []Slice{{Start: 0, End: 50}, {Start: 50, End: 50}, {Start: 50, End: 50}}, []int{1, 2}},
		{"tiny before wide", []Slice{{Start: 0, End: 0}, {Start: 0, End: 40}}, []int{1, 1}},
		{"gap of a pixel separates", []Slice{{Start: 0, End: 0}, {Start: 2, End: 2}, {Start: 4, End: 4}}, []int{1, 1, 1}},
		{"rows merge apart", []Slice{{Start: 0, End: 0}, {Start: 0, End: 0, Depth: 1}, {Start: 0, End: 0}}, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Track{Slices: tc.slices}
			for _, s := range tc.slices {
				tr.MaxDepth = max(tr.MaxDepth, s.Depth)
			}
			var got []int
			for _, b := range layoutTrack(tr, sc, 1, 4).bars {
				got = append(got, b.n)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("bars hold %v slices, want %v", got, tc.want)
			}
		})
	}
}

func TestScaleBreaks(t *testing.T) {
	// Work at 0..100 and 900..1000, nothing between: one break.
	m := Build([]TrackInfo{{UUID: 1, Name: "HQD 1"}}, []Event{
		{T: 0, Track: 1, Type: Begin, Name: "a"}, {T: 100, Track: 1, Type: End},
		{T: 900, Track: 1, Type: Instant, Name: "b"}, {T: 950, Track: 1, Type: Begin, Name: "c"}, {T: 1000, Track: 1, Type: End},
	})
	sc := newScale(m, 1000)
	bs := sc.breaks()
	if len(bs) != 1 || bs[0].t0 != 100 || bs[0].t1 != 900 || bs[0].x1-bs[0].x0 != breakWidth {
		t.Fatalf("breaks %+v, want one from 100 to 900, %v px", bs, breakWidth)
	}
	if x := sc.x(0); x != 0 {
		t.Errorf("x(start) = %v", x)
	}
	if x := sc.x(1000); x != 1000 {
		t.Errorf("x(end) = %v", x)
	}
	last := -1.0
	for tm := int64(-10); tm <= 1010; tm += 5 {
		x := sc.x(tm)
		if x < last || x < 0 || x > 1000 {
			t.Fatalf("x(%d) = %v after %v: not monotonic within the width", tm, x, last)
		}
		last = x
	}
	// A slice over the stretch keeps it: nothing is quiet.
	m = Build([]TrackInfo{{UUID: 1, Name: "HQD 1"}}, []Event{
		{T: 0, Track: 1, Type: Begin, Name: "wait"}, {T: 1000, Track: 1, Type: End}, {T: 500, Track: 1, Type: Instant}})
	if bs := newScale(m, 1000).breaks(); len(bs) != 0 {
		t.Errorf("breaks %+v under an open slice", bs)
	}
	page := render(t, Build([]TrackInfo{{UUID: 1, Name: "HQD 1"}}, []Event{{T: 0, Track: 1, Type: Instant},
		{T: 10, Track: 1, Type: Instant}, {T: 10_000, Track: 1, Type: Instant}, {T: 10_010, Track: 1, Type: Instant}}), Options{})
	if !strings.Contains(page, "1 quiet stretch without any slice or instant (9.99 µs) is drawn 24 px wide") || !strings.Contains(page, `class="brk"`) {
		t.Errorf("page does not show or say its break")
	}
}
