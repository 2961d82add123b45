package main

import (
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"

	"github.com/nodewright/nodewright/shared/rollout"
)

// gantt is the data of the rollout chart: one row per replaced node (boot
// and drain bars), one per node never replaced, the budget windows shaded
// behind them and a time axis, all in SVG user units (pixels).
type gantt struct {
	Width, Height, Left, Top, PlotW, RowH float64
	Title, Subtitle                       string
	Windows                               []ganttRect
	Ticks                                 []ganttTick
	Rows                                  []ganttRow
	AxisY, LegendY                        float64
}

type ganttRect struct{ X, W float64 }

type ganttTick struct {
	X     float64
	Label string
}

type ganttRow struct {
	Y, TextY    float64
	Label, Note string
	Boot, Drain ganttRect
	Never       bool
}

const ganttSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="{{f .Width}}" height="{{f .Height}}" viewBox="0 0 {{f .Width}} {{f .Height}}" font-family="sans-serif" font-size="11">
<title>{{x .Title}}</title>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="10" y="18" font-size="14" font-weight="bold">{{x .Title}}</text>
<text x="10" y="34" fill="#555555">{{x .Subtitle}}</text>
{{- range .Windows}}
<rect x="{{f .X}}" y="{{f $.Top}}" width="{{f .W}}" height="{{f (sub $.AxisY $.Top)}}" fill="#2e7d32" fill-opacity="0.12"/>
{{- end}}
<line x1="{{f .Left}}" y1="{{f .AxisY}}" x2="{{f (add .Left .PlotW)}}" y2="{{f .AxisY}}" stroke="#333333"/>
{{- range .Ticks}}
<line x1="{{f .X}}" y1="{{f $.Top}}" x2="{{f .X}}" y2="{{f (add $.AxisY 4)}}" stroke="#dddddd"/>
<text x="{{f .X}}" y="{{f (add $.AxisY 16)}}" text-anchor="middle" fill="#333333">{{x .Label}}</text>
{{- end}}
{{- range .Rows}}
<text x="{{f (sub $.Left 6)}}" y="{{f .TextY}}" text-anchor="end">{{x .Label}}</text>
{{- if .Never}}
<text x="{{f $.Left}}" y="{{f .TextY}}" fill="#c62828">never replaced: {{x .Note}}</text>
{{- else}}
<rect x="{{f .Boot.X}}" y="{{f .Y}}" width="{{f .Boot.W}}" height="{{f (sub $.RowH 4)}}" fill="#90caf9"/>
<rect x="{{f .Drain.X}}" y="{{f .Y}}" width="{{f .Drain.W}}" height="{{f (sub $.RowH 4)}}" fill="#1565c0"/>
<text x="{{f (add (add .Drain.X .Drain.W) 4)}}" y="{{f .TextY}}" fill="#555555">{{x .Note}}</text>
{{- end}}
{{- end}}
<rect x="{{f .Left}}" y="{{f .LegendY}}" width="12" height="10" fill="#90caf9"/><text x="{{f (add .Left 16)}}" y="{{f (add .LegendY 9)}}">replacement booting</text>
<rect x="{{f (add .Left 150)}}" y="{{f .LegendY}}" width="12" height="10" fill="#1565c0"/><text x="{{f (add .Left 166)}}" y="{{f (add .LegendY 9)}}">draining the old node</text>
<rect x="{{f (add .Left 310)}}" y="{{f .LegendY}}" width="12" height="10" fill="#2e7d32" fill-opacity="0.25"/><text x="{{f (add .Left 326)}}" y="{{f (add .LegendY 9)}}">budget window (Drifted disruptions allowed)</text>
</svg>
`

var ganttTemplate = template.Must(template.New("gantt").Funcs(template.FuncMap{
	"f":   func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"x":   template.HTMLEscapeString, // XML text: & < > ' "
	"add": func(a, b float64) float64 { return a + b },
	"sub": func(a, b float64) float64 { return a - b },
}).Parse(ganttSVG))

// ganttTicks are the axis steps tried, smallest first: at most 12 ticks.
var ganttTicks = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// writeGantt writes tl as an SVG Gantt chart: time runs from tl.From to
// the last step's end plus a tenth (tl.Until when nothing is replaced or
// a drain never ends), budget windows inside that span shaded.
func writeGantt(w io.Writer, tl rollout.Timeline) error {
	start, end := tl.From, tl.From
	for _, s := range tl.Steps {
		if s.Done.IsZero() {
			end = tl.Until
			break
		}
		end = maxTime(end, s.Done)
	}
	if len(tl.Steps) == 0 {
		end = tl.Until
	}
	end = end.Add(end.Sub(start) / 10)
	if !end.After(start) {
		end = start.Add(time.Hour)
	}
	g := gantt{Width: 1000, Left: 170, Top: 50, RowH: 16, Title: "nodewright rollout forecast",
		Subtitle: fmt.Sprintf("%d node(s) replaced, peak %d at once, %d extra node(s) (%.4f $/h); %s", len(tl.Steps), tl.PeakDisrupting, tl.PeakExtraNodes, tl.PeakExtraPerHour, finishSentence(tl))}
	g.PlotW = g.Width - g.Left - 150
	span := end.Sub(start).Seconds()
	x := func(t time.Time) float64 {
		v := g.Left + t.Sub(start).Seconds()/span*g.PlotW
		return min(max(v, g.Left), g.Left+g.PlotW)
	}
	y := g.Top + 4
	for _, s := range tl.Steps {
		done := s.Done
		note := fmt.Sprintf("by %s", joinOr(s.Replacements, "nothing ("+string(s.Decision)+")"))
		if done.IsZero() {
			done, note = end, "drain never ends"
		}
		g.Rows = append(g.Rows, ganttRow{Y: y, TextY: y + g.RowH - 6, Label: s.NodeClaim + " " + string(s.Method), Note: note,
			Boot: ganttRect{X: x(s.Start), W: max(x(s.Ready)-x(s.Start), 0.5)}, Drain: ganttRect{X: x(s.Ready), W: max(x(done)-x(s.Ready), 0.5)}})
		y += g.RowH
	}
	for _, n := range tl.Never {
		g.Rows = append(g.Rows, ganttRow{Y: y, TextY: y + g.RowH - 6, Label: n.NodeClaim, Note: n.Reason, Never: true})
		y += g.RowH
	}
	g.AxisY = y + 4
	g.LegendY = g.AxisY + 26
	g.Height = g.LegendY + 24
	for _, win := range tl.Windows {
		if win.End.Before(start) || win.Start.After(end) {
			continue
		}
		g.Windows = append(g.Windows, ganttRect{X: x(win.Start), W: x(win.End) - x(win.Start)})
	}
	step := ganttTicks[len(ganttTicks)-1]
	for _, d := range ganttTicks {
		if end.Sub(start)/d <= 12 {
			step = d
			break
		}
	}
	for t := start.Truncate(step); !t.After(end); t = t.Add(step) {
		if t.Before(start) {
			continue
		}
		label := t.UTC().Format("15:04")
		if step >= 24*time.Hour || t.Equal(start) {
			label = t.UTC().Format("Jan 2 15:04")
		}
		g.Ticks = append(g.Ticks, ganttTick{X: x(t), Label: label})
	}
	return ganttTemplate.Execute(w, g)
}

func finishSentence(tl rollout.Timeline) string {
	if tl.Finish != nil {
		return "finishes " + clock(*tl.Finish) + " UTC"
	}
	return "not finished by " + clock(tl.Until) + " UTC"
}

func joinOr(s []string, empty string) string {
	if len(s) == 0 {
		return empty
	}
	return strings.Join(s, "; ")
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
