package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/webhook"
)

// Destinations (docs/contract.md §7.11): the operator's commands over a
// queue's registered receivers. The store keeps them; the relay reads them
// at its start and delivers each flow to its own (relaycmd.go).

// destinationRow is one line of `destinations list`: everything but the
// secrets, which are shown as a count only.
type destinationRow struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Secrets     int    `json:"secrets"`
	Concurrency int    `json:"concurrency"` // 0: no limit
	Rate        int    `json:"rate"`        // claims per 1000 ticks (per second in real time); 0: no limit
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pause_reason,omitempty"`
	Flows       int64  `json:"flows"`
	Backlog     int64  `json:"backlog"`
	Inflight    int64  `json:"inflight"`
}

// destinationStore is the queue's store as a queue.DestinationStore.
func (q *queueDB) destinationStore() (queue.DestinationStore, error) {
	d, ok := q.s.(queue.DestinationStore)
	if !ok {
		return nil, fmt.Errorf("destinations: %w", errNoCapability)
	}
	return d, nil
}

// Destinations lists the registered destinations with their secrets (for
// `destinations set`, which changes one and writes it back).
func (q *queueDB) Destinations(ctx context.Context) ([]queue.DestinationState, error) {
	d, err := q.destinationStore()
	if err != nil {
		return nil, err
	}
	return d.Destinations(ctx)
}

// PutDestination registers or changes d, audited with reason.
func (q *queueDB) PutDestination(ctx context.Context, d queue.Destination, reason string, now clock.Tick) error {
	s, err := q.destinationStore()
	if err != nil {
		return err
	}
	return s.PutDestination(ctx, d, reason, q.at(now))
}

// PauseDestination pauses (pause true) or resumes a destination, audited
// with reason.
func (q *queueDB) PauseDestination(ctx context.Context, name, reason string, pause bool, now clock.Tick) error {
	s, err := q.destinationStore()
	if err != nil {
		return err
	}
	if pause {
		return s.PauseDestination(ctx, name, reason, q.at(now))
	}
	return s.ResumeDestination(ctx, name, reason, q.at(now))
}

// SetFlowDestination makes flow deliver to dest, audited with reason.
func (q *queueDB) SetFlowDestination(ctx context.Context, flow, dest, reason string, now clock.Tick) error {
	s, err := q.destinationStore()
	if err != nil {
		return err
	}
	return s.SetFlowDestination(ctx, flow, dest, reason, q.at(now))
}

// flowDestination reads one flow's destination: ok is false when the queue
// has no such flow. It reads one page of one row through the flows' index.
func (q *queueDB) flowDestination(ctx context.Context, flow string) (dest string, ok bool, err error) {
	p, isPager := q.s.(queue.Pager)
	if !isPager {
		return "", false, errNoCapability
	}
	page, err := p.FlowsPage(ctx, queue.FlowQuery{Prefix: flow, Sort: queue.SortByFlow, Limit: 1})
	if err != nil {
		return "", false, err
	}
	if len(page.Flows) == 0 || page.Flows[0].Flow != flow {
		return "", false, nil
	}
	return page.Flows[0].Destination, true, nil
}

// destName shows a destination's name, the default one in words.
func destName(d string) string {
	if d == queue.DefaultDestination {
		return "the default destination (relay --to)"
	}
	return "destination " + d
}

func cmdDestinations(e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "add", "set":
			return cmdDestinationPut(e, args[0], args[1:])
		case "pause", "resume":
			return cmdDestinationPause(e, args[0], args[1:])
		case "list":
			args = args[1:]
		}
	}
	return cmdDestinationList(e, args)
}

