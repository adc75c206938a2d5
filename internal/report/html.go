package report

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
)

// Chart colours (the screenshot test looks for them).
const (
	colorCFI    = "#4a7dc4"
	colorSFrame = "#e8833a"
	colorRatio  = "#3a9e6e"
	colorSkip   = "#c44a4a"
)

type bar struct {
	label  string
	values []float64
	colors []string
	note   string
}

// hbars draws a horizontal bar chart as inline SVG.
func hbars(bars []bar, unit func(float64) string) template.HTML {
	if len(bars) == 0 {
		return template.HTML(`<p class="empty">nothing to show</p>`)
	}
	max := 0.0
	for _, b := range bars {
		for _, v := range b.values {
			if v > max {
				max = v
			}
		}
	}
	if max == 0 {
		max = 1
	}
	const labelW, barW, rowH = 260, 520, 22
	per := float64(rowH-6) / float64(len(bars[0].values))
	h := len(bars)*rowH + 10
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">`, labelW+barW+260, h)
	for i, b := range bars {
		y := 5 + i*rowH
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="end" class="lbl">%s</text>`, labelW-8, y+rowH/2+4, html.EscapeString(b.label))
		for j, v := range b.values {
			w := v / max * barW
			if v > 0 && w < 1 {
				w = 1
			}
			fmt.Fprintf(&sb, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				labelW, float64(y)+3+float64(j)*per, w, per-1, b.colors[j], html.EscapeString(unit(v)))
		}
		longest := 0.0
		for _, v := range b.values {
			longest = math.Max(longest, v)
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="val">%s</text>`, float64(labelW)+longest/max*barW+6, y+rowH/2+4, html.EscapeString(b.note))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}

