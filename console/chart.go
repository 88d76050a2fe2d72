package console

import (
	"strconv"

	"github.com/fairrelay/fairrelay/queue"
)

// chart is a horizontal bar chart drawn as inline SVG by the templates: the
// geometry is computed here, in whole pixels, so the template only places
// it.
type chart struct {
	Title, Note string
	Width       int // the SVG's width and height
	Height      int
	Bars        []bar
	Empty       string // shown instead of bars when there are none
	Axis        int    // x of the bars' left edge
}

type bar struct {
	Label   string
	Value   int64
	Text    string // the value as shown
	Y, W    int    // the bar's top and width
	TextX   int    // where the value is written
	LabelY  int
	Href    string
	Class   string
	Tooltip string
}

const (
	chartWidth  = 520
	chartAxis   = 160 // room for the labels
	barHeight   = 18
	barGap      = 8
	chartMargin = 6
)

// layoutBars places bars scaled to the largest value.
func layoutBars(c *chart) {
	var top int64
	for _, b := range c.Bars {
		top = max(top, b.Value)
	}
	c.Width, c.Axis = chartWidth, chartAxis
	room := chartWidth - chartAxis - 60
	for i := range c.Bars {
		b := &c.Bars[i]
		b.Y = chartMargin + i*(barHeight+barGap)
		b.LabelY = b.Y + barHeight - 5
		if top > 0 {
			b.W = int(int64(room) * b.Value / top)
		}
		if b.Value > 0 && b.W < 2 {
			b.W = 2
		}
		b.TextX = chartAxis + b.W + 6
		b.Text = strconv.FormatInt(b.Value, 10)
		if len([]rune(b.Label)) > 24 {
			b.Label = string([]rune(b.Label)[:23]) + "…"
		}
	}
	c.Height = 2*chartMargin + len(c.Bars)*(barHeight+barGap)
}

// flowChart charts one number per flow; each bar links to its flow.
func flowChart(title, note string, fs []queue.FlowState, value func(queue.FlowState) int64, class string) chart {
	c := chart{Title: title, Note: note, Empty: "No flows yet."}
	for _, f := range fs {
		v := value(f)
		if v == 0 {
			continue // the order puts the zeros last: nothing to draw
		}
		c.Bars = append(c.Bars, bar{Label: f.Flow, Value: v, Href: pageLink("/flow", "name", f.Flow), Class: class,
			Tooltip: f.Flow + ": backlog " + strconv.FormatInt(f.Backlog, 10) + ", served " + strconv.FormatInt(f.Served, 10)})
	}
	layoutBars(&c)
	return c
}

// stateChart charts the events by state.
func stateChart(n queue.EventCounts) chart {
	c := chart{Title: "Events by state", Note: "every event the queue holds", Empty: "No events yet."}
	for _, s := range []struct {
		name string
		v    int64
	}{{"pending", n.Pending}, {"inflight", n.Inflight}, {"acked", n.Acked}, {"quarantined", n.Quarantined}} {
		b := bar{Label: s.name, Value: s.v, Class: s.name, Tooltip: s.name + ": " + strconv.FormatInt(s.v, 10)}
		if s.name == "quarantined" {
			b.Href = "/quarantined"
		}
		c.Bars = append(c.Bars, b)
	}
	if n.Pending+n.Inflight+n.Acked+n.Quarantined == 0 {
		c.Bars = nil
	}
	layoutBars(&c)
	return c
}
