package timeline

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"strconv"
	"strings"
)

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

// contentPolicy is the page's Content-Security-Policy: nothing is fetched from anywhere, and
// the only script that runs is the page's own (by its hash), so even a name that escaped its
// escaping could neither load nor run anything.
var contentPolicy = func() string {
	sum := sha256.Sum256([]byte(pageJS))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// Geometry of the drawing, in pixels.
const (
	labelWidth  = 230 // track names
	axisHeight  = 26
	rowHeight   = 16
	markHeight  = 12 // the strip of instants under a track's slice rows
	trackGap    = 3
	emptyHeight = 10 // a track without slices or instants
	maxIndent   = 6  // nesting levels indented in the labels
)

// esc escapes text for an HTML text node or a double-quoted attribute. Every string that
// came from the trace passes through it.
func esc(s string) string { return html.EscapeString(s) }

// pageWriter writes the page and keeps the first write error.
type pageWriter struct {
	w   *bufio.Writer
	err error
}

func (p *pageWriter) s(parts ...string) {
	for _, s := range parts {
		if p.err == nil {
			_, p.err = p.w.WriteString(s)
		}
	}
}

func (p *pageWriter) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// colour is a stable fill for a name: equal names look alike across tracks.
func colour(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return "hsl(" + strconv.Itoa(int(h.Sum32()%360)) + " 55% 62%)"
}

// trackY is where each drawn track begins, below the axis, and the drawing's height.
func trackY(l layout, m *Model) (ys []int, height int) {
	y := axisHeight
	ys = make([]int, len(l.tracks))
	for i, tl := range l.tracks {
		ys[i] = y
		y += trackHeight(tl, m.Tracks[i]) + trackGap
	}
	return ys, y + axisHeight
}

// trackHeight: a track with nothing to draw (an idle HQD slot, a parent track) is a thin
// row, so the busy ones fill the picture while every slot stays visible.
func trackHeight(tl trackLayout, t *Track) int {
	h := tl.rows * rowHeight
	if len(t.Instants) > 0 {
		h += markHeight
	}
	if h == 0 {
		return emptyHeight
	}
	return h
}

// Render writes the model as one self-contained HTML page: inline SVG, CSS and script, no
// other file or network access, so it opens from file:// anywhere.
func Render(w io.Writer, m *Model, o Options) error {
	o = o.withDefaults()
	l := layoutModel(m, o)
	p := &pageWriter{w: bufio.NewWriterSize(w, 64<<10)}
	p.s("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
		"<meta http-equiv=\"Content-Security-Policy\" content=\"", contentPolicy, "\">\n<title>", esc(o.Title), "</title>\n",
		"<meta name=\"viewport\" content=\"width=device-width\">\n<style>\n", pageCSS, "</style>\n</head>\n<body>\n")
	p.s("<header><h1>", esc(o.Title), "</h1><p class=\"meta\">")
	if o.Source != "" {
		p.s("<span class=\"src\">", esc(o.Source), "</span> · ")
	}
	p.f("span %s · %d events · %d tracks · %d flows</p></header>\n", esc(formatDuration(m.End-m.Start)), m.Events, len(m.Tracks), len(m.Flows))
	p.s("<div class=\"controls\"><label><input type=\"checkbox\" id=\"flows\" checked> flows</label> ",
		"<label>highlight <input type=\"search\" id=\"find\" placeholder=\"name contains…\"></label> ",
		"<span id=\"detail\">click a bar or mark for its details</span></div>\n")
	writeSVG(p, m, l, o)
	writeNotes(p, m, l, o)
	writeLatencies(p, m)
	writeTrackTable(p, m)
	p.s("<script>", pageJS, "</script>\n</body>\n</html>\n") // exactly the text contentPolicy hashes
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

func writeSVG(p *pageWriter, m *Model, l layout, o Options) {
	ys, height := trackY(l, m)
	width := labelWidth + o.Width + 12
	sc := l.sc
	p.f("<div class=\"scroll\"><svg id=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"timeline of %d tracks\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", len(l.tracks), width, height, width, height)
	p.s("<defs><marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0 0L6 3L0 6z\" class=\"fa\"/></marker></defs>\n")
	writeAxis(p, m, sc, height)
	elements := 0
	labels := 0
	for i, tl := range l.tracks {
		t := m.Tracks[i]
		y := ys[i]
		h := trackHeight(tl, t)
		busy, frac := m.Busy(t)
		p.f("<g class=\"track k-%s\" data-track=\"%s\" data-kind=\"%s\" data-slices=\"%d\" data-instants=\"%d\" data-busy=\"%.4f\">\n",
			t.Kind, esc(t.Name), t.Kind, len(t.Slices), len(t.Instants), frac)
		p.f("<rect class=\"bg\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\"/>", y, width, h)
		indent := 6 + 10*min(t.Level, maxIndent)
		lbl, ly := "lbl", y+12
		if h == emptyHeight {
			lbl, ly = "lbl idle", y+9
		}
		p.f("<text class=\"%s\" x=\"%d\" y=\"%d\">%s<title>%s — %d slices, %d instants, busy %s (%.1f%%)</title></text>\n",
			lbl, indent, ly, esc(fit(t.Name, labelWidth-indent-8)), esc(t.Name), len(t.Slices), len(t.Instants), esc(formatDuration(busy)), 100*frac)
		for _, b := range tl.bars {
			if elements >= o.MaxElements {
				break
			}
			elements++
			x0 := labelWidth + b.x0
			wpx := max(b.x1-b.x0, 1)
			by := y + b.row*rowHeight + 1
			cls := "s"
			if b.n > 1 {
				cls += " m"
			}
			if b.open || b.noBegin {
				cls += " u"
			}
			p.f("<rect class=\"%s\" x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\" fill=\"%s\"><title>%s</title></rect>",
				cls, num(x0), by, num(wpx), rowHeight-2, colour(b.names[0]), esc(barTitle(m, b)))
			if wpx >= 34 && labels < o.MaxLabels && b.n == 1 {
				if s := fit(b.names[0], int(wpx)-6); s != "" {
					labels++
					p.f("<text class=\"bl\" x=\"%s\" y=\"%d\">%s</text>", num(x0+3), by+11, esc(s))
				}
			}
			p.s("\n")
		}
		my := y + tl.rows*rowHeight
		for _, d := range tl.dots {
			if elements >= o.MaxElements {
				break
			}
			elements++
			x := labelWidth + d.x
			cls := "i"
			if d.n > 1 {
				cls += " m"
			}
			p.f("<path class=\"%s\" d=\"M%s %dl4 5l-4 5l-4-5z\" fill=\"%s\"><title>%s</title></path>\n",
				cls, num(x), my+1, colour(d.names[0]), esc(dotTitle(m, d)))
		}
		p.s("</g>\n")
	}
	writeBreaks(p, m, sc, height)
	writeFlows(p, m, l, o, ys, sc)
	p.s("</svg></div>\n")
}

// writeAxis draws the time axis above and below the tracks, with grid lines, and the breaks
// where quiet stretches were drawn narrow.
func writeAxis(p *pageWriter, m *Model, sc scale, height int) {
	visible := m.End - m.Start
	for _, b := range sc.breaks() {
		visible -= b.t1 - b.t0
	}
	step := tickStep(visible, 10)
	u := axisUnit(step)
	p.s("<g class=\"axis\">")
	lastX := -1e9
	for _, g := range sc.segs {
		if g.quiet {
			continue
		}
		first := (g.t0 - m.Start + step - 1) / step * step // the first multiple of step in the segment
		for t := first; m.Start+t <= g.t1 && t >= 0; t += step {
			x := float64(labelWidth) + sc.x(m.Start+t)
			if x-lastX < 48 {
				continue
			}
			lastX = x
			label := esc(formatTick(t, step, u))
			p.f("<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\"/><text x=\"%s\" y=\"16\">%s</text><text x=\"%s\" y=\"%d\">%s</text>",
				num(x), axisHeight-4, num(x), height-axisHeight+4, num(x), label, num(x), height-8, label)
			if t > g.t1-m.Start-step { // the segment's last tick; also guards overflow near MaxInt64
				break
			}
		}
	}
	p.s("</g>\n")
}

// writeBreaks marks the quiet stretches drawn narrow: a pale band between dashed lines over
// every track.
func writeBreaks(p *pageWriter, m *Model, sc scale, height int) {
	for _, b := range sc.breaks() {
		x0, x1 := float64(labelWidth)+b.x0, float64(labelWidth)+b.x1
		p.f("<g class=\"brk\"><rect x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\"/><path d=\"M%s %dV%dM%s %dV%d\"/><title>%s</title></g>\n",
			num(x0), axisHeight-4, num(x1-x0), height-2*axisHeight+8, num(x0+2), axisHeight-4, height-axisHeight+4, num(x1-2), axisHeight-4, height-axisHeight+4,
			esc(fmt.Sprintf("nothing happens for %s (from %s to %s): drawn %.0f px wide", formatDuration(b.t1-b.t0), rel(m, b.t0), rel(m, b.t1), breakWidth)))
	}
}

func writeFlows(p *pageWriter, m *Model, l layout, o Options, ys []int, sc scale) {
	type seg struct{ x1, y1, x2, y2 int }
	seen := map[seg]bool{}
	drawn := 0
	p.s("<g class=\"flows\">")
	for _, f := range m.Flows {
		for i := 1; i < len(f.Points) && drawn < o.MaxFlows; i++ {
			a, b := f.Points[i-1], f.Points[i]
			if a.Track >= len(l.tracks) || b.Track >= len(l.tracks) {
				continue
			}
			ya := ys[a.Track] + trackHeight(l.tracks[a.Track], m.Tracks[a.Track])/2
			yb := ys[b.Track] + trackHeight(l.tracks[b.Track], m.Tracks[b.Track])/2
			xa, xb := labelWidth+sc.x(a.T), labelWidth+sc.x(b.T)
			k := seg{int(xa), ya, int(xb), yb}
			if seen[k] {
				continue
			}
			seen[k] = true
			drawn++
			p.f("<path class=\"f\" d=\"M%s %dL%s %d\" marker-end=\"url(#arrow)\"><title>%s</title></path>\n",
				num(xa), ya, num(xb), yb, esc(fmt.Sprintf("flow %#x: %s → %s, %s", f.ID, a.Name, b.Name, formatDuration(b.T-a.T))))
		}
	}
	p.s("</g>\n")
}

func rel(m *Model, t int64) string { return "+" + formatDuration(t-m.Start) }

func barTitle(m *Model, b bar) string {
	var s string
	if b.n == 1 {
		s = fmt.Sprintf("%s\nat %s, lasts %s", b.names[0], rel(m, b.start), formatDuration(b.end-b.start)) + argLines(b.args)
	} else {
		s = fmt.Sprintf("%d slices merged (%s)\nfrom %s to %s", b.n, nameList(b.names, b.more), rel(m, b.start), rel(m, b.end))
	}
	if b.open {
		s += "\nno end in the trace: drawn to its end"
	}
	if b.noBegin {
		s += "\nno begin in the trace: drawn from its start"
	}
	return s
}

func dotTitle(m *Model, d dot) string {
	if d.n == 1 {
		return fmt.Sprintf("%s\nat %s", d.names[0], rel(m, d.start)) + argLines(d.args)
	}
	return fmt.Sprintf("%d instants merged (%s)\nfrom %s to %s", d.n, nameList(d.names, d.more), rel(m, d.start), rel(m, d.end))
}

func argLines(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return "\n" + strings.Join(args, "\n")
}

func nameList(names []string, more bool) string {
	s := strings.Join(names, ", ")
	if more {
		s += ", …"
	}
	return s
}

// fit shortens s to about px pixels of the page's small font (an average glyph is about 6.2
// pixels), marking a cut with an ellipsis; "" if not even two characters fit.
func fit(s string, px int) string {
	n := px * 10 / 62
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 3 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

func writeNotes(p *pageWriter, m *Model, l layout, o Options) {
	var notes []string
	total, drawnBars := 0, 0
	for i, tl := range l.tracks {
		total += len(m.Tracks[i].Slices)
		drawnBars += len(tl.bars)
	}
	notes = append(notes, fmt.Sprintf("%d slices drawn as %d bars; %d slices and instants closer than %s px (%s at this scale) were merged into one bar or mark each, which says how many it holds",
		total, drawnBars, l.merged, strconv.FormatFloat(l.gap, 'f', -1, 64), formatDuration(int64(l.gap/l.sc.px))))
	if bs := l.sc.breaks(); len(bs) > 0 {
		longest := int64(0)
		for _, b := range bs {
			longest = max(longest, b.t1-b.t0)
		}
		what := fmt.Sprintf("%d quiet stretches without any slice or instant (the longest %s) are", len(bs), formatDuration(longest))
		if len(bs) == 1 {
			what = fmt.Sprintf("1 quiet stretch without any slice or instant (%s) is", formatDuration(longest))
		}
		notes = append(notes, fmt.Sprintf("%s drawn %.0f px wide (a pale band between dashed lines)", what, breakWidth))
	}
	if l.capped {
		notes = append(notes, fmt.Sprintf("more than %d bars and marks even after merging: the rest were not drawn", o.MaxElements))
	}
	if n := len(m.Tracks) - len(l.tracks); n > 0 {
		notes = append(notes, fmt.Sprintf("%d tracks beyond the first %d are not drawn (they are in the table)", n, o.MaxTracks))
	}
	hidden := 0
	for _, tl := range l.tracks {
		hidden += tl.hidden
	}
	if hidden > 0 {
		notes = append(notes, fmt.Sprintf("%d slices nested deeper than %d levels are not drawn", hidden, o.MaxRows))
	}
	if m.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d counter values and events of no type are not drawn", m.Skipped))
	}
	if m.Unbalanced > 0 {
		notes = append(notes, fmt.Sprintf("%d slices were unbalanced (a begin without an end is drawn to the trace's end, an end without a begin from its start; dashed outline)", m.Unbalanced))
	}
	p.s("<ul class=\"notes\">")
	for _, n := range notes {
		p.s("<li>", esc(n), "</li>")
	}
	p.s("</ul>\n")
}

func writeLatencies(p *pageWriter, m *Model) {
	p.s("<h2>Latencies along the flows</h2>\n")
	lat := m.Latencies()
	if len(lat) == 0 {
		p.s("<p class=\"none\">no flows in this trace</p>\n")
		return
	}
	p.s("<table class=\"lat\"><thead><tr><th>from</th><th>to</th><th>count</th><th>median</th><th>p90</th><th>max</th></tr></thead><tbody>\n")
	for _, r := range lat {
		from := r.From
		if r.Whole {
			from += " (whole flow)"
		}
		p.s("<tr><td>", esc(from), "</td><td>", esc(r.To), "</td><td>", strconv.Itoa(r.Count), "</td><td>",
			esc(formatDuration(r.Median)), "</td><td>", esc(formatDuration(r.P90)), "</td><td>", esc(formatDuration(r.Max)), "</td></tr>\n")
	}
	p.s("</tbody></table>\n")
}

// maxTableTracks bounds the track table; a trace may declare very many tracks.
const maxTableTracks = 1000

func writeTrackTable(p *pageWriter, m *Model) {
	p.s("<h2>Tracks</h2>\n<table class=\"tracks\"><thead><tr><th>track</th><th>kind</th><th>slices</th><th>instants</th><th>busy</th><th>busy %</th><th>most frequent</th></tr></thead><tbody>\n")
	for i, t := range m.Tracks {
		if i == maxTableTracks {
			p.f("<tr><td colspan=\"7\">%d more tracks</td></tr>\n", len(m.Tracks)-i)
			break
		}
		busy, frac := m.Busy(t)
		var top []string
		for _, nc := range TopNames(t, 5) {
			top = append(top, fmt.Sprintf("%s ×%d", nc.Name, nc.Count))
		}
		p.f("<tr class=\"k-%s\"><td style=\"padding-left:%dpx\">%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%.1f</td><td>%s</td></tr>\n",
			t.Kind, 4+10*min(t.Level, maxIndent), esc(t.Name), t.Kind, len(t.Slices), len(t.Instants), esc(formatDuration(busy)), 100*frac, esc(strings.Join(top, ", ")))
	}
	p.s("</tbody></table>\n")
}
