package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The figure of a sweep: its size, and the PNG's resolution.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 6.5 * vg.Inch
	plotDPI    = 120
	// plotRateShare is the share of the height the rate panel takes.
	plotRateShare = 0.3
)

// Colours of the figure's series.
var (
	plotP50  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	plotP99  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	plotP999 = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	plotMax  = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	plotRate = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// SaveSweepPlot draws the hold of r to path, a PNG or an SVG as its
// extension says: the latency percentiles of each interval on a log scale
// above, the achieved and the target rate below.
func SaveSweepPlot(path string, r *SweepResult) (err error) {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if format != "png" && format != "svg" {
		return fmt.Errorf("plot %s: want a .png or .svg file", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("plot: %w", cerr)
		}
	}()
	if err := WriteSweepPlot(f, format, r); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// WriteSweepPlot writes the figure of SaveSweepPlot to w in format, png
// or svg.
func WriteSweepPlot(w io.Writer, format string, r *SweepResult) error {
	if len(r.PerSecond) == 0 {
		return fmt.Errorf("the sweep has no hold to draw")
	}
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))}
	case "svg":
		c = vgsvg.New(plotWidth, plotHeight)
	default:
		return fmt.Errorf("format %q: want png or svg", format)
	}
	lat, err := latencyPlot(r)
	if err != nil {
		return err
	}
	rate, err := ratePlot(r)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	title := drawTitle(dc, sweepTitle(r))
	split := plotHeight * plotRateShare
	top := draw.Crop(dc, 0, 0, split, -title)
	bottom := draw.Crop(dc, 0, 0, 0, split-plotHeight)
	top = drawYLabel(top, lat)
	alignLeft(lat, &top, rate, &bottom)
	// The legend starts at the top of the panel; move it down into the
	// data area, where the headroom above the lines leaves it room.
	lat.Legend.YOffs = lat.DataCanvas(top).Max.Y - top.Max.Y - vg.Points(4)
	lat.Draw(top)
	rate.Draw(bottom)
	_, err = c.WriteTo(w)
	return err
}

// drawYLabel draws p's y-axis label at the left of c, mid-height, and
// returns the rest of c for p. Left to the plot, a label on a log axis
// makes it reserve room above the data for a label box placed at the
// arithmetic middle of the range, which a log scale draws near the top.
func drawYLabel(c draw.Canvas, p *plot.Plot) draw.Canvas {
	label := p.Y.Label
	p.Y.Label.Text = ""
	sty := label.TextStyle
	sty.Rotation += math.Pi / 2
	h := label.TextStyle.Height(label.Text)
	descent := label.TextStyle.FontExtents().Descent
	data := p.DataCanvas(c)
	c.FillText(sty, vg.Point{X: c.Min.X + h - descent, Y: data.Center().Y}, label.Text)
	return draw.Crop(c, h+label.Padding, 0, 0, 0)
}

// alignLeft narrows the canvas of the plot whose data area starts further
// left, so that both data areas start at the same x.
func alignLeft(a *plot.Plot, ca *draw.Canvas, b *plot.Plot, cb *draw.Canvas) {
	xa, xb := a.DataCanvas(*ca).Min.X, b.DataCanvas(*cb).Min.X
	if xa < xb {
		*ca = draw.Crop(*ca, xb-xa, 0, 0, 0)
	} else {
		*cb = draw.Crop(*cb, xa-xb, 0, 0, 0)
	}
}

// sweepTitle names the op, the concurrency and the rates, and sums up the
// hold, one line each.
func sweepTitle(r *SweepResult) []string {
	return []string{
		fmt.Sprintf("canopy bench sweep: %s, %d threads over %d conn(s), open loop", r.Op, r.Clients, r.Conns),
		fmt.Sprintf("hold at %.0f%% of the maximum %s ops/s = %s ops/s for %gs (achieved %s ops/s)",
			100*r.HoldFraction, fmtRate(r.MaxOpsPerSec), fmtRate(r.HoldTargetOpsPerSec), r.HoldSec, fmtRate(r.HoldOpsPerSec)),
		fmt.Sprintf("latency over the hold: p50 %s, p99 %s, p99.9 %s, max %s",
			fmtUs(r.HoldP50Us), fmtUs(r.HoldP99Us), fmtUs(r.HoldP999Us), fmtUs(r.HoldMaxUs)),
	}
}

