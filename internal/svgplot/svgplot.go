// Package svgplot draws small, dependency-free SVG charts from Go: line,
// step and CDF plots with axes, ticks and a legend, and grouped bar charts.
// The planner's web page inlines them in HTML; the simulator and the
// testbed write them as .svg files.
//
// Every text (titles, labels, series names) is XML-escaped, so names that
// come from users (job names) are safe to embed. Non-finite values are
// dropped, never drawn.
//
// Usage:
//
//	c := svgplot.Chart{Title: "JCT CDF", XLabel: "JCT (s)", YLabel: "fraction of jobs"}
//	c.Add(svgplot.CDF("optimus", jcts))              // a step series
//	c.Add(svgplot.Series{Name: "fit", X: xs, Y: ys, Class: "fit-curve"})
//	c.HLine("target", 0.1)                            // a dashed reference line
//	err := os.WriteFile("jct-cdf.svg", c.SVG(), 0o644)
//
//	b := svgplot.Bars{Title: "average JCT", Groups: []string{"0.5", "1"}, YLabel: "s"}
//	b.Add("optimus", []float64{3200, 5100})
//	out := b.SVG()
//
// Series.ID and Series.Class become the path's id and class attributes, so
// tests (and CSS) can find a given curve.
package svgplot

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
)

// legendSlot is the width of one legend entry in pixels.
const legendSlot = 210

// Default size in pixels.
const (
	DefaultWidth  = 640
	DefaultHeight = 320
)

// Palette is the series colours, in order (colour-blind safe, Okabe-Ito).
var Palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"}

// Series is one line.
type Series struct {
	Name string
	X, Y []float64
	// Step draws a staircase (the value holds until the next X).
	Step bool
	// Points draws a marker at each point and no line.
	Points bool
	// Dashed draws a dashed line.
	Dashed bool
	// ID and Class are the path's attributes (optional).
	ID, Class string
	// Color overrides the palette.
	Color string
}

// Chart is a line/step/scatter chart.
type Chart struct {
	Title, XLabel, YLabel string
	Width, Height         int
	Series                []Series
	// Refs are horizontal reference lines (e.g. a target loss).
	Refs []Ref
	// YMin/YMax, when set (YFixed), override the data range on Y: lines
	// are clamped to it and points outside it are not drawn.
	YFixed     bool
	YMin, YMax float64
	// ID is the svg element's id (optional).
	ID string
	// XInteger and YInteger put that axis's ticks on whole numbers only
	// (counts: a worker count of 1.5 does not exist).
	XInteger, YInteger bool
}

// Ref is a labelled horizontal line.
type Ref struct {
	Name string
	Y    float64
}

// Add appends a series.
func (c *Chart) Add(s Series) { c.Series = append(c.Series, s) }

// HLine adds a dashed horizontal reference line.
func (c *Chart) HLine(name string, y float64) { c.Refs = append(c.Refs, Ref{Name: name, Y: y}) }

// CDF returns the empirical CDF of values as a step series (non-finite
// values are dropped).
func CDF(name string, values []float64) Series {
	v := finite(values)
	slices.Sort(v)
	s := Series{Name: name, Step: true}
	n := float64(len(v))
	if len(v) > 0 {
		s.X, s.Y = append(s.X, v[0]), append(s.Y, 0)
	}
	for i, x := range v {
		s.X = append(s.X, x)
		s.Y = append(s.Y, float64(i+1)/n)
	}
	return s
}

// geometry of the plot area inside the svg.
type frame struct {
	w, h                  float64
	left, right, top, bot float64
	x0, x1, y0, y1        float64
}

func (f frame) px(x float64) float64 {
	return f.left + (x-f.x0)/(f.x1-f.x0)*(f.w-f.left-f.right)
}

func (f frame) py(y float64) float64 {
	return f.h - f.bot - (y-f.y0)/(f.y1-f.y0)*(f.h-f.top-f.bot)
}

func (c *Chart) size() (float64, float64) {
	w, h := c.Width, c.Height
	if w <= 0 {
		w = DefaultWidth
	}
	if h <= 0 {
		h = DefaultHeight
	}
	return float64(w), float64(h)
}

