package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// now is the tick a write is made at: Options.Now, or the queue's clock
// mark.
func (c *console) now(ctx context.Context) (clock.Tick, error) {
	if c.o.Now != nil {
		return c.o.Now(ctx)
	}
	return c.q.ClockMark(ctx)
}

// refusal turns a store's refusal of a redrive into a status and plain
// words, the last of them what was done: nothing, or the done events a
// bulk redrive had redriven (one chunk at a time) before the refusal; ok is
// false for an error that is not a refusal (an internal one).
func refusal(err error, done int) (status int, title, msg string, ok bool) {
	switch {
	case errors.Is(err, queue.ErrEmptyReason):
		status, title, msg = http.StatusBadRequest, "A reason is required", "Say why the event may go again (what was fixed): the reason is kept in the audit."
	case errors.Is(err, queue.ErrStaleGeneration):
		status, title, msg = http.StatusConflict, "The event changed", "The event is no longer at the generation you saw: it changed since the page was read; look at it again."
	case errors.Is(err, queue.ErrNotQuarantined):
		status, title, msg = http.StatusConflict, "Not quarantined", "Only a quarantined event can be redriven, and this one is not (any more)."
	case errors.Is(err, queue.ErrNotFound):
		status, title, msg = http.StatusNotFound, "No such event", "The queue has no such event."
	case errors.Is(err, queue.ErrTimeRegression):
		status, title, msg = http.StatusConflict, "Time went backwards", "The tick of the write is below the queue's clock mark."
	case errors.Is(err, queue.ErrInvalid):
		status, title, msg = http.StatusBadRequest, "Not accepted", "The reason must be 1..1000 bytes of printable text (no line breaks or control characters, no spaces at either end), and the event ID 1..200."
	default:
		return 0, "", "", false
	}
	if done > 0 {
		return status, title, msg + fmt.Sprintf(" It stopped part way: %d events had been redriven before, each with its audit row (see the audit); the rest were not.", done), true
	}
	return status, title, msg + " Nothing was redriven.", true
}

