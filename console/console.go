package console

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// Queue is what the console reads from and writes to a queue: the paged
// reads of queue.Pager (so no page reads every flow), a few reads of one
// event or flow, and the audited redrives. Both backends' stores
// (queuestore.Store, pgqueuestore.Store) are one. A Queue that is also a
// queue.Pauser (both backends are) lets the operator pause and resume a
// flow from its page (docs/contract.md §7.9), audited as a redrive is.
type Queue interface {
	queue.Pager
	Stats(ctx context.Context) (queue.Stats, error)
	Policy(ctx context.Context) (queue.Policy, error)
	Event(ctx context.Context, id string) (queue.EventState, error)
	Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error
	RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error)
}

// Receiver is what the console reads from a receiver: its flows' totals,
// one flow's total and next expected seq, and its recorded conflicts.
// Every receiver.Store has them.
type Receiver interface {
	Flows(ctx context.Context) ([]receiver.FlowState, error)
	Total(ctx context.Context, flow string) (int64, error)
	NextExpected(ctx context.Context, flow string) (int64, error)
	Conflicts(ctx context.Context) ([]receiver.ConflictRecord, error)
}

// Options configure the console. The zero value is a read-only console
// whose reads are open (fit for a loopback address only).
type Options struct {
	// Token is the operator's secret. Every write must carry it (the form
	// field "token" or the header "Authorization: Bearer TOKEN"); without a
	// Token every write is refused with 403 and the console is read-only.
	Token string
	// ProtectReads makes every page need the token too: a browser signs in
	// once on /login (a session cookie derived from the token), a program
	// sends the Authorization header. New refuses ProtectReads without a
	// Token. Set it whenever the console listens beyond loopback.
	ProtectReads bool
	// Now gives the tick a redrive is written at. nil means the queue's
	// clock mark (the highest tick it has recorded), as relayctl does.
	Now func(ctx context.Context) (clock.Tick, error)
	// Logger receives internal errors (never shown to the browser) and one
	// line per write. nil means slog.Default().
	Logger *slog.Logger
	// PageSize is the number of rows of a paged list, 1..1000; 0 means 50.
	PageSize int
	// Secure marks the console's cookies Secure (only sent over HTTPS). Set
	// it when the console is served through a TLS-terminating proxy.
	Secure bool
	// RealTime says the queue's ticks are Unix milliseconds (a queue run
	// in real time, docs/contract.md §7.3): the pages then show each tick
	// as a UTC date-time with how long ago it was ("2026-12-04 12:03:04
	// UTC, 3 min ago") and spans as durations ("30 s"). Without it ticks
	// are shown as the numbers they are.
	RealTime bool
	// WallNow is the wall clock "ago" is measured against; nil means
	// time.Now.
	WallNow func() time.Time
	// AllowedHosts are the names the console answers to besides the
	// loopback ones, which it always answers (localhost and the names
	// under .localhost, 127.0.0.0/8, ::1). A request whose Host header
	// names anything else is refused with 421 Misdirected Request before
	// anything is read or written: a page of another site that points its
	// own name at this machine (DNS rebinding) gets nothing. An entry is a
	// host name or an IP address, matching any port, or host:port,
	// matching that port only, compared without regard to case; "*"
	// answers every name (fit for a console whose every page needs the
	// token, ProtectReads). Behind a reverse proxy that forwards the
	// browser's Host, list the name the proxy serves. Anything else is
	// ErrOptions.
	AllowedHosts []string
	// Relays, when set, reads the running relays' view of the
	// destinations (their breakers and failures, which live in each relay
	// process, not in the queue): the Destinations page and a
	// destination's page show them per relay. It is called with a context
	// the console bounds (RelaysTimeout) and must return by then, one
	// RelayStatus per relay, unreachable ones with Err set. nil means the
	// pages say where to find them instead. relayctl web --relay ADDR sets
	// it to read each relay's /status.
	Relays func(ctx context.Context) []RelayStatus
}

// RelaysTimeout bounds Options.Relays on every page that calls it: a
// relay slower than this is shown as unreachable, and the page is not held
// longer.
const RelaysTimeout = 2 * time.Second

// RelayStatus is one running relay's view of the destinations
// (Options.Relays).
type RelayStatus struct {
	// Relay names the relay as the operator gave it (its --metrics
	// address).
	Relay string
	// Err says why the relay could not be read (nil: read).
	Err error
	// Destinations are the destinations the relay knows, the default one
	// with Name "".
	Destinations []RelayDestination
}

// RelayDestination is one destination as one relay sees it: its breaker
// (docs/contract.md §7.8) and that relay's counts since it started.
type RelayDestination struct {
	Name                string    // "" for the default destination
	Breaker             string    // closed, open or probing
	Since               time.Time // when the breaker entered its state (zero: closed since the start)
	NextProbe           time.Time // open: when the next probe is claimed
	ConsecutiveFailures int       // destination failures since the last success
	LastReason          string    // the reason of the last destination failure
	Delivered           int64     // events this relay delivered to it
	Failed              int64     // failed deliveries this relay settled (retry scheduled or quarantined)
	InFlight            int       // this relay's handlers running for it now
}

