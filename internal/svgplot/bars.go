package svgplot

import (
	"bytes"
	"fmt"
	"math"
)

// Bars is a grouped bar chart: one group per label on X, one bar per series
// in each group.
type Bars struct {
	Title, XLabel, YLabel string
	Width, Height         int
	Groups                []string
	Series                []BarSeries
	ID                    string
}

// BarSeries is one named set of values, one per group (NaN: no bar).
type BarSeries struct {
	Name   string
	Values []float64
	Class  string
}

// Add appends a series.
func (c *Bars) Add(name string, values []float64) {
	c.Series = append(c.Series, BarSeries{Name: name, Values: values})
}

// SVG renders the chart; bars start at zero.
func (c *Bars) SVG() []byte {
	ch := Chart{Width: c.Width, Height: c.Height}
	w, h := ch.size()
	var b bytes.Buffer
	open(&b, w, h, c.ID)
	for _, s := range c.Series {
		ch.Series = append(ch.Series, Series{Name: s.Name})
	}
	f := frame{w: w, h: h, left: 64, right: 16, top: 28, bot: 44}
	f.bot += float64(ch.legendRows(w)) * 16
	title(&b, f, c.Title)
	hi := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if isFinite(v) {
				hi = math.Max(hi, v)
			}
		}
	}
	if len(c.Groups) == 0 || hi <= 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" fill="#666">no data</text></svg>`, w/2, h/2)
		return b.Bytes()
	}
	yt := Ticks(0, hi, 5)
	f.x0, f.x1 = 0, float64(len(c.Groups))
	f.y0, f.y1 = widen(0, hi, yt)
	axes(&b, f, nil, yt, c.XLabel, c.YLabel)
	groupW := (f.w - f.left - f.right) / float64(len(c.Groups))
	barW := groupW * 0.8 / float64(max(len(c.Series), 1))
	for g, label := range c.Groups {
		gx := f.px(float64(g))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`, gx+groupW/2, f.h-f.bot+16, esc(label))
		for i, s := range c.Series {
			if g >= len(s.Values) || !isFinite(s.Values[g]) {
				continue
			}
			v := s.Values[g]
			x, y := gx+groupW*0.1+float64(i)*barW, f.py(v)
			class := ""
			if s.Class != "" {
				class = ` class="` + esc(s.Class) + `"`
			}
			fmt.Fprintf(&b, `<rect%s x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				class, x, y, math.Max(barW-1, 1), f.py(0)-y, color("", i), esc(s.Name+" "+label+": "+Format(v)))
		}
	}
	ch.drawLegend(&b, f)
	b.WriteString("</svg>")
	return b.Bytes()
}