// dataRange is the extent of all finite points and reference lines.
func (c *Chart) dataRange() (x0, x1, y0, y1 float64, ok bool) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range min(len(s.X), len(s.Y)) {
			if !isFinite(s.X[i]) || !isFinite(s.Y[i]) {
				continue
			}
			x0, x1 = math.Min(x0, s.X[i]), math.Max(x1, s.X[i])
			y0, y1 = math.Min(y0, s.Y[i]), math.Max(y1, s.Y[i])
			ok = true
		}
	}
	for _, r := range c.Refs {
		if isFinite(r.Y) && ok {
			y0, y1 = math.Min(y0, r.Y), math.Max(y1, r.Y)
		}
	}
	if c.YFixed {
		y0, y1 = c.YMin, c.YMax
	}
	return x0, x1, y0, y1, ok
}

// SVG renders the chart. A chart without finite data renders its frame
// and the words "no data".
func (c *Chart) SVG() []byte {
	w, h := c.size()
	var b bytes.Buffer
	open(&b, w, h, c.ID)
	f := frame{w: w, h: h, left: 64, right: 16, top: 28, bot: 44}
	legend := c.legendRows(w)
	f.bot += float64(legend) * 16
	title(&b, f, c.Title)
	x0, x1, y0, y1, ok := c.dataRange()
	if !ok {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" fill="#666">no data</text>`, w/2, h/2)
		b.WriteString("</svg>")
		return b.Bytes()
	}
	xt, yt := Ticks(x0, x1, 6), Ticks(y0, y1, 5)
	if c.XInteger {
		xt = IntTicks(x0, x1, 6)
	}
	if c.YInteger {
		yt = IntTicks(y0, y1, 5)
	}
	f.x0, f.x1 = widen(x0, x1, xt)
	f.y0, f.y1 = widen(y0, y1, yt)
	axes(&b, f, xt, yt, c.XLabel, c.YLabel)
	for i, s := range c.Series {
		c.drawSeries(&b, f, s, color(s.Color, i))
	}
	for _, r := range c.Refs {
		if !isFinite(r.Y) {
			continue
		}
		y := f.py(r.Y)
		fmt.Fprintf(&b, `<line class="ref" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="6 4"/>`, f.left, y, w-f.right, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#444">%s</text>`, w-f.right-2, y-3, esc(r.Name))
	}
	c.drawLegend(&b, f)
	b.WriteString("</svg>")
	return b.Bytes()
}

func (c *Chart) drawSeries(b *bytes.Buffer, f frame, s Series, col string) {
	attrs := ""
	if s.ID != "" {
		attrs += ` id="` + esc(s.ID) + `"`
	}
	if s.Class != "" {
		attrs += ` class="` + esc(s.Class) + `"`
	}
	if s.Points {
		fmt.Fprintf(b, `<g%s fill="%s">`, attrs, col)
		for i := range min(len(s.X), len(s.Y)) {
			if isFinite(s.X[i]) && isFinite(s.Y[i]) && s.Y[i] >= f.y0 && s.Y[i] <= f.y1 {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5"><title>%s</title></circle>`,
					f.px(s.X[i]), f.py(s.Y[i]), esc(s.Name+": "+Format(s.X[i])+", "+Format(s.Y[i])))
			}
		}
		b.WriteString("</g>")
		return
	}
	var d bytes.Buffer
	started := false
	for i := range min(len(s.X), len(s.Y)) {
		if !isFinite(s.X[i]) || !isFinite(s.Y[i]) {
			continue
		}
		x, y := f.px(s.X[i]), f.py(math.Min(math.Max(s.Y[i], f.y0), f.y1))
		switch {
		case !started:
			fmt.Fprintf(&d, "M%.1f %.1f", x, y)
			started = true
		case s.Step:
			fmt.Fprintf(&d, "H%.1fV%.1f", x, y)
		default:
			fmt.Fprintf(&d, "L%.1f %.1f", x, y)
		}
	}
	if !started {
		return
	}
	dash := ""
	if s.Dashed {
		dash = ` stroke-dasharray="5 3"`
	}
	fmt.Fprintf(b, `<path%s d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>`, attrs, d.String(), col, dash, esc(s.Name))
}