func cmdDestinationList(e *env, args []string) (err error) {
	f := newFlags(e, "destinations", "destinations [list] [--json]",
		"Destinations lists the receivers this queue delivers to besides the relay's own\n"+
			"(--to), docs/contract.md §7.11: each one's URL, how many signing secrets it has\n"+
			"(never the secrets), its limits, whether it is paused and why, and its flows,\n"+
			"backlog (events not acked) and claims in flight (leases not expired at the\n"+
			"clock mark). A flow delivers to the destination its first event named\n"+
			"(enqueue --to NAME); the others to the relay's --to URL.\n\n"+
			"  relayctl destinations add NAME --url URL --secret-file F --reason TEXT\n"+
			"      [--concurrency N] [--rate N]\n"+
			"  relayctl destinations set NAME [--url URL] [--secret-file F]... [--add-secret-file F]\n"+
			"      [--drop-secret-file F] [--concurrency N] [--rate N] --reason TEXT\n"+
			"  relayctl destinations pause NAME --reason TEXT\n"+
			"  relayctl destinations resume NAME --reason TEXT\n"+
			"  relayctl flows set-destination FLOW NAME --reason TEXT").
		withQueue().withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	ds, err := q.Destinations(e.ctx)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	rows := make([]destinationRow, 0, len(ds))
	paused := 0
	for _, d := range ds {
		rows = append(rows, destinationRow{
			Name: d.Name, URL: d.URL, Secrets: d.SecretCount, Concurrency: d.Concurrency, Rate: d.Rate,
			Paused: d.Paused, PauseReason: d.PauseReason, Flows: d.Flows, Backlog: d.Backlog, Inflight: d.Inflight,
		})
		if d.Paused {
			paused++
		}
	}
	if f.json {
		return writeJSON(e.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no destinations: every flow delivers to the relay's --to URL")
		return nil
	}
	cols := []string{"NAME", "URL", "STATE", "SECRETS", "CONCURRENCY", "RATE", "FLOWS", "BACKLOG", "INFLIGHT"}
	if paused > 0 {
		cols = append(cols, "PAUSE REASON")
	}
	t := newTable(e.stdout, cols...)
	for _, r := range rows {
		state := "running"
		if r.Paused {
			state = "paused"
		}
		cells := []string{r.Name, r.URL, state, itoa(int64(r.Secrets)), limit(r.Concurrency), limit(r.Rate),
			itoa(r.Flows), itoa(r.Backlog), itoa(r.Inflight)}
		if paused > 0 {
			cells = append(cells, r.PauseReason)
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if paused > 0 {
		fmt.Fprintf(e.stderr, "%s paused: no claim picks their flows until 'relayctl destinations resume NAME --reason \"...\"'.\n", plural(paused, "destination"))
	}
	return nil
}

// limit shows a concurrency or rate limit, 0 as "none".
func limit(n int) string {
	if n == 0 {
		return "none"
	}
	return itoa(int64(n))
}

// readSecretFile reads one signing secret from a file: its text without
// the line break that ends it, checked as the relay and the receiver read
// secrets (webhook.ParseSecret: "whsec_" and base64, or the text itself).
// Secrets are never taken on the command line, where ps shows them.
func readSecretFile(e *env, name string) (string, error) {
	if name == "" {
		return "", usagef("--secret-file is empty")
	}
	b, err := os.ReadFile(e.abs(name))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, as given
		}
		return "", fmt.Errorf("secret file %s: %w; nothing changed", name, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	s := string(b)
	if _, err := webhook.ParseSecret(s); err != nil {
		return "", fmt.Errorf("secret file %s: %v; nothing changed", name, err)
	}
	if len(s) > queue.MaxSecretLen {
		return "", fmt.Errorf("secret file %s: the secret is %d bytes, at most %d; nothing changed", name, len(s), queue.MaxSecretLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return "", fmt.Errorf("secret file %s: the secret is not one line of printable ASCII without spaces; nothing changed", name)
		}
	}
	return s, nil
}

// cmdDestinationPut is `destinations add` (verb "add": a new name) and
// `destinations set` (a registered one, changed).
func cmdDestinationPut(e *env, verb string, args []string) (err error) {
	name := "destinations " + verb
	usage := name + " NAME --url URL --secret-file F [--secret-file F2] [--concurrency N] [--rate N] --reason TEXT"
	about := "Add registers a destination: a receiver some flows deliver to (docs/contract.md\n" +
		"§7.11). NAME is 1..64 bytes of a-z, 0-9, '.', '_' and '-' (a metric label). The relay\n" +
		"signs every request to URL with each secret (Standard Webhooks), read from a file\n" +
		"(one line; \"whsec_\" and base64, or the text): a secret never goes on the command\n" +
		"line. --concurrency caps the claims of its events in flight at once, over every\n" +
		"relay; --rate caps its claims per second (per 1000 ticks); 0 is no limit. The\n" +
		"reason goes into the audit (with the secrets as a count, never their text)."
	if verb == "set" {
		usage = name + " NAME [--url URL] [--secret-file F]... [--add-secret-file F] [--drop-secret-file F] [--concurrency N] [--rate N] --reason TEXT"
		about = "Set changes a registered destination; what is not given stays. --secret-file\n" +
			"(repeatable) replaces its secrets; --add-secret-file adds one and --drop-secret-file\n" +
			"drops the one the file holds, for a rotation: add the new secret (the relays sign\n" +
			"with both), give it to the receiver, then drop the old one (docs/destinations.md).\n" +
			"Running relays read the change within their --destination-refresh (10s by\n" +
			"default). A pause is kept. The reason goes into the audit."
	}
	f := newFlags(e, name, usage, about).withQueue().withNow()
	url := f.String("url", "", "the destination's `URL` (absolute http or https)")
	var files, add, drop repeatedFlag
	f.Var(&files, "secret-file", "read a signing secret from `FILE`; repeat for more (set: replaces them all)")
	if verb == "set" {
		f.Var(&add, "add-secret-file", "set: add the secret `FILE` holds (a rotation's new secret)")
		f.Var(&drop, "drop-secret-file", "set: drop the secret `FILE` holds (a rotation's old secret)")
	}
	conc := f.Int("concurrency", 0, "at most `N` claims in flight at once, over every relay (0: no limit)")
	rate := f.Int("rate", 0, "at most `N` claims per second (per 1000 ticks), over every relay (0: no limit)")
	reason := f.String("reason", "", "why (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("want one destination NAME, got %d arguments", len(pos))
	case verb == "add" && !f.isSet("url"):
		return usagef("--url is required: where the relay delivers this destination's events")
	case verb == "add" && len(files) == 0:
		return usagef("--secret-file is required: the file holding the signing secret")
	case !f.isSet("reason"):
		return usagef("--reason is required: say why (it is kept in the audit)")
	case verb == "set" && !f.isSet("url") && len(files)+len(add)+len(drop) == 0 && !f.isSet("concurrency") && !f.isSet("rate"):
		return usagef("nothing to change: give --url, --secret-file, --add-secret-file, --drop-secret-file, --concurrency or --rate")
	case len(files) > 0 && len(add)+len(drop) > 0:
		return usagef("--secret-file replaces every secret; --add-secret-file and --drop-secret-file change one: use one way")
	}
	dest := pos[0]
	// Read every file before the queue opens: a wrong path changes nothing.
	var secrets, adds, drops []string
	for _, list := range []struct {
		files []string
		into  *[]string
	}{{files, &secrets}, {add, &adds}, {drop, &drops}} {
		for _, fn := range list.files {
			s, err := readSecretFile(e, fn)
			if err != nil {
				return err
			}
			*list.into = append(*list.into, s)
		}
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	ds, err := q.Destinations(e.ctx)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	i := slices.IndexFunc(ds, func(d queue.DestinationState) bool { return d.Name == dest })
	var d queue.Destination
	switch {
	case verb == "add" && i >= 0:
		return fmt.Errorf("destination %s already exists; change it with 'relayctl destinations set %s ...'; nothing changed", dest, dest)
	case verb == "set" && i < 0:
		return unknownDestination(dest)
	case verb == "add":
		d = queue.Destination{Name: dest, URL: *url, Secrets: secrets, Concurrency: *conc, Rate: *rate}
	default:
		d = ds[i].Destination
		d.Secrets = slices.Clone(d.Secrets)
		if f.isSet("url") {
			d.URL = *url
		}
		if len(secrets) > 0 {
			d.Secrets = secrets
		}
		for j, s := range drops {
			k := slices.Index(d.Secrets, s)
			if k < 0 {
				return fmt.Errorf("secret file %s: not one of destination %s's secrets; nothing changed", drop[j], dest)
			}
			d.Secrets = slices.Delete(d.Secrets, k, k+1)
		}
		for j, s := range adds {
			if slices.Contains(d.Secrets, s) {
				return fmt.Errorf("secret file %s: destination %s has this secret already; nothing changed", add[j], dest)
			}
			d.Secrets = append(d.Secrets, s)
		}
		if len(d.Secrets) == 0 {
			return fmt.Errorf("destination %s would have no secret left: add the new one before dropping the last; nothing changed", dest)
		}
		if f.isSet("concurrency") {
			d.Concurrency = *conc
		}
		if f.isSet("rate") {
			d.Rate = *rate
		}
	}
	if err := q.PutDestination(e.ctx, d, *reason, now); err != nil {
		return explainDestination(e, q, now, dest, "", err)
	}
	did := "added"
	if verb == "set" {
		did = "changed"
	}
	fmt.Fprintf(e.stdout, "destination %s %s at %s: %s, %s, concurrency %s, rate %s; reason kept in the audit\n",
		dest, did, e.when(now), d.URL, plural(len(d.Secrets), "secret"), limit(d.Concurrency), limit(d.Rate))
	if verb == "set" {
		fmt.Fprintln(e.stderr, "running relays read the change within their --destination-refresh (10s by default)")
	}
	return nil
}

// unknownDestination is the message of a name that is not registered.
func unknownDestination(dest string) error {
	return fmt.Errorf("destination %q is not registered (run 'relayctl destinations list'); nothing changed", dest)
}

// explainDestination turns a store's refusal of a destination command into
// plain words (exit status 1: docs/decisions/relayctl-exit-status.md).
// flow is the flow of set-destination, if any.
func explainDestination(e *env, q *queueDB, now clock.Tick, dest, flow string, err error) error {
	if perr := partway(q, err); perr != nil {
		return perr
	}
	switch {
	case errors.Is(err, queue.ErrUnknownDestination):
		return unknownDestination(dest)
	case errors.Is(err, queue.ErrDestinationPaused):
		return fmt.Errorf("destination %s is already paused; nothing changed", dest)
	case errors.Is(err, queue.ErrDestinationNotPaused):
		return fmt.Errorf("destination %s is not paused; nothing changed", dest)
	case errors.Is(err, queue.ErrEmptyReason):
		return errors.New("the reason is empty: say why (it is kept in the audit); nothing changed")
	case errors.Is(err, queue.ErrNotFound) && flow != "":
		return fmt.Errorf("flow %q not found (run 'relayctl flows' for the list); nothing changed", flow)
	case errors.Is(err, queue.ErrTimeRegression):
		return timeRegression(e, q, now)
	case errors.Is(err, queue.ErrInvalid):
		return fmt.Errorf("refused, nothing changed: %w", err)
	case errors.Is(err, errNoCapability):
		return err
	}
	return fmt.Errorf("destination %s: %w", dest, err)
}

// cmdDestinationPause is `destinations pause NAME` and `destinations resume
// NAME`.
func cmdDestinationPause(e *env, verb string, args []string) (err error) {
	about := "Pause stops claims of every flow of one destination: no relay is handed their\n" +
		"heads until it is resumed (docs/contract.md §7.11). Claims in flight settle as\n" +
		"usual; enqueues go on; every other destination's flows are untouched and keep\n" +
		"their places. The reason goes into the audit."
	if verb == "resume" {
		about = "Resume lets a paused destination's flows be claimed again, from the next claim\n" +
			"on, in their places. The reason goes into the audit."
	}
	dest, reason, q, now, err := pauseArgs(e, "destinations "+verb, "NAME", "destination", verb, about, args)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	if err := q.PauseDestination(e.ctx, dest, reason, verb == "pause", now); err != nil {
		return explainDestination(e, q, now, dest, "", err)
	}
	if verb == "pause" {
		fmt.Fprintf(e.stdout, "destination %s paused at %s: no claim picks its flows until 'relayctl destinations resume %s --reason ...'; reason kept in the audit\n",
			dest, e.when(now), dest)
	} else {
		fmt.Fprintf(e.stdout, "destination %s resumed at %s: its flows can be claimed again; reason kept in the audit\n", dest, e.when(now))
	}
	return nil
}

// cmdSetDestination is `flows set-destination FLOW NAME --reason TEXT`.
func cmdSetDestination(e *env, args []string) (err error) {
	f := newFlags(e, "flows set-destination", "flows set-destination FLOW (NAME | --default) --reason TEXT [--now TICK]",
		"Set-destination makes a flow deliver to another destination from its next claim\n"+
			"on (docs/contract.md §7.11): NAME is a registered destination; --default is the\n"+
			"relay's own --to URL. A claim in flight finishes where it was going. The\n"+
			"reason goes into the audit.").
		withQueue().withNow()
	reason := f.String("reason", "", "why the flow moves (required; kept in the audit)")
	def := f.Bool("default", false, "deliver to the relay's own --to URL (the default destination)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case *def && len(pos) != 1:
		return usagef("want FLOW and --default, or FLOW and NAME; got %d arguments with --default", len(pos))
	case !*def && len(pos) != 2:
		return usagef("want FLOW and NAME (or --default), got %d arguments", len(pos))
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the flow moves (it is kept in the audit)")
	}
	flow, dest := pos[0], queue.DefaultDestination
	if !*def {
		dest = pos[1]
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	if err := q.SetFlowDestination(e.ctx, flow, dest, *reason, now); err != nil {
		return explainDestination(e, q, now, dest, flow, err)
	}
	fmt.Fprintf(e.stdout, "flow %s delivers to %s from its next claim on (set at %s); reason kept in the audit\n", flow, destName(dest), e.when(now))
	return nil
}

// enqueueDestination explains an enqueue refused for its destination
// (--to, or a line's "to"), or returns nil when err is not about one.
func enqueueDestination(e *env, q *queueDB, ev newEvent, err error) error {
	switch {
	case errors.Is(err, queue.ErrUnknownDestination):
		return fmt.Errorf("destination %q is not registered (add it with 'relayctl destinations add', or leave out --to / \"to\" for the default); nothing changed", ev.To)
	case errors.Is(err, queue.ErrDestinationMismatch):
		have, ok, rerr := q.flowDestination(e.ctx, ev.Flow)
		if rerr != nil || !ok {
			return fmt.Errorf("flow %s delivers to another destination than %q; nothing changed (its first event chose; 'relayctl flows set-destination' changes it)", ev.Flow, ev.To)
		}
		return fmt.Errorf("flow %s delivers to %s, not %s; nothing changed (its first event chose; 'relayctl flows set-destination %s %s --reason ...' moves it)",
			ev.Flow, destName(have), strings.TrimPrefix(destName(ev.To), "destination "), ev.Flow, ev.To)
	}
	return nil
}

// batchDestination finds the event of a batch refused for its destination
// and explains it: the first one naming an unregistered destination
// (ErrUnknownDestination), or the first one naming another destination than
// its flow's, as stored or as an earlier event of the batch chose
// (ErrDestinationMismatch). It returns a nil error when err is neither or
// the event is not found.
func batchDestination(e *env, q *queueDB, batch []newEvent, err error) (int, error) {
	switch {
	case errors.Is(err, queue.ErrUnknownDestination):
		ds, rerr := q.Destinations(e.ctx)
		if rerr != nil {
			return 0, nil
		}
		known := make(map[string]bool, len(ds))
		for _, d := range ds {
			known[d.Name] = true
		}
		for i, ev := range batch {
			if ev.To != "" && !known[ev.To] {
				return i, enqueueDestination(e, q, ev, err)
			}
		}
	case errors.Is(err, queue.ErrDestinationMismatch):
		chosen := map[string]string{} // flow -> its destination, stored or chosen earlier in the batch
		for i, ev := range batch {
			have, ok := chosen[ev.Flow]
			if !ok {
				d, exists, rerr := q.flowDestination(e.ctx, ev.Flow)
				if rerr != nil {
					return 0, nil
				}
				if exists {
					have, ok = d, true
				}
			}
			if !ok {
				chosen[ev.Flow] = ev.To // the flow's first event chooses
				continue
			}
			chosen[ev.Flow] = have
			if ev.To != "" && ev.To != have {
				return i, fmt.Errorf("flow %s delivers to %s, not %s (its first event chose; 'relayctl flows set-destination' moves it)",
					ev.Flow, destName(have), ev.To)
			}
		}
	}
	return 0, nil
}

// destinationChange says in words what a destination's audit row changed
// (docs/contract.md §7.11), secrets as a count; "" for another row.
func destinationChange(a queue.AuditRecord) string {
	switch a.Kind {
	case queue.AuditDestination, queue.AuditDestinationPause, queue.AuditDestinationResume:
		var ch queue.DestinationChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Name == "" {
			return ""
		}
		switch a.Kind {
		case queue.AuditDestinationPause:
			return fmt.Sprintf("pause destination %q", ch.Name)
		case queue.AuditDestinationResume:
			return fmt.Sprintf("resume destination %q", ch.Name)
		}
		n := ch.New
		if ch.Old == nil {
			return fmt.Sprintf("destination %q added: %s, %s, concurrency %s, rate %s", ch.Name, n.URL, plural(n.Secrets, "secret"), limit(n.Concurrency), limit(n.Rate))
		}
		o := ch.Old
		var parts []string
		if o.URL != n.URL {
			parts = append(parts, "url "+o.URL+" -> "+n.URL)
		}
		if o.Secrets != n.Secrets {
			parts = append(parts, fmt.Sprintf("secrets %d -> %d", o.Secrets, n.Secrets))
		}
		if o.Concurrency != n.Concurrency {
			parts = append(parts, "concurrency "+limit(o.Concurrency)+" -> "+limit(n.Concurrency))
		}
		if o.Rate != n.Rate {
			parts = append(parts, "rate "+limit(o.Rate)+" -> "+limit(n.Rate))
		}
		if len(parts) == 0 {
			// Only the secrets' text can have changed (a replacement by as
			// many): the audit never holds it.
			parts = append(parts, fmt.Sprintf("URL, limits and secret count unchanged (%d secrets; their text is never recorded)", n.Secrets))
		}
		return fmt.Sprintf("destination %q: %s", ch.Name, strings.Join(parts, ", "))
	case queue.AuditFlowDestination:
		var ch queue.FlowDestinationChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch.Flow == "" {
			return ""
		}
		show := func(d string) string {
			if d == queue.DefaultDestination {
				return "default"
			}
			return d
		}
		return fmt.Sprintf("flow %q destination %s -> %s", ch.Flow, show(ch.Old), show(ch.New))
	}
	return ""
}
