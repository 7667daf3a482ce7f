package netpipe

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func samplePoints(scale float64) []Point {
	var pts []Point
	for i, n := range Schedule(1, 1<<20, 3) {
		sec := 20e-6 + float64(n)/(scale*1e6)
		pts = append(pts, Point{N: i, Bytes: n, Seconds: sec, Mbps: Mbps(n, false, sec)})
	}
	return pts
}

// svgRoot decodes b as XML and returns the name of its root element.
func svgRoot(t *testing.T, b []byte) string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	return root
}

func TestWritePlotSVGAndPNG(t *testing.T) {
	series := []Series{{Name: "raw", Points: samplePoints(1000)}, {Name: "tcp", Points: samplePoints(300)}}
	var svg bytes.Buffer
	if err := WritePlot(&svg, "svg", series); err != nil {
		t.Fatal(err)
	}
	if root := svgRoot(t, svg.Bytes()); root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, want := range []string{"raw", "tcp", "Signature graph", "message size (bytes)"} {
		if !bytes.Contains(svg.Bytes(), []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.png")
	if err := PlotFile(p, series); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("PNG is %v", b)
	}
}

func TestWritePlotRejects(t *testing.T) {
	if err := WritePlot(io.Discard, "svg", nil); err == nil {
		t.Error("empty plot accepted")
	}
	if err := WritePlot(io.Discard, "svg", []Series{{Name: "zero", Points: []Point{{Bytes: 0}}}}); err == nil {
		t.Error("series without plottable points accepted")
	}
	if err := PlotFile(filepath.Join(t.TempDir(), "x.pdf"), []Series{{Name: "a", Points: samplePoints(1)}}); err == nil {
		t.Error(".pdf accepted")
	}
}
