package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// layout is what every page template gets: the page's own data in Data.
type layout struct {
	Title     string
	Nav       string // the menu entry to highlight
	CSRF      string // the double-submit value for forms
	Writable  bool   // a token is configured: write forms are shown
	Protected bool   // reads need the token too
	Data      any
}

var funcs = template.FuncMap{
	// at and span are replaced per console (console.funcs); these are
	// the logical queue's forms, for parsing.
	"at":     func(t any) string { return logicalAt(t) },
	"when":   func(t clock.Tick) string { return "tick " + logicalAt(t) },
	"span":   func(t clock.Tick) string { return strconv.FormatInt(int64(t), 10) + " ticks" },
	"link":   link,
	"wall":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) }, // replaced per console (console.timeFuncs)
	"detail": describeDetail,
	"cut":    cut,
	// maxHistory is how many failed attempts an event keeps.
	"maxHistory": func() int { return queue.MaxHistory },
	"pct": func(n, total int64) string {
		if total == 0 {
			return "0"
		}
		return strconv.FormatFloat(float64(n)*100/float64(total), 'f', 1, 64)
	},
}

// cut shortens s to n characters, the last of them "…", for a table
// cell; the page of the event shows it whole.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// waits shows a retry schedule as its list of waits in ticks ("none"
// when empty), for an audit row.
func waits(w []clock.Tick) string {
	if len(w) == 0 {
		return "none"
	}
	s := make([]string, len(w))
	for i, t := range w {
		s[i] = strconv.FormatInt(int64(t), 10)
	}
	return strings.Join(s, ",")
}

