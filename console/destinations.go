package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Destinations is what the console reads and writes of a queue's
// destinations (docs/contract.md §7.11). A Queue that is also one (both
// backends' stores are queue.DestinationStores) gets the Destinations page
// and its pause and resume form, audited as a flow's pause is.
type Destinations interface {
	Destinations(ctx context.Context) ([]queue.DestinationState, error)
	PauseDestination(ctx context.Context, name, reason string, now clock.Tick) error
	ResumeDestination(ctx context.Context, name, reason string, now clock.Tick) error
}

// destinationsData is the Destinations page and a destination's page.
type destinationsData struct {
	// Supported says the queue's store has destinations at all.
	Supported bool
	Rows      []queue.DestinationState
	Mark      clock.Tick
	// One is the destination of a destination's page; Done is "paused" or
	// "resumed" right after the form did it.
	One  *queue.DestinationState
	Done string
	// Relays says Options.Relays is set; Views are the relays' views of
	// each row (by name), and of One.
	Relays bool
	Views  map[string][]relayView
	Down   []RelayStatus // relays that could not be read
	Late   bool          // Options.Relays did not return in time: nothing is shown of them
}

// relayView is one relay's view of one destination.
type relayView struct {
	Relay string
	Err   error // the relay could not be read
	Known bool  // the relay knows the destination (it has read it or claimed for it)
	RelayDestination
}

// State is the breaker's state, or what stands for it.
func (v relayView) State() string {
	switch {
	case v.Err != nil:
		return "unreachable"
	case !v.Known:
		return "not known yet"
	}
	return v.Breaker
}

// destinations lists every registered destination: its URL, limits, the
// pause and its reason, flows, backlog and claims in flight, read from the
// queue (one operator read over the destinations' flows). Secrets are shown
// as a count. Breaker states and delivery failures live in the relays, not
// in the queue: with Options.Relays the page shows each relay's (read
// concurrently with the queue, for RelaysTimeout at most); without, it says
// where they are (each relay's /metrics and /status).
func (c *console) destinations(w http.ResponseWriter, r *http.Request) {
	d, err := c.readDestinations(r.Context())
	if err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "destinations", d)
}