// legendRows is how many rows the legend takes.
func (c *Chart) legendRows(w float64) int {
	named := 0
	for _, s := range c.Series {
		if s.Name != "" {
			named++
		}
	}
	if named == 0 {
		return 0
	}
	perRow := max(int((w-64)/legendSlot), 1)
	return (named + perRow - 1) / perRow
}

func (c *Chart) drawLegend(b *bytes.Buffer, f frame) {
	rows := c.legendRows(f.w)
	if rows == 0 {
		return
	}
	perRow := max(int((f.w-64)/legendSlot), 1)
	y0 := f.h - float64(rows)*16 + 4
	k := 0
	for i, s := range c.Series {
		if s.Name == "" {
			continue
		}
		x := 64 + float64(k%perRow)*legendSlot
		y := y0 + float64(k/perRow)*16
		col := color(s.Color, i)
		fmt.Fprintf(b, `<g class="legend"><rect x="%.1f" y="%.1f" width="12" height="4" fill="%s"/><text x="%.1f" y="%.1f" font-size="11">%s</text></g>`,
			x, y-4, col, x+16, y+1, esc(clip(s.Name, 32)))
		k++
	}
}

func open(b *bytes.Buffer, w, h float64, id string) {
	idAttr := ""
	if id != "" {
		idAttr = ` id="` + esc(id) + `"`
	}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg"%s width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`, idAttr, w, h, w, h)
	fmt.Fprintf(b, `<rect width="%g" height="%g" fill="#fff"/>`, w, h)
}

func title(b *bytes.Buffer, f frame, t string) {
	if t != "" {
		fmt.Fprintf(b, `<text x="%g" y="18" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`, f.w/2, esc(t))
	}
}

func axes(b *bytes.Buffer, f frame, xt, yt []float64, xl, yl string) {
	r, bot := f.w-f.right, f.h-f.bot
	fmt.Fprintf(b, `<g class="axes" stroke="#999"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`,
		f.left, bot, r, bot, f.left, f.top, f.left, bot)
	for _, t := range xt {
		x := f.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/><text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`,
			x, bot, x, bot+4, x, bot+16, Format(t))
	}
	for _, t := range yt {
		y := f.py(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end" font-size="11">%s</text>`,
			f.left, y, r, y, f.left-4, y+4, Format(t))
	}
	if xl != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (f.left+r)/2, bot+32, esc(xl))
	}
	if yl != "" {
		fmt.Fprintf(b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, (f.top+bot)/2, esc(yl))
	}
}

// Ticks returns about n "nice" tick values (1, 2, 5 x 10^k steps) covering
// [lo, hi]. A zero-width range gets ticks around its value.
func Ticks(lo, hi float64, n int) []float64 {
	if !isFinite(lo) || !isFinite(hi) || n < 1 {
		return nil
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		d := math.Max(math.Abs(lo)*0.1, 1)
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi - lo) / float64(n))
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; v <= hi+step*0.5 && len(out) < 4*n+2; v += step {
		out = append(out, roundTo(v, step))
	}
	return out
}

// IntTicks is Ticks on whole numbers only: where Ticks would step by less
// than 1, it steps by 1 from floor(lo) to ceil(hi).
func IntTicks(lo, hi float64, n int) []float64 {
	t := Ticks(lo, hi, n)
	if len(t) < 2 || t[1]-t[0] >= 1 {
		return t
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	var out []float64
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func roundTo(v, step float64) float64 {
	if step >= 1 {
		return math.Round(v)
	}
	digits := math.Pow(10, math.Ceil(-math.Log10(step))+1)
	return math.Round(v*digits) / digits
}

// widen extends [lo, hi] to the outer ticks.
func widen(lo, hi float64, ticks []float64) (float64, float64) {
	if len(ticks) > 0 {
		lo, hi = math.Min(lo, ticks[0]), math.Max(hi, ticks[len(ticks)-1])
	}
	if hi == lo {
		hi = lo + 1
	}
	return lo, hi
}

// Format prints a number compactly (1.5k, 2M, 0.25).
func Format(v float64) string {
	if v == 0 {
		return "0" // not "-0"
	}
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func color(c string, i int) string {
	if c != "" {
		return esc(c)
	}
	return Palette[i%len(Palette)]
}

func esc(s string) string { return html.EscapeString(s) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func finite(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		if isFinite(x) {
			out = append(out, x)
		}
	}
	return out
}