// pageLink is the address of one of the console's pages: path, then the
// non-empty values of the key/value pairs kv as a query, each encoded once
// (url.Values). The handler decodes them once (Request.URL.Query), so a
// name with '/', ':', ' ', '#', '%', '?' or any other character reaches it
// as it was. Every link the console draws or redirects to is made here.
func pageLink(path string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// link is pageLink for the templates, whose values may also be numbers
// (0 is left out) and sort orders. A template puts it at the start of an
// href, where html/template only normalizes a URL, never encodes it again
// (a query value inside the attribute would be encoded twice: %2F became
// %252F).
func link(path string, kv ...any) (string, error) {
	if len(kv)%2 != 0 {
		return "", fmt.Errorf("console: link %s: odd number of key/value arguments", path)
	}
	s := make([]string, len(kv))
	for i, x := range kv {
		switch x := x.(type) {
		case string:
			s[i] = x
		case queue.FlowSort:
			s[i] = string(x)
		case int64:
			if x != 0 {
				s[i] = strconv.FormatInt(x, 10)
			}
		default:
			return "", fmt.Errorf("console: link %s: argument %d has type %T", path, i, x)
		}
	}
	return pageLink(path, s...), nil
}

// pageTitles gives each page template its title and menu entry.
var pageTitles = map[string][2]string{
	"overview":    {"Overview", "overview"},
	"flows":       {"Flows", "flows"},
	"flow":        {"Flow", "flows"},
	"event":       {"Event", "flows"},
	"quarantined": {"Quarantined", "quarantined"},
	"redriven":    {"Redriven", "quarantined"},
	"audit":       {"Audit", "audit"},
	"receiver":    {"Receiver", "receiver"},
	"login":       {"Sign in", ""},
	"error":       {"Error", ""},
}

func parseTemplates(own template.FuncMap) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for name := range pageTitles {
		t, err := template.New("base.html").Funcs(funcs).Funcs(own).ParseFS(templateFS, "templates/base.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render executes page name into a buffer first, so that a template error
// becomes the generic error page, never half a page.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t := c.tmpl[name]
	l := layout{
		Title:     pageTitles[name][0],
		Nav:       pageTitles[name][1],
		CSRF:      c.csrfFor(w, r),
		Writable:  c.o.Token != "",
		Protected: c.o.ProtectReads,
		Data:      data,
	}
	if e, ok := data.(*errorData); ok {
		l.Title = e.Title
	}
	var b bytes.Buffer
	if err := t.Execute(&b, l); err != nil {
		c.log.Error("console: template", "page", name, "err", err)
		if name != "error" {
			c.internal(w, r, err)
			return
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// badInput answers 400 with a message the operator can act on.
func (c *console) badInput(w http.ResponseWriter, r *http.Request, msg string) {
	c.fail(w, r, http.StatusBadRequest, "Bad request", msg)
}

// overviewData is the overview page.
type overviewData struct {
	Stats    queue.Stats
	Reasons  []queue.ReasonCount
	Policy   queue.Policy
	Backlog  chart
	Served   chart
	States   chart
	Receiver *receiverTotals
}

// chartFlows is how many flows the overview's charts show.
const chartFlows = 10

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := c.q.Stats(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	reasons, err := c.q.QuarantinedReasons(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	busiest, err := c.q.FlowsPage(ctx, queue.FlowQuery{Sort: queue.SortByBacklog, Limit: chartFlows})
	if err != nil {
		c.internal(w, r, err)
		return
	}
	served, err := c.q.FlowsPage(ctx, queue.FlowQuery{Sort: queue.SortByServed, Limit: chartFlows})
	if err != nil {
		c.internal(w, r, err)
		return
	}
	pol, err := c.q.Policy(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	d := &overviewData{Stats: st, Reasons: reasons, Policy: pol}
	d.Backlog = flowChart("Backlog of the busiest flows", "events not yet delivered, head included", busiest.Flows,
		func(f queue.FlowState) int64 { return f.Backlog }, "backlog")
	d.Served = flowChart("Served turns per flow", "claims handed to each flow: who is getting their turns", served.Flows,
		func(f queue.FlowState) int64 { return f.Served }, "served")
	d.States = stateChart(st.Events)
	if c.r != nil {
		if d.Receiver, err = c.receiverTotals(r); err != nil {
			c.internal(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "overview", d)
}

// flowsData is the flows page.
type flowsData struct {
	Prefix, Sort string
	Sorts        []string
	Rows         []flowRow
	Page         queue.FlowPage
	Mark         clock.Tick
	First        bool // the page is the first one
	// Rotation is set when the queue's policy is FairRotation: the page
	// then shows each flow's weight, the share of turns it is owed
	// (docs/contract.md §7.6). Under min_served weights change nothing.
	Rotation bool
	// Routed is set when a flow of the page delivers to a registered
	// destination (docs/contract.md §7.11): the page then shows each
	// flow's destination.
	Routed bool
}

type flowRow struct {
	queue.FlowState
	Blocked string
}

var sorts = []string{"flow", "backlog", "served", "blocked"}

func (c *console) flows(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := r.URL.Query()
	q := queue.FlowQuery{
		Prefix: v.Get("q"),
		Sort:   queue.FlowSort(v.Get("sort")),
		After:  v.Get("after"),
		Before: v.Get("before"),
		Last:   v.Get("last") == "1",
		Limit:  c.o.PageSize,
	}
	if q.Sort == "" {
		q.Sort = queue.SortByFlow
	}
	if !validSort(string(q.Sort)) {
		c.badInput(w, r, "Sort by one of: flow, backlog, served, blocked.")
		return
	}
	if !validPrefix(q.Prefix) {
		c.badInput(w, r, fmt.Sprintf("The search is a prefix of flow names: up to %d bytes of printable text.", queue.MaxNameLen))
		return
	}
	p, err := c.q.FlowsPage(ctx, q)
	if errors.Is(err, queue.ErrInvalid) {
		c.badInput(w, r, "This page address is not one the console made (a bad page cursor). Start again from the first page.")
		return
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	pol, err := c.q.Policy(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	d := &flowsData{Prefix: q.Prefix, Sort: string(q.Sort), Sorts: sorts, Page: p, Mark: p.Mark,
		First: q.After == "" && q.Before == "" && !q.Last, Rotation: pol.Fairness == queue.FairRotation}
	for _, f := range p.Flows {
		d.Rows = append(d.Rows, flowRow{f, blockedWhy(f, p.Mark)})
		d.Routed = d.Routed || f.Destination != ""
	}
	c.render(w, r, http.StatusOK, "flows", d)
}

func validSort(s string) bool {
	for _, x := range sorts {
		if s == x {
			return true
		}
	}
	return false
}

// validText applies the stores' rules for names and reasons: valid UTF-8,
// printable, at most max bytes, not blank, neither beginning nor ending with
// whitespace; empty only when empty is allowed.
func validText(s string, max int, empty bool) bool {
	if s == "" {
		return empty
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return len(s) <= max && printable(s) && !unicode.IsSpace(first) && !unicode.IsSpace(last)
}

// validPrefix checks a search prefix: the start of a name, so it may end
// with a space but not begin with one.
func validPrefix(s string) bool {
	if s == "" {
		return true
	}
	first, _ := utf8.DecodeRuneInString(s)
	return len(s) <= queue.MaxNameLen && printable(s) && !unicode.IsSpace(first)
}

// printable reports whether s is valid UTF-8 made of printable characters
// (unicode.IsPrint), the stores' rule for names and reasons.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// showable reports whether a body can be shown as text: valid UTF-8 whose
// only control characters are tabs and line breaks.
func showable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// blockedWhy says why a flow's head holds back the rest of its flow at the
// mark (docs/contract.md §2.2), or "" when it does not; relayctl flows says
// the same.
func blockedWhy(f queue.FlowState, mark clock.Tick) string {
	if f.Paused {
		return "paused"
	}
	switch f.HeadState {
	case "quarantined":
		return "quarantined"
	case "inflight":
		if f.ReadyAt != nil && mark < *f.ReadyAt {
			return "inflight"
		}
	case "pending":
		if f.ReadyAt != nil && mark < *f.ReadyAt {
			return "backoff"
		}
	}
	return ""
}

// maxFlowEvents is how many events the flow page lists.
const maxFlowEvents = 500

// flowData is one flow's page.
type flowData struct {
	Flow     string
	Events   []queue.EventState
	Before   int64 // events before the listed ones (acked, or pruned)
	After    int64 // events after the listed ones
	HeadSeq  int64
	Backlog  int64 // events from the head on
	Acked    int64 // events before the head, pruned ones included
	Receiver *receiver.FlowState
	Mark     clock.Tick
	Stuck    *queue.EventState // the quarantined head, if any
	Blocked  string
	Audit    []queue.AuditRecord // redrives of the listed events, newest first
	// Weight is the flow's weight when the queue's policy is FairRotation,
	// 0 otherwise (the page then does not show it).
	Weight int
	// Paused and PauseReason are the flow's pause (docs/contract.md §7.9);
	// Pausable says the queue can pause and resume flows (queue.Pauser),
	// so the page offers the form; Done is "paused" or "resumed" right
	// after the form was sent.
	Paused      bool
	PauseReason string
	Pausable    bool
	Done        string
	// Destination is the registered destination the flow delivers to
	// (docs/contract.md §7.11); "" is the relay's own URL.
	Destination string
}

// maxFlowAudit is how many redriven events of a flow the flow page reads
// the audit rows of.
const maxFlowAudit = 20

func (c *console) flow(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.URL.Query().Get("name")
	if !validText(name, queue.MaxNameLen, false) {
		c.badInput(w, r, fmt.Sprintf("Give a flow name: 1..%d bytes of printable text.", queue.MaxNameLen))
		return
	}
	st, err := c.flowState(ctx, name)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	// One page of the flow's events, from just before its head (or, with
	// every event acked, its last ones): the flow's row says where that
	// is, so the page reads one range of events whatever the flow's size.
	from := int64(1)
	if st.HeadSeq > 0 {
		from = st.HeadSeq - 10
	}
	from = max(1, min(from, st.LastSeq-maxFlowEvents+1))
	evs, err := c.q.FlowEventsFrom(ctx, name, from, maxFlowEvents)
	if errors.Is(err, queue.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No such flow", "The queue has never had an event in flow "+strconv.Quote(name)+".")
		return
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	mark, err := c.q.ClockMark(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	d := &flowData{Flow: name, Mark: mark, Events: evs}
	if pol, err := c.q.Policy(ctx); err != nil {
		c.internal(w, r, err)
		return
	} else if pol.Fairness == queue.FairRotation {
		d.Weight = st.Weight
	}
	d.Paused, d.PauseReason = st.Paused, st.PauseReason
	d.Destination = st.Destination
	_, d.Pausable = c.q.(queue.Pauser)
	// The notice after a pause or resume is shown only while the state
	// agrees: a link cannot make the page claim a write that did not happen.
	if done := r.URL.Query().Get("done"); (done == "paused" && d.Paused) || (done == "resumed" && !d.Paused) {
		d.Done = done
	}
	// The head is the first listed event not acked: the page starts at or
	// before it. Every event before it was acked (some may be pruned,
	// docs/contract.md §7.9).
	last := st.LastSeq
	for i := range evs {
		e := &evs[i]
		last = max(last, e.Seq) // PostgreSQL: arrivals the flow's row has not counted yet
		if e.State == "acked" || d.HeadSeq != 0 {
			continue
		}
		d.HeadSeq = e.Seq
		if e.State == "quarantined" {
			d.Stuck = e
		}
		var ready *clock.Tick
		switch e.State {
		case "pending":
			ready = &e.AvailableAt
		case "inflight":
			ready = &e.LeaseUntil
		}
		d.Blocked = blockedWhy(queue.FlowState{HeadState: e.State, ReadyAt: ready, Paused: d.Paused}, mark)
	}
	d.Acked = last
	if d.HeadSeq > 0 {
		d.Acked, d.Backlog = d.HeadSeq-1, last-d.HeadSeq+1
	}
	if d.Paused {
		d.Blocked = "paused" // as the flows list says, with or without a head
	}
	if len(evs) > 0 {
		d.Before, d.After = evs[0].Seq-1, last-evs[len(evs)-1].Seq
	}
	// A redrive adds a generation without an attempt: the events whose
	// generation is above their lifetime attempts have audit rows.
	read := 0
	for _, e := range d.Events {
		if e.Generation <= int64(e.LifetimeAttempts) || read == maxFlowAudit {
			continue
		}
		read++
		a, err := c.q.AuditPage(ctx, queue.AuditQuery{EventID: e.ID, Limit: c.o.PageSize})
		if err != nil {
			c.internal(w, r, err)
			return
		}
		d.Audit = append(d.Audit, a.Entries...)
	}
	slices.SortFunc(d.Audit, func(a, b queue.AuditRecord) int { return cmp.Compare(b.ID, a.ID) })
	if c.r != nil {
		// Two reads of the flow's row; a flow the receiver has never
		// accepted a message of expects seq 1 and is not shown.
		total, err := c.r.Total(ctx, name)
		if err != nil {
			c.internal(w, r, err)
			return
		}
		next, err := c.r.NextExpected(ctx, name)
		if err != nil {
			c.internal(w, r, err)
			return
		}
		if next > 1 {
			d.Receiver = &receiver.FlowState{Flow: name, Total: total, NextExpected: next}
		}
	}
	c.render(w, r, http.StatusOK, "flow", d)
}

// flowState reads flow name's row of the flows index (its weight and
// pause): the first flow in name order whose name starts with name is name
// itself, if it exists; the zero FlowState otherwise.
func (c *console) flowState(ctx context.Context, name string) (queue.FlowState, error) {
	p, err := c.q.FlowsPage(ctx, queue.FlowQuery{Prefix: name, Sort: queue.SortByFlow, Limit: 1})
	if err != nil {
		return queue.FlowState{}, err
	}
	if len(p.Flows) == 0 || p.Flows[0].Flow != name {
		return queue.FlowState{}, nil
	}
	return p.Flows[0], nil
}

// eventData is one event's page.
type eventData struct {
	Event    queue.EventState
	Audit    queue.AuditPage
	Mark     clock.Tick
	Redriven string // "OLD->NEW" after a successful redrive
	Body     string
	Binary   bool
}

func (c *console) event(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	if !validText(id, queue.MaxNameLen, false) {
		c.badInput(w, r, fmt.Sprintf("Give an event ID: 1..%d bytes of printable text.", queue.MaxNameLen))
		return
	}
	e, err := c.q.Event(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No such event", "The queue has no event with ID "+strconv.Quote(id)+".")
		return
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	a, err := c.q.AuditPage(ctx, queue.AuditQuery{EventID: id, Limit: c.o.PageSize})
	if err != nil {
		c.internal(w, r, err)
		return
	}
	mark, err := c.q.ClockMark(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	d := &eventData{Event: e, Audit: a, Mark: mark}
	// The notice after a redrive is shown only when the audit has that
	// redrive (its row names the generation it made): a link cannot make
	// the page claim one that did not happen.
	if g := r.URL.Query().Get("redriven"); g != "" {
		if n, err := strconv.ParseInt(g, 10, 64); err == nil && n >= 0 {
			for _, row := range a.Entries {
				if row.Kind == queue.AuditRedrive && row.EventID == e.ID && row.Generation == n+1 {
					d.Redriven = fmt.Sprintf("generation %d → %d", n, e.Generation)
				}
			}
		}
	}
	if showable(e.Body) {
		d.Body = string(e.Body)
	} else {
		d.Body, d.Binary = fmt.Sprintf("%x", e.Body), true
	}
	c.render(w, r, http.StatusOK, "event", d)
}

// quarantinedData is the quarantined page.
type quarantinedData struct {
	Flow, Reason string
	Reasons      []queue.ReasonCount
	Page         queue.QuarantinedPage
	First        bool
}

func (c *console) quarantined(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := r.URL.Query()
	f := queue.RedriveFilter{Flow: v.Get("flow"), Reason: v.Get("reason")}
	q := queue.QuarantinedQuery{Filter: f, After: v.Get("after"), Limit: c.o.PageSize}
	if !validText(f.Flow, queue.MaxNameLen, true) || !validText(f.Reason, queue.MaxReasonLen, true) {
		c.badInput(w, r, "Filter by a flow name and a reason: printable text, as the queue stores them.")
		return
	}
	reasons, err := c.q.QuarantinedReasons(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	p, err := c.q.QuarantinedPage(ctx, q)
	if errors.Is(err, queue.ErrInvalid) {
		c.badInput(w, r, "This page address is not one the console made (a bad page cursor). Start again from the first page.")
		return
	}
	if err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "quarantined", &quarantinedData{Flow: f.Flow, Reason: f.Reason, Reasons: reasons,
		Page: p, First: q.After == ""})
}

// auditData is the audit page.
type auditData struct {
	EventID string
	Page    queue.AuditPage
	First   bool
}

func (c *console) audit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := r.URL.Query()
	q := queue.AuditQuery{EventID: v.Get("event"), Limit: c.o.PageSize}
	if !validText(q.EventID, queue.MaxNameLen, true) {
		c.badInput(w, r, "Filter by an event ID: printable text, as the queue stores it.")
		return
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			c.badInput(w, r, "This page address is not one the console made. Start again from the first page.")
			return
		}
		q.Before = n
	}
	p, err := c.q.AuditPage(ctx, q)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "audit", &auditData{EventID: q.EventID, Page: p, First: q.Before == 0})
}

// receiverTotals sums the receiver.
type receiverTotals struct {
	Flows, Sum, Conflicts int64
}

func (c *console) receiverTotals(r *http.Request) (*receiverTotals, error) {
	fs, err := c.r.Flows(r.Context())
	if err != nil {
		return nil, err
	}
	cs, err := c.r.Conflicts(r.Context())
	if err != nil {
		return nil, err
	}
	t := &receiverTotals{Flows: int64(len(fs)), Conflicts: int64(len(cs))}
	for _, f := range fs {
		t.Sum += f.Total
	}
	return t, nil
}

// receiverRows is how many flows and conflicts the receiver page lists.
const receiverRows = 200

// receiverData is the receiver page.
type receiverData struct {
	None       bool
	Totals     receiverTotals
	Flows      []receiver.FlowState
	MoreFlows  int
	Conflicts  []receiver.ConflictRecord
	MoreConfls int
}

func (c *console) receiver(w http.ResponseWriter, r *http.Request) {
	if c.r == nil {
		c.render(w, r, http.StatusOK, "receiver", &receiverData{None: true})
		return
	}
	fs, err := c.r.Flows(r.Context())
	if err != nil {
		c.internal(w, r, err)
		return
	}
	cs, err := c.r.Conflicts(r.Context())
	if err != nil {
		c.internal(w, r, err)
		return
	}
	d := &receiverData{Totals: receiverTotals{Flows: int64(len(fs)), Conflicts: int64(len(cs))}}
	for _, f := range fs {
		d.Totals.Sum += f.Total
	}
	d.Flows, d.MoreFlows = fs[:min(len(fs), receiverRows)], max(0, len(fs)-receiverRows)
	d.Conflicts, d.MoreConfls = cs[:min(len(cs), receiverRows)], max(0, len(cs)-receiverRows)
	c.render(w, r, http.StatusOK, "receiver", d)
}

// describeDetail says in words what a policy, weight, pause or resume
// audit row changed ("lease 5 → 8", "weight of flow a 1 → 3", "pause of
// flow "a""); other details are shown as they are.
func describeDetail(a queue.AuditRecord) string {
	if a.Kind == queue.AuditWeight {
		var ch queue.WeightChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Flow == "" {
			return a.Detail
		}
		return fmt.Sprintf("weight of flow %s %d → %d", strconv.Quote(ch.Flow), ch.Old, ch.New)
	}
	if a.Kind == queue.AuditPause || a.Kind == queue.AuditResume {
		var ch queue.FlowChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Flow == "" {
			return a.Detail
		}
		return fmt.Sprintf("%s of flow %s", a.Kind, strconv.Quote(ch.Flow))
	}
	if s, ok := describeDestination(a); ok {
		return s
	}
	if a.Kind != queue.AuditPolicy {
		return a.Detail
	}
	var ch struct{ Old, New queue.Policy }
	if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil {
		return a.Detail
	}
	var parts []string
	diff := func(name string, o, n any) {
		if o != n {
			parts = append(parts, fmt.Sprintf("%s %v → %v", name, o, n))
		}
	}
	diff("lease", ch.Old.Lease, ch.New.Lease)
	diff("max attempts", ch.Old.MaxAttempts, ch.New.MaxAttempts)
	diff("backoff base", ch.Old.BackoffBase, ch.New.BackoffBase)
	diff("backoff cap", ch.Old.BackoffCap, ch.New.BackoffCap)
	diff("jitter", ch.Old.Jitter, ch.New.Jitter)
	diff("fairness", ch.Old.Fairness, ch.New.Fairness)
	if !slices.Equal(ch.Old.Schedule, ch.New.Schedule) {
		parts = append(parts, fmt.Sprintf("schedule %s → %s", waits(ch.Old.Schedule), waits(ch.New.Schedule)))
	}
	diff("retry-after cap", ch.Old.RetryAfterCap, ch.New.RetryAfterCap)
	diff("retention", ch.Old.Retention, ch.New.Retention)
	if len(parts) == 0 {
		return "policy unchanged"
	}
	return "policy: " + strings.Join(parts, ", ")
}