// redrive redrives one quarantined event at the generation the form shows,
// then sends the browser to the event's page, which shows the result and
// the audit row.
func (c *console) redrive(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PostFormValue("id")
	gen, err := strconv.ParseInt(r.PostFormValue("generation"), 10, 64)
	if id == "" || err != nil || gen < 0 {
		c.badInput(w, r, "The form needs the event ID and the generation it was read at. Nothing was redriven.")
		return
	}
	reason := r.PostFormValue("reason")
	now, err := c.now(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	if err := c.q.Redrive(ctx, id, gen, reason, now); err != nil {
		status, title, msg, ok := refusal(err, 0)
		if !ok {
			c.internal(w, r, err)
			return
		}
		c.log.Info("console: redrive refused", "event", id, "generation", gen, "err", err)
		c.render(w, r, status, "error", &errorData{Title: title, Message: msg, Status: status, Back: pageLink("/event", "id", id)})
		return
	}
	c.log.Info("console: redrive", "event", id, "generation", gen, "reason", reason, "tick", now, "remote", r.RemoteAddr)
	http.Redirect(w, r, pageLink("/event", "id", id, "redriven", strconv.FormatInt(gen, 10)), http.StatusSeeOther)
}

// redrivenData is the result page of a bulk redrive.
type redrivenData struct {
	Filter queue.RedriveFilter
	Reason string
	Tick   clock.Tick
	Done   []queue.Redriven
	Count  int                 // events redriven
	Audit  []queue.AuditRecord // the audit rows the redrive wrote
	More   int                 // rows written but not listed
}

// maxResultRows is how many redriven events and audit rows the result page
// lists.
const maxResultRows = 200

// redriveAll redrives every quarantined event that matches the form's flow
// and reason filter ("" matches any), with the operator's reason, and shows
// what it redrove and the audit rows it wrote.
func (c *console) redriveAll(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := queue.RedriveFilter{Flow: r.PostFormValue("flow"), Reason: r.PostFormValue("filter_reason")}
	reason := r.PostFormValue("reason")
	back := pageLink("/quarantined", "flow", f.Flow, "reason", f.Reason)
	now, err := c.now(ctx)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	done, err := c.q.RedriveAll(ctx, f, reason, now)
	if err != nil {
		// RedriveAll commits a chunk at a time: a refusal of a later chunk
		// (or of a later shard) leaves the earlier ones redriven.
		c.log.Info("console: redrive all refused", "flow", f.Flow, "filter_reason", f.Reason, "redriven", len(done), "err", err)
		status, title, msg, ok := refusal(err, len(done))
		if !ok {
			c.internal(w, r, err)
			return
		}
		if errors.Is(err, queue.ErrInvalid) && !errors.Is(err, queue.ErrEmptyReason) {
			msg = "The reason must be 1..1000 bytes of printable text (no line breaks, no spaces at either end), and the filter's flow and reason as the queue stores them. Nothing was redriven."
		}
		c.render(w, r, status, "error", &errorData{Title: title, Message: msg, Status: status, Back: back})
		return
	}
	c.log.Info("console: redrive all", "flow", f.Flow, "filter_reason", f.Reason, "redriven", len(done), "reason", reason, "tick", now, "remote", r.RemoteAddr)
	d := &redrivenData{Filter: f, Reason: reason, Tick: now, Done: done, Count: len(done)}
	// Show the audit rows the redrive wrote, read back from the audit
	// itself: the newest rows naming a redriven event at its new
	// generation (other writers' rows in between are left out).
	if len(done) > 0 {
		page, err := c.q.AuditPage(ctx, queue.AuditQuery{Limit: min(2*len(done), queue.MaxPageLimit)})
		if err != nil {
			c.internal(w, r, err)
			return
		}
		wrote := map[string]int64{}
		for _, e := range done {
			wrote[e.EventID] = e.Generation
		}
		for _, a := range page.Entries {
			if g, ok := wrote[a.EventID]; ok && a.Kind == queue.AuditRedrive && a.Generation == g && len(d.Audit) < maxResultRows {
				d.Audit = append(d.Audit, a)
			}
		}
	}
	if len(d.Done) > maxResultRows {
		d.More = len(d.Done) - maxResultRows
		d.Done = d.Done[:maxResultRows]
	}
	c.render(w, r, http.StatusOK, "redriven", d)
}

// A pauseTarget is what a pause form pauses or resumes: a flow
// (docs/contract.md §7.9) or a destination (§7.11).
type pauseTarget struct {
	noun    string // "flow" or "destination": messages, and the log's key
	field   string // the form field that names it
	page    string // its page, where the browser goes next
	logVerb string // the log message before the verb ("console: ", "console: destination ")
	// cannot is the message when the queue's store has no such writes.
	cannot string
	// unknown is the message when the store has no such target.
	unknown string
	// paused and notPaused are the store's refusals of a pause of one
	// paused already and a resume of one not paused; missing are its
	// refusals of a name it does not know.
	paused, notPaused error
	missing           []error
	// backOK says whether the error page links back to the name's page.
	backOK func(name string) bool
	// write pauses (pausing) or resumes it; ok is false when the queue's
	// store has no such writes.
	write func(c *console, ctx context.Context, name, reason string, now clock.Tick, pausing bool) (ok bool, err error)
}

// refusal turns a store's refusal of a pause or resume of t into a status
// and plain words; ok is false for an error that is not a refusal.
func (t *pauseTarget) refusal(err error, verb string) (status int, title, msg string, ok bool) {
	nothing := " Nothing was " + verb + "d."
	for _, m := range t.missing {
		if errors.Is(err, m) {
			return http.StatusNotFound, "No such " + t.noun, t.unknown + nothing, true
		}
	}
	switch {
	case errors.Is(err, queue.ErrEmptyReason):
		return http.StatusBadRequest, "A reason is required", "Say why the " + t.noun + " is " + verb + "d: the reason is kept in the audit." + nothing, true
	case errors.Is(err, t.paused):
		return http.StatusConflict, "Already paused", "The " + t.noun + " is already paused (someone paused it since the page was read)." + nothing, true
	case errors.Is(err, t.notPaused):
		return http.StatusConflict, "Not paused", "The " + t.noun + " is not paused (someone resumed it since the page was read)." + nothing, true
	case errors.Is(err, queue.ErrTimeRegression):
		return http.StatusConflict, "Time went backwards", "The tick of the write is below the queue's clock mark." + nothing, true
	case errors.Is(err, queue.ErrInvalid):
		return http.StatusBadRequest, "Not accepted", "The reason must be 1..1000 bytes of printable text (no line breaks or control characters, no spaces at either end)." + nothing, true
	}
	return 0, "", "", false
}

// flowPause is a flow as the target of POST /pause and /resume.
var flowPause = &pauseTarget{
	noun: "flow", field: "flow", page: "/flow", logVerb: "console: ",
	cannot:  "This queue's store cannot pause or resume flows.",
	unknown: "The queue has no such flow.",
	paused:  queue.ErrFlowPaused, notPaused: queue.ErrFlowNotPaused, missing: []error{queue.ErrNotFound},
	backOK: func(string) bool { return true },
	write: func(c *console, ctx context.Context, name, reason string, now clock.Tick, pausing bool) (bool, error) {
		p, ok := c.q.(queue.Pauser)
		switch {
		case !ok:
			return false, nil
		case pausing:
			return true, p.PauseFlow(ctx, name, reason, now)
		default:
			return true, p.ResumeFlow(ctx, name, reason, now)
		}
	},
}

// pauser is the handler of a pause form of t: it pauses (POST …/pause) or
// resumes (POST …/resume) the form's target with the operator's reason,
// then sends the browser to the target's page, which shows the new state.
func (c *console) pauser(t *pauseTarget) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		verb := "pause"
		if strings.HasSuffix(r.URL.Path, "/resume") {
			verb = "resume"
		}
		name := r.PostFormValue(t.field)
		if name == "" {
			c.badInput(w, r, "The form needs the "+t.noun+"'s name. Nothing was "+verb+"d.")
			return
		}
		reason := r.PostFormValue("reason")
		now, err := c.now(ctx)
		if err != nil {
			c.internal(w, r, err)
			return
		}
		ok, err := t.write(c, ctx, name, reason, now, verb == "pause")
		if !ok {
			c.fail(w, r, http.StatusNotImplemented, "Cannot pause", t.cannot+" Nothing was "+verb+"d.")
			return
		}
		if err != nil {
			status, title, msg, ok := t.refusal(err, verb)
			if !ok {
				c.internal(w, r, err)
				return
			}
			c.log.Info(t.logVerb+verb+" refused", t.noun, name, "err", err)
			back := ""
			if t.backOK(name) {
				back = pageLink(t.page, "name", name)
			}
			c.render(w, r, status, "error", &errorData{Title: title, Message: msg, Status: status, Back: back})
			return
		}
		c.log.Info(t.logVerb+verb, t.noun, name, "reason", reason, "tick", now, "remote", r.RemoteAddr)
		http.Redirect(w, r, pageLink(t.page, "name", name, "done", verb+"d"), http.StatusSeeOther)
	}
}