// Errors of New.
var (
	// ErrOptions reports options New refuses.
	ErrOptions = errors.New("console: invalid options")
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// console is the handler New returns.
type console struct {
	q       Queue
	r       Receiver
	o       Options
	log     *slog.Logger
	tmpl    map[string]*template.Template
	mux     *http.ServeMux
	session string // the session cookie's value: an HMAC of the token
	hosts   hostRules
	// relaysWait bounds Options.Relays: RelaysTimeout (tests shorten it).
	relaysWait time.Duration
}

// New returns the console's handler over q and r. r may be nil (the
// receiver page then says there is none). Options it refuses are
// ErrOptions.
func New(q Queue, r Receiver, o Options) (http.Handler, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: no queue", ErrOptions)
	}
	if o.ProtectReads && o.Token == "" {
		return nil, fmt.Errorf("%w: ProtectReads needs a Token", ErrOptions)
	}
	if o.Token != "" {
		if err := CheckToken(o.Token); err != nil {
			return nil, err
		}
	}
	hosts, err := parseHostRules(o.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if o.PageSize == 0 {
		o.PageSize = 50
	}
	if o.PageSize < 1 || o.PageSize > queue.MaxPageLimit {
		return nil, fmt.Errorf("%w: PageSize %d is outside 1..%d", ErrOptions, o.PageSize, queue.MaxPageLimit)
	}
	c := &console{q: q, r: r, o: o, log: o.Logger, hosts: hosts, relaysWait: RelaysTimeout}
	if c.log == nil {
		c.log = slog.Default()
	}
	if o.Token != "" {
		c.session = sessionValue(o.Token)
	}
	if c.tmpl, err = parseTemplates(c.timeFuncs()); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", c.read(c.overview))
	m.HandleFunc("GET /flows", c.read(c.flows))
	m.HandleFunc("GET /flow", c.read(c.flow))
	m.HandleFunc("GET /event", c.read(c.event))
	m.HandleFunc("GET /quarantined", c.read(c.quarantined))
	m.HandleFunc("GET /audit", c.read(c.audit))
	m.HandleFunc("GET /receiver", c.read(c.receiver))
	m.HandleFunc("GET /destinations", c.read(c.destinations))
	m.HandleFunc("GET /destination", c.read(c.destination))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.write(c.login, false))
	m.HandleFunc("POST /redrive", c.write(c.redrive, true))
	m.HandleFunc("POST /redrive-all", c.write(c.redriveAll, true))
	m.HandleFunc("POST /pause", c.write(c.pauser(flowPause), true))
	m.HandleFunc("POST /resume", c.write(c.pauser(flowPause), true))
	m.HandleFunc("POST /destination/pause", c.write(c.pauser(destinationPause), true))
	m.HandleFunc("POST /destination/resume", c.write(c.pauser(destinationPause), true))
	// A write path asked for with GET (a link, a prefetch, a crawler)
	// changes nothing.
	for _, p := range []string{"/redrive", "/redrive-all", "/pause", "/resume", "/destination/pause", "/destination/resume"} {
		m.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "POST")
			c.fail(w, r, http.StatusMethodNotAllowed, "Writes are POST only",
				"This address changes the queue, so it only answers a form sent with POST.")
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "Not found", "There is no page at this address.")
	})
	c.mux = m
	return c, nil
}

// MinTokenLen is the shortest token New accepts.
const MinTokenLen = 16

// CheckToken refuses, as New does (ErrOptions), a token outside
// MinTokenLen..1000 bytes or with spaces at either end.
func CheckToken(token string) error {
	if len(token) < MinTokenLen || len(token) > 1000 || strings.TrimSpace(token) != token {
		return fmt.Errorf("%w: the token is %d bytes; it must be %d..1000 bytes without surrounding spaces (for example: openssl rand -hex 32)", ErrOptions, len(token), MinTokenLen)
	}
	return nil
}

// ServeHTTP sets the headers every answer carries and dispatches.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing is loaded from elsewhere: scripts, styles and images come from
	// this console only; no frame may embed it.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !c.hosts.allow(r.Host) {
		c.log.Warn("console: host refused", "host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusMisdirectedRequest)
		io.WriteString(w, "421 Misdirected Request: this console does not answer to the host name in this request.\n"+
			"Open it by a loopback name (localhost, 127.0.0.1), or start it with the name allowed (relayctl web --allowed-hosts).\n")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// internal logs err with a reference and shows the browser a generic page
// with that reference only.
func (c *console) internal(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the browser went away
	}
	ref := randomHex(6)
	c.log.Error("console: internal error", "ref", ref, "method", r.Method, "path", r.URL.Path, "err", err)
	c.fail(w, r, http.StatusInternalServerError, "Something went wrong",
		"The console could not read or write the stores. The details are in the server log under reference "+ref+".")
}

// fail shows an error page with status, a title and a plain message.
func (c *console) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	c.render(w, r, status, "error", &errorData{Title: title, Message: msg, Status: status})
}

type errorData struct {
	Title, Message string
	Status         int
	Back           string // a page to go back to, if any
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