func kb(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cfi2sframe report</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px 40px; color: #222; background: #fafafa; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #666; margin-bottom: 18px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px 16px; min-width: 150px; }
.card b { display: block; font-size: 22px; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 14px; vertical-align: -1px; }
svg .lbl { font-size: 12px; fill: #333; } svg .val { font-size: 11px; fill: #555; }
table { border-collapse: collapse; background: #fff; font-size: 12px; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; } td:first-child, th:first-child { text-align: left; }
.empty { color: #888; }
</style></head><body>
<h1>SFrame against .eh_frame</h1>
<div class="sub">{{.Files}} ELF files; what cfi2sframe would write (SFrame V3 and V2) next to the CFI they carry.</div>
<div class="cards">
<div class="card">.eh_frame + .eh_frame_hdr<b>{{.EH}}</b></div>
<div class="card">.sframe V3<b>{{.V3}}</b></div>
<div class="card">.sframe V2<b>{{.V2}}</b></div>
<div class="card">V3 / (.eh_frame + hdr)<b>{{.Ratio}}</b></div>
<div class="card">functions described<b>{{.FuncCov}}</b></div>
<div class="card">code bytes described<b>{{.ByteCov}}</b></div>
<div class="card">of all the code<b>{{.CodeCov}}</b></div>
</div>
<h2>Largest files</h2>
<div class="legend"><span style="background:{{.CCFI}}"></span>.eh_frame + .eh_frame_hdr<span style="background:{{.CSF}}"></span>.sframe V3</div>
{{.Sizes}}
<h2>Size ratio per file (V3 / .eh_frame + hdr)</h2>
{{.Ratios}}
<h2>Functions without SFrame, by reason</h2>
{{.Skips}}
<h2>Encoding</h2>
{{.Enc}}
<h2>All files</h2>
<table><tr><th>file</th><th>.eh_frame</th><th>hdr</th><th>V3</th><th>V2</th><th>ratio</th><th>FDEs</th><th>FREs</th><th>functions</th><th>code</th><th>all code</th></tr>
{{range .Rows}}<tr><td>{{.Path}}</td><td>{{.EHFrame}}</td><td>{{.EHFrameHdr}}</td><td>{{.SFrameV3}}</td><td>{{.SFrameV2}}</td><td>{{printf "%.2f" .Ratio}}</td><td>{{.FDEs}}</td><td>{{.FREs}}</td><td>{{.FuncCov}}</td><td>{{.ByteCov}}</td><td>{{.CodeCov}}</td></tr>
{{end}}</table>
</body></html>
`))

type htmlRow struct {
	*File
	FuncCov, ByteCov, CodeCov string
}

// WriteHTML writes a self-contained page (inline CSS and SVG, no scripts).
func WriteHTML(w io.Writer, files []*File) error {
	t := Total(files)
	bySize := append([]*File(nil), files...)
	sort.Slice(bySize, func(i, j int) bool {
		return bySize[i].EHFrame+bySize[i].EHFrameHdr > bySize[j].EHFrame+bySize[j].EHFrameHdr
	})
	if len(bySize) > 25 {
		bySize = bySize[:25]
	}
	var sizes []bar
	for _, f := range bySize {
		sizes = append(sizes, bar{label: filepath.Base(f.Path), values: []float64{float64(f.EHFrame + f.EHFrameHdr), float64(f.SFrameV3)},
			colors: []string{colorCFI, colorSFrame}, note: fmt.Sprintf("%s → %s (%.2f)", kb(float64(f.EHFrame+f.EHFrameHdr)), kb(float64(f.SFrameV3)), f.Ratio())})
	}
	const buckets = 16
	var hist [buckets]int
	for _, f := range files {
		if f.EHFrame+f.EHFrameHdr == 0 {
			continue
		}
		b := int(f.Ratio() / 0.1)
		if b >= buckets {
			b = buckets - 1
		}
		hist[b]++
	}
	var ratios []bar
	for i, n := range hist {
		label := fmt.Sprintf("%.1f – %.1f", float64(i)/10, float64(i+1)/10)
		if i == buckets-1 {
			label = fmt.Sprintf("≥ %.1f", float64(i)/10)
		}
		ratios = append(ratios, bar{label: label, values: []float64{float64(n)}, colors: []string{colorRatio}, note: fmt.Sprintf("%d files", n)})
	}
	var skipBars []bar
	for _, r := range SkipReasons(t) {
		skipBars = append(skipBars, bar{label: r, values: []float64{float64(t.Skipped[r])}, colors: []string{colorSkip}, note: fmt.Sprintf("%d functions", t.Skipped[r])})
	}
	enc := []bar{
		{label: "FRE start 1 byte (functions)", values: []float64{float64(t.FREType[0])}, colors: []string{colorSFrame}, note: fmt.Sprint(t.FREType[0])},
		{label: "FRE start 2 bytes", values: []float64{float64(t.FREType[1])}, colors: []string{colorSFrame}, note: fmt.Sprint(t.FREType[1])},
		{label: "FRE start 4 bytes", values: []float64{float64(t.FREType[2])}, colors: []string{colorSFrame}, note: fmt.Sprint(t.FREType[2])},
		{label: "1-byte data words (FREs)", values: []float64{float64(t.WordSize[0])}, colors: []string{colorCFI}, note: fmt.Sprint(t.WordSize[0])},
		{label: "2-byte data words", values: []float64{float64(t.WordSize[1])}, colors: []string{colorCFI}, note: fmt.Sprint(t.WordSize[1])},
		{label: "4-byte data words", values: []float64{float64(t.WordSize[2])}, colors: []string{colorCFI}, note: fmt.Sprint(t.WordSize[2])},
	}
	rows := make([]htmlRow, len(files))
	for i, f := range files {
		rows[i] = htmlRow{f, pct(uint64(f.SFrameFuncs), uint64(f.CFIFuncs)), pct(f.SFrameBytes, f.CFIBytes), pct(f.SFrameCode, f.CodeBytes)}
	}
	return page.Execute(w, map[string]any{
		"Files": len(files), "EH": kb(float64(t.EHFrame + t.EHFrameHdr)), "V3": kb(float64(t.SFrameV3)), "V2": kb(float64(t.SFrameV2)),
		"Ratio": fmt.Sprintf("%.2f", t.Ratio()), "FuncCov": pct(uint64(t.SFrameFuncs), uint64(t.CFIFuncs)), "ByteCov": pct(t.SFrameBytes, t.CFIBytes), "CodeCov": pct(t.SFrameCode, t.CodeBytes),
		"CCFI": template.CSS(colorCFI), "CSF": template.CSS(colorSFrame),
		"Sizes": hbars(sizes, kb), "Ratios": hbars(ratios, func(v float64) string { return fmt.Sprintf("%.0f files", v) }),
		"Skips": hbars(skipBars, func(v float64) string { return fmt.Sprintf("%.0f functions", v) }),
		"Enc":   hbars(enc, func(v float64) string { return fmt.Sprintf("%.0f", v) }), "Rows": rows,
	})
}
