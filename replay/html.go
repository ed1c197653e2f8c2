package replay

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// palette gives each policy a color, in report order.
var palette = []string{"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728"}

// WriteHTML writes the report as one self-contained HTML page: the table,
// the mapping, utilization over time and the wait-time CDF of each tier,
// as inline SVG (no scripts, no external files).
func (r *Report) WriteHTML(w io.Writer) error {
	var table, kinds, teams bytes.Buffer
	if err := r.writeTable(&table); err != nil {
		return err
	}
	if err := r.WriteKinds(&kinds); err != nil {
		return err
	}
	if err := r.WriteTeams(&teams); err != nil {
		return err
	}
	type chart struct {
		Title string
		SVG   template.HTML
	}
	var charts []chart
	charts = append(charts, chart{"GPU utilization over time (share of the cluster doing work)", r.utilSVG()})
	if len(r.Policies) > 0 {
		for i, tw := range r.Policies[0].Wait {
			charts = append(charts, chart{fmt.Sprintf("Wait-time CDF, tier %s (%d jobs)", tw.Tier, tw.Jobs), r.cdfSVG(i)})
		}
	}
	var legend []template.HTML
	for i, p := range r.Policies {
		legend = append(legend, template.HTML(fmt.Sprintf(`<span style="color:%s">■</span> <b>%s</b>: %s`, palette[i%len(palette)], template.HTMLEscapeString(p.Name), template.HTMLEscapeString(p.Rule))))
	}
	return pageTmpl.Execute(w, map[string]any{
		"Table":   table.String(),
		"Kinds":   kinds.String(),
		"Teams":   teams.String(),
		"Mapping": r.mappingLines(),
		"Legend":  legend,
		"Charts":  charts,
		"Report":  r,
	})
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>berth simulate: {{.Report.Trace.Jobs}} jobs on {{.Report.Cluster.GPUs}} GPUs</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222;padding:0 1em}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px}
h2{font-size:16px;margin-top:2em} svg{background:#fff;border:1px solid #ddd}
.legend span{font-size:18px} li{margin:.2em 0}
</style></head><body>
<h1>berth simulate</h1>
<p>{{.Report.Trace.Jobs}} jobs replayed on {{.Report.Cluster.Name}} ({{.Report.Cluster.Nodes}} nodes, {{.Report.Cluster.GPUs}} GPUs) under {{len .Report.Policies}} policies, same trace, same cluster.</p>
<h2>Policies</h2>
<ul class="legend">{{range .Legend}}<li>{{.}}</li>{{end}}</ul>
<h2>Mapping</h2>
<ul>{{range .Mapping}}<li>{{.}}</li>{{end}}</ul>
<h2>Results</h2>
<pre>{{.Table}}</pre>
{{if .Kinds}}<h2>Per GPU kind</h2>
<pre>{{.Kinds}}</pre>
{{end}}<h2>Per team</h2>
<pre>{{.Teams}}</pre>
{{range .Charts}}<h2>{{.Title}}</h2>
{{.SVG}}
{{end}}
<p>Wait: time a job held no GPUs between its submit and its completion. Utilization: GPU-time doing work over capacity. Fairness: Jain's index of each project's GPUs held over its entitlement, while jobs wait. Entitlement met: per team, the time-average of min(1, GPUs held ÷ what its quota entitles it to: its GPUs held plus its waiting jobs that each fit in what its quota has left, at most the quota), while that is above zero. Quota debt: GPU-hours a team's in-quota demand waited while other teams held borrowed GPUs, beyond the reclaim grace. Wait in quota / borrowing: by whether the job fitted its team's quota at its first start.</p>
</body></html>
`))

const (
	svgW, svgH             = 960, 320
	padL, padR, padT, padB = 60, 20, 15, 40
)

// plot draws lines (x, y in data units) with axes; xlab and ylab format
// tick values.
func plot(lines [][][2]float64, colors []string, xmin, xmax, ymin, ymax float64, xlab, ylab func(float64) string, logX bool) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`, svgW, svgH, svgW, svgH)
	tx := func(x float64) float64 {
		if logX {
			x, xmin, xmax := math.Log10(math.Max(x, 1)), math.Log10(math.Max(xmin, 1)), math.Log10(math.Max(xmax, 10))
			return padL + (x-xmin)/(xmax-xmin)*(svgW-padL-padR)
		}
		if xmax == xmin {
			return padL
		}
		return padL + (x-xmin)/(xmax-xmin)*(svgW-padL-padR)
	}
	ty := func(y float64) float64 { return svgH - padB - (y-ymin)/(ymax-ymin)*(svgH-padT-padB) }
	// Grid and ticks.
	for i := 0; i <= 4; i++ {
		y := ymin + (ymax-ymin)*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, padL, svgW-padR, ty(y), ty(y), padL-5, ty(y)+4, ylab(y))
	}
	var xt []float64
	if logX {
		for x := 1.0; x <= math.Max(xmax, 10)*1.0001; x *= 10 {
			xt = append(xt, x)
		}
	} else {
		for i := 0; i <= 6; i++ {
			xt = append(xt, xmin+(xmax-xmin)*float64(i)/6)
		}
	}
	for _, x := range xt {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>`, tx(x), tx(x), padT, svgH-padB, tx(x), svgH-padB+15, xlab(x))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, svgW-padL-padR, svgH-padT-padB)
	for i, pts := range lines {
		if len(pts) == 0 {
			continue
		}
		var pb strings.Builder
		for k, p := range pts {
			cmd := "L"
			if k == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&pb, "%s%.1f %.1f", cmd, tx(p[0]), ty(p[1]))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5" opacity="0.85"/>`, pb.String(), colors[i])
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func (r *Report) utilSVG() template.HTML {
	var lines [][][2]float64
	var colors []string
	xmax := 0.0
	for i, p := range r.Policies {
		var pts [][2]float64
		for k, u := range p.Series.Utilization {
			x := float64(k) * p.Series.BucketSeconds / 86400
			pts = append(pts, [2]float64{x, u * 100})
			xmax = math.Max(xmax, x)
		}
		lines = append(lines, pts)
		colors = append(colors, palette[i%len(palette)])
	}
	return plot(lines, colors, 0, math.Max(xmax, 1), 0, 100,
		func(x float64) string { return fmt.Sprintf("day %.0f", x) },
		func(y float64) string { return fmt.Sprintf("%.0f%%", y) }, false)
}

func (r *Report) cdfSVG(tier int) template.HTML {
	var lines [][][2]float64
	var colors []string
	xmax := 10.0
	for i, p := range r.Policies {
		if tier >= len(p.Wait) {
			continue
		}
		var pts [][2]float64
		for k, w := range p.Wait[tier].CDF {
			pts = append(pts, [2]float64{math.Max(w, 1), float64(k)})
			xmax = math.Max(xmax, w)
		}
		lines = append(lines, pts)
		colors = append(colors, palette[i%len(palette)])
	}
	return plot(lines, colors, 1, xmax, 0, 100,
		func(x float64) string { return short(x) },
		func(y float64) string { return fmt.Sprintf("%.0f%%", y) }, true)
}
