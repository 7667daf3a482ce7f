package netpipe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one curve: the points of one np.out file or run.
type Series struct {
	Name   string
	Points []Point
}

// PlotFormat returns "svg" or "png" from a file name's extension.
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg":
		return "svg", nil
	case ".png":
		return "png", nil
	default:
		return "", fmt.Errorf("plot %s: want a .svg or .png file name", path)
	}
}

// PlotFile draws series into path (.svg or .png): see WritePlot.
func PlotFile(path string, series []Series) error {
	format, err := PlotFormat(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := WritePlot(f, format, series); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// WritePlot draws NetPIPE's two graphs side by side, one curve per series:
// throughput against message size, and the signature graph, throughput
// against transfer time. format is "svg" or "png".
func WritePlot(w io.Writer, format string, series []Series) error {
	if len(series) == 0 {
		return errors.New("plot: no data")
	}
	bySize := plot.New()
	bySize.Title.Text = "Throughput against message size"
	bySize.X.Label.Text = "message size (bytes)"
	bySize.Y.Label.Text = "throughput (Mbps)"
	bySize.X.Scale = plot.LogScale{}
	bySize.X.Tick.Marker = plot.LogTicks{Prec: -1}

	sig := plot.New()
	sig.Title.Text = "Signature graph"
	sig.X.Label.Text = "transfer time (s)"
	sig.Y.Label.Text = "throughput (Mbps)"
	sig.X.Scale = plot.LogScale{}
	sig.X.Tick.Marker = plot.LogTicks{Prec: -1}

	for _, p := range []*plot.Plot{bySize, sig} {
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		p.Y.Min = 0
	}
	for i, s := range series {
		var xs, ts plotter.XYs
		for _, pt := range s.Points {
			if pt.Bytes < 1 || pt.Seconds <= 0 {
				continue // a log axis cannot show them
			}
			xs = append(xs, plotter.XY{X: float64(pt.Bytes), Y: pt.Mbps})
			ts = append(ts, plotter.XY{X: pt.Seconds, Y: pt.Mbps})
		}
		if len(xs) == 0 {
			return fmt.Errorf("plot: series %q has no plottable points", s.Name)
		}
		for j, pair := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{bySize, xs}, {sig, ts}} {
			l, pts, err := plotter.NewLinePoints(pair.xys)
			if err != nil {
				return fmt.Errorf("plot %q: %w", s.Name, err)
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			pts.Color = plotutil.Color(i)
			pts.Shape = plotutil.Shape(i)
			pts.Radius = vg.Points(1.5)
			pair.p.Add(l, pts)
			if j == 0 {
				bySize.Legend.Add(s.Name, l, pts)
			} else {
				sig.Legend.Add(s.Name, l, pts)
			}
		}
	}

	width, height := 12*vg.Inch, 4.5*vg.Inch
	var dc draw.Canvas
	var writeTo func(io.Writer) (int64, error)
	switch format {
	case "svg":
		c := vgsvg.New(width, height)
		dc, writeTo = draw.New(c), c.WriteTo
	case "png":
		c := vgimg.New(width, height)
		dc, writeTo = draw.New(c), vgimg.PngCanvas{Canvas: c}.WriteTo
	default:
		return fmt.Errorf("plot: format %q: want svg or png", format)
	}
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	cs := plot.Align([][]*plot.Plot{{bySize, sig}}, tiles, dc)
	bySize.Draw(cs[0][0])
	sig.Draw(cs[0][1])
	if _, err := writeTo(w); err != nil {
		return fmt.Errorf("plot: write %s: %w", format, err)
	}
	return nil
}