// drawTitle writes lines centred at the top of c and returns the height
// they take.
func drawTitle(c draw.Canvas, lines []string) vg.Length {
	sty := plot.New().Title.TextStyle
	sty.Font.Size = vg.Points(13)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	lineH := sty.Height("Ag") * 1.25
	pad := vg.Points(8)
	for i, line := range lines {
		c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y - pad - vg.Length(i)*lineH}, line)
	}
	return 2*pad + vg.Length(len(lines))*lineH
}

// latencyPlot is the upper panel: p50, p99, p99.9 and max per interval.
func latencyPlot(r *SweepResult) (*plot.Plot, error) {
	p := plot.New()

	lo, hi := math.Inf(1), 0.0
	for _, iv := range r.PerSecond {
		for _, v := range []float64{iv.P50Us, iv.P99Us, iv.P999Us, iv.MaxUs} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = 1, 10 // nothing succeeded: an empty panel
	}
	unit, div := latencyUnit(hi)
	p.Y.Label.Text = "latency (" + unit + ", log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	// Headroom above for the legend; below so the lowest line stays clear
	// of the axis.
	p.Y.Min, p.Y.Max = lo/div/1.5, hi/div*8
	p.X.Min, p.X.Max = 0, r.PerSecond[len(r.PerSecond)-1].Second
	p.Add(plotter.NewGrid())

	series := []struct {
		name  string
		get   func(Interval) float64
		color color.Color
		width vg.Length
		dash  []vg.Length
		dots  bool
	}{
		{"max", func(iv Interval) float64 { return iv.MaxUs }, plotMax, 1, []vg.Length{vg.Points(2), vg.Points(3)}, true},
		{"p99.9", func(iv Interval) float64 { return iv.P999Us }, plotP999, 2, nil, false},
		{"p99", func(iv Interval) float64 { return iv.P99Us }, plotP99, 2, nil, false},
		{"p50", func(iv Interval) float64 { return iv.P50Us }, plotP50, 2, nil, false},
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	for i := len(series) - 1; i >= 0; i-- { // the legend lists p50 first
		s := series[i]
		var xys plotter.XYs
		for _, iv := range r.PerSecond {
			if v := s.get(iv); v > 0 { // a log scale has no zero
				xys = append(xys, plotter.XY{X: iv.Second, Y: v / div})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color, line.Width, line.Dashes = s.color, vg.Points(float64(s.width)), s.dash
		points.Color, points.Shape = s.color, draw.CircleGlyph{}
		points.Radius = vg.Points(1.5)
		if s.dots {
			points.Radius = vg.Points(2)
		}
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
	}
	return p, nil
}

// ratePlot is the lower panel: the achieved rate per interval against
// the target.
func ratePlot(r *SweepResult) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "time into the hold (s)"
	p.X.Min, p.X.Max = 0, r.PerSecond[len(r.PerSecond)-1].Second
	p.Y.Label.Text = "achieved ops/s"
	p.Y.Tick.Marker = rateTicks{}
	p.Add(plotter.NewGrid())
	var xys plotter.XYs
	top := r.HoldTargetOpsPerSec
	for _, iv := range r.PerSecond {
		xys = append(xys, plotter.XY{X: iv.Second, Y: iv.OpsPerSec})
		top = max(top, iv.OpsPerSec)
	}
	p.Y.Min, p.Y.Max = 0, top*1.25
	target, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: r.HoldTargetOpsPerSec}, {X: p.X.Max, Y: r.HoldTargetOpsPerSec}})
	if err != nil {
		return nil, err
	}
	target.Color, target.Width, target.Dashes = color.Black, vg.Points(1), []vg.Length{vg.Points(5), vg.Points(3)}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = plotRate, vg.Points(2)
	points.Color, points.Shape, points.Radius = plotRate, draw.CircleGlyph{}, vg.Points(1.5)
	p.Add(target, line, points)
	p.Legend.Add("achieved", line, points)
	p.Legend.Add("target", target)
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(4)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	return p, nil
}

// latencyUnit picks the unit the latency axis shows for values up to
// maxUs: its name and what a microsecond value is divided by.
func latencyUnit(maxUs float64) (string, float64) {
	switch {
	case maxUs < 2e3:
		return "µs", 1
	case maxUs < 2e6:
		return "ms", 1e3
	default:
		return "s", 1e6
	}
}

// ticks125 marks a log axis at 1, 2 and 5 times each power of ten, with
// unlabelled minor ticks between, so even a range within one decade is
// labelled.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// rateTicks are the default ticks labelled with thousands separators.
type rateTicks struct{}

func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmtRate(ts[i].Value)
		}
	}
	return ts
}

// fmtRate formats a rate as a whole number with thousands separators.
func fmtRate(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
