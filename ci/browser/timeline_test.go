package browser

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vgpu/timeline"
)

// screenshotEnv makes TestTimelinePage write its screenshot to docs/timeline.png.
const screenshotEnv = "VGPU_UPDATE_SCREENSHOT"

// maxScreenshot bounds the committed PNG.
const maxScreenshot = 400 << 10

type drawnTrack struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Bars  int    `json:"bars"`
	Marks int    `json:"marks"`
}

// TestTimelinePage renders the trace of a known workload with the timeline package, opens the
// page from file:// in headless Chromium and checks it as a user would see it: no script
// error, no failed load, the expected tracks drawn with their slices, the script's controls
// working; then takes a screenshot (written to docs/timeline.png with VGPU_UPDATE_SCREENSHOT=1).
func TestTimelinePage(t *testing.T) {
	b, ctx := start(t)
	dir := t.TempDir()
	tr := filepath.Join(dir, "workload.pftrace")
	recordWorkload(t, tr)
	page := filepath.Join(dir, "workload.html")
	if err := timeline.WriteFile(tr, page); err != nil {
		t.Fatal(err)
	}
	if err := b.Navigate(ctx, "file://"+page); err != nil {
		t.Fatal(err)
	}
	var ready string
	if err := b.Evaluate(ctx, `document.documentElement.getAttribute("data-ready") || ""`, &ready); err != nil || ready == "" || ready == "0" {
		t.Errorf("the page's script did not finish (data-ready %q): %v", ready, err)
	}

	var tracks []drawnTrack
	if err := b.Evaluate(ctx, `Array.from(document.querySelectorAll("svg#tl g.track")).map(g => ({
		name: g.dataset.track, kind: g.dataset.kind,
		bars: g.querySelectorAll("rect.s").length, marks: g.querySelectorAll("path.i").length}))`, &tracks); err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]drawnTrack{}
	for _, d := range tracks {
		byKind[d.Kind] = append(byKind[d.Kind], d)
	}
	busy := func(kind string) (n int) {
		for _, d := range byKind[kind] {
			if d.Bars > 0 {
				n++
			}
		}
		return n
	}
	if len(byKind["hqd"]) != wantHQDTracks {
		t.Errorf("%d HQD tracks drawn, want %d: %+v", len(byKind["hqd"]), wantHQDTracks, byKind["hqd"])
	}
	for kind, want := range wantBusy {
		if got := busy(kind); got < want {
			t.Errorf("%d %s tracks with slices drawn, want at least %d: %+v", got, kind, want, byKind[kind])
		}
	}
	for _, kind := range []string{"ih", "mes"} {
		marks := 0
		for _, d := range byKind[kind] {
			marks += d.Marks
		}
		if marks == 0 {
			t.Errorf("no instants drawn on the %s track: %+v", kind, byKind[kind])
		}
	}
	var counts struct {
		Flows, Latencies, Axis int
		Width, Height          float64
	}
	if err := b.Evaluate(ctx, `({flows: document.querySelectorAll("svg#tl path.f").length,
		latencies: document.querySelectorAll("table.lat tbody tr").length,
		axis: document.querySelectorAll("svg#tl .axis text").length,
		width: document.getElementById("tl").getBoundingClientRect().width,
		height: document.getElementById("tl").getBoundingClientRect().height})`, &counts); err != nil {
		t.Fatal(err)
	}
	if counts.Flows == 0 || counts.Latencies == 0 || counts.Axis < 4 || counts.Width < 800 || counts.Height < 200 {
		t.Errorf("page shows %+v: want flow arrows, latency rows, axis labels and a drawing of at least 800×200", counts)
	}

	// The script's controls: a click shows a bar's details, the search box highlights.
	var detail struct{ Shown, Title string }
	if err := b.Evaluate(ctx, `(() => {
		const r = document.querySelector("g.track[data-kind=hqd] rect.s");
		r.dispatchEvent(new MouseEvent("click", {bubbles: true}));
		return {shown: document.getElementById("detail").textContent, title: r.querySelector("title").textContent};
	})()`, &detail); err != nil {
		t.Fatal(err)
	}
	if detail.Shown == "" || detail.Shown != detail.Title {
		t.Errorf("a click shows %q, want the bar's title %q", detail.Shown, detail.Title)
	}
	var highlighted int
	if err := b.Evaluate(ctx, `(() => {
		const f = document.getElementById("find");
		f.value = `+"`"+highlightQuery+"`"+`;
		f.dispatchEvent(new Event("input"));
		const n = document.querySelectorAll("svg#tl .hl").length;
		f.value = ""; f.dispatchEvent(new Event("input"));
		return n;
	})()`, &highlighted); err != nil || highlighted == 0 {
		t.Errorf("searching %q highlights %d elements: %v", highlightQuery, highlighted, err)
	}

	if probs := b.Problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}

	shot, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot)
	if os.Getenv(screenshotEnv) == "1" {
		out := filepath.Join("..", "..", "docs", "timeline.png")
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, len(shot))
	}
}

// checkScreenshot: a 1200×700 PNG, small enough to commit, that is a picture (many colours,
// not one blank page).
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{1200, 700}) {
		t.Errorf("screenshot is %v, want 1200×700", got)
	}
	if len(shot) > maxScreenshot {
		t.Errorf("screenshot is %d bytes, want at most %d", len(shot), maxScreenshot)
	}
	colours := map[uint32]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>11<<10|g>>11<<5|b>>11]++
		}
	}
	white := colours[31<<10|31<<5|31]
	total := (bounds.Dx() / 2) * (bounds.Dy() / 2)
	if len(colours) < 30 || white > total*9/10 {
		t.Errorf("screenshot looks empty: %d colours, %d of %d sampled pixels white", len(colours), white, total)
	}
}

// TestTimelinePolicy: the page's Content-Security-Policy lets only its own script run and
// nothing load, so markup that got into the page some other way (a copy of the page edited
// by hand, an escaping bug) does nothing.
func TestTimelinePolicy(t *testing.T) {
	b, ctx := start(t)
	dir := t.TempDir()
	var page bytes.Buffer
	m := timeline.Build([]timeline.TrackInfo{{UUID: 1, Name: "HQD 1"}}, []timeline.Event{
		{T: 0, Track: 1, Type: timeline.Begin, Name: "IB"}, {T: 10, Track: 1, Type: timeline.End}})
	if err := timeline.Render(&page, m, timeline.Options{}); err != nil {
		t.Fatal(err)
	}
	injected := strings.Replace(page.String(), "</body>",
		`<script>window.injected = 1;</script><img src="http://mirror.example/x.png"></body>`, 1)
	path := filepath.Join(dir, "injected.html")
	if err := os.WriteFile(path, []byte(injected), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Navigate(ctx, "file://"+path); err != nil {
		t.Fatal(err)
	}
	var state struct {
		Injected bool
		Ready    string
	}
	if err := b.Evaluate(ctx, `({injected: window.injected === 1, ready: document.documentElement.getAttribute("data-ready") || ""})`, &state); err != nil {
		t.Fatal(err)
	}
	if state.Injected || state.Ready == "" {
		t.Errorf("injected script ran: %v; the page's own ran: %q", state.Injected, state.Ready)
	}
	probs := strings.Join(b.Problems(), "\n")
	if strings.Count(probs, "Content Security Policy") < 2 {
		t.Errorf("the browser did not report both blocked elements:\n%s", probs)
	}
}