func (c *console) readDestinations(ctx context.Context) (*destinationsData, error) {
	d := &destinationsData{}
	ds, ok := c.q.(Destinations)
	if !ok {
		return d, nil
	}
	d.Supported = true
	var relays chan []RelayStatus
	if c.o.Relays != nil {
		d.Relays = true
		relays = make(chan []RelayStatus, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, c.relaysWait)
			defer cancel()
			relays <- c.o.Relays(rctx)
		}()
	}
	rows, err := ds.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	if relays != nil {
		defer func() {
			// Options.Relays should heed its context; a page waits a
			// little longer than RelaysTimeout at most even if it does not.
			t := time.NewTimer(c.relaysWait + c.relaysWait/4)
			defer t.Stop()
			select {
			case sts := <-relays:
				d.Views, d.Down = relayViews(sts, d.Rows)
			case <-t.C:
				d.Late = true
			case <-ctx.Done():
				d.Late = true
			}
		}()
	}
	for i := range rows {
		rows[i].Secrets = nil // never near a template
	}
	d.Rows = rows
	if d.Mark, err = c.q.ClockMark(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// destination is one destination's page, with its pause or resume form.
func (c *console) destination(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if queue.CheckDestinationName(name) != nil {
		c.badInput(w, r, "The address needs a destination's name: 1..64 bytes of a-z, 0-9, '.', '_' and '-'.")
		return
	}
	d, err := c.readDestinations(r.Context())
	if err != nil {
		c.internal(w, r, err)
		return
	}
	i := slices.IndexFunc(d.Rows, func(s queue.DestinationState) bool { return s.Name == name })
	if i < 0 {
		c.fail(w, r, http.StatusNotFound, "No such destination", "The queue has no destination of this name. Registered ones are on the Destinations page.")
		return
	}
	d.One = &d.Rows[i]
	// As a flow's: the notice only while the state agrees.
	if done := r.URL.Query().Get("done"); (done == "paused" && d.One.Paused) || (done == "resumed" && !d.One.Paused) {
		d.Done = done
	}
	c.render(w, r, http.StatusOK, "destination", d)
}

// destinationPause is a destination as the target of POST
// /destination/pause and /destination/resume.
var destinationPause = &pauseTarget{
	noun: "destination", field: "name", page: "/destination", logVerb: "console: destination ",
	cannot:  "This queue's store has no destinations.",
	unknown: "The queue has no destination of this name.",
	paused:  queue.ErrDestinationPaused, notPaused: queue.ErrDestinationNotPaused,
	missing: []error{queue.ErrUnknownDestination, queue.ErrNotFound},
	backOK:  func(name string) bool { return queue.CheckDestinationName(name) == nil },
	write: func(c *console, ctx context.Context, name, reason string, now clock.Tick, pausing bool) (bool, error) {
		ds, ok := c.q.(Destinations)
		switch {
		case !ok:
			return false, nil
		case pausing:
			return true, ds.PauseDestination(ctx, name, reason, now)
		default:
			return true, ds.ResumeDestination(ctx, name, reason, now)
		}
	},
}

// relayViews sorts the relays' statuses by destination: each row's views,
// one per relay in the order given, and the relays that could not be read.
func relayViews(sts []RelayStatus, rows []queue.DestinationState) (map[string][]relayView, []RelayStatus) {
	views := make(map[string][]relayView, len(rows))
	var down []RelayStatus
	for _, st := range sts {
		if st.Err != nil {
			down = append(down, st)
		}
		for _, row := range rows {
			v := relayView{Relay: st.Relay, Err: st.Err}
			if i := slices.IndexFunc(st.Destinations, func(x RelayDestination) bool { return x.Name == row.Name }); i >= 0 && st.Err == nil {
				v.Known, v.RelayDestination = true, st.Destinations[i]
			}
			views[row.Name] = append(views[row.Name], v)
		}
	}
	return views, down
}

func init() {
	pageTitles["destinations"] = [2]string{"Destinations", "destinations"}
	pageTitles["destination"] = [2]string{"Destination", "destinations"}
}

// describeDestination says in words what a destination's audit row
// changed: "destination api registered: https://…, 1 secret", "pause of
// destination api", "flow a: default → api". ok is false for other rows.
func describeDestination(a queue.AuditRecord) (string, bool) {
	switch a.Kind {
	case queue.AuditDestination, queue.AuditDestinationPause, queue.AuditDestinationResume:
		var ch queue.DestinationChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Name == "" {
			return a.Detail, true
		}
		switch a.Kind {
		case queue.AuditDestinationPause:
			return "pause of destination " + strconv.Quote(ch.Name), true
		case queue.AuditDestinationResume:
			return "resume of destination " + strconv.Quote(ch.Name), true
		}
		n := ch.New
		now := fmt.Sprintf("%s, %s, concurrency %s, rate %s", n.URL, secretsText(n.Secrets), limitText(n.Concurrency), limitText(n.Rate))
		if ch.Old == nil {
			return "destination " + strconv.Quote(ch.Name) + " registered: " + now, true
		}
		o := ch.Old
		var parts []string
		if o.URL != n.URL {
			parts = append(parts, "url "+o.URL+" → "+n.URL)
		}
		if o.Secrets != n.Secrets {
			parts = append(parts, fmt.Sprintf("secrets %d → %d", o.Secrets, n.Secrets))
		} else {
			parts = append(parts, fmt.Sprintf("secrets: %d (their text is never recorded)", n.Secrets))
		}
		if o.Concurrency != n.Concurrency {
			parts = append(parts, "concurrency "+limitText(o.Concurrency)+" → "+limitText(n.Concurrency))
		}
		if o.Rate != n.Rate {
			parts = append(parts, "rate "+limitText(o.Rate)+" → "+limitText(n.Rate))
		}
		return "destination " + strconv.Quote(ch.Name) + ": " + strings.Join(parts, ", "), true
	case queue.AuditFlowDestination:
		var ch queue.FlowDestinationChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Flow == "" {
			return a.Detail, true
		}
		return "flow " + strconv.Quote(ch.Flow) + " delivers to " + destText(ch.New) + " (was " + destText(ch.Old) + ")", true
	}
	return "", false
}

func destText(d string) string {
	if d == queue.DefaultDestination {
		return "the default destination"
	}
	return strconv.Quote(d)
}

func limitText(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func secretsText(n int) string {
	if n == 1 {
		return "1 secret"
	}
	return strconv.Itoa(n) + " secrets"
}
