package svgplot

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// wellFormed fails unless b parses as XML from start to end.
func wellFormed[T []byte | string](t *testing.T, b T) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		must.NoError(t, err, must.Sprintf("svg: %s", b))
	}
}

func TestTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{3, 97, 5, []float64{0, 20, 40, 60, 80, 100}},
		{5, 5, 4, []float64{4, 4.5, 5, 5.5, 6}},
		{10, 0, 5, []float64{0, 2, 4, 6, 8, 10}},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, Ticks(tc.lo, tc.hi, tc.n), must.Sprintf("Ticks(%v, %v, %d)", tc.lo, tc.hi, tc.n))
	}
	must.Nil(t, Ticks(math.NaN(), 1, 5))
	must.Nil(t, Ticks(0, math.Inf(1), 5))
}

func TestIntTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{1, 3, 6, []float64{1, 2, 3}},
		{1, 2, 6, []float64{1, 2}},
		{2, 2, 5, []float64{1, 2, 3}},
		{0, 40, 5, []float64{0, 10, 20, 30, 40}}, // Ticks' own steps when whole
		{-7.5, 0, 6, []float64{-8, -6, -4, -2, 0}},
		{-0.5, 0, 6, []float64{-1, 0}},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, IntTicks(tc.lo, tc.hi, tc.n), must.Sprintf("IntTicks(%v, %v, %d)", tc.lo, tc.hi, tc.n))
	}
	c := Chart{XInteger: true}
	c.Add(Series{Name: "s", X: []float64{1, 2, 3}, Y: []float64{10, 20, 30}})
	must.StrNotContains(t, string(c.SVG()), ">1.5<")
}

func TestFormat(t *testing.T) {
	must.Eq(t, "0.25", Format(0.25))
	must.Eq(t, "1500", Format(1500))
	must.Eq(t, "25k", Format(25000))
	must.Eq(t, "2M", Format(2e6))
	must.Eq(t, "0", Format(math.Copysign(0, -1)))
}

func TestCDF(t *testing.T) {
	s := CDF("p", []float64{3, 1, math.NaN(), 2, math.Inf(1)})
	must.True(t, s.Step)
	must.Eq(t, []float64{1, 1, 2, 3}, s.X)
	must.Eq(t, []float64{0, 1.0 / 3, 2.0 / 3, 1}, s.Y)
	must.SliceEmpty(t, CDF("none", nil).X)
}

func TestChart_EscapesAndIDs(t *testing.T) {
	evil := `<script>alert("x")</script>&"'`
	c := Chart{Title: evil, XLabel: evil, YLabel: evil, ID: evil}
	c.Add(Series{Name: evil, X: []float64{0, 1, 2}, Y: []float64{3, 2, 1.5}, ID: "loss-fit", Class: "fit-curve"})
	c.Add(Series{Name: "points", X: []float64{0, 1, math.NaN()}, Y: []float64{3, math.Inf(1), 1}, Points: true})
	c.Add(Series{Name: "step", X: []float64{0, 1, 2}, Y: []float64{1, 2, 3}, Step: true, Dashed: true})
	c.HLine(evil, 1)
	out := c.SVG()
	wellFormed(t, out)
	s := string(out)
	must.StrNotContains(t, s, "<script>")
	must.StrContains(t, s, "&lt;script&gt;")
	must.StrContains(t, s, `id="loss-fit" class="fit-curve"`)
	must.StrContains(t, s, "H") // the step series
	must.StrNotContains(t, s, "NaN")
	must.StrNotContains(t, s, "Inf")
	// Only the finite point is drawn.
	must.Eq(t, 1, strings.Count(s, "<circle"))
}

func TestChart_NoData(t *testing.T) {
	c := Chart{Title: "empty"}
	c.Add(Series{Name: "nan", X: []float64{math.NaN()}, Y: []float64{1}})
	out := c.SVG()
	wellFormed(t, out)
	must.StrContains(t, string(out), "no data")
}

func TestChart_FixedYAndSinglePoint(t *testing.T) {
	c := Chart{YFixed: true, YMin: 0, YMax: 1, Width: 300, Height: 200}
	c.Add(Series{Name: "one", X: []float64{5}, Y: []float64{0.5}})
	out := c.SVG()
	wellFormed(t, out)
	must.StrContains(t, string(out), `width="300" height="200"`)
	must.StrContains(t, string(out), "M") // a path with one point still renders
}

func TestBars(t *testing.T) {
	b := Bars{Title: "avg JCT", Groups: []string{"0.5", "<1>"}, YLabel: "s"}
	b.Add("fifo", []float64{100, 200})
	b.Add("optimus&co", []float64{80, math.NaN()})
	out := b.SVG()
	wellFormed(t, out)
	s := string(out)
	must.Eq(t, 3, strings.Count(s, "<rect ")-1-2) // 3 bars, minus the background and 2 legend swatches
	must.StrContains(t, s, "&lt;1&gt;")
	must.StrContains(t, s, "optimus&amp;co")

	empty := Bars{}
	wellFormed(t, empty.SVG())
	must.StrContains(t, string(empty.SVG()), "no data")
}

func BenchmarkChart(b *testing.B) {
	c := Chart{}
	x, y := make([]float64, 1000), make([]float64, 1000)
	for i := range x {
		x[i], y[i] = float64(i), math.Sqrt(float64(i))
	}
	c.Add(Series{Name: "a", X: x, Y: y})
	for b.Loop() {
		_ = c.SVG()
	}
}

func TestChart_FixedYClamps(t *testing.T) {
	c := Chart{YFixed: true, YMin: 0, YMax: 1, Height: 200}
	c.Add(Series{Name: "curve", X: []float64{0, 1, 2}, Y: []float64{1e9, 0.5, 0.2}})
	c.Add(Series{Name: "dots", X: []float64{0, 1}, Y: []float64{5, 0.5}, Points: true})
	out := string(c.SVG())
	wellFormed(t, out)
	must.Eq(t, 1, strings.Count(out, "<circle")) // the point at 5 is outside
	must.StrNotContains(t, out, "e+")            // no far-off coordinates
}
